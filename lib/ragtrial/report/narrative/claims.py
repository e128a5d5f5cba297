"""What notebook 08 says of its saved tables: the questions it asked, the comparisons, the agreement
with the judge beside the paper's figures (rows of its `findings` table,
`evaluation.claims_findings`), and the claim clusters of an answer as HTML.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps, colors

from ragtrial.evaluation.findings import FINDINGS_TABLE, answered_by_embedded_model, stated, statements
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.common import embedded_disclaimer
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.report.narrative.wording import answer_length_sentence, signed_interval
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


def comparison_sentences(tests: pd.DataFrame) -> list[str]:
    """One sentence per tested pair and measure, saying what the numbers support."""
    lines = []
    for r in tests.itertuples(index=False):
        if r.n_shared == 0:
            lines.append(
                f"{r.method_a} vs {r.method_b} on {r.measure}: no question with a value for both; not tested."
            )
            continue
        difference = signed_interval(r.mean_diff, r.ci_low, r.ci_high)
        head = (
            f"**{r.method_a}** vs {r.method_b} on {r.measure}: {difference} "
            f"per answer over {r.n_shared} shared questions "
            f"(Wilcoxon p={r.p_value:.3g}, Holm {r.p_holm:.3g})"
        )
        more = "more" if r.mean_diff > 0 else "fewer"
        claim = f"{r.method_a} gave {more} than {r.method_b} on these questions"
        lines.append(f"{head}: {claim_text(r.ci_low, r.ci_high, r.p_holm, claim)}.")
    return lines


def _share(low: float, high: float) -> str:
    """A share, or a range of shares in whole percent: "78%", "69-70%"."""
    return f"{low:.0%}" if round(low, 2) == round(high, 2) else f"{low * 100:.0f}-{high:.0%}"


def paper_agreement(findings: pd.DataFrame, metric: str) -> str:
    """The paper's agreement of the claim-based winner with the judge, and on which share of pairs."""
    agreed = stated(findings, "paper_agreement", metric)
    non_tie = stated(findings, "paper_non_tie_share", metric).value
    return f"{_share(agreed.ci_low, agreed.ci_high)} on {non_tie:.0%} non-tie pairs"


def tie_share_sentence(findings: pd.DataFrame) -> str:
    """What the judge's non-tie share means: the paper's 33% / 39% are the share of pairs whose
    majority over five repeats of a judge that may call a tie was not a tie.
    """
    could_tie = stated(findings, "judge_ties").value
    paper = " / ".join(f"{v:.0%}" for v in statements(findings, "paper_non_tie_share")["value"])
    if math.isnan(could_tie):
        return (
            "Verdicts were read from a file, which does not record whether their judge could call a tie; "
            "compare the non-tie share with the paper's only if it could."
        )
    if could_tie:
        return (
            "The judge could call a tie and its votes were collapsed by strict majority, as in the paper, "
            f"so the non-tie share means what the paper's {paper} mean."
        )
    return (
        "The judge could not call a tie (`judge.classic_ties` false): a tie here is only votes that "
        f"disagree, so the non-tie share is not comparable with the paper's {paper}."
    )


def agreement_sentences(agreement: pd.DataFrame, findings: pd.DataFrame) -> list[str]:
    level = stated(findings, "interval_level").value
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
            f"agreed {r.agree} times ({r.agreement:.0%}, {level:.0%} interval "
            f"[{r.ci_low:.0%}, {r.ci_high:.0%}]; "
            f"{r.claim_ties} claim-based ties count as disagreement). "
            f"Paper: {paper_agreement(findings, r.metric)}."
        )
    return lines


def example_answer_note(
    method: str, question: str, text: str, claims: int, labels: Sequence[int], threshold: float
) -> str:
    """Notebook 08's example answer: the question, the answer quoted, and its claims and clusters."""
    return (
        f"**{method}**, question: *{escape_markdown(question)}*\n\n> {escape_markdown(text)}\n\n"
        f"{claims} claims, {len(set(labels))} clusters at threshold {threshold}:"
    )


def verdict_source_sentence(source: pd.DataFrame) -> str:
    """Where notebook 08's judge verdicts came from, from its saved `verdict_source` row."""
    row = source.iloc[0]
    if row["judge"] == "classic":
        ties = "ties allowed" if row["ties"] else "no ties (a tie only from votes that disagree)"
        return (
            f"Judge verdicts: the classic protocol run here, {row['votes_per_order']} vote(s) per shown "
            f"order ({row['positions']}), {ties}, {row['question_pairs']} question pairs, "
            f"{row['failed_judge_calls']} failed judge call(s)."
        )
    if row["judge"] == "file":
        return f"Judge verdicts: verdicts read from `{row['verdicts_path']}`."
    return "Judge verdicts: none (claims.judge is 'none' or no path)."


def questions_note(questions: pd.DataFrame, findings: pd.DataFrame) -> str:
    """What notebook 08 asks: the corpus, the community reports there are, the questions and the
    failures of generating them (and whether the data set's own questions stood in), from the
    `questions` table and the `findings` rows of `evaluation.claims_findings.question_findings`.
    """
    levels = [int(v) for v in statements(findings, "report_level")["value"]]
    corpus = statements(findings, "documents").iloc[0]
    note = (
        f"Data set **{corpus.subject}**: {corpus.value:.0f} documents, index with "
        f"{stated(findings, 'community_reports').value:.0f} community "
        f"reports at levels {levels or 'none'}. {stated(findings, 'questions').value:.0f} question(s) "
        f"({', '.join(sorted(set(questions['question_type'])))}); "
        f"{stated(findings, 'question_failures').value:.0f} question-generation failure(s)."
    )
    if stated(findings, "dataset_questions_stood_in").value:
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
    findings: pd.DataFrame,
) -> str:
    """The closing list of notebook 08, worded from its tables."""
    lines = [f"- {answer_length_sentence(findings)}"] + [
        f"- {r.method}: {r.mean:.2f} claims per answer [{r.ci_low:.2f}, {r.ci_high:.2f}] over {r.n} answers."
        for r in summary[summary["measure"] == "comprehensiveness"].itertuples(index=False)
    ]
    lines += [f"- {s}" for s in comparison_sentences(tests)] if not tests.empty else []
    lines += (
        [f"- {s}" for s in agreement_sentences(agreement, findings)] + [f"- {tie_share_sentence(findings)}"]
        if not agreement.empty
        else ["- No judge verdicts for these conditions, so no agreement is reported."]
    )
    declined = (
        ", ".join(f"{r.method} {r.declined}" for r in counts.itertuples(index=False) if r.declined) or "none"
    )
    max_claims = stated(findings, "max_claims").value
    excluded, answers = stated(findings, "excluded_answers").value, stated(findings, "answers").value
    lines.append(
        f"- {excluded:.0f} of {answers:.0f} answers were excluded (failed answer or extraction); "
        'answers that were the fixed decline "Insufficient information." (0 claims, 0 clusters): '
        f"{declined}; "
        f"{stated(findings, 'answers_at_cap').value:.0f} reached the claim cap of "
        f"{'None' if math.isnan(max_claims) else f'{max_claims:.0f}'}, so their counts are lower bounds."
    )
    if answered_by_embedded_model(findings):
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


def narrate(tables: SavedTables) -> Narration:
    """Notebook 08's headline and closing findings, from its saved tables alone."""
    summary, tests = saved(tables, "condition_summary"), saved(tables, "pairwise_tests")
    findings = claims_findings(
        summary,
        tests,
        saved(tables, "judge_agreement"),
        saved(tables, "extraction_counts"),
        saved(tables, FINDINGS_TABLE),
    )
    return Narration(claims_headline(summary, tests), findings)
