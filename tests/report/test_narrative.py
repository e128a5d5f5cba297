"""The narrative rules every report shares: one claim rule, one failure sentence, one disclaimer."""

from __future__ import annotations

import pandas as pd
from traceable import untraced_numbers

from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.judge.findings import judge_call_findings
from ragtrial.report.markdown import model_markdown
from ragtrial.report.narrative.common import embedded_disclaimer, failure_sentence
from ragtrial.report.narrative.judge import EMBEDDED_NOTE, judge_failure_sentence
from ragtrial.report.narrative.tasks import answer_failure_sentence, paired_sentences
from ragtrial.runner.context import EMBEDDED_WARNING
from ragtrial.stats import NO_CLAIM, Interval, McNemarResult, claim_supported, claim_text


def test_a_claim_needs_an_interval_off_zero_and_an_adjusted_test_that_rejects():
    assert claim_text(0.1, 0.3, 0.01, "better") == "better"
    assert claim_text(-0.3, -0.1, 0.049, "worse") == "worse"
    assert claim_text(-0.1, 0.3, 0.001, "better") == NO_CLAIM
    assert claim_text(float("nan"), float("nan"), 0.001, "better") == NO_CLAIM
    assert claim_text(0.1, 0.3, 0.05, "better") == "better"  # p = alpha rejects: p <= alpha
    assert "adjusted test does not reject (p = 0.06, above 0.05)" in claim_text(0.1, 0.3, 0.06, "better")
    assert "no test could be run" in claim_text(0.1, 0.3, float("nan"), "better")
    assert not claim_supported(0.1, 0.3, float("nan")) and claim_supported(0.1, 0.3, 0.2, alpha=0.25)


def test_paired_sentences_apply_the_claim_rule():
    row = dict(method="graph", baseline="rag", metric="f1", mean_diff=0.2, n=9, wins=5, losses=1)
    row |= dict(test="Wilcoxon", p_value=0.04, p_holm=0.04)
    supported, unsupported = paired_sentences(
        pd.DataFrame([row | {"ci_low": 0.1, "ci_high": 0.3}, row | {"ci_low": -0.1, "ci_high": 0.3}])
    )
    assert supported.endswith("graph did better than rag on these questions.")
    assert unsupported.endswith(f"{NO_CLAIM}.")


def test_one_failure_sentence_shape_for_answers_and_judge_calls():
    summary = pd.DataFrame({"method": ["a", "b"], "failures": [0, 2], "questions": [4, 4]})
    assert answer_failure_sentence(summary).startswith("Answers lost to model failures (b 2 of 4)")
    assert (
        answer_failure_sentence(summary.assign(failures=0))
        == "Every method produced an answer for every question."
    )
    call = {
        "question_id": "q",
        "trial": 0,
        "method_a": "a",
        "replicate_a": 0,
        "method_b": "b",
        "replicate_b": 0,
    }
    judge = pd.DataFrame([call | {"stage": "judge_unbiased", "kind": "parse"}])
    findings = findings_table(judge_call_findings(judge, pd.DataFrame(index=range(10))))
    assert judge_failure_sentence(findings).startswith(
        "1 of 10 judge calls failed after the repair round (parse 1)"
    )
    for sentence in (answer_failure_sentence(summary), judge_failure_sentence(findings)):
        assert sentence.endswith("each is listed in the failures table, none is scored.")
    assert failure_sentence({}, "nothing failed", "x", "y") == "nothing failed"


def test_every_embedded_note_carries_the_one_disclaimer():
    disclaimer = embedded_disclaimer("X").removeprefix("X")
    assert disclaimer in EMBEDDED_WARNING and disclaimer in EMBEDDED_NOTE


def index_tables(difference: tuple[Interval, McNemarResult] | None) -> dict[str, pd.DataFrame]:
    """Notebook 01's saved tables for an NLP-only index of 2 documents in 3 chunks."""
    from ragtrial.evaluation.findings import Finding, findings_table
    from ragtrial.evaluation.index_findings import recall_difference_table

    findings = findings_table(
        [Finding("documents", "", 2, "index"), Finding("chunks", "", 3, "index"),
         Finding("llm extraction", "", 0, "manifest.json")]
    )  # fmt: skip
    return {
        "findings": findings,
        "index_build": pd.DataFrame({"wall_s": [10.0], "model_s": [3.0]}),
        "graph_counts": pd.DataFrame(
            {"origin": ["nlp"], "entities": [4], "relations": [5], "communities": [1]}
        ),
        "relation_recall_difference": recall_difference_table(difference),
    }


def test_index_findings_state_the_recall_difference_with_the_claim_rule():
    from ragtrial.report.narrative.index_build import narrate

    test = McNemarResult(2, 0, 0.0, 0.5, "exact binomial")
    tables = index_tables((Interval(-0.5, -1.0, 0.0, 2), test))
    narration = narrate(tables)
    text = narration.findings
    assert "LLM minus NLP relation recall is -50% [-100%, +0%] (McNemar exact binomial, p=0.5)" in text
    assert NO_CLAIM in text
    assert (
        "No LLM graph was built." in text and "The build took 10 s, 3 s of it waiting for the model" in text
    )
    assert (
        narration.headline == "2 documents in 3 chunks: the nlp graph 4 entities, 5 relations, 1 communities."
    )
    assert untraced_numbers(text + narration.headline, tables) == []
    significant = McNemarResult(9, 0, 0.0, 0.004, "exact binomial")
    claimed = narrate(index_tables((Interval(-0.5, -0.8, -0.2, 9), significant))).findings
    assert "the NLP graph recalls more" in claimed
    assert "LLM minus NLP" not in narrate(index_tables(None)).findings


def test_index_findings_count_what_the_manifest_recorded():
    from ragtrial.evaluation.findings import stated
    from ragtrial.evaluation.index_findings import index_build_table, index_findings
    from ragtrial.index.chunk_documents import chunk_documents
    from ragtrial.index.tables import GraphIndex
    from ragtrial.records import Dataset, Document
    from ragtrial.report.narrative.index_build import extraction_headline, llm_graph_note, reports_note

    llm = {
        "chunks": 4,
        "attempted_chunks": 3,
        "skipped_chunk_ids": ["c4"],
        "failures_by_stage": {"extract_graph": 1},
        "endpoint_instances_added": 2,
        "entities_from_endpoints_only": 1,
        "gleaning_rounds": 0,
        "gleaned_entities": 0,
        "description_summaries": {"candidates": 3, "summarized": 2, "not_summarized": 1},
    }
    reports = {
        "selected": 3,
        "generated": 1,
        "reused": 1,
        "failed": [{"community_id": "7"}],
        "skipped": {"report_min_size": ["1", "2"]},
    }
    manifest = {"settings": {"dataset": "tiny", "index": {"chunk_size": 200, "chunk_overlap": 20,
                "chunking": "tokens", "graph_source": "both"}}, "config_hash": "abc", "built_at": "t",
                "built_by_run": "r", "build_wall_s": 9.0, "stages": [{"model_s": 1.5}, {"model_s": 2.0}],
                "llm_extraction": llm, "community_reports": reports}  # fmt: skip
    documents = Dataset(
        name="d", documents=[Document(doc_id=d, title=d, text=f"{d} met Kel. " * 200) for d in ("a", "b")]
    ).documents_frame()
    chunks = chunk_documents(documents, 200, 20)
    index = GraphIndex(documents=documents, chunks=chunks, manifest=manifest)
    findings = index_findings(index)
    assert stated(findings, "chunks")["value"] == len(chunks)
    assert stated(findings, "median chunk tokens")["value"] == chunks["n_tokens"].median()
    assert stated(findings, "llm failures", "extract_graph")["value"] == 1
    assert stated(findings, "community reports skipped", "report_min_size")["value"] == 2
    built = index_build_table(index, "outputs/indexes/abc", reused=False).iloc[0]
    assert built["model_s"] == 3.5 and built["built_at"] == "" and built["path"] == "outputs/indexes/abc"
    coverage = pd.DataFrame([{"origin": "llm", "measure": "extraction failed", "count": 1, "of": 3,
                              "share": 1 / 3, "low": 0.0, "high": 1.0}])  # fmt: skip
    headline = extraction_headline(coverage, findings)
    assert "a seeded sample of 3 of 4 chunks" in headline
    assert headline.endswith("Failures by stage: {'extract_graph': 1}.")
    assert llm_graph_note(findings).startswith("LLM graph: 2 relation/claim endpoints were added")
    assert reports_note(findings) == (
        "3 communities selected: 1 reports generated, 1 reused (same members as a reported community), "
        "1 failed. Skipped: 2 by report_min_size."
    )


def test_model_headings_sit_below_the_report_headings():
    assert model_markdown("# Title\n## Part\ntext") == "#### Title\n##### Part\ntext"


def relevance_tables(rating_failures: pd.DataFrame, embedded: bool) -> dict[str, pd.DataFrame]:
    from ragtrial.config.questions import RelevanceSettings
    from ragtrial.evaluation.question_findings import relevance_findings
    from ragtrial.evaluation.run_facts import quoted_names_table

    questions = pd.DataFrame({"question_id": ["q1"], "generator": ["graph"], "at_length_cap": [False]})
    by_generator = pd.DataFrame(
        [{"generator": "graph", "mean": 2.5, "ci_low": 2.0, "ci_high": 3.0, "n": 4, "share_0_1": 0.25,
          "share_0_1_low": 0.0, "share_0_1_high": 0.5}]
    )  # fmt: skip
    findings = relevance_findings(
        questions, pd.DataFrame(), pd.DataFrame(), rating_failures, None, RelevanceSettings(), embedded
    )
    return {
        "findings": findings,
        "relevance_by_generator": by_generator,
        "generator_comparison": pd.DataFrame({"verdict": ["graph vs summary: no claim."]}),
        "quoted_names": quoted_names_table({"data set": "tiny", "questions.relevance.retriever": "vector"}),
    }


def test_question_findings_use_the_shared_disclaimer_and_failure_sentence():
    from ragtrial.report.narrative.questions import narrate_relevance

    tables = relevance_tables(pd.DataFrame([{"x": 1}]), embedded=True)
    narration = narrate_relevance(tables)
    text = narration.findings
    assert "mean relevance 2.50 [2.00, 3.00] over 4 rated questions" in text
    assert "Retriever `vector` (top 5, 600 context tokens) on *tiny*." in text
    assert embedded_disclaimer("Questions and ratings") in text
    assert "Questions without a rating (retrieval or rating failed) (questions 1)" in text
    assert text.endswith("Questions have no length cap (questions.question_max_chars is None).")
    assert narration.headline.endswith("graph 2.50 [2.00, 3.00].")
    assert untraced_numbers(text, tables) == []
    clean = narrate_relevance(relevance_tables(pd.DataFrame(), embedded=False)).findings
    assert "Every question was rated." in clean and "Gemma" not in clean


def test_question_findings_count_replies_over_and_questions_at_the_length_cap():
    from ragtrial.evaluation.findings import findings_table, stated
    from ragtrial.evaluation.question_findings import generated_question_findings
    from ragtrial.report.narrative.questions import length_cap_note

    questions = pd.DataFrame(
        {"question_id": ["q1", "q2"], "generator": ["graph", "summary"], "at_length_cap": [True, False]}
    )
    failures = pd.DataFrame({"item_id": ["c1", "c2"], "kind": ["too_long", "parse"]})

    def note(questions, failures, cap):
        return length_cap_note(findings_table(generated_question_findings(questions, failures, cap)))

    capped = findings_table(generated_question_findings(questions, failures, 140))
    assert stated(capped, "questions kept")["value"] == 2
    assert stated(capped, "questions kept", "graph")["value"] == 1
    assert stated(capped, "replies over the length cap")["value"] == 1
    assert "1 generation call(s) failed on a reply over it (kind too_long" in note(questions, failures, 140)
    assert "1 kept question(s) reached it" in note(questions, failures, 140)
    assert "No reply reached the 140-character" in note(questions.iloc[1:], failures.iloc[1:], 140)
    assert "no length cap" in note(questions, pd.DataFrame(), None)


def test_the_entity_distribution_is_worded_from_its_tables_alone():
    from ragtrial.evaluation.question_findings import entity_distribution_findings
    from ragtrial.evaluation.run_facts import quoted_names_table
    from ragtrial.report.narrative.questions import narrate_entity_distribution

    questions = pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "generator": ["summary", "graph", "graph"],
            "at_length_cap": False,
        }
    )
    distribution = pd.DataFrame([{"linker": "ngram", "generator": "graph", "questions": 2, "mentions": 0}])
    findings = entity_distribution_findings(
        questions, pd.DataFrame(), pd.DataFrame(), pd.DataFrame([{"x": 1}]), None, 1, False
    )
    tables = {
        "findings": findings,
        "entity_distribution": distribution,
        "quoted_names": quoted_names_table({"data set": "tiny"}),
    }
    narration = narrate_entity_distribution(tables)
    assert "- **graph** (ngram): no entity found in 2 questions." in narration.findings
    assert "These counts come from 2 graph, 1 summary questions on *tiny*" in narration.findings
    assert "(150 questions per generator)" in narration.findings
    assert "Calls that failed (entity listings 1)" in narration.findings
    assert narration.headline.endswith("graph none.")
    assert untraced_numbers(narration.findings, tables) == []


def test_the_question_notebooks_state_the_duplicates_dropped_beside_the_papers_150():
    """Seed 000 §V counts 150 questions per generator and states no de-duplication: notebooks 02 and
    03 drop repeats before any share, so their findings count them per generator and the prose says so.
    """
    import numpy as np

    from ragtrial.config.questions import RelevanceSettings
    from ragtrial.evaluation.question_findings import entity_distribution_findings, relevance_findings
    from ragtrial.evaluation.run_facts import quoted_names_table
    from ragtrial.questions.run_generators import deduplicate
    from ragtrial.report.narrative.questions import narrate_entity_distribution, narrate_relevance

    generated = pd.DataFrame(
        {
            "question_id": ["g1", "g2", "g3", "g4", "s1"],
            "generator": ["graph", "graph", "graph", "graph", "summary"],
            "question": [
                "Who is Harry?",
                "who is Harry",
                "Who is Harry, really?",
                "What is Hogwarts?",
                "Why?",
            ],
            "at_length_cap": False,
        }
    )
    vectors = {  # g3 is g1 in other words (cosine 1.0); the rest are orthogonal
        "Who is Harry?": [1, 0, 0], "who is Harry": [1, 0, 0], "Who is Harry, really?": [1, 0, 0],
        "What is Hogwarts?": [0, 1, 0], "Why?": [0, 0, 1],
    }  # fmt: skip
    questions, duplicates = deduplicate(
        generated, lambda texts: np.array([vectors[t] for t in texts], float), 0.9
    )
    assert list(duplicates["kind"]) == ["exact", "near"]
    names = quoted_names_table({"data set": "tiny", "questions.relevance.retriever": "vector"})
    expected = (
        "de-duplication dropped repeats within each generator (table duplicates): graph 4 generated, 1 exact "
        "and 1 near duplicates dropped, 2 kept; summary 1 generated, 0 exact and 0 near duplicates dropped, "
        "1 kept. The paper counts 150 questions per generator and states no de-duplication."
    )
    findings = entity_distribution_findings(
        questions, duplicates, pd.DataFrame(), pd.DataFrame(), None, 1, False
    )
    tables = {
        "findings": findings,
        "entity_distribution": pd.DataFrame(
            [{"linker": "ngram", "generator": "graph", "questions": 2, "mentions": 0}]
        ),
        "quoted_names": names,
    }
    text = narrate_entity_distribution(tables).findings
    assert expected in text and untraced_numbers(text, tables) == []
    by_generator = pd.DataFrame(
        [{"generator": "graph", "mean": 2.5, "ci_low": 2.0, "ci_high": 3.0, "n": 2, "share_0_1": 0.5,
          "share_0_1_low": 0.0, "share_0_1_high": 1.0}]
    )  # fmt: skip
    rated = relevance_findings(
        questions, duplicates, pd.DataFrame(), pd.DataFrame(), None, RelevanceSettings(), False
    )
    relevance_tables = {
        "findings": rated,
        "relevance_by_generator": by_generator,
        "generator_comparison": pd.DataFrame({"verdict": []}),
        "quoted_names": names,
    }
    assert expected in narrate_relevance(relevance_tables).findings
    near = rated[rated["statement"] == "near duplicates dropped"].set_index("subject")["value"]
    assert near.to_dict() == {"graph": 1.0, "summary": 0.0}
    # the paper's count is read from its data file, which names the passage it quotes
    paper = findings[findings["statement"] == "questions per generator in the paper"].iloc[0]
    assert paper["source"] == "evaluation/published/question_counts.csv"
    assert "V Graph-Text-Grounded Questions Evaluation" in paper["figure"]
