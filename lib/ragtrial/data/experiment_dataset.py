"""The data set a run's settings name: the generated corpus, or a real one through
`ragtrial.data.load_dataset`, with the sampling options applied.
"""

from __future__ import annotations

from ragtrial.config.base import ParamsError
from ragtrial.config.data import DataSettings
from ragtrial.records import Dataset


def load_experiment_dataset(data: DataSettings) -> Dataset:
    """The data set the settings name: the generated corpus, or a real one through ragtrial.data."""
    if data.dataset == "generated":
        from ragtrial.data.synthetic import generate_corpus

        return generate_corpus(data.size, data.seed)[0]
    if not data.path:
        raise ParamsError(f"key 'data.path': required for data set {data.dataset!r}")
    from ragtrial.data import load_dataset

    return load_dataset(
        data.dataset,
        data.path,
        limit_questions=data.limit_questions,
        limit_documents=data.limit_documents,
        seed=data.seed,
        **data.options,
    )
