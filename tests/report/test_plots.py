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


def test_the_judge_plots_draw_one_panel_per_pair_and_come_back_closed():
    from ragtrial.report.plots import (
        length_bias_plot,
        position_bias_plot,
        self_vs_self_plot,
        trial_bias_plot,
        win_rate_matrix_plot,
        win_tie_loss_boxes,
    )

    trials = pd.DataFrame(
        {
            "method_a": "a",
            "replicate_a": 0,
            "method_b": ["b", "b", "c"],
            "replicate_b": 0,
            "trial": [0, 1, 0],
            "win_rate": [0.5, 0.4, 0.2],
            "tie_rate": [0.1, 0.2, 0.0],
            "loss_rate": [0.4, 0.4, 0.8],
            "relative_win_rate": [0.1, 0.0, -0.6],
        }
    )
    sanity = pd.DataFrame(
        {
            "pair": ["a vs b"],
            "protocol": ["classic"],
            "win_rate": [0.6],
            "tie_rate": [0.0],
            "loss_rate": [0.4],
        }
    )
    boxes = win_tie_loss_boxes(trials, sanity)
    assert [ax.get_title() for ax in boxes.axes] == ["a vs b", "a vs c"]
    assert [line.get_label() for line in boxes.axes[0].lines if line.get_label() == "classic"] == ["classic"]
    assert win_tie_loss_boxes(trials.iloc[:0], sanity) is None
    names = ["a", "b"]
    matrix = pd.DataFrame([[float("nan"), 0.25], [-0.25, float("nan")]], index=names, columns=names)
    heat = win_rate_matrix_plot(matrix, names)
    assert sorted(t.get_text() for t in heat.axes[0].texts) == ["+0.25", "-0.25", "—", "—"]
    classic = pd.DataFrame({"aspect": ["overall"], "position": ["AB"], "wins_a": [3], "wins_b": [1]})
    sanity_plot = self_vs_self_plot(classic, trials, 2)
    assert [ax.get_title() for ax in sanity_plot.axes] == [
        "classic (A shown first, no ties)",
        "unbiased (2 trials)",
    ]
    positions = pd.DataFrame(
        {"order": ["AB", "BA"], "protocol": "classic", "first_shown_win_rate": [0.7, 0.6]}
    )
    assert position_bias_plot(positions).axes[0].get_title() == "position bias"
    bins = pd.DataFrame({"mean_gap": [5.0, 20.0], "longer_win_rate": [0.5, 0.8], "verdicts": [4, 2]})
    assert [t.get_text() for t in length_bias_plot(bins).axes[0].texts] == ["n=4", "n=2"]
    assert len(trial_bias_plot(trials).axes[0].lines[0].get_xdata()) == 3
    assert not plt.get_fignums()
