"""Every report plot draws from a small table and comes back closed (shown once, by the notebook), with
no label over another or cut at the figure's edge and whole-number ticks on axes of counts and trials.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from types import SimpleNamespace  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ragtrial.report.plots import (  # noqa: E402
    degree_histograms,
    diversity_plot,
    entity_pies,
    judge_protocols_plot,
    length_bias_plot,
    pair_trials_plot,
    pareto_plot,
    position_bias_plot,
    recall_plane,
    relevance_score_panels,
    settled_renderer,
    trial_bias_plot,
    win_rate_matrix_plot,
)


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


def sticks_out(fig) -> bool:
    """Whether anything drawn on `fig` (a label, a title, a legend) reaches past its edge (is cut)."""
    drawn = fig.get_tightbbox(settled_renderer(fig))
    page = fig.bbox_inches
    return (
        drawn.x0 < page.x0 - 0.01
        or drawn.y0 < page.y0 - 0.01
        or drawn.x1 > page.x1 + 0.01
        or drawn.y1 > page.y1 + 0.01
    )


def overlapping_labels(ax) -> list[tuple[str, str]]:
    renderer = settled_renderer(ax.figure)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
    return [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1 :] if box.overlaps(other)]


def crowded_front() -> pd.DataFrame:
    """04's front on a weak model: methods at nearly the same cost and accuracy, three at zero."""
    methods = ["vector_rag", "bm25", "hybrid_rag", "graph_local", "graph_global", "graph_drift", "lightrag",
               "no_context", "raptor", "hipporag"]  # fmt: skip
    tokens = [1200, 1210, 1250, 3000, 9000, 3100, 3050, 100, 1230, 2990]
    accuracy = np.array([0.30, 0.31, 0.30, 0.32, 0.25, 0.31, 0.33, 0.0, 0.0, 0.0])
    return pd.DataFrame({"method": methods, "tokens_per_question": tokens, "accuracy": accuracy,
                         "accuracy_low": accuracy - 0.05, "accuracy_high": accuracy + 0.05,
                         "pareto": [1, 0, 0, 0, 0, 0, 1, 1, 0, 0]})  # fmt: skip


def test_point_labels_never_overlap_and_coincident_points_share_one():
    fig = pareto_plot(crowded_front(), "accuracy", "accuracy")
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == sorted(crowded_front()["method"])
    assert overlapping_labels(ax) == [] and not sticks_out(fig)
    same_spot = pd.DataFrame(
        {"category": "local", "method": ["a", "b", "c", "d"] * 2,
         "metric": ["entity_recall"] * 4 + ["relationship_recall"] * 4, "mean": [0, 0, 0, 0.5, 0, 0, 0, 0.1]}
    )  # fmt: skip
    plane = recall_plane(same_spot, {"local": 0.5}, 0.3)
    assert sorted(t.get_text() for t in plane.axes[0].texts) == ["a, b, c", "d"]
    assert overlapping_labels(plane.axes[0]) == []


def test_the_recall_plane_of_a_data_set_without_gold_edges_says_so_instead_of_failing():
    # paper_diagnostics.yaml's MuSiQue run: entity recall only (no gold edges, no relationship recall)
    entities_only = pd.DataFrame(
        {"category": "multi_hop", "method": ["a", "b"], "metric": "entity_recall", "mean": 0.5}
    )
    plane = recall_plane(entities_only, {"multi_hop": 0.7}, 0.8)
    assert [t.get_text() for t in plane.axes[0].texts] == ["no question with\nboth recalls"]


def whole_numbers(ticks) -> bool:
    return all(float(t).is_integer() for t in ticks)


def test_axes_of_counts_and_trials_have_whole_number_ticks_and_no_figure_clips_a_label():
    trials = pd.DataFrame({"trial": [0, 1, 2], "relative_win_rate": [0.1, -0.2, 0.0],
                           "win_rate": [0.5, 0.4, 0.45], "tie_rate": [0.1, 0.2, 0.1],
                           "loss_rate": [0.4, 0.4, 0.45]})  # fmt: skip
    trial_fig = trial_bias_plot(trials)
    settled_renderer(trial_fig)
    assert whole_numbers(trial_fig.axes[0].get_xticks())  # not 0.25, 0.5, ... (06's trial axis)
    classic = pd.DataFrame({"aspect": ["overall"], "position": ["AB"], "wins_a": [3], "wins_b": [1]})
    protocols = judge_protocols_plot(classic, trials, 3)
    settled_renderer(protocols)
    assert whole_numbers(protocols.axes[0].get_yticks())  # questions
    entities = pd.DataFrame({"origin": ["llm"] * 4, "degree": [1, 1, 2, 3]})
    degrees = degree_histograms(SimpleNamespace(entities=entities))
    settled_renderer(degrees)
    assert whole_numbers(degrees.axes[0].get_xticks())
    pairs = trials.assign(pair="a very long method name vs another very long method name")
    sanity = pd.DataFrame({"pair": [pairs["pair"][0]], "protocol": ["classic"], "win_rate": [0.5],
                           "tie_rate": [0.1], "loss_rate": [0.4]})  # fmt: skip
    names = ["vector_rag", "graph_local_search"]
    matrix = pd.DataFrame([[np.nan, -0.001], [0.001, np.nan]], index=names, columns=names)
    bins = pd.DataFrame(
        {"mean_gap_tokens": [5.0, 5.5, 40.0], "longer_win_rate": [0.5, 0.52, 0.9], "verdicts": [10, 12, 3]}
    )
    positions = pd.DataFrame({"order": ["AB", "BA"] * 2, "protocol": ["classic"] * 2 + ["unbiased"] * 2,
                              "first_shown_win_rate": [0.6, 0.55, 0.5, 0.52]})  # fmt: skip
    figures = [
        trial_fig,
        protocols,
        degrees,
        pair_trials_plot(pairs, sanity),
        win_rate_matrix_plot(matrix),
        length_bias_plot(bins),
        position_bias_plot(positions),
        pareto_plot(crowded_front(), "accuracy", "accuracy"),
    ]
    assert [sticks_out(fig) for fig in figures] == [False] * len(figures)
    assert "-0.00" not in [t.get_text() for t in figures[4].axes[0].texts]
    assert overlapping_labels(figures[5].axes[0]) == []
    assert not plt.get_fignums()  # all closed
