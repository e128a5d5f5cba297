"""A path or a number given on the command line that cannot be used is a one-line error naming it,
never a traceback (issue 37: each case below printed one).
"""

from __future__ import annotations

import pytest
import yaml
from conftest import cited_answer_reply, endpoint_settings

from ragtrial.cli import main
from ragtrial.config.paths import OUTPUTS_ENV

pytestmark = pytest.mark.fault


@pytest.fixture
def batch(scripted, tmp_path, monkeypatch):
    monkeypatch.delenv(OUTPUTS_ENV, raising=False)
    scripted.default_reply = cited_answer_reply
    settings = endpoint_settings(
        scripted.base_url,
        tmp_path,
        data={"size": "tiny"},
        index={"graph_source": "nlp", "reports": "none"},
        retrieval={"k": 2},
    )
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump({"settings": settings, "runs": [{"notebook": "04_rag_vs_graphrag_qa"}]}))
    return path


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


def test_run_into_an_unwritable_outputs_folder(batch, blocked, capsys):
    assert main(["run", str(batch), "--outputs", str(blocked)]) != 0
    assert "a_file" in one_line_error(capsys)


@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_estimate_into_a_folder_or_an_unwritable_path(batch, blocked, tmp_path, capsys, option):
    assert main(["estimate", str(batch), "--outputs", str(tmp_path / "out"), option, str(tmp_path)]) != 0
    assert str(tmp_path) in one_line_error(capsys)
    assert main(["estimate", str(batch), "--outputs", str(tmp_path / "out"), option, str(blocked)]) != 0
    assert "a_file" in one_line_error(capsys)


def test_questions_export_to_a_folder(batch, tmp_path, capsys):
    assert main(["questions", "export", str(batch), "--to", str(tmp_path)]) != 0
    assert str(tmp_path) in one_line_error(capsys)


def test_init_to_an_unwritable_path_names_it_not_its_temporary_file(blocked, capsys):
    assert main(["init", "--dataset", "qmsum", "--to", str(blocked / "x.yaml")]) != 0
    err = one_line_error(capsys)
    assert str(blocked / "x.yaml") in err and ".part" not in err
