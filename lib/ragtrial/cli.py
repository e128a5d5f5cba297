"""`ragtrial run params/<batch>.yaml [--set key.sub=value ...]`, `ragtrial estimate params/<batch>.yaml
[--set ...] [--only NB]`, `ragtrial diagnose params/<batch>.yaml [--set ...] [--baseline F] [--tolerance T]
[--save-baseline F]`, `ragtrial questions export params/<batch>.yaml [--only NB] [--from-run RUN] --to FILE`
and `ragtrial settings [SECTION]` (also `python -m ragtrial`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import textwrap
from pathlib import Path

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec, parse_set_overrides
from ragtrial.config.settings import describe_settings
from ragtrial.redact import redact_url


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def print_settings(section: str | None) -> None:
    """Every dotted key (of `section`) with its type, default and description."""
    for row in describe_settings(section):
        print(row.key, row.type if row.default is None else f"{row.type} = {row.default}", sep="  ")
        print(textwrap.fill(row.description, width=100, initial_indent="    ", subsequent_indent="    "))


def print_estimate(args: argparse.Namespace) -> int:
    """`ragtrial estimate`: the readable table on stdout, optionally CSV / JSON files; exit 2 on a
    params error, as `run`.
    """
    from ragtrial.runner.estimate import estimate_batch, render

    try:
        table, notes = estimate_batch(
            args.batch,
            parse_set_overrides(args.overrides),
            root=Path.cwd(),
            outputs=args.outputs,
            only=args.only,
        )
    except ParamsError as err:
        print(f"error: {redact_url(str(err))}", file=sys.stderr)
        return 2
    print(render(table, notes))
    if args.csv:
        table.to_csv(args.csv, index=False)
    if args.json:
        table.to_json(args.json, orient="records", indent=1)
    return 0


# The notebooks that ask a data set's questions, and the section whose question source decides it.
_GENERATED_SOURCE = {
    "06_judge_bias_audit": ("judge", "dataset"),
    "07_pairwise_method_comparison": ("judge", "dataset"),
    "08_claims_comprehensiveness_diversity": ("claims", "dataset"),
}
_ASKING = (
    "04_rag_vs_graphrag_qa",
    "05_rag_vs_graphrag_summarization",
    *_GENERATED_SOURCE,
    "09_retrieval_diagnostics",
)


def notebook_questions(spec: RunSpec, from_run: Path | None) -> pd.DataFrame:
    """The questions notebook run `spec` asks (question_id, question, question_type, answers), chosen
    by the same function the notebook calls; model-generated questions are read from a finished
    run's saved `questions` table (`from_run`), since only a run generates them.
    """
    from ragtrial.data.experiment_dataset import load_experiment_dataset
    from ragtrial.questions import sampling

    if spec.notebook not in _ASKING:
        raise ParamsError(f"{spec.notebook} asks no questions; notebooks that do: {', '.join(_ASKING)}")
    section, dataset_source = _GENERATED_SOURCE.get(spec.notebook, ("", ""))
    generated = bool(section) and getattr(spec.settings, section).question_source != dataset_source
    if generated or from_run:
        table = (from_run or Path()) / "tables" / "questions.parquet"
        if not from_run or not table.is_file():
            raise ParamsError(
                f"{spec.notebook}: {section}.question_source is "
                f"{getattr(spec.settings, section).question_source!r}: the model generates these questions, "
                f"so they need a run first; pass --from-run outputs/<run_id> of a finished run"
                if generated and not from_run
                else f"--from-run: no saved questions table {table}"
            )
        return pd.read_parquet(table)
    s, dataset = spec.settings, load_experiment_dataset(spec.settings.data)
    # The notebooks' own calls; with a data-set source none of them touches a model or an index.
    questions = {
        "04_rag_vs_graphrag_qa": lambda: sampling.task_questions(
            dataset, "qa", s.qa.questions_per_type, s.qa.seed
        ),
        "05_rag_vs_graphrag_summarization": lambda: sampling.task_questions(
            dataset, "summarization", s.summarization.questions_per_type, s.summarization.seed
        ),
        "06_judge_bias_audit": lambda: sampling.judge_questions(None, dataset, None, s.judge, s.questions)[0],
        "07_pairwise_method_comparison": lambda: sampling.judge_questions(
            None, dataset, None, s.judge, s.questions
        )[0],
        "08_claims_comprehensiveness_diversity": lambda: sampling.claims_questions(
            None, dataset, s.claims, s.questions
        )[0],
        "09_retrieval_diagnostics": lambda: sampling.diagnosis_questions(
            dataset, s.diagnostics.questions_per_type, s.diagnostics.seed, s.diagnostics.question_types
        ),
    }[spec.notebook]()
    return pd.DataFrame(
        [(q.question_id, q.question, q.question_type, q.answers) for q in questions],
        columns=["question_id", "question", "question_type", "answers"],
    )


def export_questions(args: argparse.Namespace) -> int:
    """`ragtrial questions export`: the questions of the batch's (selected) run as JSON Lines."""
    from ragtrial.config.batch import load_batch
    from ragtrial.runner.batch import select_runs

    specs, _ = load_batch(
        args.batch, parse_set_overrides(args.overrides), notebooks_dir=Path.cwd() / "notebooks"
    )
    specs = [s for s in select_runs(specs, args.only, args.batch) if s.notebook in _ASKING]
    if args.run:
        specs = [s for s in specs if s.run_id == args.run]
    if len(specs) != 1:
        asking = ", ".join(s.run_id for s in specs) or "none"
        raise ParamsError(
            f"{args.batch}: {len(specs)} runs ask questions ({asking}); choose one with --only NOTEBOOK "
            "or --run RUN_ID"
        )
    frame = notebook_questions(specs[0], Path(args.from_run) if args.from_run else None)
    Path(args.to).write_text(frame.to_json(orient="records", lines=True, force_ascii=False))
    print(f"{len(frame)} questions of {specs[0].notebook} written to {args.to}")
    return 0


def run_notebooks(args: argparse.Namespace, only: list[str] | None) -> tuple[list, list]:
    """The batch's runs (those `only` names) through `run_batch` with the command's options; the
    results, and those not done (failed, locked), each printed on stderr with its reason.
    """
    from ragtrial.runner.batch import run_batch

    results = run_batch(
        args.batch,
        parse_set_overrides(args.overrides),
        root=Path.cwd(),
        outputs=args.outputs,
        only=only,
        force=args.force,
        workers=args.workers,
        show_code=args.show_code,
    )
    not_done = [r for r in results if r.status in ("failed", "locked")]
    for r in not_done:
        reason = r.error.splitlines()[0] if r.error else "no reason recorded"
        print(f"{r.status.upper()} {r.run_id}: {reason} (see {r.run_dir})", file=sys.stderr)
    return results, not_done


def run_command(args: argparse.Namespace) -> int:
    """`ragtrial run`: exit 1 when a run failed or was locked, else 0; the index's path on stdout."""
    if args.retry_failures:
        from ragtrial.llm.middleware import RETRY_FAILURES_ENV

        # read by every model call, papermill's kernels included (inherited environment); the
        # settings, and so the run ids, do not change
        os.environ[RETRY_FAILURES_ENV] = "1"
    _, not_done = run_notebooks(args, args.only)
    outputs = Path(args.outputs).resolve() if args.outputs else Path.cwd() / "outputs"
    print(outputs / "index.html")
    return 1 if not_done else 0


def diagnose_command(args: argparse.Namespace) -> int:
    """`ragtrial diagnose`: run the batch's notebook-09 runs (a completed one is not re-run), check
    each one's diagnostics summary against its thresholds and baseline, print what regressed; exit 1
    when a metric regressed or a run could not be checked, else 0.
    """
    from ragtrial.config.batch import load_batch, settings_hash
    from ragtrial.runner.batch import read_run_json
    from ragtrial.runner.regression import (
        DIAGNOSTICS_NOTEBOOK,
        load_baseline,
        read_summary,
        regressions,
        render_regressions,
        save_baseline,
        summary_path,
    )

    root = Path.cwd()
    if args.tolerance is not None and not 0 <= args.tolerance <= 1:
        raise ParamsError(f"--tolerance {args.tolerance}: must be between 0 and 1")
    specs, _ = load_batch(args.batch, parse_set_overrides(args.overrides), notebooks_dir=root / "notebooks")
    diagnosed = {s.run_id: s for s in specs if s.notebook == DIAGNOSTICS_NOTEBOOK}
    if not diagnosed:
        raise ParamsError(
            f"{args.batch}: no run of notebook {DIAGNOSTICS_NOTEBOOK}, so nothing to diagnose "
            f"(its notebooks: {', '.join(dict.fromkeys(s.notebook for s in specs))})"
        )
    only = args.only or [DIAGNOSTICS_NOTEBOOK]
    if DIAGNOSTICS_NOTEBOOK not in only:
        raise ParamsError(
            f"--only {', '.join(only)}: selects no {DIAGNOSTICS_NOTEBOOK} run, so nothing to diagnose"
        )
    if args.save_baseline and len(diagnosed) > 1:
        raise ParamsError(
            f"--save-baseline {args.save_baseline}: {args.batch} has {len(diagnosed)} runs of "
            f"{DIAGNOSTICS_NOTEBOOK} and a baseline holds one run's summary; select one with --set"
        )
    baseline_of = {
        run_id: (root / path if (path := args.baseline or spec.settings.diagnostics.baseline_path) else None)
        for run_id, spec in diagnosed.items()
    }
    # read before any run, so a bad baseline costs no model call
    baselines = {path: load_baseline(path) for path in set(baseline_of.values()) if path}
    results, not_done = run_notebooks(args, only)
    failed = bool(not_done)
    for result in results:
        spec = diagnosed.get(result.run_id)
        if spec is None or result.status not in ("completed", "skipped"):
            continue
        record = read_run_json(result.run_dir) or {}
        if result.status == "skipped":
            commit = record.get("git_commit", "unknown")
            print(
                f"note: {result.run_id} was not re-run (completed at commit {commit}); --force runs it again"
            )
        path, tolerance = baseline_of[result.run_id], spec.settings.diagnostics.tolerance
        tolerance = args.tolerance if args.tolerance is not None else tolerance
        baseline = baselines[path] if path else None
        try:
            summary = read_summary(result.run_dir)
            found = regressions(summary, baseline.frame() if baseline else None, tolerance)
        except (OSError, ValueError) as err:  # no table, or a table that breaks the summary's contract
            print(f"error: {summary_path(result.run_dir)}: {err}", file=sys.stderr)
            failed = True
            continue
        label = f"{path} (run {baseline.run_id}, commit {baseline.git_commit})" if baseline else None
        for line in render_regressions(
            found, run_id=result.run_id, checked=len(summary), baseline=label, tolerance=tolerance
        ):
            print(line)
        failed = failed or not found.empty
        if args.save_baseline:
            try:
                save_baseline(
                    summary,
                    args.save_baseline,
                    run_id=result.run_id,
                    settings_hash=settings_hash(spec.settings),
                    git_commit=record.get("git_commit", "unknown"),
                )
            except (OSError, ValueError) as err:
                print(f"error: --save-baseline {args.save_baseline}: {err}", file=sys.stderr)
                failed = True
                continue
            print(f"baseline saved: {args.save_baseline}")
    return 1 if failed else 0


def systems_command(args: argparse.Namespace) -> int:
    """`ragtrial systems list | install NAME...`: the upstream systems and their environments."""
    from ragtrial.methods.upstream.environments import (
        SYSTEMS,
        SystemNotInstalled,
        environment_folder,
        install,
        is_installed,
    )

    if args.action == "list":
        for name in SYSTEMS:
            spec, entry = SYSTEMS.get(name), SYSTEMS.entry(name)
            where = environment_folder(name) if spec.isolated else "the kit's own environment"
            state = "installed" if is_installed(name) else "not installed"
            print(f"{name:14} {state:14} {where}\n{'':14} {entry.description}")
        return 0
    names = list(SYSTEMS) if args.names == ["all"] else args.names
    unknown = SYSTEMS.unknown(names)
    if unknown or not names:
        print(f"error: name the systems to install ({', '.join(SYSTEMS)} or all)", file=sys.stderr)
        return 2
    for name in names:
        try:
            print(f"{name}: {install(name, force=args.force)}")
        except SystemNotInstalled as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragtrial", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute a batch of notebooks with papermill")
    run.add_argument("batch", help="params/<batch>.yaml")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting for every run, e.g. --set llm.model=gpt-4o-mini",
    )
    run.add_argument("--only", action="append", metavar="NOTEBOOK", help="run only these notebooks")
    run.add_argument("--force", action="store_true", help="re-run completed runs (the cache still applies)")
    run.add_argument(
        "--retry-failures",
        action="store_true",
        help="ask the model again for the replies the cache recorded as validation failures "
        "(otherwise they are replayed and counted, paying nothing); the run ids stay the same",
    )
    run.add_argument("--workers", type=int, help="parallel notebook executions (default: the batch's)")
    run.add_argument("--outputs", help="outputs folder (default: ./outputs)")
    run.add_argument("--show-code", action="store_true", help="keep code cells in report.html")
    estimate = sub.add_parser(
        "estimate",
        help="dry run of a batch: calls, tokens, cache hits, time and cost per notebook; no model call",
    )
    estimate.add_argument("batch", help="params/<batch>.yaml")
    estimate.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as for run"
    )
    estimate.add_argument("--only", action="append", metavar="NOTEBOOK", help="estimate only these notebooks")
    estimate.add_argument(
        "--outputs", help="outputs folder whose ledgers give measured latencies (default: ./outputs)"
    )
    estimate.add_argument("--csv", help="also write the per-stage table to this CSV file")
    estimate.add_argument("--json", help="also write the per-stage table to this JSON file (records)")
    check = sub.add_parser(
        "diagnose",
        help="regression mode: run the batch's 09_retrieval_diagnostics runs (a completed run is not re-run) "
        "and exit 1 when a metric falls below its threshold or its baseline by more than the tolerance",
    )
    check.add_argument("batch", help="params/<batch>.yaml")
    check.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as for run"
    )
    check.add_argument(
        "--only",
        action="append",
        metavar="NOTEBOOK",
        help="run only these notebooks (default: 09_retrieval_diagnostics, which must be among them)",
    )
    check.add_argument(
        "--baseline",
        metavar="FILE",
        help="baseline JSON (from --save-baseline) to compare with (default: diagnostics.baseline_path)",
    )
    check.add_argument(
        "--tolerance",
        type=float,
        metavar="T",
        help="how far a metric may fall below its baseline (default: diagnostics.tolerance)",
    )
    check.add_argument(
        "--save-baseline", metavar="FILE", help="write the run's summary as a baseline JSON file (one run)"
    )
    check.add_argument("--force", action="store_true", help="re-run completed runs (the cache still applies)")
    check.add_argument("--workers", type=int, help="parallel notebook executions (default: the batch's)")
    check.add_argument("--outputs", help="outputs folder (default: ./outputs)")
    check.set_defaults(show_code=False)
    questions = sub.add_parser("questions", help="the questions a batch's notebook asks")
    export = questions.add_subparsers(dest="action", required=True).add_parser(
        "export",
        help="write the questions a notebook would ask as JSON Lines (question_id, question, question_type, "
        "answers), for an outside system to answer (methods.answer_files)",
    )
    export.add_argument("batch", help="params/<batch>.yaml")
    export.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as for run"
    )
    export.add_argument("--only", action="append", metavar="NOTEBOOK", help="the notebook whose questions")
    export.add_argument("--run", metavar="RUN_ID", help="the run whose questions, when a notebook runs twice")
    export.add_argument(
        "--from-run", metavar="RUN_DIR", help="a finished run whose saved questions table to export"
    )
    export.add_argument("--to", required=True, metavar="FILE", help="the JSON Lines file written")
    listing = sub.add_parser(
        "settings", help="list every settings key with its type, default and description"
    )
    listing.add_argument(
        "section", nargs="?", help="only this section or key, e.g. retrieval or llm.embedded"
    )
    systems = sub.add_parser(
        "systems", help="the upstream systems on trial (GraphRAG, LightRAG, fast-graphrag): list, install"
    )
    systems.add_argument("action", choices=["list", "install"])
    systems.add_argument("names", nargs="*", metavar="NAME", help="systems to install, or all")
    systems.add_argument("--force", action="store_true", help="re-create the environment")
    args = parser.parse_args(argv)
    if args.command == "systems":
        return systems_command(args)
    if args.command == "settings":
        try:
            print_settings(args.section)
        except ParamsError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "estimate":
        return print_estimate(args)
    if args.command == "questions":
        try:
            return export_questions(args)
        except (ParamsError, ValueError) as err:
            print(f"error: {redact_url(str(err))}", file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, _interrupt)  # a scheduler's stop is handled like Ctrl-C
    try:
        return diagnose_command(args) if args.command == "diagnose" else run_command(args)
    except ParamsError as err:
        print(f"error: {redact_url(str(err))}", file=sys.stderr)  # a bad value may quote a URL's user-info
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: the run is recorded as interrupted; run the same command again to resume "
            "from the cache",
            file=sys.stderr,
        )
        return 130
