"""What `ragtrial run` says on the terminal: each running notebook's progress, a closing table of the
runs, a failed run's own exception, and nothing of the kernels' own chatter; planted notebooks in a
project folder of the test's, against the scripted endpoint.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest
import yaml

from ragtrial.cli import main
from ragtrial.runner.batch import run_batch

pytestmark = pytest.mark.usefixtures("notebook_kernels")

# What the kernels and their manager must not print on the batch's terminal (issue 18).
NOISE = ("without encryption", "Task was destroyed", "Logging error", "Traceback")

SLOW_STAGE = """\
from ragtrial.llm import fanout
from ragtrial.runner.context import open_run

fanout.PROGRESS_AFTER_S = fanout.PROGRESS_EVERY_S = 0  # outside a batch, a line for every unit
ctx = open_run(settings, run_dir, notebook="slow")
questions = [f"question {i}" for i in range(UNITS)]
answers = ctx.llm.fan_out(lambda q: ctx.llm.complete(q, stage="slow").text, questions, label="slow stage")
ctx.headline(f"**{len(answers)} answers** from the slow stage")
"""


def plant(root, name: str, *sources: str) -> None:
    """notebooks/<name>.ipynb: a parameters cell (`settings`, `run_dir`), then one cell per source."""
    notebook = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('settings = {}\nrun_dir = ""')
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells = [parameters, *(nbformat.v4.new_code_cell(source) for source in sources)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (root / "notebooks").mkdir(exist_ok=True)
    nbformat.write(notebook, root / "notebooks" / f"{name}.ipynb")


def planted_batch(root, scripted, notebooks: list[str]) -> str:
    llm = {
        "backend": "openai_compatible",
        "base_url": scripted.base_url,
        "model": "scripted",
        "concurrency": 1,
    }
    path = root / "batch.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "settings": {"llm": llm, "cache": {"url": f"sqlite:///{root / 'cache.sqlite'}"}},
                "runs": [{"notebook": name} for name in notebooks],
            }
        )
    )
    return str(path)


class Terminal:
    """The batch's log lines; at each progress line, whether the index page links the run's report."""

    def __init__(self, outputs):
        self.outputs, self.lines, self.report_linked_while_running = outputs, [], []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if " · " in line:  # a progress line: the run is executing
            page = (self.outputs / "index.html").read_text()
            self.report_linked_while_running.append("/report.html" in page)


def test_a_slow_stage_shows_progress_and_the_batch_ends_with_its_table_and_no_noise(
    scripted, tmp_path, capfd
):
    units = 6
    plant(tmp_path, "slow", f"UNITS = {units}", SLOW_STAGE)
    batch = planted_batch(tmp_path, scripted, ["slow"])
    outputs = tmp_path / "outputs"
    scripted.script.extend([("sleep", 1.0)] * units)  # each unit's call takes a second
    first = Terminal(outputs)
    [result] = run_batch(batch, root=tmp_path, outputs=outputs, log=first, progress_every_s=0.5)
    assert result.status == "completed", result.error
    progress = [line for line in first.lines if re.search(rf"slow stage \d/{units} · calls \d+ live", line)]
    assert progress and all(line.startswith(f"[1/1] {result.run_id} · ") for line in progress), first.lines
    assert re.search(r"· \d+s$", progress[-1])  # the run's elapsed time
    header, _, row, _, total = first.lines[-5:]
    assert header.split() == [
        "run",
        "label",
        "status",
        "live",
        "calls",
        "cached",
        "calls",
        "failures",
        "wall",
        "time",
    ]
    assert row.split()[:5] == [result.run_id, "completed", str(units), "0", "0"]
    assert total.startswith("1 run ") and "1 completed" in total
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["headline"] == f"{units} answers from the slow stage"
    assert not (result.run_dir / "progress.json").exists()  # the record says how the run ended
    # under `ragtrial run` the stage printed nothing into the notebook, so nothing reaches the report
    executed = nbformat.read(result.run_dir / "notebook.ipynb", as_version=4)
    printed = [str(output) for cell in executed.cells for output in cell.get("outputs", [])]
    assert printed and not any("slow stage:" in output for output in printed)  # a bar line starts so

    scripted.script.extend([("sleep", 1.0)] * units)  # unused: a forced re-run replays the cache
    forced = Terminal(outputs)
    scripted.requests.clear()
    [again] = run_batch(batch, root=tmp_path, outputs=outputs, log=forced, force=True, progress_every_s=0.5)
    assert again.status == "completed" and again.summary["llm_calls_cached"] == units
    assert scripted.requests == []  # progress changes no call
    # while the forced run ran, the page did not link the report its folder no longer had
    assert forced.report_linked_while_running and not any(forced.report_linked_while_running)
    assert '<a href="' + again.run_id + '/report.html">' in (outputs / "index.html").read_text()
    out, err = capfd.readouterr()
    assert not [noise for noise in NOISE if noise in out + err], out + err
    # the kernel's own output is kept in the run folder, and ipykernel had no reason to warn there either
    assert "without encryption" not in (again.run_dir / "kernel.log").read_text()


def test_the_kernel_runs_with_few_malloc_arenas_unless_the_environment_sets_its_own(
    tmp_path, scripted, monkeypatch
):
    """A notebook's request threads would each hold an arena of freed memory (issue 36)."""
    plant(
        tmp_path,
        "arenas",
        "import pathlib\n"  # the environment the kernel process was started with
        "environ = pathlib.Path('/proc/self/environ').read_text()\n"
        "started = dict(v.split('=', 1) for v in environ.split('\\0') if v)\n"
        "pathlib.Path(run_dir, 'arenas.txt').write_text(started.get('MALLOC_ARENA_MAX', 'unset'))",
    )
    batch = planted_batch(tmp_path, scripted, ["arenas"])
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    [run] = run_batch(batch, root=tmp_path, outputs=tmp_path / "outputs")
    assert (run.run_dir / "arenas.txt").read_text() == "2"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    [again] = run_batch(batch, root=tmp_path, outputs=tmp_path / "outputs", force=True)
    assert (again.run_dir / "arenas.txt").read_text() == "8"


def test_a_failed_run_prints_the_notebooks_own_exception(tmp_path, scripted, capsys, monkeypatch):
    plant(
        tmp_path,
        "fails",
        "from ragtrial.records import DataError\n"
        "raise DataError('corpus/missing', None, None, 'data set folder not found')",
    )
    batch = planted_batch(tmp_path, scripted, ["fails"])
    monkeypatch.chdir(tmp_path)
    assert main(["run", batch]) == 1
    captured = capsys.readouterr()
    [failed] = captured.err.splitlines()
    reason = "DataError: file corpus/missing: data set folder not found"
    assert failed.startswith("FAILED fails-") and reason in failed, failed
    run = json.loads(next((tmp_path / "outputs").glob("fails-*/run.json")).read_text())
    assert run["status"] == "failed" and run["error"].startswith(reason)
    assert "failed" in captured.out.splitlines()[-2]  # the summary table's last row
    page = (tmp_path / "outputs" / "index.html").read_text()
    assert f'href="{run["run_id"]}/error.txt"' in page and reason in page
