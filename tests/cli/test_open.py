"""`ragtrial open`: the page a run id, a unique prefix or `index` names, opened in the browser (a
recording double here), or served over HTTP on 127.0.0.1 (a real GET of the page).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from ragtrial.cli import main, open_report
from ragtrial.cli.open_report import serve_outputs

RUNS = ("04_rag_vs_graphrag_qa-ab12cd34ef", "04_rag_vs_graphrag_qa-ff00112233", "01_build_index-0123456789")


@pytest.fixture
def outputs(tmp_path):
    out = tmp_path / "outputs"
    for run_id in RUNS:
        (out / run_id).mkdir(parents=True)
        (out / run_id / "run.json").write_text(json.dumps({"run_id": run_id, "status": "completed"}))
        (out / run_id / "report.html").write_text(f"<title>report of {run_id}</title>")
    (out / "index.html").write_text("<title>ragtrial runs</title>")
    (out / "cache").mkdir()
    return out


@pytest.fixture
def browser(monkeypatch):
    """The browser as a double that records the URLs it is asked to open."""
    opened: list[str] = []
    monkeypatch.setattr(open_report.webbrowser, "open", lambda url: opened.append(url) or True)
    return opened


@pytest.mark.parametrize(
    ("target", "page"),
    [
        ("04_rag_vs_graphrag_qa-ab12cd34ef", "04_rag_vs_graphrag_qa-ab12cd34ef/report.html"),
        ("01_build", "01_build_index-0123456789/report.html"),
        ("04_rag_vs_graphrag_qa-ff", "04_rag_vs_graphrag_qa-ff00112233/report.html"),
        ("index", "index.html"),
    ],
)
def test_a_run_id_a_unique_prefix_or_index_opens_its_page(outputs, browser, capsys, target, page):
    assert main(["open", target, "--outputs", str(outputs)]) == 0
    assert browser == [(outputs / page).resolve().as_uri()]
    assert capsys.readouterr().out == f"opened {outputs.resolve() / page}\n"


def test_an_ambiguous_prefix_lists_its_candidates(outputs, browser, capsys):
    assert main(["open", "04_rag", "--outputs", str(outputs)]) == 2
    err = capsys.readouterr().err
    assert "04_rag: 2 runs start with it" in err and RUNS[0] in err and RUNS[1] in err and RUNS[2] not in err
    assert browser == []


def test_an_unknown_run_lists_the_runs(outputs, browser, capsys):
    assert main(["open", "cache", "--outputs", str(outputs)]) == 2  # a folder of outputs, not a run
    err = capsys.readouterr().err
    assert "cache: no run id starts with it" in err and all(run in err for run in RUNS)


def test_a_run_without_its_report_says_its_status(outputs, browser, capsys):
    (outputs / RUNS[2] / "report.html").unlink()
    (outputs / RUNS[2] / "run.json").write_text(json.dumps({"status": "failed"}))
    assert main(["open", "01", "--outputs", str(outputs)]) == 2
    assert f"run {RUNS[2]} has no report.html yet (status: failed)" in capsys.readouterr().err


def test_no_browser_names_the_file_and_the_serve_option(outputs, monkeypatch, capsys):
    monkeypatch.setattr(open_report.webbrowser, "open", lambda url: False)
    assert main(["open", "index", "--outputs", str(outputs)]) == 1
    assert "no browser found" in (err := capsys.readouterr().err) and "--serve" in err


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_the_served_outputs_folder_answers_a_real_get_on_loopback_only(outputs):
    server = serve_outputs(outputs, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        assert get(f"http://127.0.0.1:{port}/{RUNS[0]}/report.html") == (
            200,
            f"<title>report of {RUNS[0]}</title>",
        )
        assert get(f"http://127.0.0.1:{port}/index.html")[1] == "<title>ragtrial runs</title>"
        (outputs.parent / "secret.txt").write_text("outside")
        assert get(f"http://127.0.0.1:{port}/../secret.txt")[0] == 404  # nothing above the outputs folder
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_open_serve_prints_the_url_serves_the_page_and_stops_at_ctrl_c(outputs):
    command = [
        sys.executable,
        "-m",
        "ragtrial",
        "open",
        "01",
        "--serve",
        "--port",
        "0",
        "--outputs",
        str(outputs),
    ]
    # Started as a shell starts a background job, with SIGINT ignored: the command still stops at it.
    proc = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"serving {outputs.resolve()} at http://127.0.0.1:"), proc.stderr.read()
        url = line.split(" at ", 1)[1].split()[0]
        assert url.endswith(f"/{RUNS[2]}/report.html")
        assert get(url) == (200, f"<title>report of {RUNS[2]}</title>")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped" in out


def test_a_port_in_use_is_named(outputs, capsys):
    server = serve_outputs(outputs, 0)
    try:
        port = server.server_address[1]
        assert main(["open", "index", "--serve", "--port", str(port), "--outputs", str(outputs)]) == 2
        assert f"--port {port}: cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err
    finally:
        server.server_close()


def test_the_outputs_folder_defaults_to_the_project_roots(tmp_path, monkeypatch, browser, capsys):
    (tmp_path / "ragtrial.yaml").write_text("runs: []\n")  # a folder `ragtrial init` made: a project root
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "index.html").write_text("<title>ragtrial runs</title>")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["open", "index"]) == 0
    assert browser == [Path(tmp_path / "outputs" / "index.html").resolve().as_uri()]


@pytest.mark.fault
def test_a_link_inside_the_outputs_folder_to_a_file_outside_is_not_served(outputs):
    (outputs.parent / "secret.txt").write_text("outside")
    (outputs / "leak.txt").symlink_to(outputs.parent / "secret.txt")
    (outputs / "leaks").symlink_to(outputs.parent)
    (outputs / "inside.html").symlink_to(outputs / "index.html")  # a link that stays inside is fine
    server = serve_outputs(outputs, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert get(f"http://127.0.0.1:{port}/leak.txt")[0] == 404
        assert get(f"http://127.0.0.1:{port}/leaks/secret.txt")[0] == 404
        assert get(f"http://127.0.0.1:{port}/inside.html") == (200, "<title>ragtrial runs</title>")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
