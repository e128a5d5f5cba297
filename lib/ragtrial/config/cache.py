"""Where the response cache lives (`ragtrial.llm.cache`): one SQLite file on this machine (the
default), or a PostgreSQL database that several machines share.

A cache URL is `sqlite:///<path>` (a relative path is a settings path: `outputs/...` goes under the
outputs folder, `config.paths.output_path`; `sqlite:////abs/path` is absolute) or
`postgresql://user@host:port/database` (also `postgres://`). A PostgreSQL password may stand in the
URL (it is masked in every output, as URL credentials are) or, better, in the environment variable
`password_env` names, read when a connection opens and never stored.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ragtrial.config.base import Section
from ragtrial.redact import redact_url

SQLITE_PREFIX = "sqlite:///"
POSTGRES_SCHEMES = ("postgresql", "postgres")
DEFAULT_CACHE_URL = SQLITE_PREFIX + "outputs/cache/ragtrial.sqlite"
DEFAULT_PASSWORD_ENV = "PGPASSWORD"


def url_problem(url: str) -> str:
    """Why `url` is not a cache URL, "" when it is one."""
    scheme, sep, rest = url.partition("://")
    shown = redact_url(url)
    if not sep:
        return (
            f"{shown!r} is not a cache URL: write {SQLITE_PREFIX}{url} for a SQLite file, or "
            "postgresql://user@host:port/database"
        )
    if scheme == "sqlite":
        if url.startswith(SQLITE_PREFIX) and len(url) > len(SQLITE_PREFIX):
            return ""
        return f"{shown!r}: a SQLite cache URL is {SQLITE_PREFIX}<path> (four slashes for an absolute path)"
    if scheme in POSTGRES_SCHEMES:
        return "" if rest.strip("/") else f"{shown!r}: name the server, postgresql://user@host:port/database"
    return f"{shown!r}: unknown cache URL scheme {scheme!r} (sqlite or postgresql)"


def sqlite_file(url: str) -> str | None:
    """The file of a `sqlite:///` cache URL, None for a PostgreSQL one."""
    return url[len(SQLITE_PREFIX) :] if url.startswith(SQLITE_PREFIX) else None


class CacheSettings(Section):
    """The response cache every run shares: a SQLite file, or a PostgreSQL database for several
    machines (its rows and semantics are the same; `ragtrial cache export/import` moves them).
    """

    url: str = Field(
        DEFAULT_CACHE_URL,
        description="sqlite:///<file> (relative: under the project; outputs/... under the outputs folder; "
        "sqlite:////abs/path) or postgresql://user@host:port/database, a database several machines share",
    )
    password_env: str = Field(
        DEFAULT_PASSWORD_ENV,
        min_length=1,
        description="environment variable holding the PostgreSQL password when the URL has none (read "
        "when a connection opens, never stored)",
    )

    @field_validator("url")
    @classmethod
    def _cache_url(cls, url: str) -> str:
        problem = url_problem(url)
        if problem:
            raise ValueError(problem)
        return url
