"""A test set from a production query log, sampled by cluster frequency as seed 004 describes.

"Cluster semantically similar questions, then sample from each cluster proportionally to its
frequency."

Questions (from `data.query_log`, each with metadata frequency) are embedded and clustered
agglomeratively (average linkage on cosine distance, merging while below a distance threshold).
The n places are allotted to clusters by frequency with the largest-remainder rule: when n is at
least the number of clusters every cluster first gets one place (so no kind of question is lost)
and the rest go proportionally; when n is smaller, the n most frequent clusters get one each. A
cluster never gets more places than it has distinct questions; its surplus goes to the others by
the same rule. Within a cluster, questions are drawn without replacement with probability
proportional to their frequency, seeded.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.cluster import AgglomerativeClustering

from ragtrial.config.diagnostics import LOG_CLUSTER_DISTANCE
from ragtrial.records import Question


def sample_log(
    questions: list[Question],
    embedder,
    n: int,
    seed: int = 0,
    *,
    distance_threshold: float = LOG_CLUSTER_DISTANCE,
) -> tuple[list[Question], pd.DataFrame]:
    """Questions (n) sampled from the log's clusters in proportion to their frequency, and the cluster
    table (cluster, size, frequency, share, sampled, example).

    `embedder` has `embed(texts, stage=...) -> array` (ragtrial.llm.Embedder or HashingEmbedder).
    A question's frequency is its metadata frequency (1 without one); a sampled question's metadata
    gains its cluster. Clusters are numbered by falling frequency (ties: first appearance); the
    example is the cluster's most frequent question. n larger than the log keeps every question.
    """
    if n < 1:
        raise ValueError(f"n must be a positive number of questions, got {n!r}")
    if not 0 < distance_threshold <= 2:
        raise ValueError(
            f"distance_threshold must be a cosine distance in (0, 2], got {distance_threshold!r}"
        )
    if not questions:
        raise ValueError("the log has no questions to sample")
    frequency = np.array([_frequency(q) for q in questions], dtype=float)
    labels = _clusters([q.question for q in questions], embedder, distance_threshold)
    members = _members_by_frequency(labels, frequency)
    places = _allot([frequency[m].sum() for m in members], [len(m) for m in members], min(n, len(questions)))
    rng = np.random.default_rng(seed)
    cluster_of: dict[int, int] = {}  # sampled row -> its cluster
    for cluster, (rows, k) in enumerate(zip(members, places, strict=True)):
        picked = rng.choice(rows, size=k, replace=False, p=frequency[rows] / frequency[rows].sum())
        cluster_of.update({int(i): cluster for i in picked})
    total = frequency.sum()
    table = pd.DataFrame(
        [
            {
                "cluster": cluster,
                "size": len(rows),
                "frequency": int(frequency[rows].sum()),
                "share": frequency[rows].sum() / total,
                "sampled": k,
                "example": questions[rows[int(np.argmax(frequency[rows]))]].question,
            }
            for cluster, (rows, k) in enumerate(zip(members, places, strict=True))
        ],
        columns=["cluster", "size", "frequency", "share", "sampled", "example"],
    )
    sample = [
        questions[i].model_copy(update={"metadata": {**questions[i].metadata, "cluster": cluster_of[i]}})
        for i in sorted(cluster_of)
    ]
    return sample, table


def _frequency(q: Question) -> int:
    value = q.metadata.get("frequency", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"question {q.question_id}: metadata frequency must be a positive integer, got {value!r}"
        )
    return value


def _clusters(texts: list[str], embedder, threshold: float) -> np.ndarray:
    if len(texts) < 2:  # scikit-learn needs two samples
        return np.zeros(len(texts), dtype=int)
    vectors = np.asarray(embedder.embed(texts, stage="log_sampling"), dtype=float)
    model = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=threshold
    )
    return model.fit_predict(vectors)


def _members_by_frequency(labels: np.ndarray, frequency: np.ndarray) -> list[np.ndarray]:
    """Each cluster's question rows, clusters ordered by falling frequency, then first appearance."""
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(labels):
        groups.setdefault(int(label), []).append(row)
    ordered = sorted(groups.values(), key=lambda rows: (-frequency[rows].sum(), rows[0]))
    return [np.array(rows) for rows in ordered]


def _allot(weights: list[float], caps: list[int], n: int) -> list[int]:
    """Places (n) over clusters ordered by falling weight: one each first when n allows, the rest by
    largest remainder of the weight share, never above a cluster's cap (its surplus re-allotted).
    """
    places = [1 if n >= len(weights) else int(i < n) for i in range(len(weights))]
    left = n - sum(places)
    while left > 0:
        open_ = [i for i in range(len(weights)) if places[i] < caps[i]]
        total = sum(weights[i] for i in open_)
        quotas = {i: left * weights[i] / total for i in open_}
        grant = {i: min(int(quotas[i]), caps[i] - places[i]) for i in open_}
        rest = left - sum(grant.values())
        # largest remainder first; ties to the more frequent (earlier) cluster
        for i in sorted(open_, key=lambda i: (-(quotas[i] - int(quotas[i])), i)):
            if rest and grant[i] < caps[i] - places[i]:
                grant[i] += 1
                rest -= 1
        for i, g in grant.items():
            places[i] += g
        left = n - sum(places)
    return places
