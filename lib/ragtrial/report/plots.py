"""The reports' plots: each returns a closed figure, shown once by the notebook displaying it. Every
figure lays itself out (constrained or tight layout: no label cut at the edge), point labels never sit
on one another (`label_points`), and an axis of counts or trials has whole-number ticks.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.index.inspect import with_origin
from ragtrial.index.tables import GraphIndex


def pareto_plot(front: pd.DataFrame, quality: str, label: str) -> Any:
    """Quality (with its interval) against tokens per question; the Pareto front joined by a line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    if front.empty:  # every answer failed: the plot says so instead of drawing nothing
        ax.text(0.5, 0.5, f"no method has a {label} value (see the failures table)", ha="center")
        ax.set_axis_off()
        plt.close(fig)
        return fig
    err = [front[quality] - front[f"{quality}_low"], front[f"{quality}_high"] - front[quality]]
    ax.errorbar(front["tokens_per_question"], front[quality], yerr=err, fmt="o", color="grey", alpha=0.6)
    line = front[front["pareto"].astype(bool)].sort_values("tokens_per_question")
    ax.plot(line["tokens_per_question"], line[quality], "-o", color="tab:blue", label="Pareto front")
    ax.set(
        xlabel="tokens per question (prompt + completion, all calls)",
        ylabel=f"{label} (95% bootstrap interval)",
        title="Quality against cost",
    )
    ax.margins(0.15)  # room for the labels inside the axes
    ax.set_xlim(left=max(0, ax.get_xlim()[0]))  # no negative token counts
    ax.legend(loc="best", fontsize=8)
    label_points(ax, front["tokens_per_question"], front[quality], front["method"])
    plt.close(fig)  # shown once, by the notebook displaying the returned figure
    return fig


# Where a label may sit around its point, nearest first: offsets in points (right, left, above,
# below and the diagonals, on rings further out); beyond the first ring a thin line leads back.
_RINGS = (6, 14, 24, 36, 50)
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))
_WRAP = 32  # characters per line of a label naming several coincident points


def label_points(
    ax: Any, xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], fontsize: float = 8
):
    """Label each point of `ax` so that no label covers another label, a point or the axes' edge:
    points at the same spot share one label (their names joined); each label takes the nearest free
    place around its point, with a leader line when it sits further out, or the least crowded place
    when none is free. Returns the labels (matplotlib annotations).
    """
    renderer = settled_renderer(ax.figure)
    fig = ax.figure
    points = np.column_stack([np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)])
    keep = np.isfinite(points).all(axis=1)
    points, names = points[keep], [str(n) for n, k in zip(labels, keep, strict=True) if k]
    pixels = ax.transData.transform(points) if len(points) else np.empty((0, 2))
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (px, py) in enumerate(pixels):
        groups.setdefault((round(px / 3), round(py / 3)), []).append(i)  # within ~3 px: one spot
    marker = fig.dpi / 72 * 4  # a marker's half width in pixels
    gap = fig.dpi / 72 * 2  # between two labels, so that they do not touch
    taken = [(px - marker, py - marker, px + marker, py + marker) for px, py in pixels]
    frame = ax.get_window_extent(renderer)
    placed = []
    for members in groups.values():
        text = textwrap.fill(", ".join(dict.fromkeys(names[i] for i in members)), _WRAP)
        xy = tuple(points[members[0]])
        best: tuple[float, tuple[float, float]] | None = None
        for radius in _RINGS:
            for dx, dy in _DIRECTIONS:
                offset: tuple[float, float] = (dx * radius, dy * radius)
                note = _annotate(ax, text, xy, offset, fontsize, leader=False)
                box = note.get_window_extent(renderer)
                note.remove()
                padded = box.padded(gap).extents
                crowding = sum(_overlap(padded, other) for other in taken) + _outside(box, frame)
                if best is None or crowding < best[0]:
                    best = (crowding, offset)
                if crowding == 0:
                    break
            if best is not None and best[0] == 0:
                break
        offset = best[1] if best else (_RINGS[0], _RINGS[0])
        note = _annotate(ax, text, xy, offset, fontsize, leader=max(map(abs, offset)) > _RINGS[0])
        taken.append(tuple(note.get_window_extent(renderer).extents))
        placed.append(note)
    return placed


def settled_renderer(fig: Any) -> Any:
    """`fig` drawn once (its layout settled, so what is measured is what is shown) and the renderer
    that drew it; a figure whose canvas has none (a closed one, another backend's) is given Agg's.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _annotate(ax: Any, text: str, xy: tuple, offset: tuple[float, float], fontsize: float, leader: bool):
    dx, dy = offset
    return ax.annotate(
        text,
        xy,
        xytext=offset,
        textcoords="offset points",
        ha="left" if dx > 0 else "right" if dx < 0 else "center",
        va="bottom" if dy > 0 else "top" if dy < 0 else "center",
        fontsize=fontsize,
        arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.6, "shrinkA": 0, "shrinkB": 3}
        if leader
        else None,
    )


def _overlap(a: Sequence[float], b: Sequence[float]) -> float:
    """The area two boxes (x0, y0, x1, y1) share."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, width) * max(0.0, height)


def _outside(box: Any, frame: Any) -> float:
    """The area of `box` outside the axes (weighted up: a label there sits on the ticks)."""
    inside = _overlap(box.extents, frame.extents)
    return 4 * (box.width * box.height - inside)


def degree_histograms(index: GraphIndex) -> Any:
    """Per graph origin, entities by degree (distinct neighbours), on a log scale: the hubs show."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    origins = list(dict.fromkeys(index.entities["origin"]))
    fig, axes = plt.subplots(1, len(origins), figsize=(5 * len(origins), 3.2), squeeze=False)
    for ax, origin in zip(axes[0], origins, strict=True):
        degrees = index.entities.loc[index.entities["origin"] == origin, "degree"]
        ax.hist(degrees, bins=range(0, int(degrees.max()) + 2), color="#4c72b0")
        ax.set_yscale("log")
        ax.set_title(f"{origin} graph: {len(degrees)} entities")
        ax.set_xlabel("degree (distinct neighbours)")
        ax.set_ylabel("entities")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
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

    fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
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


def entity_pies(top: pd.DataFrame, linkers: list[str], generators: list[str]) -> Any:
    """Per linker and generator, the share of mentions of its top entities (the rest grey)."""
    import matplotlib.pyplot as plt

    n_rows, n_cols = max(1, len(linkers)), max(1, len(generators))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4.2 * n_cols, 4.2 * n_rows), squeeze=False)
    axes[0][0].axis("off")  # stays blank only when no generator produced a question
    for r, linker in enumerate(linkers):
        for c, generator in enumerate(generators):
            ax = axes[r][c]
            slices = top[(top["linker"] == linker) & (top["generator"] == generator)]
            if slices.empty:
                ax.text(0.5, 0.5, "no linked entity", ha="center", va="center")
                ax.axis("off")
            else:
                colours = [
                    plt.cm.tab10(i % 10) if rank <= 10 else "lightgrey"
                    for i, rank in enumerate(slices["rank"])
                ]
                ax.pie(
                    slices["count"],
                    labels=[e[:22] for e in slices["entity"]],
                    colors=colours,
                    autopct="%1.0f%%",
                    textprops={"fontsize": 7},
                )
            ax.set_title(f"{generator} ({linker} linker)", fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig


def relevance_score_panels(ratings: pd.DataFrame) -> Any:
    """Per generator and level, the share of questions at each 0-5 relevance score."""
    import matplotlib.pyplot as plt

    groups = ratings.assign(group=ratings["generator"] + " / " + ratings["level"])
    shares = (
        groups.groupby("group")["score"]
        .value_counts(normalize=True)
        .unstack(fill_value=0)
        .reindex(columns=range(6), fill_value=0)
    )
    n_per_group = groups.groupby("group").size()
    n_cols = max(1, min(4, len(shares)))  # one blank panel when no rating succeeded
    n_rows = max(1, -(-len(shares) // n_cols))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.4 * n_cols, 2.8 * n_rows), squeeze=False, sharey=True)
    for ax, (group, row) in zip(axes.ravel(), shares.iterrows(), strict=False):
        ax.bar(
            range(6), row.to_numpy(), color=["#b2182b", "#ef8a62", "#fddbc7", "#d1e5f0", "#67a9cf", "#2166ac"]
        )
        ax.set_title(f"{group} (n={n_per_group[group]})", fontsize=9)
        ax.set_xticks(range(6))
        ax.set_xlabel("relevance score")
    for ax in axes.ravel()[len(shares) :]:
        ax.axis("off")
    axes[0][0].set_ylabel("share of questions")
    fig.tight_layout()
    plt.close(fig)
    return fig


def recall_plane(summary: pd.DataFrame, thresholds: dict[str, float], relationship_threshold: float) -> Any:
    """Per category, each method's mean entity recall against its relationship recall, with the
    thresholds as lines: high entity and low relationship recall (the lower right) is the seed's
    "islands of context", nodes fetched without the edges that connect them.
    """
    import matplotlib.pyplot as plt

    recalls = ["entity_recall", "relationship_recall"]
    # both columns always: a data set without gold edges (MuSiQue) has no relationship recall at all
    wide = (
        summary[summary["metric"].isin(recalls)]
        .pivot_table(index=["category", "method"], columns="metric", values="mean", sort=False)
        .reindex(columns=recalls)
    )
    categories = list(dict.fromkeys(summary["category"]))
    fig, axes = plt.subplots(
        1, max(len(categories), 1), figsize=(3.6 * max(len(categories), 1), 3.6), squeeze=False
    )
    for ax, category in zip(axes[0], categories, strict=False):
        ax.set(xlim=(-0.05, 1.05), ylim=(-0.05, 1.05), title=category, xlabel="entity recall")
        if category in wide.index.get_level_values(0):
            points = wide.loc[category].dropna(how="any")
            ax.scatter(points["entity_recall"], points["relationship_recall"], color="tab:blue")
            if points.empty:
                ax.text(0.5, 0.5, "no question with\nboth recalls", ha="center", fontsize=8)
        if category in thresholds:
            ax.axvline(thresholds[category], color="grey", ls="--", lw=0.8)
        ax.axhline(relationship_threshold, color="grey", ls="--", lw=0.8)
    axes[0][0].set_ylabel("relationship recall")
    fig.suptitle("Entity vs relationship recall per method (dashed: the seed's thresholds)", fontsize=10)
    fig.tight_layout()
    for ax, category in zip(axes[0], categories, strict=False):  # labelled once the layout is settled
        if category in wide.index.get_level_values(0):
            points = wide.loc[category].dropna(how="any")
            if not points.empty:
                label_points(
                    ax, points["entity_recall"], points["relationship_recall"], points.index, fontsize=7
                )
    plt.close(fig)
    return fig


def verdict_intervals(verdicts: pd.DataFrame) -> Any:
    """Per question type, each graph method's difference against its baseline with its interval, one
    panel per verdict kind (answers, retrieval); filled markers are findings under the claim rule.
    The methods keep their table order: the plot reads intervals, not a ranking.
    """
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(verdicts["kind"])) if len(verdicts) else []
    fig, axes = plt.subplots(1, max(len(kinds), 1), figsize=(6 * max(len(kinds), 1), 4.5), squeeze=False)
    if not kinds:
        axes[0][0].text(0.5, 0.5, "no comparison of a graph method with a baseline", ha="center")
        axes[0][0].set_axis_off()
    for ax, kind in zip(axes[0], kinds, strict=False):
        rows = verdicts[verdicts["kind"] == kind].reset_index(drop=True)
        labels = [f"{r.question_type} · {r.method} ({r.measure})" for r in rows.itertuples(index=False)]
        err = [rows["mean_diff"] - rows["ci_low"], rows["ci_high"] - rows["mean_diff"]]
        ax.errorbar(rows["mean_diff"], range(len(rows)), xerr=err, fmt="none", ecolor="grey")
        for i, r in rows.iterrows():
            face = "tab:blue" if r["supported"] else "white"
            ax.plot(r["mean_diff"], i, "o", color="tab:blue", markerfacecolor=face)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set(title=f"{kind}: graph method minus baseline", xlabel="difference (95% paired bootstrap)")
    fig.tight_layout()
    plt.close(fig)
    return fig


def amortized_cost_plot(costs: pd.DataFrame, unit: str, notebook: str) -> Any:
    """Cost per query including the index build against the number of queries it is amortized over
    (log scale), one line per method, for the answers of `notebook`.
    """
    import matplotlib.pyplot as plt

    rows = costs[(costs["unit"] == unit) & (costs["notebook"] == notebook)].sort_values("queries")
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for method, line in rows.groupby("method", sort=False):
        ax.plot(line["queries"], line["per_query"], "-o", label=method, ms=3)
    ax.set(
        xscale="log",
        yscale="log" if (rows["per_query"] > 0).all() and len(rows) else "linear",
        xlabel="queries the index build is amortized over",
        ylabel=f"{unit} per query (index / N + answering)",
        title=f"Cost per query including indexing ({notebook})",
    )
    if len(rows):
        ax.legend(fontsize=7)
    plt.close(fig)
    return fig


def judge_protocols_plot(classic: pd.DataFrame, trials: pd.DataFrame, n_trials: int) -> Any:
    """Notebook 06: the classic protocol's overall wins (questions, A shown first, no ties) beside
    the unbiased protocol's win, tie and loss shares over its trials.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    overall = classic[(classic["aspect"] == "overall") & (classic["position"] == "AB")]
    if not overall.empty:
        left.bar(
            ["run A wins", "run B wins"],
            [overall["wins_a"].iloc[0], overall["wins_b"].iloc[0]],
            color=["tab:blue", "tab:orange"],
        )
    left.set(title="classic (A shown first, no ties)", ylabel="questions")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    if not trials.empty:
        right.boxplot(
            [trials[c] for c in ("win_rate", "tie_rate", "loss_rate")],
            tick_labels=["A wins", "tie", "B wins"],
        )
    right.set(title=f"unbiased ({n_trials} trials)", ylabel="share of questions", ylim=(-0.05, 1.05))
    plt.close(fig)
    return fig


def position_bias_plot(positions: pd.DataFrame) -> Any:
    """Notebook 06: per order shown and protocol, how often the answer shown first wins."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
    wide = positions.pivot(index="order", columns="protocol", values="first_shown_win_rate")
    wide.plot.bar(ax=ax, rot=0, ylim=(0, 1.05))
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize=8)
    ax.set(ylabel="answer shown first wins (share)", title="position bias")
    plt.close(fig)
    return fig


def length_bias_plot(length_bins: pd.DataFrame) -> Any:
    """Notebook 06 (the paper's Fig. 6): per bin of the token gap between two answers, how often the
    longer one wins the position-exchanged verdicts with a winner, each point labelled with their number.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    ax.plot(length_bins["mean_gap_tokens"], length_bins["longer_win_rate"], "-o")
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set(
        xlabel="token gap between the answers",
        ylabel="longer answer wins (share)",
        ylim=(-0.05, 1.05),
        title="length bias (classic verdicts, exchanged over both orders)",
    )
    ax.margins(x=0.1)
    label_points(
        ax,
        length_bins["mean_gap_tokens"],
        length_bins["longer_win_rate"],
        [f"n={n}" for n in length_bins["verdicts"]],
    )
    plt.close(fig)
    return fig


def trial_bias_plot(trials: pd.DataFrame) -> Any:
    """Notebook 06: run A's relative win rate per trial of the unbiased protocol, the trials on
    whole-number ticks.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
    ax.plot(trials["trial"], trials["relative_win_rate"], "o-")
    ax.axhline(0, color="grey", ls=":", lw=1)
    ax.set(xlabel="trial", ylabel="relative win rate of run A", ylim=(-1.05, 1.05), title="trial bias")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    plt.close(fig)
    return fig


def pair_trials_plot(trials: pd.DataFrame, sanity: pd.DataFrame) -> Any:
    """Notebook 07: per pair (`trials["pair"]`, else labelled as the judge labels pairs), the unbiased
    protocol's win, tie and loss shares over its trials, the classic protocol's shares as red diamonds.
    """
    import matplotlib.pyplot as plt

    from ragtrial.evaluation.judge.pairs import pair_label

    if "pair" not in trials:
        trials = trials.assign(pair=[pair_label(r) for r in trials.itertuples(index=False)])
    pairs = list(dict.fromkeys(trials["pair"]))
    fig, axes = plt.subplots(
        1, max(len(pairs), 1), figsize=(4.2 * max(len(pairs), 1), 3.8), squeeze=False, layout="constrained"
    )
    if not pairs:
        axes[0][0].text(0.5, 0.5, "no pair was judged", ha="center")
        axes[0][0].set_axis_off()
    for ax, pair in zip(axes[0], pairs, strict=False):
        shares = trials[trials["pair"] == pair]
        ax.boxplot(
            [shares[c] for c in ("win_rate", "tie_rate", "loss_rate")],
            tick_labels=["A wins", "tie", "B wins"],
        )
        shown = sanity[(sanity["pair"] == pair) & (sanity["protocol"] == "classic")]
        if not shown.empty:
            rates = shown[["win_rate", "tie_rate", "loss_rate"]].iloc[0]
            ax.plot([1, 2, 3], rates, "D", color="tab:red", label="classic")
            ax.legend(fontsize=8)
        ax.set(title=textwrap.fill(pair, 40), ylim=(-0.05, 1.05), ylabel="share of questions")
    plt.close(fig)
    return fig


def win_rate_matrix_plot(matrix: pd.DataFrame) -> Any:
    """Notebook 07: every pair's relative win rate (row method minus column method), each cell written."""
    import matplotlib.pyplot as plt

    names = list(matrix.index)
    fig, ax = plt.subplots(figsize=(1.3 * len(names) + 2, 1.1 * len(names) + 1.5), layout="constrained")
    image = ax.imshow(matrix.to_numpy(dtype=float), cmap="RdBu", vmin=-1, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_yticks(range(len(names)), names)
    for i, row in enumerate(names):
        for j, col in enumerate(matrix.columns):
            value = matrix.loc[row, col]
            text = "—" if pd.isna(value) else "0.00" if round(value, 2) == 0 else f"{value:+.2f}"  # no -0.00
            ax.text(j, i, text, ha="center", va="center", fontsize=9)
    fig.colorbar(image, ax=ax, label="relative win rate (row − column)")
    plt.close(fig)
    return fig


def calibration_curves(summary: pd.DataFrame) -> Any:
    """Notebook 12: per simulated design, the unbiased protocol's interval coverage (both scenarios),
    power (the effect scenario) and spurious-winner rate (A/A) against M trials, one line per N repeats
    and question count (with Wilson intervals over the studies); the classic protocol dashed, flat in M.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = [
        ("coverage", None, "coverage of the 95% interval", 0.95),
        ("power", "effect", "power (the better method declared)", None),
        ("winner_rate", "null", "spurious-winner rate (A/A)", 0.05),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
    unbiased = summary[summary["protocol"] == "unbiased"]
    classic = summary[summary["protocol"] == "classic"]
    for ax, (column, which, title, reference) in zip(axes, panels, strict=True):
        for frame, style in ((unbiased, "-o"), (classic, "--")):
            part = frame if which is None else frame[(frame["truth"] == 0) == (which == "null")]
            for key, line in part.groupby(["scenario", "repeats", "questions"], sort=False):
                if line[column].isna().all():
                    continue
                label = f"classic, {key[2]} q" if frame is classic else f"N={key[1]}, {key[2]} q"
                if which is None:
                    label += " (A/A)" if line["truth"].iloc[0] == 0 else " (A better)"
                line = line.sort_values("trials")
                x = (
                    line["trials"]
                    if frame is unbiased
                    else [unbiased["trials"].min(), unbiased["trials"].max()]
                )
                y = line[column] if frame is unbiased else [line[column].iloc[0]] * 2
                ax.plot(x, y, style, label=label, lw=1.2, ms=4)
                if frame is unbiased:
                    ax.fill_between(line["trials"], line[f"{column}_low"], line[f"{column}_high"], alpha=0.12)
        if reference is not None:
            ax.axhline(reference, color="grey", ls=":", lw=1)
        ax.set(title=title, xlabel="M (trials)", ylim=(-0.02, 1.02))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=6)
    plt.close(fig)
    return fig


def recall_at_k_plot(summary: pd.DataFrame, ks: Sequence[int]) -> Any:
    """recall@k against k per method (all questions), graph retrievers dashed, with 95% intervals."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    rows = summary[(summary["question_type"] == "all") & summary["measure"].isin([f"recall@{k}" for k in ks])]
    for method, part in rows.groupby("method", sort=False):
        part = part.assign(k=part["measure"].str.split("@").str[1].astype(int)).sort_values("k")
        style = "--" if bool(part["reads_graph"].iloc[0]) else "-"
        ax.errorbar(
            part["k"],
            part["mean"],
            yerr=[part["mean"] - part["ci_low"], part["ci_high"] - part["mean"]],
            fmt=f"{style}o",
            capsize=3,
            label=method,
        )
    ax.set(xlabel="k (distinct passages)", ylabel="recall@k (95% bootstrap interval)", ylim=(0, 1))
    ax.set_xticks(list(ks))
    ax.set_title("Gold passages among the first k (graph retrievers dashed)")
    ax.legend(loc="lower right", fontsize=8)
    plt.close(fig)
    return fig


def sweep_key_plot(differences: pd.DataFrame, points: pd.DataFrame, keys: Sequence[str], measure: str) -> Any:
    """One panel per varied key: each point's paired difference to the reference on `measure` (95%
    bootstrap interval) at its value of the key, one colour per method, points of one value side by
    side (`differences`: the sweep's `reference_differences`; `points`: its `sweep_points`).
    """
    import matplotlib.pyplot as plt

    rows = differences[(differences["measure"] == measure) & (differences["partner"] == "")]
    rows = rows.merge(points, left_on="second_run", right_on="run_id")
    methods = list(dict.fromkeys(rows["method"]))
    fig, axes = plt.subplots(
        1,
        max(len(keys), 1),
        figsize=(3.2 * max(len(keys), 1) + 1.5, 3.8),
        layout="constrained",
        squeeze=False,
    )
    for ax, key in zip(axes[0], keys, strict=False):
        values = list(dict.fromkeys(points[key]))
        for m, method in enumerate(methods):
            part = rows[rows["method"] == method]
            sharing = part[key].value_counts()
            slot = dict.fromkeys(values, 0)
            xs = []
            for value in part[key]:  # the points sharing a value spread across its slot, methods apart
                spread = (slot[value] - (sharing[value] - 1) / 2) * 0.5 / max(sharing[value], 1)
                xs.append(values.index(value) + spread + (m - (len(methods) - 1) / 2) * 0.03)
                slot[value] += 1
            ax.errorbar(
                xs,
                part["mean_diff"],
                yerr=[part["mean_diff"] - part["ci_low"], part["ci_high"] - part["mean_diff"]],
                fmt="o",
                capsize=2,
                markersize=3,
                label=method,
            )
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(values)), values)
        ax.set(xlabel=key, ylabel=f"{measure} minus the reference's")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=7)
    fig.suptitle(f"{measure}: every point against the reference, by each varied key (95% intervals)")
    plt.close(fig)
    return fig


def sweep_heatmap(cells: pd.DataFrame, measure: str) -> Any:
    """One panel per method: the mean of `measure` over the two heatmap keys' values, each cell
    annotated (`cells`: the sweep's `sweep_heatmap`).
    """
    import matplotlib.pyplot as plt

    rows = cells[(cells["measure"] == measure) & (cells["partner"] == "")]
    methods = list(dict.fromkeys(rows["method"]))
    fig, axes = plt.subplots(
        1,
        max(len(methods), 1),
        figsize=(2.8 * max(len(methods), 1), 3.2),
        layout="constrained",
        squeeze=False,
    )
    for ax, method in zip(axes[0], methods, strict=False):
        part = rows[rows["method"] == method]
        grid = part.pivot_table(index="y_value", columns="x_value", values="mean", sort=False)
        image = ax.imshow(grid.to_numpy(float), cmap="viridis", aspect="auto")
        for (i, j), value in np.ndenumerate(grid.to_numpy(float)):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="white", fontsize=8)
        ax.set_xticks(range(grid.shape[1]), grid.columns)
        ax.set_yticks(range(grid.shape[0]), grid.index)
        ax.set(xlabel=str(part["x_key"].iloc[0]), ylabel=str(part["y_key"].iloc[0]), title=method)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(f"{measure}: mean per cell")
    plt.close(fig)
    return fig
