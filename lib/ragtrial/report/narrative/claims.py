"""What notebook 08 says of the claim tables: the comparisons, the agreement with the judge beside
the paper's figures, and the claim clusters of an answer as HTML.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps, colors

from ragtrial.report.narrative.common import embedded_disclaimer
from ragtrial.stats import claim_supported, claim_text

# ---------------------------------------------------------------- presentation


def clusters_html(claims: Sequence[str], labels: Sequence[int]) -> str:
    """The claims as a list grouped by cluster, each cluster in its own colour."""
    palette = colormaps["tab20"]
    items = []
    for position in np.argsort(np.asarray(labels), kind="stable"):
        label = int(labels[position])
        colour = colors.to_hex(palette(label % palette.N))
        items.append(
            f'<li style="background:{colour}40;border-left:6px solid {colour};padding:2px 6px;'
            f'margin:2px 0;list-style:none"><b>cluster {label + 1}</b> · {html.escape(claims[position])}</li>'
        )
    return f"<ul style='padding-left:0'>{''.join(items)}</ul>"


# Edge et al. 2024, Section 5.2: the judge's non-tie share and the claim-based agreement on it.
PAPER_AGREEMENT = {
    "comprehensiveness": "78% on 33% non-tie pairs",
    "diversity": "69-70% on 39% non-tie pairs",
}


def comparison_sentences(tests: pd.DataFrame) -> list[str]:
    """One sentence per tested pair and measure, saying what the numbers support."""
    lines = []
    for r in tests.itertuples(index=False):
        if r.n_shared == 0:
            lines.append(
                f"{r.method_a} vs {r.method_b} on {r.measure}: no question with a value for both; not tested."
            )
            continue
        head = (
            f"**{r.method_a}** vs {r.method_b} on {r.measure}: {r.mean_diff:+.2f} "
            f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}] per answer over {r.n_shared} shared questions "
            f"(Wilcoxon p={r.p_value:.3g}, Holm {r.p_holm:.3g})"
        )
        more = "more" if r.mean_diff > 0 else "fewer"
        claim = f"{r.method_a} gave {more} than {r.method_b} on these questions"
        lines.append(f"{head}: {claim_text(r.ci_low, r.ci_high, r.p_holm, claim)}.")
    return lines


def tie_share_sentence(judge_ties: bool | None) -> str:
    """What the judge's non-tie share means: the paper's 33% / 39% are the share of pairs whose
    majority over five repeats of a judge that may call a tie was not a tie.
    """
    if judge_ties is None:
        return (
            "Verdicts were read from a file, which does not record whether their judge could call a tie; "
            "compare the non-tie share with the paper's only if it could."
        )
    if judge_ties:
        return (
            "The judge could call a tie and its votes were collapsed by strict majority, as in the paper, "
            "so the non-tie share means what the paper's 33% / 39% mean."
        )
    return (
        "The judge could not call a tie (`judge.classic_ties` false): a tie here is only votes that "
        "disagree, so the non-tie share is not comparable with the paper's 33% / 39%."
    )


def agreement_sentences(agreement: pd.DataFrame) -> list[str]:
    lines = []
    for r in agreement.itertuples(index=False):
        head = (
            f"**{r.measure}**: the judge's majority was not a tie on {r.non_tie} of {r.judged} judged "
            f"question pairs ({r.non_tie_share:.0%})"
        )
        if r.non_tie == 0:
            lines.append(f"{head}, so there is no verdict to check the claims against.")
            continue
        if r.compared == 0:
            lines.append(
                f"{head}; none of those had claim values for both answers, "
                "so there is no agreement to report."
            )
            continue
        lines.append(
            f"{head}; on the {r.compared} with claim values for both answers the claim-based winner "
            f"agreed {r.agree} times ({r.agreement:.0%}, 95% interval [{r.ci_low:.0%}, {r.ci_high:.0%}]; "
            f"{r.claim_ties} claim-based ties count as disagreement). Paper: {PAPER_AGREEMENT[r.metric]}."
        )
    return lines


def questions_note(
    dataset_name: str,
    n_documents: int,
    report_levels: Sequence[int],  # the level of each community report
    questions: pd.DataFrame,
    question_failures: pd.DataFrame,
    fell_back: bool,
) -> str:
    """What notebook 08 asks: the corpus, the community reports there are, the questions and the
    failures of generating them (and whether the data set's own questions stood in).
    """
    note = (
        f"Data set **{dataset_name}**: {n_documents} documents, index with {len(report_levels)} community "
        f"reports at levels {sorted(set(report_levels)) or 'none'}. {len(questions)} question(s) "
        f"({', '.join(sorted(set(questions['question_type'])))}); {len(question_failures)} "
        "question-generation failure(s)."
    )
    if fell_back:
        note += (
            " **Persona generation produced no question** (its failures are listed at the end), "
            "so the data set's own questions are used instead."
        )
    return note


def claims_findings(
    summary: pd.DataFrame,
    tests: pd.DataFrame,
    agreement: pd.DataFrame,
    counts: pd.DataFrame,
    max_claims: int | None,
    answer_note: str,
    judge_ties: bool | None,
    embedded: bool,
) -> str:
    """The closing list of notebook 08, generated from its tables; `judge_ties` says whether the
    verdicts' judge could call a tie (None: not known, verdicts read from a file).
    """
    lines = [f"- {answer_note}"] + [
        f"- {r.method}: {r.mean:.2f} claims per answer [{r.ci_low:.2f}, {r.ci_high:.2f}] over {r.n} answers."
        for r in summary[summary["measure"] == "comprehensiveness"].itertuples(index=False)
    ]
    lines += [f"- {s}" for s in comparison_sentences(tests)] if not tests.empty else []
    lines += (
        [f"- {s}" for s in agreement_sentences(agreement)] + [f"- {tie_share_sentence(judge_ties)}"]
        if not agreement.empty
        else ["- No judge verdicts for these conditions, so no agreement is reported."]
    )
    excluded = counts["failed_answer"].sum() + counts["failed_extraction"].sum()
    declined = (
        ", ".join(f"{r.method} {r.declined}" for r in counts.itertuples(index=False) if r.declined) or "none"
    )
    lines.append(
        f"- {excluded} of {counts['answers'].sum()} answers were excluded (failed answer or extraction); "
        'answers that were the fixed decline "Insufficient information." (0 claims, 0 clusters): '
        f"{declined}; "
        f"{counts['at_cap'].sum()} reached the claim cap of {max_claims}, so their counts are lower bounds."
    )
    if embedded:
        lines.append("- " + embedded_disclaimer("These answers and the claims listed from them"))
    return "\n".join(lines)


def claims_headline(summary: pd.DataFrame, tests: pd.DataFrame) -> str:
    """The one line of notebook 08 for the index page: claims per answer per condition, and which
    comprehensiveness differences the claim rule supports.
    """
    rows = summary[summary["measure"] == "comprehensiveness"]
    if rows.empty:
        return "No answer had claims extracted, so comprehensiveness could not be measured."
    means = ", ".join(
        f"{r.method} {r.mean:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]" for r in rows.itertuples(index=False)
    )
    compared = tests[tests["measure"] == "comprehensiveness"] if not tests.empty else tests
    supported = [
        f"{r.method_a} {'more' if r.mean_diff > 0 else 'fewer'} than {r.method_b}"
        for r in compared.itertuples(index=False)
        if r.n_shared and claim_supported(r.ci_low, r.ci_high, r.p_holm)
    ]
    return f"Claims per answer: {means}; " + (
        "supported differences: " + ", ".join(supported) + "."
        if supported
        else "no difference between conditions is a finding under the claim rule."
    )
