"""`ragtrial questions export params/<batch>.yaml [--only NB] [--run RUN_ID] [--from-run RUN_DIR]
--to FILE`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from ragtrial.cli.arguments import add_batch_arguments, project_and_batch
from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec, parse_set_overrides
from ragtrial.config.notebooks import NOTEBOOKS, notebook_specs
from ragtrial.redact import redact_url
from ragtrial.registry import resolve
from ragtrial.report.files import saved_table_path


def add_parser(sub) -> None:
    questions = sub.add_parser("questions", help="the questions a batch's notebook asks")
    export = questions.add_subparsers(dest="action", required=True).add_parser(
        "export",
        help="write the questions a notebook would ask as JSON Lines (question_id, question, question_type, "
        "answers), for an outside system to answer (methods.answer_files)",
    )
    add_batch_arguments(export, "the notebook whose questions")
    export.add_argument("--run", metavar="RUN_ID", help="the run whose questions, when a notebook runs twice")
    export.add_argument(
        "--from-run", metavar="RUN_DIR", help="a finished run whose saved questions table to export"
    )
    export.add_argument("--to", required=True, metavar="FILE", help="the JSON Lines file written")
    export.set_defaults(handler=questions_command)


def asking_notebooks() -> list[str]:
    """The notebooks that ask questions (their registry entries say which and how)."""
    return [spec.name for spec in notebook_specs() if spec.asks]


def notebook_questions(spec: RunSpec, from_run: Path | None) -> pd.DataFrame:
    """The questions notebook run `spec` asks (question_id, question, question_type, answers), chosen
    by the same function the notebook calls; model-generated questions are read from a finished
    run's saved `questions` table (`from_run`), since only a run generates them.
    """
    from ragtrial.data.experiment_dataset import load_experiment_dataset

    asks = NOTEBOOKS.get(spec.notebook).asks if spec.notebook in NOTEBOOKS else None
    if asks is None:
        raise ParamsError(
            f"{spec.notebook} asks no questions; notebooks that do: {', '.join(asking_notebooks())}"
        )
    section = asks.section
    generated = bool(section) and getattr(spec.settings, section).question_source != asks.dataset_source
    if generated or from_run:
        table = saved_table_path(from_run or Path(), "questions")
        if not from_run or not table.is_file():
            raise ParamsError(
                f"{spec.notebook}: {section}.question_source is "
                f"{getattr(spec.settings, section).question_source!r}: the model generates these questions, "
                f"so they need a run first; pass --from-run outputs/<run_id> of a finished run"
                if generated and not from_run
                else f"--from-run: no saved questions table {table}"
            )
        return pd.read_parquet(table)
    # The notebook's own choice; with a data-set source it touches no model and no index.
    questions = resolve(asks.sampler)(load_experiment_dataset(spec.settings.data), spec.settings)
    return pd.DataFrame(
        [(q.question_id, q.question, q.question_type, q.answers) for q in questions],
        columns=["question_id", "question", "question_type", "answers"],
    )


def questions_command(args: argparse.Namespace) -> int:
    """`ragtrial questions export`; a questions table that cannot be read is a named error (exit 2)."""
    try:
        return export_questions(args)
    except ValueError as err:
        print(f"error: {redact_url(str(err))}", file=sys.stderr)
        return 2


def export_questions(args: argparse.Namespace) -> int:
    """`ragtrial questions export`: the questions of the batch's (selected) run as JSON Lines."""
    from ragtrial.config.batch import load_batch
    from ragtrial.config.paths import notebooks_dir
    from ragtrial.runner.checks import select_runs

    root, batch = project_and_batch(args.batch)
    specs, _ = load_batch(batch, parse_set_overrides(args.overrides), notebooks_dir=notebooks_dir(root))
    asking = asking_notebooks()
    specs = [s for s in select_runs(specs, args.only, args.batch) if s.notebook in asking]
    if args.run:
        specs = [s for s in specs if s.run_id == args.run]
    if len(specs) != 1:
        listed = ", ".join(s.run_id for s in specs) or "none"
        raise ParamsError(
            f"{args.batch}: {len(specs)} runs ask questions ({listed}); choose one with --only NOTEBOOK "
            "or --run RUN_ID"
        )
    frame = notebook_questions(specs[0], Path(args.from_run) if args.from_run else None)
    Path(args.to).write_text(frame.to_json(orient="records", lines=True, force_ascii=False))
    print(f"{len(frame)} questions of {specs[0].notebook} written to {args.to}")
    return 0
