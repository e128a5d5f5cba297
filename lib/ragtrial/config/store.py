"""Where the index is kept and searched besides memory (`ragtrial.retrieval.stores`): a PostgreSQL
database, the Postgres graph-walk experiment's store (seed 001), and a Cypher graph store, where seed
004 pulls the retrieved subgraph (Kùzu embedded; FalkorDB through its client).

The in-memory retrievers stay the default. `retrieval: postgresql` runs vector, bm25, ts_rank,
hybrid, graph_walk and graph_hybrid as SQL in the database at `url`; `retrieval: cypher` runs the
graph walk as Cypher on the `graph` store. A PostgreSQL password may stand in the URL (masked in every
output) or, better, in the environment variable `password_env` names, read when a connection opens.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ragtrial.config.base import Section, conflict
from ragtrial.config.cache import DEFAULT_PASSWORD_ENV, POSTGRES_SCHEMES
from ragtrial.redact import redact_url

# An unquoted PostgreSQL identifier: the schema name is written into SQL, so nothing else is accepted.
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
FALKORDB_SCHEMES = ("redis", "rediss", "falkor", "falkors")


class StoreSettings(Section):
    """The index in a database: the in-database twins of the passage and graph-walk retrievers
    (PostgreSQL), the Cypher graph store of notebook 09's retrieved subgraph, and your own database
    read as the run's index (docs/stores.md). Memory stays the default.
    """

    retrieval: Literal["memory", "postgresql", "cypher"] = Field(
        "memory",
        description='where the retrievers that have an in-database twin run: "memory" (numpy, the default); '
        '"postgresql": vector, bm25, ts_rank, hybrid, graph_walk and graph_hybrid as SQL in the database at '
        'store.url (the seed-001 experiment\'s store); "cypher": graph_walk and graph_hybrid walk the graph '
        "by Cypher on store.graph (passages stay in memory). Every other retriever runs in memory; the "
        "twins are also methods of their own (hybrid_postgresql, graph_walk_cypher, ...)",
    )
    url: str | None = Field(
        None,
        description="the PostgreSQL database, postgresql://user@host:port/database (the user may create "
        "schemas in it); the kit writes each index it searches into a schema of its own, ragtrial_<content "
        "hash>, in one transaction",
    )
    password_env: str = Field(
        DEFAULT_PASSWORD_ENV,
        min_length=1,
        description="environment variable holding the PostgreSQL password when store.url has none (read "
        "when a connection opens, never stored)",
    )
    schema_name: str | None = Field(
        None,
        description="your own data: the schema of store.url holding an index in the documented layout "
        "(docs/stores.md), validated and read as the run's index instead of building one; never written "
        "(the kit's search tables go to a schema of its own beside it). None: the kit builds the index",
    )
    graph: Literal["none", "kuzu", "falkordb"] = Field(
        "none",
        description='the Cypher graph store: "kuzu" (embedded, a folder under store.graph_path), "falkordb" '
        "(a server at store.graph_url, through the falkordb client); the same Cypher runs on both. Notebook "
        "09 pulls the edges among each answer's retrieved nodes from it (the seed's query) and "
        'store.retrieval "cypher" walks it; "none": no graph store',
    )
    graph_path: str = Field(
        "outputs/graphs",
        min_length=1,
        description="folder of the Kùzu databases, one subfolder per index content hash",
    )
    graph_url: str | None = Field(
        None, description="FalkorDB's address, redis://[user:password@]host:port (store.graph falkordb)"
    )

    @field_validator("url")
    @classmethod
    def _postgresql_url(cls, url: str | None) -> str | None:
        if url is not None and url.partition("://")[0] not in POSTGRES_SCHEMES:
            raise ValueError(
                f"{redact_url(url)!r} is not a PostgreSQL URL: postgresql://user@host:port/database"
            )
        return url

    @field_validator("graph_url")
    @classmethod
    def _falkordb_url(cls, url: str | None) -> str | None:
        if url is not None and url.partition("://")[0] not in FALKORDB_SCHEMES:
            raise ValueError(
                f"{redact_url(url)!r} is not a FalkorDB address: redis://[user:password@]host:port"
            )
        return url

    @field_validator("schema_name")
    @classmethod
    def _identifier(cls, name: str | None) -> str | None:
        if name is not None and not SCHEMA_NAME.fullmatch(name):
            raise ValueError(f"{name!r}: a schema name of lower-case letters, digits and '_' (not first)")
        return name

    @model_validator(mode="after")
    def _needs(self) -> StoreSettings:
        if (self.retrieval == "postgresql" or self.schema_name) and not self.url:
            key = "retrieval postgresql" if self.retrieval == "postgresql" else "schema_name"
            raise conflict("url", f"the PostgreSQL database is required with store.{key}")
        if self.retrieval == "cypher" and self.graph == "none":
            raise conflict("graph", 'store.retrieval "cypher" needs a graph store (kuzu or falkordb)')
        if self.graph == "falkordb" and not self.graph_url:
            raise conflict("graph_url", "FalkorDB's address is required with store.graph falkordb")
        return self
