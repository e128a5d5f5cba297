"""`ragtrial query "question" --method M [BATCH] [--set k=v] [--notebook NB] [--outputs DIR]`: one
answer by method M, as notebook 04 answers (the same method, generator and answer settings), over the
index the settings describe (loaded from `index.store_path`, or built as notebook 01 builds it), with
the context it was shown and what it cost. The run is opened through `runner.context.open_run`, so the
response cache and the ledger apply; its folder is `outputs/interactive/query-<settings hash>`.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import parse_set_overrides

QUERY_NOTEBOOK = "query"  # the name the run is opened under: its folder is outputs/interactive/query-<hash>
# The section whose answer settings a query uses when no notebook says (notebook 04's).
DEFAULT_ANSWER_SECTION = "qa"
CONTEXT_TEXT_CHARS = 110
IDS_SHOWN = 3


def add_parser(sub) -> None:
    query = sub.add_parser(
        "query",
        help="answer one question with one method, showing its context and its cost (like graphrag query)",
    )
    query.add_argument("question", help="the question, in quotes")
    query.add_argument(
        "--method", required=True, help="a method of ragtrial.methods.registry (e.g. naive_rag)"
    )
    query.add_argument(
        "batch", nargs="?", help="params/<batch>.yaml whose settings to use (default: the code's)"
    )
    query.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set retrieval.k=10",
    )
    query.add_argument(
        "--notebook",
        help="the batch's run whose settings to use, and whose answer settings (default: the batch's first "
        "run that answers questions, else its first run)",
    )
    query.add_argument("--outputs", help="outputs folder (default: <project>/outputs)")
    query.set_defaults(handler=query_command)


def query_settings(batch: Path | None, overrides: dict[str, Any], notebook: str | None, root: Path):
    """(the resolved settings, the section whose answer settings apply): the code defaults with
    `overrides`, or those of the batch's run of `notebook` (default: its first run that answers).
    """
    from ragtrial.config.batch import deep_merge, load_batch
    from ragtrial.config.notebooks import NOTEBOOKS
    from ragtrial.config.paths import notebooks_dir
    from ragtrial.config.settings import validate_settings

    def section_of(name: str | None) -> str:
        keys = NOTEBOOKS.get(name).methods if name is not None and name in NOTEBOOKS else ()
        return keys[0].split(".")[0] if keys else DEFAULT_ANSWER_SECTION

    if batch is None:
        if notebook:
            raise ParamsError(f"--notebook {notebook}: chooses a run of a batch; name the batch too")
        return validate_settings(deep_merge({}, overrides), "--set"), DEFAULT_ANSWER_SECTION
    specs, _ = load_batch(batch, overrides, notebooks_dir=notebooks_dir(root))
    if notebook:
        chosen = [s for s in specs if s.notebook == notebook]
        if not chosen:
            known = ", ".join(dict.fromkeys(s.notebook for s in specs))
            raise ParamsError(
                f"--notebook {notebook}: no run of that notebook in {batch} (its notebooks: {known})"
            )
        if len({s.run_id for s in chosen}) > 1:
            labels = ", ".join(f"{s.run_id} [{s.label}]" for s in chosen)
            raise ParamsError(
                f"--notebook {notebook}: {batch} runs it {len(chosen)} times ({labels}); pin the grid "
                "with --set"
            )
    else:
        chosen = [s for s in specs if s.notebook in NOTEBOOKS and NOTEBOOKS.get(s.notebook).methods] or specs
    return chosen[0].settings, section_of(chosen[0].notebook)


# C0 and C1 control characters but newline and tab: ESC (0x1b) and CSI/OSC (0x9b, 0x9d) start the
# sequences that move the cursor, clear the screen or set the terminal's title
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character but newline and tab shown as its Python escape, so a
    model's reply printed to a terminal cannot drive it.
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _cut(text: str, width: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def context_lines(items) -> list[str]:
    """One line per context entry: its number (as the prompt numbers it), kind, ids, retriever and score,
    and the start of its text.
    """
    lines = []
    for number, item in enumerate(items, start=1):
        ids = [*item.chunk_ids, *item.entity_ids, *item.relation_ids, *item.community_ids]
        shown = ", ".join(ids[:IDS_SHOWN]) + (f" +{len(ids) - IDS_SHOWN}" if len(ids) > IDS_SHOWN else "")
        lines.append(
            f"  [{number}] {item.kind} {shown or '(no id)'} ({item.retriever}, score {item.score:.3g}): "
            f"{_cut(item.text, CONTEXT_TEXT_CHARS)}"
        )
    return lines


def _calls(summary: dict[str, Any]) -> str:
    live, cached = summary["llm_calls_live"], summary["llm_calls_cached"]
    return (
        f"{live + cached} calls ({live} live, {cached} cached), {summary['embedding_calls']} embedding calls"
    )


def show(line: str) -> None:
    """Print a line that may carry a model's or a data set's text, terminal-safe."""
    print(terminal_safe(line))


def query_command(args: argparse.Namespace) -> int:
    """Print the answer, its context entries and its cost; exit 1 when the method gave no answer."""
    from ragtrial.config.paths import OUTPUTS_ENV, batch_file, outputs_dir, project_root
    from ragtrial.data.experiment_dataset import load_experiment_dataset
    from ragtrial.index.build import index_path, load_or_build_index
    from ragtrial.llm.ledger import summarize
    from ragtrial.methods.registry import METHODS, make_method
    from ragtrial.records import Question
    from ragtrial.runner.context import open_run

    if not args.question.strip():
        raise ParamsError("the question is empty: give the question to ask (no call was made)")
    root = project_root()
    outputs = outputs_dir(root, args.outputs)
    batch = batch_file(args.batch, root) if args.batch else None
    settings, section = query_settings(batch, parse_set_overrides(args.overrides), args.notebook, root)
    if args.method not in METHODS:
        imported = (
            " (an imported method answers only its file's questions)"
            if args.method in settings.methods.answer_files
            else ""
        )
        raise ParamsError(
            f"--method {args.method}: not a method of the kit{imported}; known: {', '.join(METHODS)}"
        )
    # as a run's kernel works: in the project root, told the outputs folder (settings paths under outputs/)
    os.chdir(root)
    os.environ[OUTPUTS_ENV] = str(outputs)
    ctx = open_run(settings, notebook=QUERY_NOTEBOOK, outputs=outputs)
    dataset = load_experiment_dataset(settings.data)
    stored = index_path(ctx, dataset)
    had_index = (stored / "manifest.json").is_file()
    index = load_or_build_index(ctx, dataset)
    built = summarize(ctx.ledger.frame())
    method = make_method(args.method, index, ctx, getattr(settings, section))
    answer = method.answer(Question(question_id="query", question=args.question))
    show(f"question: {args.question}")
    show(f"method: {args.method} ({settings.llm.model}; answer settings of `{section}`)")
    if answer.failure:
        show(f"no answer: {answer.failure}: {answer.failures[-1]['detail'] if answer.failures else ''}")
    else:
        show("answer:")
        show("\n".join(f"  {line}" for line in answer.text.splitlines() or [""]))
    tokens = sum(answer.context_tokens.values())
    show(
        f"context: {len(answer.context)} entries, {tokens} tokens"
        + (f"; fell back: {answer.fallback}" if answer.fallback else "")
    )
    for line in context_lines(answer.context):
        show(line)
    live = answer.calls - answer.cached_calls
    show(
        f"cost: {answer.calls} calls ({live} live, {answer.cached_calls} cached), {answer.prompt_tokens} "
        f"prompt + {answer.completion_tokens} completion tokens, {answer.latency_s:.1f} s"
    )
    if not dataset.documents:
        show(f"index: none (data set {dataset.name!r} has no documents)")
    elif had_index:
        show(f"index: loaded from {stored}")
    else:
        show(f"index: built now into {stored}: {_calls(built)}")
    show(f"run folder: {ctx.run_dir} (ledger.csv: every call; the cache replays them on the next query)")
    return 1 if answer.failure else 0
