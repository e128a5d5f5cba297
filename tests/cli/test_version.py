"""`ragtrial --version`: the package version and the git commit of the kit checkout."""

from __future__ import annotations

import re
import subprocess

import pytest

from ragtrial import __version__
from ragtrial.cli import main
from ragtrial.config.paths import kit_checkout


def test_version_names_the_package_version_and_the_checkouts_commit(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    line = capsys.readouterr().out.strip()
    match = re.fullmatch(r"ragtrial (\S+) \(commit ([0-9a-f]{40})(\+dirty)?\)", line)
    assert match, line
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=kit_checkout(), capture_output=True, text=True, check=True
    ).stdout.strip()
    assert match.group(1) == __version__ and match.group(2) == head
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=kit_checkout(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert bool(match.group(3)) == bool(dirty)


def test_version_comes_before_any_command(capsys):
    with pytest.raises(SystemExit):
        main(["--version", "list"])
    assert capsys.readouterr().out.startswith(f"ragtrial {__version__} (")
