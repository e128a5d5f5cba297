"""The reports' plots: each returns a closed figure, shown once by the notebook displaying it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragtrial.index.inspect import with_origin
from ragtrial.index.tables import GraphIndex


def pareto_plot(front: pd.DataFrame, quality: str, label: str) -> Any:
    """Quality (with its interval) against tokens per question; the Pareto front joined by a line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    err = [front[quality] - front[f"{quality}_low"], front[f"{quality}_high"] - front[quality]]
    ax.errorbar(front["tokens_per_question"], front[quality], yerr=err, fmt="o", color="grey", alpha=0.6)
    line = front[front["pareto"]].sort_values("tokens_per_question")
    ax.plot(line["tokens_per_question"], line[quality], "-o", color="tab:blue", label="Pareto front")
    for r in front.itertuples(index=False):
        ax.annotate(
            r.method,
            (r.tokens_per_question, getattr(r, quality)),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    ax.set(
        xlabel="tokens per question (prompt + completion, all calls)",
        ylabel=f"{label} (95% bootstrap interval)",
        title="Quality against cost",
    )
    ax.legend()
    plt.close(fig)  # shown once, by the notebook displaying the returned figure
    return fig


def degree_histograms(index: GraphIndex) -> Any:
    """Per graph origin, entities by degree (distinct neighbours), on a log scale: the hubs show."""
    import matplotlib.pyplot as plt

    origins = list(dict.fromkeys(index.entities["origin"]))
    fig, axes = plt.subplots(1, len(origins), figsize=(5 * len(origins), 3.2), squeeze=False)
    for ax, origin in zip(axes[0], origins, strict=True):
        degrees = index.entities.loc[index.entities["origin"] == origin, "degree"]
        ax.hist(degrees, bins=range(0, int(degrees.max()) + 2), color="#4c72b0")
        ax.set_yscale("log")
        ax.set_title(f"{origin} graph: {len(degrees)} entities")
        ax.set_xlabel("degree (distinct neighbours)")
        ax.set_ylabel("entities")
    fig.tight_layout()
    plt.close(fig)
    return fig


def largest_communities(index: GraphIndex, max_members: int = 25) -> Any:
    """The largest level-0 community of each graph (its highest-degree members), seeded spring
    layout, edge width following the relation weight.
    """
    import matplotlib.pyplot as plt
    import networkx as nx

    origins = list(dict.fromkeys(index.entities["origin"]))
    communities = with_origin(index.communities, index)
    graph = index.to_networkx()
    fig, axes = plt.subplots(1, len(origins), figsize=(6 * len(origins), 5), squeeze=False)
    for ax, origin in zip(axes[0], origins, strict=True):
        top = communities[(communities["origin"] == origin) & (communities["level"] == 0)].nlargest(1, "size")
        ax.set_axis_off()
        if top.empty:
            ax.set_title(f"{origin}: no community")
            continue
        members = sorted(top.iloc[0]["entity_ids"], key=lambda e: -graph.degree(e))[:max_members]
        sub = graph.subgraph(members)
        nx.draw_networkx(
            sub,
            nx.spring_layout(sub, seed=0),
            ax=ax,
            node_size=120,
            font_size=7,
            node_color="#dd8452",
            width=[0.5 + min(3, d["weight"] / 3) for _, _, d in sub.edges(data=True)],
            labels={n: graph.nodes[n]["name"] for n in sub},
        )
        ax.set_title(f"{origin}: community {top.iloc[0]['community_id']} ({top.iloc[0]['size']} entities)")
    fig.tight_layout()
    plt.close(fig)
    return fig


def gold_scores_plot(quality: pd.DataFrame) -> Any:
    """Recall and precision against the gold graph per origin, with their intervals."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    measures = list(dict.fromkeys(quality["measure"]))
    for k, origin in enumerate(quality["origin"].unique()):
        part = quality[quality["origin"] == origin].set_index("measure").reindex(measures)
        ax.bar(
            [i + 0.38 * k for i in range(len(measures))],
            part["share"],
            width=0.36,
            label=origin,
            yerr=[part["share"] - part["low"], part["high"] - part["share"]],
            capsize=3,
        )
    ax.set_xticks([i + 0.19 for i in range(len(measures))], measures)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share")
    ax.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig


def diversity_plot(diversity: pd.DataFrame) -> Any:
    """Mean claim clusters per answer against the distance threshold, per condition, with intervals."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for method, rows in diversity.groupby("method", sort=False):
        (line,) = ax.plot(rows["threshold"], rows["mean"], marker="o", label=method)
        ax.fill_between(
            rows["threshold"].astype(float),
            rows["ci_low"],
            rows["ci_high"],
            color=line.get_color(),
            alpha=0.15,
        )
    ax.set_xlabel("distance threshold (1 − ROUGE-L F1)")
    ax.set_ylabel("mean clusters per answer")
    ax.set_title("Claim-based diversity (95% bootstrap intervals)")
    ax.legend()
    plt.close(fig)
    return fig
