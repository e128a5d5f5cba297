"""`ragtrial clean`: the run folders go (after a yes), the cache and the indexes stay unless asked, a
run folder locked by a live process is refused, links are never followed, outputs/README.md stays.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragtrial.cli import main

RUNS = ("04_rag_vs_graphrag_qa-aaaa", "01_build_index-bbbb")


@pytest.fixture
def outputs(tmp_path):
    out = tmp_path / "outputs"
    for run_id in RUNS:
        (out / run_id / "tables").mkdir(parents=True)
        (out / run_id / "run.json").write_text(json.dumps({"run_id": run_id, "status": "completed"}))
        (out / run_id / "tables" / "answers.csv").write_text("a,b\n1,2\n")
    (out / "cache").mkdir()
    (out / "cache" / "ragtrial.sqlite").write_bytes(b"cache")
    (out / "indexes" / "abc123").mkdir(parents=True)
    (out / "indexes" / "abc123" / "manifest.json").write_text("{}")
    (out / "interactive" / "04-x").mkdir(parents=True)
    (out / "README.md").write_text("what this folder holds")
    (out / "notes").mkdir()  # not the kit's: stays
    (out / "index.html").write_text("<p>2 runs</p>")
    return out


def clean(outputs: Path, *args: str) -> int:
    return main(["clean", "--outputs", str(outputs), *args])


def test_yes_removes_the_runs_and_keeps_cache_indexes_readme_and_the_rest(outputs, capsys):
    assert clean(outputs, "--yes") == 0
    out = capsys.readouterr().out
    assert all(f"  {run}/" in out for run in RUNS) and "  interactive/" in out
    assert "keeping cache/, indexes/ (--cache / --indexes remove them)" in out and "removed 3 folders" in out
    assert sorted(p.name for p in outputs.iterdir()) == [
        "README.md",
        "cache",
        "index.html",
        "indexes",
        "notes",
    ]
    assert (outputs / "cache" / "ragtrial.sqlite").read_bytes() == b"cache"
    assert "No run yet." in (outputs / "index.html").read_text()  # the page no longer links removed runs


def test_cache_and_indexes_go_when_asked(outputs, capsys):
    assert clean(outputs, "--yes", "--cache", "--indexes") == 0
    assert sorted(p.name for p in outputs.iterdir()) == ["README.md", "index.html", "notes"]


def test_it_asks_first_and_a_no_removes_nothing(outputs, capsys, monkeypatch):
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "n")
    assert clean(outputs) == 1
    assert asked == ["remove these 3 folders? [y/N] "] and "nothing removed" in capsys.readouterr().out
    assert all((outputs / run).is_dir() for run in RUNS)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert clean(outputs) == 0 and not any((outputs / run).exists() for run in RUNS)


def test_without_a_terminal_to_ask_nothing_is_removed(outputs, capsys, monkeypatch):
    def no_terminal(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", no_terminal)
    assert clean(outputs) == 1 and all((outputs / run).is_dir() for run in RUNS)


def test_dry_run_lists_and_removes_nothing(outputs, capsys):
    before = sorted(str(p) for p in outputs.rglob("*"))
    assert clean(outputs, "--dry-run", "--cache") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"would remove from {outputs}:") and "  cache/" in out and "keeping indexes/" in out
    assert sorted(str(p) for p in outputs.rglob("*")) == before  # not even a lock file written


@pytest.fixture
def live_holder(outputs):
    """Another live process holding the lock of the first run's folder, as a run under way does."""
    lock = outputs / RUNS[0] / "run.lock"
    code = (
        "import sys, time; from ragtrial.locks import FolderLock; FolderLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    yield holder
    holder.kill()
    holder.wait()


def test_a_run_folder_locked_by_a_live_process_is_refused_with_its_pid(outputs, capsys, live_holder):
    assert clean(outputs, "--yes", "--cache") == 1
    err = capsys.readouterr().err
    assert f"refused: {RUNS[0]}/" in err and f"in use by process {live_holder.pid}" in err
    assert "refused: cache/" in err  # a run under way may be writing it
    assert (outputs / RUNS[0] / "run.json").is_file() and not (outputs / RUNS[1]).exists()
    assert (outputs / "cache" / "ragtrial.sqlite").is_file()


def test_an_index_build_under_way_keeps_the_indexes(outputs, capsys):
    lock = outputs / "indexes" / ".abc123.lock"
    code = (
        "import sys, time; from ragtrial.locks import FolderLock; FolderLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert clean(outputs, "--yes", "--indexes") == 1
        assert "refused: indexes/" in capsys.readouterr().err
        assert (outputs / "indexes" / "abc123" / "manifest.json").is_file()
    finally:
        holder.kill()
        holder.wait()


def test_links_are_never_followed_out_of_the_outputs_folder(outputs, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "run").mkdir(parents=True)
    (elsewhere / "run" / "run.json").write_text("{}")
    (elsewhere / "precious.txt").write_text("keep me")
    (outputs / "linked-run").symlink_to(elsewhere / "run")  # a run folder that is a link
    (outputs / RUNS[1] / "data").symlink_to(elsewhere)  # a link inside a run folder
    (outputs / "cache").rename(tmp_path / "real_cache")
    (outputs / "cache").symlink_to(tmp_path / "real_cache")
    assert clean(outputs, "--yes", "--cache") == 1
    err = capsys.readouterr().err
    assert "refused: linked-run/ (a link" in err and "refused: cache/ (a link" in err
    assert (outputs / "linked-run").is_symlink() and (elsewhere / "run" / "run.json").is_file()
    assert (elsewhere / "precious.txt").read_text() == "keep me"  # the link inside went, not its target
    assert not (outputs / RUNS[1]).exists() and (tmp_path / "real_cache" / "ragtrial.sqlite").is_file()


def test_an_empty_outputs_folder_has_nothing_to_remove(tmp_path, capsys):
    assert clean(tmp_path) == 0 and "nothing to remove" in capsys.readouterr().out
