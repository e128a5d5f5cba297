"""The method names: how each is built from the run's retrievers and the shared generator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ragtrial.config.methods import AnswerSettings
from ragtrial.data.answer_files import answer_file_path, check_question_ids, method_answers
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index.costs import PART_ORDER, upstream_part
from ragtrial.index.tables import GraphIndex
from ragtrial.methods.base import Generator, Method, MethodUnavailable
from ragtrial.methods.imported import ImportedMethod
from ragtrial.methods.integration import IntegrationMethod
from ragtrial.methods.map_reduce import MapReduceMethod, chunk_units, report_units
from ragtrial.methods.oracle import OracleMethod
from ragtrial.methods.retrieval_method import RetrievalMethod
from ragtrial.methods.selection import SelectionMethod
from ragtrial.methods.upstream.method import UpstreamMethod, UpstreamMode, UpstreamSession
from ragtrial.prompts import load_prompt
from ragtrial.registry import Registry
from ragtrial.retrieval.base import ContextItem, Retriever, entity_names
from ragtrial.retrieval.registry import RETRIEVERS, STORE_TWINS, make_retriever

if TYPE_CHECKING:
    from ragtrial.config.settings import Settings
    from ragtrial.llm.context import ModelContext


# ---------------------------------------------------------------- registry


class Toolkit:
    """What building methods needs, with retrievers built once and shared between methods: the
    experiment's answer settings, and how methods are built (the run's `methods` settings).
    """

    def __init__(self, index: GraphIndex, ctx: ModelContext, answer_settings: AnswerSettings):
        self.index, self.ctx, self.answer_settings = index, ctx, answer_settings
        self.method_settings = ctx.settings.methods
        self.generator = Generator(
            ctx.llm,
            load_prompt(answer_settings.answer_prompt),
            answer_settings.answer_max_tokens,
            answer_settings.first_line_only,
            frozenset(answer_settings.whole_answer_types),
        )
        self.doc_of_chunk = dict(zip(index.chunks["chunk_id"], index.chunks["doc_id"], strict=True))
        self._retrievers: dict[tuple[str, str], Retriever] = {}
        self._upstream: UpstreamSession | None = None

    def upstream(self) -> UpstreamSession:
        """The proxy, workers and indexes the upstream methods share, started on first use."""
        if self._upstream is None:
            self._upstream = UpstreamSession(self.ctx, self.index)
        return self._upstream

    def retriever(self, name: str, **overrides: Any) -> Retriever:
        """The run's retriever `name` (settings.retrieval, with `overrides`), built once."""
        key = (name, repr(sorted(overrides.items())))
        if key not in self._retrievers:
            settings = self.ctx.settings.retrieval.model_copy(update=overrides)
            self._retrievers[key] = make_retriever(name, self.index, self.ctx, settings)
        return self._retrievers[key]

    def retrieval(self, name: str, retriever: Retriever | None) -> RetrievalMethod:
        retrieval = self.ctx.settings.retrieval
        # Asked for every chunk in rank order, packing stops at the budget: the GraphRAG paper's SS.
        fills = name == "naive_rag" and retrieval.naive_rag_fills_budget
        return RetrievalMethod(
            name,
            self.generator,
            self.ctx.ledger,
            self.doc_of_chunk,
            retriever,
            len(self.index.chunks) if fills else retrieval.k,
            self.answer_settings.context_budget,
        )

    def map_reduce(self, name: str, units: list[ContextItem]) -> MapReduceMethod:
        s, m = self.answer_settings, self.method_settings
        reduce_prompt = load_prompt(s.reduce_prompt) if s.reduce_prompt != s.answer_prompt else None
        return MapReduceMethod(
            name,
            self.generator,
            self.ctx.ledger,
            self.doc_of_chunk,
            units,
            self.ctx.llm,
            map_budget=m.map_budget,
            map_max_tokens=m.map_max_tokens,
            max_points=m.map_max_points,
            point_max_chars=m.map_point_max_chars,
            reduce_budget=s.context_budget,
            reduce_prompt=reduce_prompt,
            seed=s.seed,
            entity_names=entity_names(self.index),
        )


def _global_search(level: int | None) -> Callable[[str, Toolkit], Method]:
    def build(name: str, kit: Toolkit) -> Method:
        wanted = kit.method_settings.global_level if level is None else level
        units = report_units(kit.index, wanted)
        if not units:
            levels = set(kit.index.community_reports["level"])
            raise MethodUnavailable(
                f"{name}: no community reports at level C{wanted}, native or projected from a level above "
                f"(levels with reports: {', '.join(f'C{x}' for x in sorted(levels)) or 'none'})"
            )
        return kit.map_reduce(name, units)

    return build


def _retrieval(retriever: str) -> Callable[[str, Toolkit], Method]:
    return lambda name, kit: kit.retrieval(name, kit.retriever(retriever))


def _hybrid_parts(kit: Toolkit) -> list[RetrievalMethod]:
    graph = kit.method_settings.graph_method
    return [kit.retrieval("naive_rag", kit.retriever("vector")), kit.retrieval(graph, kit.retriever(graph))]


def _selection(name: str, kit: Toolkit) -> Method:
    rag, graph = _hybrid_parts(kit)
    prompt = load_prompt(METHODS.entry("selection").metadata["route_prompt"])
    return SelectionMethod(name, {"fact": rag, "reasoning": graph}, kit.ctx.llm, prompt)


# What each graph retriever reads from the index ("chunk_embeddings" is added when the graph falls
# back to vector retrieval, `retrieval.graph_fallback`).
GRAPH_RETRIEVER_PARTS: dict[str, tuple[str, ...]] = {
    "kg_triplets": ("chunks", "graph"),
    "graph_walk": ("chunks", "graph"),
    "graph_hybrid": ("chunks", "chunk_embeddings", "graph"),
    "local_search": ("chunks", "graph", "entity_embeddings", "community_reports"),
    "lightrag": ("chunks", "graph", "entity_embeddings"),
    "fastgraphrag": ("chunks", "graph"),
}
# A part needs the parts it is built from.
_BUILT_FROM = {"community_reports": ("communities",), "communities": ("graph",), "graph": ("chunks",)}
_BY_ORIGIN = {"graph", "communities", "community_reports", "entity_embeddings", "report_embeddings"}
_GRAPH_ORIGINS = {"both": ("nlp", "llm"), "nlp": ("nlp",), "llm": ("llm",), "import": ("import",)}

# Every method by name: how it is built from the run's retrievers and the shared generator.
# `family`: what the context is built from (none, passages, graph, both, or community reports).
# `index_parts`: what it reads from the index (None: its parts' union, see `index_parts`).
# The model calls it makes besides the answer, which `ragtrial estimate` plans from this metadata
# (`evaluation.run_methods.planned_answers`): `map_reduce`, map calls over what it retrieves;
# `route_prompt`, one routing call per question with that prompt; `retriever`, the retriever whose
# own calls (an entity listing) it makes when that is not the retriever of its own name.
METHODS: Registry[Callable[[str, Toolkit], Method]] = Registry("method")
METHODS.add(
    "closed_book",
    lambda name, kit: kit.retrieval(name, None),
    "no context: the model alone",
    family="none",
    index_parts=(),
)
METHODS.add(
    "naive_rag",
    _retrieval("vector"),
    "vector retrieval of chunks (NaiveRAG)",
    family="passages",
    index_parts=("chunks", "chunk_embeddings"),
)
_parts: tuple[str, ...]
for _retriever, _parts in (
    ("bm25", ("chunks",)),
    ("ts_rank", ("chunks",)),
    ("hybrid", ("chunks", "chunk_embeddings")),
):
    METHODS.add(
        _retriever,
        _retrieval(_retriever),
        RETRIEVERS.entry(_retriever).description,
        family="passages",
        index_parts=_parts,
    )
for _retriever, _parts in GRAPH_RETRIEVER_PARTS.items():
    METHODS.add(
        _retriever,
        _retrieval(_retriever),
        RETRIEVERS.entry(_retriever).description,
        family="graph",
        index_parts=_parts,
    )
# The in-database twins as methods of their own, so that one run can answer with both (hybrid beside
# hybrid_postgresql); `store.retrieval` instead runs the methods above on a store under their own names.
for _store, _twins in STORE_TWINS.items():
    for _twin in _twins:
        _method = "naive_rag" if _twin == "vector" else _twin
        _entry = METHODS.entry(_method)
        METHODS.add(
            f"{_method}_{_store}",
            _retrieval(f"{_twin}_{_store}"),
            f"{_entry.description}, in the {_store} store",
            **_entry.metadata,
            store=_store,
        )
METHODS.add(
    "kg_triplets_text",
    lambda name, kit: kit.retrieval(name, kit.retriever("kg_triplets", kg_with_source_text=True)),
    "Han et al.'s KG-GraphRAG Triplets+Text: the triplets, then the passages they came from",
    family="graph",
    index_parts=GRAPH_RETRIEVER_PARTS["kg_triplets"],
    retriever="kg_triplets",
)
METHODS.add(
    "global_search",
    _global_search(None),
    "GraphRAG global search at level methods.global_level",
    family="community_reports",
    index_parts=("community_reports",),
    map_reduce=True,
)
# The GraphRAG paper's conditions C0-C3 (a level without its own communities projects the one above).
GLOBAL_LEVELS = range(4)
for _level in GLOBAL_LEVELS:
    METHODS.add(
        f"global_search_c{_level}",
        _global_search(_level),
        f"GraphRAG global search over the C{_level} community reports (projected from above where a "
        "branch stopped splitting)",
        family="community_reports",
        index_parts=("community_reports",),
        map_reduce=True,
    )
METHODS.add(
    "ts",
    lambda name, kit: kit.map_reduce(name, chunk_units(kit.index)),
    "the GraphRAG paper's TS: map-reduce over source chunks",
    family="passages",
    index_parts=("chunks",),
    map_reduce=True,
)
METHODS.add(
    "selection",
    _selection,
    "Han et al.'s Selection: routed to RAG or GraphRAG per question",
    family="both",
    index_parts=None,
    route_prompt="route_question",
)
METHODS.add(
    "integration",
    lambda name, kit: IntegrationMethod(name, _hybrid_parts(kit)),
    "Han et al.'s Integration: the RAG and GraphRAG contexts together",
    family="both",
    index_parts=None,
)

METHODS.add(
    "oracle",
    lambda name, kit: OracleMethod(
        name, kit.generator, kit.ctx.ledger, kit.doc_of_chunk, kit.index, kit.answer_settings.context_budget
    ),
    "the gold context (the question's gold facts, then its gold passages): the upper bound of every "
    "method, and seed 004's gold-context injection",
    family="gold",
    index_parts=("chunks",),
)

# The upstream systems as shipped (`methods/upstream/`): each search mode, its family and the kit
# method that reimplements it (its twin in notebook 11).
UPSTREAM_MODES: dict[str, tuple[UpstreamMode, str, str]] = {
    "graphrag_local": (UpstreamMode("graphrag", "local", "local_search"), "graph", "GraphRAG's local search"),
    "graphrag_global": (
        UpstreamMode("graphrag", "global", "global_search"),
        "community_reports",
        "GraphRAG's global search (map-reduce over community reports)",
    ),
    "graphrag_drift": (UpstreamMode("graphrag", "drift", "local_search"), "graph", "GraphRAG's DRIFT search"),
    "graphrag_basic": (
        UpstreamMode("graphrag", "basic", "naive_rag"),
        "passages",
        "GraphRAG's basic search (vector search over text units)",
    ),
    **{
        f"lightrag_hku_{mode}": (
            UpstreamMode("lightrag", mode, "naive_rag" if mode == "naive" else "lightrag"),
            "passages" if mode == "naive" else "graph",
            f"LightRAG's {mode} query mode",
        )
        for mode in ("naive", "local", "global", "hybrid", "mix")
    },
    "fast_graphrag": (
        UpstreamMode("fast_graphrag", "query", "fastgraphrag"),
        "graph",
        "fast-graphrag's query (personalized PageRank over its own graph)",
    ),
}


def _upstream(name: str, kit: Toolkit) -> Method:
    mode = UPSTREAM_MODES[name][0]
    return UpstreamMethod(name, kit.generator, kit.ctx, kit.doc_of_chunk, kit.upstream(), mode)


for _name, (_mode, _family, _description) in UPSTREAM_MODES.items():
    METHODS.add(
        _name,
        _upstream,
        f"{_description}, the real package ({_mode.system})",
        family=_family,
        index_parts=(upstream_part(_mode.system),),  # its own index, costed from its build's manifest
        system=_mode.system,
        twin=_mode.twin,
    )


def _imported(name: str, kit: Toolkit) -> ImportedMethod:
    """Imported method `name`, its question ids checked against the run's whole data set."""
    spec = kit.method_settings.answer_files[name]
    if name in METHODS:
        raise ValueError(
            f"methods.answer_files.{name}: {name!r} is a method of the kit; name the import otherwise"
        )
    if spec.retrieval:
        raise ValueError(
            f"methods.answer_files.{name}: a retrieval file (retrieval: true) holds no answers; notebook "
            "13 scores it through benchmark.retrieval_files"
        )
    answers = method_answers(name, spec)
    whole = kit.ctx.settings.data.model_copy(update={"limit_questions": None})
    check_question_ids(
        answer_file_path(spec), answers, {q.question_id for q in load_experiment_dataset(whole).questions}
    )
    return ImportedMethod(name, kit.generator, kit.ctx.ledger, answers, answer_file_path(spec), kit.index)


def index_parts(method: str, settings: Settings) -> list[tuple[str, str]]:
    """The (part, origin) pairs of the index `method` reads under the run's settings, each once in a
    stable order: parts are chunks, chunk_embeddings, graph, communities, community_reports,
    entity_embeddings, report_embeddings; a graph part's origin is each graph `retrieval.graph_origin`
    selects (nlp and llm for "both"), the others' origin is "".
    """
    if method in settings.methods.answer_files:
        return []  # an imported method's costs come from its answers file
    entry = METHODS.entry(method)
    if entry.metadata["index_parts"] is None:  # Selection and Integration read both their parts' indexes
        names = ["naive_rag", settings.methods.graph_method]
        return list(dict.fromkeys(p for name in names for p in index_parts(name, settings)))
    wanted = list(entry.metadata["index_parts"])
    if "system" in entry.metadata:  # an upstream system reads its own index only
        return [(part, "") for part in wanted]
    if "graph" in wanted and settings.retrieval.graph_fallback == "vector":
        wanted.append("chunk_embeddings")
    for part in wanted:  # grows while it is read: a part's sources are appended after it
        wanted += [p for p in _BUILT_FROM.get(part, ()) if p not in wanted]
    origins = _GRAPH_ORIGINS[settings.retrieval.graph_origin]
    return [
        (part, origin)
        for part in PART_ORDER
        if part in wanted
        for origin in (origins if part in _BY_ORIGIN else ("",))
    ]


def make_methods(
    names: Sequence[str], index: GraphIndex, ctx: ModelContext, answer_settings: AnswerSettings
) -> tuple[list[Method], pd.DataFrame]:
    """The named methods sharing one generator and one set of retrievers, and a table of the ones
    the index cannot support (method, reason) so a report can say why they are missing.
    `answer_settings` is the experiment's section; how methods are built is `ctx.settings.methods`;
    a name that is a key of `methods.answer_files` is an imported method (ragtrial.methods.imported).
    """
    answer_files = ctx.settings.methods.answer_files
    unknown = [n for n in METHODS.unknown(list(names)) if n not in answer_files]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; known: {', '.join([*METHODS, *answer_files])}")
    kit = Toolkit(index, ctx, answer_settings)
    methods, unavailable = [], []
    for name in names:
        parts = index_parts(name, ctx.settings)
        if index.chunks.empty and parts:
            reads = ", ".join(dict.fromkeys(part for part, _ in parts))
            unavailable.append((name, f"{name} reads the index ({reads}); the data set has no documents"))
            continue
        try:
            methods.append(_imported(name, kit) if name in answer_files else METHODS.get(name)(name, kit))
        except MethodUnavailable as err:
            unavailable.append((name, str(err)))
    return methods, pd.DataFrame(unavailable, columns=["method", "reason"])


def make_method(name: str, index: GraphIndex, ctx: ModelContext, answer_settings: AnswerSettings) -> Method:
    methods, unavailable = make_methods([name], index, ctx, answer_settings)
    if not methods:
        raise MethodUnavailable(unavailable["reason"].iloc[0])
    return methods[0]
