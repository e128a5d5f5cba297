"""A path or a number given on the command line that cannot be used is a one-line error naming it,
never a traceback (issue 37: each case below printed one).
"""

from __future__ import annotations

import pytest

from ragtrial.cli import main

pytestmark = pytest.mark.fault


@pytest.fixture
def blocked(tmp_path):
    """A path no one can write, even root: its parent is a file."""
    (tmp_path / "a_file").write_text("")
    return tmp_path / "a_file" / "below"


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("port", ["-1", "70000", "http"])
def test_a_port_out_of_range(port, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["open", "--serve", "--port", port])
    assert exit_.value.code == 2
    assert "not a port number" in capsys.readouterr().err


def test_run_into_an_unwritable_outputs_folder(tiny_qa_batch, blocked, capsys):
    assert main(["run", str(tiny_qa_batch), "--outputs", str(blocked)]) != 0
    assert "a_file" in one_line_error(capsys)


@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_estimate_into_a_folder_or_an_unwritable_path(tiny_qa_batch, blocked, tmp_path, capsys, option):
    assert (
        main(["estimate", str(tiny_qa_batch), "--outputs", str(tmp_path / "out"), option, str(tmp_path)]) != 0
    )
    assert str(tmp_path) in one_line_error(capsys)
    assert (
        main(["estimate", str(tiny_qa_batch), "--outputs", str(tmp_path / "out"), option, str(blocked)]) != 0
    )
    assert "a_file" in one_line_error(capsys)


def test_questions_export_to_a_folder(tiny_qa_batch, tmp_path, capsys):
    assert main(["questions", "export", str(tiny_qa_batch), "--to", str(tmp_path)]) != 0
    assert str(tmp_path) in one_line_error(capsys)


def test_init_to_an_unwritable_path_names_it_not_its_temporary_file(blocked, capsys):
    assert main(["init", "--dataset", "qmsum", "--to", str(blocked / "x.yaml")]) != 0
    err = one_line_error(capsys)
    assert str(blocked / "x.yaml") in err and ".part" not in err
