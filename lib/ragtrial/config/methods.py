"""Settings of the retrieval-and-answer methods: how they are built (`methods`, shared by every
experiment), what each experiment answers with (`AnswerSettings`, the base of the experiment
sections), and the sections of notebooks 04 (QA) and 05 (query-focused summarization).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from ragtrial.config.base import ExistingPath, Names, Section, conflict
from ragtrial.prompts import load_prompt, prompt_files

# What the generator fills in every answer (and reduce) prompt: methods.base.Generator renders
# `prompt.render(context=..., question=...)`.
ANSWER_PLACEHOLDERS = frozenset({"context", "question"})


def answer_prompt_name(name: str) -> str:
    """A shipped query-stage prompt's name (never a path) whose placeholders are the generator's."""
    fitting = sorted(
        n
        for n, (stage, _) in prompt_files().items()
        if stage == "query" and load_prompt(n).placeholders == ANSWER_PLACEHOLDERS
    )
    if name not in fitting:
        problem = (
            f"no shipped prompt {name!r}: a prompt is named, not a path (a file ragtrial/prompts/<stage>/"
            "<name>.txt)"
            if name not in prompt_files()
            else f"prompt {name!r} is not a query prompt with exactly the placeholders $context and $question"
        )
        raise ValueError(f"{problem}; answer prompts: {', '.join(fitting)}")
    return name


# The fields of an answers file (ragtrial.methods.imported); `columns` maps a file's own names onto them.
ANSWER_FILE_FIELDS = (
    "question_id",
    "method",
    "answer",
    "question",
    "contexts",
    "chunk_ids",
    "entity_ids",
    "relation_ids",
    "prompt_tokens",
    "completion_tokens",
    "calls",
    "latency_s",
    "passage_ids",
    "titles",
    "failure",
)


class AnswerFile(Section):
    """A file of answers some other system produced (bring your own answers, ragtrial.methods.imported):
    one row per (question_id, method) with `answer`, optionally the question, the contexts, the ids of
    the kit's index the system used, tokens, calls, latency and a failure.
    """

    path: Annotated[str, ExistingPath("file", under="data")] = Field(
        description="the answers file, relative to the data root ($RAGTRIAL_DATA_ROOT, default data/) "
        "unless absolute, like data.path"
    )
    format: Literal["auto", "jsonl", "csv", "parquet", "json"] = Field(
        "auto",
        description="jsonl (one JSON object a line), csv, parquet or json (an array of objects); auto: "
        "from the file's suffix (.jsonl, .csv, .parquet, .json)",
    )
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="the file's own field names of the answers-file fields, {field: its name in the file} "
        "(e.g. {question_id: _id, answer: lightrag_answer}); unmapped fields are read under their own name",
    )
    method: str | None = Field(
        None,
        description="which method's rows of a file holding several (its `method` column); None: the "
        "method's name in answer_files, or every row when the file has no method column",
    )
    system: str = Field(
        "", description='who produced the answers, free text (e.g. "LightRAG (KAG authors\' run)")'
    )
    retrieval: bool = Field(
        False,
        description="the file holds retrieval results instead of answers: per question the passages a system "
        "retrieved, as `passage_ids` (the data set's document ids) or `titles` (each the title of exactly "
        "one passage); notebook 13 scores it (benchmark.retrieval_files); no answer is read",
    )
    match: Literal["question_id", "question"] = Field(
        "question_id",
        description='how a row finds its question: "question_id", or "question", the exact question text '
        "(published outputs that carry no id)",
    )
    ranked: bool = Field(
        True,
        description="retrieval files: the passages are in rank order (recall@k, MRR, Hits are computed); "
        "false: only the rank-free measures (recall and all_supporting over the whole list)",
    )
    description: str = Field("", description="what the answers are, for the report")

    @model_validator(mode="after")
    def _known_fields(self) -> AnswerFile:
        unknown = sorted(set(self.columns) - set(ANSWER_FILE_FIELDS))
        if unknown:
            raise conflict(
                "columns",
                f"not answers-file fields: {', '.join(unknown)}; fields: {', '.join(ANSWER_FILE_FIELDS)}",
            )
        return self


class MethodSettings(Section):
    """How the methods are built (ragtrial.methods.registry), the same in every experiment: the
    GraphRAG side of selection and integration, and the map step of the map-reduce methods
    (global_search, global_search_c<n>, ts). Retriever knobs (k, hops, hub cap, keyword search) are
    in `retrieval`; what an experiment answers with is in its own section.
    """

    graph_method: Annotated[str, Names("retriever")] = Field(
        "local_search",
        description="the GraphRAG side of selection and integration: the graph retriever whose context "
        "they use beside naive_rag's",
    )
    global_level: int = Field(
        0, ge=0, description="community level C<n> of global_search (the index reports C0 by default)"
    )
    map_budget: int = Field(1500, gt=0, description="report / chunk tokens per map call")
    map_max_tokens: int = Field(128, gt=0, description="reply token cap of each map call")
    map_max_points: int | None = Field(
        2,
        ge=1,
        description="scored points each map call returns at most (the JSON schema's maxItems); None: "
        "uncapped, every point a map reply gives is kept, as GraphRAG, which bounds a map reply by "
        "map_max_tokens only (the reduce context's token budget still applies)",
    )
    map_point_max_chars: int | None = Field(
        160,
        ge=1,
        description="characters of each map point's description at most (the JSON schema's maxLength: a "
        "grammar-constrained reply then ends before map_max_tokens; a longer reply fails the batch as "
        "too_long, a point at the cap is counted in the answer's notes); None: no cap",
    )
    answer_files: dict[str, AnswerFile] = Field(
        default_factory=dict,
        description="imported methods, {name: answers file}: a name listed in an experiment's `methods` "
        "that is a key here answers from its file (ragtrial.methods.imported); a question the file does "
        "not answer is a failure, not_answered",
    )


# Keys whose default differs per experiment: each section states its default, the type and the
# description are written once.
MethodName = Annotated[str, Names("method")]
MethodNames = Annotated[
    list[MethodName],
    Field(
        min_length=1, description="the methods run, by name (ragtrial.methods.registry.METHODS), each once"
    ),
]
QuestionsPerType = Annotated[
    int | None, Field(ge=1, description="a seeded sample of this many questions per question type; None: all")
]
AnswerPrompt = Annotated[
    str,
    AfterValidator(answer_prompt_name),
    Field(
        description="the prompt every method answers with: the name of a shipped prompt whose placeholders "
        "are $context and $question (answer, summarize_query, ...), never a path"
    ),
]
AnswerMaxTokens = Annotated[int, Field(gt=0, description="reply token cap of an answer")]
FirstLineOnly = Annotated[
    bool, Field(description="keep the first line of an answer (a base model runs on after a short answer)")
]
ReducePrompt = Annotated[
    str,
    AfterValidator(answer_prompt_name),
    Field(
        description="the prompt the map-reduce methods (global_search, ts) answer with after the map "
        'step: the answer prompt by default, "global_reduce" for GraphRAG\'s own reduce step'
    ),
]


class Resampling(Section):
    """A section whose intervals and paired tests are bootstrapped."""

    bootstrap_resamples: int = Field(
        2000, ge=100, description="bootstrap resamples of every interval and paired test"
    )


class FamilyWiseLevel(Section):
    """A section whose paired comparisons are Holm-adjusted and read with the claim rule."""

    alpha: float = Field(
        0.05, gt=0, lt=1, description="family-wise significance level of the paired tests (Holm)"
    )


class AnswerSettings(Resampling):
    """What an experiment's methods answer with (ragtrial.methods): one generator, one answer prompt
    and one context budget for every method; only the context differs. The base of the sections
    of the experiments that run methods. Defaults are for long-form answers; QA overrides them.
    """

    methods: MethodNames
    questions_per_type: QuestionsPerType
    context_budget: int = Field(
        1000,
        gt=0,
        description="cl100k tokens of context shown, the same for every method (per part for "
        "integration; the reduce step's budget for map-reduce)",
    )
    answer_prompt: AnswerPrompt = "summarize_query"
    answer_max_tokens: AnswerMaxTokens = 96
    first_line_only: FirstLineOnly = False
    whole_answer_types: list[str] = Field(
        [],
        description='question types answered in full despite first_line_only: "contradictory" lets '
        "an answer name every conflicting value and its source (scored right only then); [] keeps every "
        "answer to its first line (the default batch: no extra tokens)",
    )
    reduce_prompt: ReducePrompt = "summarize_query"
    seed: int = Field(0, ge=0, description="seed of the question sample and of the map units' shuffle")

    @model_validator(mode="after")
    def _methods_once(self) -> AnswerSettings:
        repeated = sorted({m for m in self.methods if self.methods.count(m) > 1})
        if repeated:
            raise conflict("methods", f"named more than once: {', '.join(repeated)}")
        return self


class BaselineAnswerSettings(AnswerSettings):
    """Answer settings of an experiment that compares every method with one baseline method."""

    baseline: str = Field(
        "naive_rag",
        description="the method the paired comparisons and complementarity are against; one of `methods`",
    )

    @model_validator(mode="after")
    def _baseline_is_run(self) -> BaselineAnswerSettings:
        if self.baseline not in self.methods:
            raise conflict(
                "baseline", f"{self.baseline!r} is not among the methods ({', '.join(self.methods)})"
            )
        return self


# Notebook 04's methods by default, which notebook 09 diagnoses too.
QA_METHODS = [
    "closed_book",
    "naive_rag",
    "hybrid",
    "graph_walk",
    "graph_hybrid",
    "local_search",
    "global_search",
]


class QASettings(BaselineAnswerSettings):
    """Notebook 04 (RAG vs GraphRAG on QA): short answers. Defaults fit the embedded model's 6-minute
    budget; paper settings are in params/paper_rag_vs_graphrag.yaml.
    """

    methods: MethodNames = QA_METHODS
    questions_per_type: QuestionsPerType = 2
    answer_prompt: AnswerPrompt = "answer"
    answer_max_tokens: AnswerMaxTokens = 48
    first_line_only: FirstLineOnly = True
    reduce_prompt: ReducePrompt = "answer"


class SummarizationSettings(BaselineAnswerSettings):
    """Notebook 05 (query-focused summarization, ROUGE-2 / BERTScore). Defaults fit a 3-minute budget."""

    methods: MethodNames = ["naive_rag", "hybrid", "local_search", "global_search"]
    questions_per_type: QuestionsPerType = 3
    bertscore_standard: bool = Field(
        False,
        description="BERTScore as published (Han et al.'s metric): bert-score's English default "
        "roberta-large, layer 17, rescaled with bert-score's baseline; the model is read from "
        "bertscore_model or the local Hugging Face cache (nothing is downloaded) and the run fails "
        "before any model call when it is absent. False: bertscore_model or the bundled "
        "all-MiniLM-L6-v2, unscaled, labelled in the report as not comparable with published BERTScore",
    )
    bertscore_model: Annotated[str | None, ExistingPath("folder")] = Field(
        None,
        description="BERTScore's model: a local model folder (with bertscore_standard, the folder holding "
        "roberta-large); None: the bundled all-MiniLM-L6-v2 (with bertscore_standard: the Hugging Face "
        "cache)",
    )
    bertscore_layers: int | None = Field(
        None,
        ge=1,
        description="BERTScore's layer; None: the model's last layer (layer 17 with bertscore_standard)",
    )
    index_per_document: bool = Field(
        False,
        description="one index per document, each question answered from its own document's index (Han et "
        "al. on the single-document sets QMSum and SQuALITY); every question must have exactly one gold "
        "document. False: one index of every document, so a method must also find the right document",
    )

    @model_validator(mode="after")
    def _standard_layer(self) -> SummarizationSettings:
        if self.bertscore_standard and self.bertscore_layers not in (None, 17):
            raise conflict(
                "bertscore_layers",
                "bertscore_standard uses bert-score's layer 17 of roberta-large; leave it unset",
            )
        return self
