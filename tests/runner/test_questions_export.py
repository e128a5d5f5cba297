"""`ragtrial questions export`: the questions a notebook would ask, as JSON Lines, with no model call."""

from __future__ import annotations

import json

import pandas as pd
from conftest import PROJECT_ROOT

from ragtrial.cli import main
from ragtrial.config.settings import Settings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.questions.sampling import select_questions, task_questions

DEFAULT = str(PROJECT_ROOT / "params" / "default.yaml")


def run_ids(overrides: dict | None = None) -> dict[str, str]:
    """The default batch's run of each notebook on the generated corpus (07 also runs on UltraDomain)."""
    from ragtrial.config.batch import load_batch

    specs, _ = load_batch(DEFAULT, overrides or {}, notebooks_dir=PROJECT_ROOT / "notebooks")
    return {s.notebook: s.run_id for s in specs if s.settings.data.dataset == "generated"}


RUNS = run_ids()


def exported(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_export_holds_the_questions_the_notebooks_select(tmp_path, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    settings = Settings()
    dataset = load_experiment_dataset(settings.data)
    expected = {
        "07_pairwise_method_comparison": select_questions(
            dataset.questions, settings.judge.questions_per_type, settings.judge.seed
        ),
        "04_rag_vs_graphrag_qa": task_questions(
            dataset, "qa", settings.qa.questions_per_type, settings.qa.seed
        ),
    }
    for notebook, questions in expected.items():
        to = tmp_path / f"{notebook}.jsonl"
        assert (
            main(
                ["questions", "export", DEFAULT, "--only", notebook, "--run", RUNS[notebook], "--to", str(to)]
            )
            == 0
        )
        assert exported(to) == [
            {
                "question_id": q.question_id,
                "question": q.question,
                "question_type": q.question_type,
                "answers": q.answers,
            }
            for q in questions
        ]


def test_generated_questions_need_a_finished_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(PROJECT_ROOT)
    to = tmp_path / "q.jsonl"
    notebook = "07_pairwise_method_comparison"
    run_id = run_ids({"judge": {"question_source": "graph"}})[notebook]  # the setting is in the run id
    args = ["questions", "export", DEFAULT, "--only", notebook, "--run", run_id, "--to", str(to)]
    assert main([*args, "--set", "judge.question_source=graph"]) == 2
    assert "need a run first; pass --from-run" in capsys.readouterr().err and not to.exists()
    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    saved = pd.DataFrame(
        {"question_id": ["g1"], "question": ["What links A and B?"], "question_type": ["edge"]}
    )
    saved.to_parquet(run / "tables" / "questions.parquet")
    assert main([*args, "--set", "judge.question_source=graph", "--from-run", str(run)]) == 0
    assert exported(to) == saved.to_dict("records")


def test_a_batch_with_several_asking_runs_needs_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(PROJECT_ROOT)
    assert main(["questions", "export", DEFAULT, "--to", str(tmp_path / "q.jsonl")]) == 2
    assert "choose one with --only NOTEBOOK or --run RUN_ID" in capsys.readouterr().err
    # the default batch runs 07 twice (the generated corpus, the imported answers): --only is not enough
    args = [
        "questions",
        "export",
        DEFAULT,
        "--only",
        "07_pairwise_method_comparison",
        "--to",
        str(tmp_path / "q"),
    ]
    assert main(args) == 2
    assert RUNS["07_pairwise_method_comparison"] in capsys.readouterr().err
