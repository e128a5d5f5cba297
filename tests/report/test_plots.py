"""Every report plot draws from a small table and comes back closed (shown once, by the notebook)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ragtrial.report.plots import diversity_plot, entity_pies, relevance_score_panels  # noqa: E402


def test_plots_return_closed_figures_with_one_panel_per_group():
    ratings = pd.DataFrame({"generator": ["graph", "graph", "summary"], "level": ["node", "node", ""],
                            "score": [0, 5, 3]})  # fmt: skip
    panels = relevance_score_panels(ratings)
    assert [ax.get_title() for ax in panels.axes if ax.axison][:2] == [
        "graph / node (n=2)",
        "summary /  (n=1)",
    ]
    top = pd.DataFrame({"linker": ["ngram"] * 2, "generator": ["graph"] * 2, "entity": ["Ada", "Kel"],
                        "count": [3, 1], "rank": [1, 2]})  # fmt: skip
    pies = entity_pies(top, ["ngram"], ["graph", "summary"])
    assert [ax.get_title() for ax in pies.axes] == ["graph (ngram linker)", "summary (ngram linker)"]
    diversity = pd.DataFrame({"method": ["a", "a"], "threshold": [0.5, 0.8], "mean": [2.0, 1.0],
                              "ci_low": [1.0, 0.5], "ci_high": [3.0, 1.5]})  # fmt: skip
    lines = diversity_plot(diversity)
    assert len(lines.axes[0].lines) == 1
    assert not plt.get_fignums()  # all closed
