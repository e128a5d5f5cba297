"""The paper batches state the seed papers' conditions (issue 13): uncapped answers, the systems'
retriever settings, the GraphRAG paper's judge (ties, five repeats) and one shared podcast index.
"""

from __future__ import annotations

import pytest
from conftest import batch_runs

from ragtrial.config.judge import JudgeSettings
from ragtrial.config.settings import Settings
from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.run_findings import answer_length_findings
from ragtrial.prompts import load_prompt
from ragtrial.report.narrative.wording import answer_length_sentence

pytestmark = pytest.mark.fault

PODCAST_BATCHES = ("paper_judge", "paper_claims", "paper_graphrag_experiment1")


def runs(batch: str) -> dict[str, Settings]:
    """The batch's runs by notebook (each notebook runs once in these batches)."""
    return {s.notebook: s.settings for s in batch_runs(f"params/{batch}.yaml")}


def answer_sections(batch: str) -> list[tuple[str, object]]:
    """(notebook, the settings section its methods answer with) of every judge or claims run."""
    return [
        (notebook, settings.claims if notebook.startswith("08") else settings.judge)
        for notebook, settings in runs(batch).items()
    ]


@pytest.mark.parametrize("batch", PODCAST_BATCHES)
def test_paper_runs_answer_without_a_word_cap(batch):
    for notebook, section in answer_sections(batch):
        for name in (section.answer_prompt, section.reduce_prompt):
            assert "words" not in load_prompt(name).system, f"{batch} {notebook}: {name} caps the answer"
        assert "sets no length limit" in answer_length_sentence(
            findings_table(answer_length_findings(section))
        )
        assert section.answer_max_tokens >= 400, f"{batch} {notebook}: about 200-token answers need room"


def test_the_embedded_default_keeps_its_cap_and_its_report_states_it():
    sentence = answer_length_sentence(findings_table(answer_length_findings(JudgeSettings())))
    assert "`summarize_query@v1` asks for at most about 80 words" in sentence
    assert "replies stop at 96 tokens" in sentence


def test_paper_judge_compares_lightrag_with_naive_rag_at_the_systems_retriever_settings():
    batch = runs("paper_judge")
    compared = batch["07_pairwise_method_comparison"]
    assert compared.judge.methods[-1] == "naive_rag"  # every method under test is listed (shown) before it
    assert {"lightrag", "fastgraphrag", "local_search"} <= set(compared.judge.methods)
    assert batch["06_judge_bias_audit"].judge.self_method == "lightrag"
    for settings in batch.values():
        r = settings.retrieval
        assert (r.entity_source, r.lightrag_keywords) == ("llm", "llm")
        assert r.lightrag_tokens_per_kind == 4000 and r.local_max_tokens == 12000 and r.k == 60
        assert settings.judge.classic_positions == ["AB", "BA"]  # both fixed orders, as two conditions


def test_graphrag_experiment1_is_the_papers_head_to_head():
    settings = runs("paper_graphrag_experiment1")["07_pairwise_method_comparison"]
    judge = settings.judge
    assert judge.methods == [
        "global_search_c0",
        "global_search_c1",
        "global_search_c2",
        "global_search_c3",
        "ts",
        "naive_rag",
    ]
    assert (judge.question_source, judge.questions_per_type) == ("dataset", None)
    assert (judge.classic_repeats, judge.classic_ties, judge.unbiased) == (5, True, False)
    assert settings.data.dataset == "graphrag_podcast" and settings.data.path == "graphrag_paper_podcast_msft"
    assert settings.index.chunking == "documents"


def test_claims_judge_is_experiment1s_so_the_non_tie_share_is_the_papers():
    settings = runs("paper_claims")["08_claims_comprehensiveness_diversity"]
    assert settings.claims.judge == "classic"
    assert (settings.judge.classic_repeats, settings.judge.classic_ties) == (5, True)
    experiment1 = runs("paper_graphrag_experiment1")["07_pairwise_method_comparison"]
    # The same judge requests (same pairs, prompt, repeats and caps): one batch replays the other's.
    assert settings.claims.methods == experiment1.judge.methods
    assert settings.claims.judge_positions == experiment1.judge.classic_positions
    for key in ("classic_max_tokens", "judge_temperature", "classic_repeats", "classic_ties"):
        assert getattr(settings.judge, key) == getattr(experiment1.judge, key), key
    for key in ("context_budget", "answer_prompt", "reduce_prompt", "answer_max_tokens"):
        assert getattr(settings.claims, key) == getattr(experiment1.judge, key), key


def test_the_podcast_batches_share_one_index():
    indexes = {
        (batch, notebook): settings.index
        for batch in PODCAST_BATCHES
        for notebook, settings in runs(batch).items()
    }
    first = next(iter(indexes.values()))
    assert all(index == first for index in indexes.values()), sorted(indexes)


def test_paper_diagnostics_is_the_seeds_suite_on_the_generated_corpus_and_on_real_data():
    specs = batch_runs("params/paper_diagnostics.yaml")
    assert [s.notebook for s in specs] == ["09_retrieval_diagnostics"] * 2 + ["10_verdict"] * 2
    generated, real = (s.settings for s in specs[:2])
    assert (generated.data.dataset, generated.data.size) == ("generated", "diagnostics")
    assert real.data.dataset in ("musique", "hotpotqa", "2wikimultihopqa")
    for settings in (generated, real):
        d = settings.diagnostics
        assert (d.questions_per_type, d.correctness, d.grounding) == (None, "judge", "model")
        assert d.entity_recall_thresholds == {
            "single_hop": 0.85,
            "multi_hop": 0.70,
            "temporal": 0.85,
            "contradictory": 0.70,
        }
        assert (d.relationship_recall_threshold, d.grounding_threshold, d.citation_threshold) == (
            0.8,
            0.9,
            0.95,
        )
    assert set(real.diagnostics.categories.values()) == {"multi_hop"}  # MuSiQue's hop types


def test_the_paper_scale_study_is_the_paper_judge_on_a_million_token_corpus_as_one_identity():
    from ragtrial.runner.combined_runs import identity

    specs = batch_runs("params/paper_scale_study.yaml")
    study, judge = {s.notebook: s for s in specs}, runs("paper_judge")
    assert list(study) == ["01_build_index", "06_judge_bias_audit", "07_pairwise_method_comparison"]
    seventh = study["07_pairwise_method_comparison"].settings
    assert seventh.judge == judge["07_pairwise_method_comparison"].judge and seventh.judge.trials == 25
    assert seventh.index.model_dump(exclude={"chunking"}) == judge[
        "07_pairwise_method_comparison"
    ].index.model_dump(exclude={"chunking"})
    assert (seventh.data.dataset, seventh.data.size) == ("generated", "large")  # 1.33M cl100k tokens
    # one data set, model and index: the Ray engine runs them in order, the index built once by 01
    assert len({str(identity(s.settings.model_dump(mode="json"))) for s in specs}) == 1
    assert study["01_build_index"].resources.memory == 8 * 2**30 and seventh.llm.concurrency == 32


def test_the_seed_stores_batch_is_seed_001s_grid_on_postgresql_and_seed_004s_diagnostics_on_kuzu():
    specs = batch_runs("params/seed_stores.yaml")
    grid = [s.settings for s in specs if s.notebook == "04_rag_vs_graphrag_qa"]
    assert {s.store.retrieval for s in grid} == {"postgresql"}
    knobs = [(s.retrieval.hops, s.retrieval.k, s.retrieval.hub_degree_cap, s.retrieval.keyword) for s in grid]
    points = set(knobs)
    assert len(grid) == len(points) == 16  # every knob of the seed's "what else changed the outcome"
    assert {"hybrid", "graph_walk", "ts_rank", "bm25"} <= set(grid[0].qa.methods)
    (diagnostics,) = [s.settings for s in specs if s.notebook == "09_retrieval_diagnostics"]
    assert (diagnostics.store.graph, diagnostics.store.retrieval) == ("kuzu", "cypher")
    assert diagnostics.diagnostics.relationship_edges == "induced"  # the seed's edges among retrieved nodes
