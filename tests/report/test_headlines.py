"""The one line each notebook records for the index page (`RunContext.headline`): generated from its
tables under the claim rule, one line, and saying so when there is nothing to report.
"""

from __future__ import annotations

import pandas as pd
import pytest
from traceable import untraced_numbers

from ragtrial.evaluation.backend_findings import backend_findings
from ragtrial.evaluation.diagnostics_findings import attribution_findings
from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.index_findings import index_findings
from ragtrial.evaluation.judge.audits import sanity_table
from ragtrial.evaluation.judge.findings import build_findings, supported_pairs_findings
from ragtrial.evaluation.run_facts import quoted_names_table
from ragtrial.evaluation.task_findings import task_findings
from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.tables import GraphIndex
from ragtrial.records import Dataset, Document
from ragtrial.report.narrative.backend import narrate as narrate_backend
from ragtrial.report.narrative.claims import claims_headline
from ragtrial.report.narrative.diagnostics import diagnostics_headline
from ragtrial.report.narrative.index_build import index_headline
from ragtrial.report.narrative.judge import audit_findings, audit_headline, comparison_headline
from ragtrial.report.narrative.questions import entity_distribution_headline, relevance_headline
from ragtrial.report.narrative.tasks import findings_headline
from ragtrial.report.narrative.upstream import systems_note, upstream_headline


def one_line(text: str) -> str:
    assert "\n" not in text and text.endswith((".", ")")), text
    return text


def test_the_qa_and_summary_headline_names_the_best_mean_and_the_supported_comparisons():
    summary = pd.DataFrame(
        {
            "method": ["hybrid", "graph_hybrid"],
            "accuracy": [0.5, 0.75],
            "accuracy_low": [0.3, 0.6],
            "accuracy_high": [0.7, 0.9],
            "accuracy_n": [8, 8],
            "questions": [8, 8],
        }
    )
    paired = pd.DataFrame(
        {
            "method": ["graph_hybrid"] * 2,
            "baseline": ["hybrid"] * 2,
            "metric": ["accuracy"] * 2,
            "subset": ["all", "no fallback"],
            "mean_diff": [0.25, 0.3],
            "ci_low": [0.1, 0.1],
            "ci_high": [0.4, 0.5],
            "p_holm": [0.01, 0.01],
        }
    )
    answers = pd.DataFrame({"method": ["hybrid", "graph_hybrid"], "calls": [1, 2], "route": ["", ""]})

    def headline(summary: pd.DataFrame, paired: pd.DataFrame) -> str:
        found = task_findings(summary, paired, answers, quality="accuracy", recall=None, embedded=False)
        return one_line(findings_headline(summary, paired, found, "accuracy"))

    line = headline(summary, paired)
    assert line.startswith("Highest mean accuracy: graph_hybrid 0.75 [0.60, 0.90] over 8 questions")
    assert "graph_hybrid better than hybrid on accuracy (+0.25 [+0.10, +0.40])" in line
    unsupported = headline(summary, paired.assign(p_holm=0.2))
    assert unsupported.endswith("no paired accuracy difference with the baseline is a finding (1 compared).")
    failed = headline(summary.drop(columns=["accuracy"]), paired)
    assert failed.startswith("No method has a accuracy value")


def test_the_index_headline_states_each_graph_and_its_gold_relation_recall():
    documents = Dataset(
        name="d", documents=[Document(doc_id=d, title=d, text=f"{d} met Kel. " * 200) for d in ("a", "b")]
    ).documents_frame()
    chunks = chunk_documents(documents, 200, 20)
    settings = {"chunk_size": 200, "chunk_overlap": 20}
    findings = index_findings(
        GraphIndex(documents=documents, chunks=chunks, manifest={"settings": {"index": settings}})
    )
    counts = pd.DataFrame(
        {"origin": ["nlp", "llm"], "entities": [10, 5], "relations": [11, 2], "communities": [2, 1]}
    )
    quality = pd.DataFrame(
        {
            "origin": ["nlp", "llm", "nlp"],
            "measure": ["relation recall", "relation recall", "entity recall"],
            "share": [0.5, float("nan"), 0.9],
            "low": [0.25, float("nan"), 0.8],
            "high": [0.75, float("nan"), 1.0],
        }
    )
    line = one_line(index_headline(findings, counts, quality))
    assert line.startswith(
        f"2 documents in {len(chunks)} chunks: the nlp graph 10 entities, 11 relations, 2 communities;"
    )
    assert line.endswith("Gold relations recovered: nlp 50% [25%, 75%], llm n/a.")
    assert "Gold" not in index_headline(findings, counts, None)


def test_the_question_headlines_give_each_generator_its_numbers():
    distribution = pd.DataFrame(
        {
            "linker": ["ngram", "ngram", "llm"],
            "generator": ["summary", "graph", "summary"],
            "mentions": [4, 0, 3],
            "distinct_entities": [2, 0, 3],
            "top_question_share": [0.75, 0.0, 0.5],
        }
    )
    # with the model's entity lists the headline counts them, the unbiased counter, and says so
    line = one_line(entity_distribution_headline(distribution, embedded=False))
    assert "(entities the model listed, each counted whether the graph holds it or not;" in line
    assert line.endswith("summary 3 (50%).") and "ngram" not in line and "Pipeline check" not in line
    assert untraced_numbers(line, {"entity_distribution": distribution}) == []
    assert one_line(entity_distribution_headline(distribution, embedded=True)).startswith("*Pipeline check")
    # without them, the n-gram count, named with its bias toward graph-grounded questions
    ngram = one_line(entity_distribution_headline(distribution[distribution["linker"] == "ngram"], False))
    assert "the n-gram linker: graph entity names found in the questions, a count that favours" in ngram
    assert ngram.endswith("summary 2 (75%), graph none.") and "Pipeline check" not in ngram
    by_generator = pd.DataFrame({"generator": ["graph"], "mean": [2.5], "ci_low": [1.0], "ci_high": [4.0]})
    assert one_line(relevance_headline(by_generator)).endswith("graph 2.50 [1.00, 4.00].")
    assert "No question" in relevance_headline(by_generator.iloc[:0])


def sanity(protocols: list[str], supported: list[bool], rwr: float = 0.5) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pair": "naive_rag vs local_search",
            "protocol": protocols,
            "questions": 6,
            "relative_win_rate": rwr,
            "ci_low": 0.2,
            "ci_high": 0.8,
            "supported": supported,
            "detectable_difference": 0.86,
            "detection_power": 0.8,
            "detection_alpha": 0.05,
        }
    )


def counted(sanity: pd.DataFrame) -> pd.DataFrame:
    """The findings the comparison headline words: the pairs told apart, of the pairs judged."""
    return findings_table(supported_pairs_findings(sanity))


def test_the_judge_headlines_report_the_unbiased_protocol_when_it_ran():
    both = sanity(["classic", "unbiased"], [True, False])
    audit = one_line(audit_headline(both))
    assert "unbiased protocol, 6 questions" in audit and "no difference under the claim rule" in audit
    assert "false finding" in audit_headline(sanity(["classic"], [True]))
    assert one_line(comparison_headline(both, counted(both))).endswith(
        "by the unbiased judge: naive_rag vs local_search +0.50 [+0.20, +0.80]; "
        "no pair differs under the claim rule."
    )
    one_lost = sanity(["unbiased"], [True], rwr=-0.5)
    lost = comparison_headline(one_lost, counted(one_lost))
    assert "the second answers better" in lost and lost.endswith(
        "1 of 1 pair(s) differ under the claim rule."
    )
    assert "No pair" in audit_headline(both.iloc[:0])
    assert "No pair" in comparison_headline(both.iloc[:0], counted(both))


def _self_vs_self(low: float, high: float) -> pd.DataFrame:
    """Notebook 06's sanity check on one classic self-vs-self pair with the interval [low, high]."""
    classic = pd.DataFrame(
        [dict(pair="naive_rag vs naive_rag", aspect="overall", position="AB", n=40, relative_win_rate=0.0,
              rwr_ci_low=low, rwr_ci_high=high, win_rate_a=0.3, tie_rate=0.4, loss_rate=0.3, p_holm=0.9)]
    )  # fmt: skip
    return sanity_table(classic, pd.DataFrame(columns=["pair", "questions_judged", "p_holm"]))


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [
        # width 0.2: se = 0.2 / (2 x 1.95996) = 0.05102; (1.95996 + 0.84162) x 0.05102 = 0.1429
        (-0.1, 0.1, "it detects a relative win rate of ±0.14 with 80% power at the 0.05 level, so a smaller"),
        # width 1.6: (1.95996 + 0.84162) x 0.4082 = 1.14 > 1, beyond the relative win rate's range
        (-0.8, 0.8, "it could not detect even the largest relative win rate with 80% power at the 0.05"),
        (0.0, 0.0, "its interval has no width, so what the check could have detected cannot be stated"),
    ],
)
def test_the_audit_says_what_a_no_difference_sanity_check_could_have_detected(low, high, said):
    table = _self_vs_self(low, high)
    headline = one_line(audit_headline(table))
    assert "no difference under the claim rule" in headline and said in headline
    assert "fair judge must report" not in headline
    findings = audit_findings(table, pd.DataFrame(columns=["pair", "protocol", "order"]), findings_table([]))
    assert said in findings
    assert untraced_numbers(headline, {"sanity_check": table}) == []


def test_the_claims_headline_gives_claims_per_answer_and_the_supported_differences():
    summary = pd.DataFrame(
        {
            "measure": ["comprehensiveness", "comprehensiveness", "diversity@0.5"],
            "method": ["global_search_c0", "naive_rag", "naive_rag"],
            "mean": [4.75, 4.25, 2.0],
            "ci_low": [4.0, 3.5, 1.0],
            "ci_high": [5.5, 5.0, 3.0],
        }
    )
    tests = pd.DataFrame(
        {
            "measure": ["comprehensiveness"],
            "method_a": ["global_search_c0"],
            "method_b": ["naive_rag"],
            "n_shared": [4],
            "mean_diff": [0.5],
            "ci_low": [0.2],
            "ci_high": [0.8],
            "p_holm": [0.01],
        }
    )
    line = one_line(claims_headline(summary, tests))
    assert line.startswith(
        "Claims per answer: global_search_c0 4.75 [4.00, 5.50], naive_rag 4.25 [3.50, 5.00];"
    )
    assert line.endswith("supported differences: global_search_c0 more than naive_rag.")
    assert "no difference" in claims_headline(summary, tests.assign(p_holm=0.3))
    assert "No answer" in claims_headline(summary[summary["measure"] != "comprehensiveness"], tests)


def test_the_diagnostics_headline_counts_means_under_threshold_and_the_top_failure():
    summary = pd.DataFrame(
        {
            "mean": [0.5, 0.9, float("nan")],
            "threshold": [0.85, 0.8, 0.9],
            "below_threshold": [True, False, False],
        }
    )
    shares = pd.DataFrame(
        {
            "method": "hybrid",
            "category": "single_hop",
            "outcome": ["correct", "retrieval failure", "reasoning failure"],
            "answers": [1, 3, 1],
            "attributed": 5,
        }
    )

    def headline(shares: pd.DataFrame) -> str:
        return one_line(diagnostics_headline(findings_table(attribution_findings(summary, shares))))

    line = headline(shares)
    assert line == (
        "1 of 2 measured (method, category, metric) means are under the seed's starting thresholds; the most "
        "common failure is the retrieval failure (3 of 5 attributed answers)."
    )
    assert line.startswith("1 of 2") and headline(shares.iloc[:0]).endswith("thresholds.")


def test_the_upstream_headline_and_a_system_whose_index_was_not_built():
    summary = pd.DataFrame(
        {
            "upstream": ["lightrag_hku_hybrid"],
            "twin": ["lightrag"],
            "answer_f1": [0.4],
            "answer_f1_low": [0.2],
            "answer_f1_high": [0.6],
            "answer_f1_n": [3],
        }
    )
    judged = pd.DataFrame(
        {
            "pair": ["lightrag_hku_hybrid vs lightrag"],
            "rwr_ci_low": [0.1],
            "rwr_ci_high": [0.5],
            "p_holm": [0.01],
        }
    )
    line = one_line(upstream_headline(summary, judged))
    assert "lightrag_hku_hybrid vs lightrag token F1 0.40 [0.20, 0.60] over 3 question(s)" in line
    assert line.endswith("The unbiased judge tells apart: lightrag_hku_hybrid vs lightrag.")
    assert upstream_headline(summary, judged.iloc[:0]).endswith("No pair was judged.")
    systems = pd.DataFrame(
        {
            "system": ["graphrag"],
            "version": ["3.3.0"],
            "python": ["3.11"],
            "index_folder": [""],
            "counts": ["{}"],
            "build_calls": [float("nan")],
            "build_cached_calls": [float("nan")],
            "build_prompt_tokens": [float("nan")],
            "build_completion_tokens": [float("nan")],
            "build_embedding_tokens": [0],
        }
    )
    unavailable = pd.DataFrame({"method": ["graphrag_local"], "reason": ["its index could not be built"]})
    note = systems_note(systems, unavailable, findings_table(build_findings(systems)))
    assert "**graphrag 3\\.3\\.0** (Python `3.11`): its index was not built" in note
    assert "**graphrag\\_local** did not run: its index could not be built" in note


def backend_tables(failures: list[str]) -> dict[str, pd.DataFrame]:
    probes = pd.DataFrame({"probe": ["completion", "structured"], "failure": failures})
    return {
        "probes": probes,
        "findings": backend_findings(probes),
        "quoted_names": quoted_names_table({"llm.model": "m"}),
        "answered_by": pd.DataFrame(
            {"source": ["live"], "calls": [2], "models": ["m-2024"], "failures": [""]}
        ),
        "prompt_versions": pd.DataFrame({"prompt": ["answer@1"]}),
    }


def test_the_backend_headline_says_what_answered_and_which_probes_failed():
    narration = narrate_backend(backend_tables(["", "invalid *JSON*"]))
    assert one_line(narration.headline) == (
        "Answered by m-2024 (2 calls live) (m requested). 1 of 2 probe(s) failed: structured."
    )
    assert "structured — invalid \\*JSON\\*" in narration.findings
    assert "Prompt versions used: answer@1." in narration.findings
    assert narrate_backend(backend_tables(["", ""])).headline.endswith("All 2 probes succeeded.")
