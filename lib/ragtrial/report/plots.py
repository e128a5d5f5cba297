"""Plots shared by reports."""

from __future__ import annotations

from typing import Any

import pandas as pd


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
