"""The data set a run's settings name: the generated corpus (its template or schema questions), or a
real one through `ragtrial.data.load_dataset`, with the sampling options applied; and the generated
corpus's gold graph, the one corpus whose true graph is known.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.config.data import DataSettings, data_path
from ragtrial.data.registry import load_dataset
from ragtrial.data.schema_questions import schema_questions
from ragtrial.data.synthetic import generate_corpus, world_tables
from ragtrial.records import Dataset


def load_experiment_dataset(data: DataSettings) -> Dataset:
    """The data set the settings name: the generated corpus, or a real one through ragtrial.data."""
    if data.dataset == "generated":
        corpus, world = generate_corpus(data.size, data.seed)
        if data.question_plan == "templates":
            return corpus
        entities, relations = world_tables(world, corpus)
        questions = schema_questions(entities, relations, data.questions_per_relation, data.seed)
        return corpus.model_copy(update={"questions": questions})
    assert data.path is not None  # DataSettings requires a path unless the data set is generated
    return load_dataset(
        data.dataset,
        data_path(data.path),
        limit_questions=data.limit_questions,
        limit_documents=data.limit_documents,
        seed=data.seed,
        **data.options,
    )


def gold_graph(data: DataSettings, dataset: Dataset) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(gold entities, gold relations) of the generated corpus; None for any other data set."""
    if data.dataset != "generated":
        return None
    _, world = generate_corpus(data.size, data.seed)
    return world_tables(world, dataset)
