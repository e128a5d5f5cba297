"""What gold a loaded data set carries, and the check a notebook that needs gold makes before any
work: a notebook run on a data set without the gold it scores against stops with one line saying
what is missing and what to do, not with a NaN deep in its tables.
"""

from __future__ import annotations

from ragtrial.config.base import ParamsError
from ragtrial.config.notebooks import NOTEBOOKS, Gold
from ragtrial.records import Dataset


def gold_carried(dataset: Dataset) -> set[Gold]:
    """The kinds of `config.notebooks.Gold` at least one of the data set's questions carries."""
    questions = dataset.questions
    carried: dict[Gold, bool] = {
        "questions": bool(questions),
        # a null question (one that must be declined) is scored without an answer
        "answers": any(q.answers or q.metadata.get("is_null") for q in questions),
        "gold passages": any(q.gold_doc_ids for q in questions),
        "gold entities": any(q.gold_entities for q in questions),
        "reference summaries": any(q.reference_summaries for q in questions),
    }
    return {kind for kind, present in carried.items() if present}


def require_gold(dataset: Dataset, notebook: str) -> None:
    """Raise `ParamsError` when `notebook` (a name of `config.notebooks.NOTEBOOKS`; others need
    nothing) needs gold the data set does not carry.
    """
    if notebook not in NOTEBOOKS:
        return
    spec = NOTEBOOKS.get(notebook)
    missing = [kind for kind in spec.needs if kind not in gold_carried(dataset)]
    if missing:
        where = f" ({dataset.source_path})" if dataset.source_path else ""
        raise ParamsError(
            f"notebook {notebook} cannot run on data set {dataset.name!r}{where}: it has no "
            f"{' and no '.join(missing)}, and {spec.why_not}. Run it on a data set that has them "
            "(`ragtrial datasets` says what each provides) or leave it out of the batch."
        )
