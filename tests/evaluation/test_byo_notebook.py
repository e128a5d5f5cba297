"""Notebook 07 with params/byo_ultradomain_lightrag.yaml against the scripted server: KAG's LightRAG
answers imported through the column mapping are judged beside closed_book on UltraDomain cs, with no
index (the data set has no documents) and the imported answers never regenerated.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import PROJECT_ROOT, SHARED_DATASETS, endpoint_settings
from traceable import assert_narrated_from_saved_tables

from ragtrial.evaluation.judge.pairs import NOT_ALIGNABLE
from ragtrial.llm.ledger import read_ledger
from ragtrial.runner.batch import run_batch

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def test_the_kag_lightrag_answers_are_judged_against_closed_book(scripted, tmp_path):
    # A long reply: closed_book's answers outrun LightRAG's, which alignment cannot regenerate.
    scripted.default_reply = lambda body: " ".join(["word"] * 400)
    overrides = endpoint_settings(
        scripted.base_url,
        tmp_path,
        judge={"bootstrap_resamples": 200, "trials": 1},
        data={"limit_questions": 4},  # the params file judges all 100 on a capable endpoint
    )
    (result,) = run_batch(
        PROJECT_ROOT / "params" / "byo_ultradomain_lightrag.yaml",
        overrides,
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        log=lambda _: None,
    )
    assert result.status == "completed", result.error
    tables = result.run_dir / "tables"
    answers = pd.read_parquet(tables / "answers.parquet").set_index(["method", "question_id"])
    upstream = {
        r["_id"]: r["lightrag_answer"]
        for r in json.loads(
            (SHARED_DATASETS / "ultradomain_cs_questions_kag/csqa_lightrag_answers.json").read_text()
        )
    }
    imported = answers.loc["lightrag_kag"]
    assert len(imported) == 4 and (imported["failure"] == "").all() and (imported["calls"] == 0).all()
    assert all(imported.loc[q, "text"] == upstream[q] for q in imported.index)
    assert (answers.loc["closed_book", "failure"] == "").all()
    log = pd.read_parquet(tables / "alignment_log.parquet")
    assert len(log) == 4 and (log["method_a"] == "lightrag_kag").all()
    # Where LightRAG's answer is the shorter, only closed_book was regenerated, and the pair stays apart.
    shorter = log[log["words_a_before"] < log["words_b_before"] - 10]
    assert not shorter.empty and (shorter["status"] == NOT_ALIGNABLE).all() and not shorter["forced"].any()
    assert not (tmp_path / "indexes").exists()  # no documents: nothing indexed
    asked = [r["body"]["messages"][-1]["content"] for r in scripted.chat_requests()]
    assert not any(upstream[q][:60] in text for q in imported.index for text in asked if "Answer:" in text)
    # every judge call made is one row of the costs table; the report's numbers are its saved tables'
    costs = pd.read_parquet(tables / "costs.parquet")
    ledger = read_ledger(result.run_dir / "ledger.csv")
    assert len(costs) > 0 and costs["calls"].sum() == ledger["stage"].str.startswith("judge_").sum()
    assert_narrated_from_saved_tables(result.run_dir)
