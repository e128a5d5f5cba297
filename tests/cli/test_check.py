"""`ragtrial check`: each kind of bad input exits non-zero with a message naming the culprit (file,
run, dotted key); a good batch passes against the scripted server after real requests to it; and
`ragtrial run` makes the same checks (`runner.checks.check_batch`) before its first notebook.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import endpoint_settings

from ragtrial.cli import main
from ragtrial.config.base import ParamsError
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.server import free_port
from ragtrial.runner.batch import run_batch

KEY_ENV = "RAGTRIAL_CHECK_TEST_KEY"


def write_batch(folder: Path, settings: dict, runs: list[dict] | None = None, **top) -> Path:
    batch = folder / "batch.yaml"
    runs = runs or [{"notebook": "00_backend_check"}, {"notebook": "01_build_index"}]
    batch.write_text(yaml.safe_dump({"settings": settings, "runs": runs, **top}))
    return batch


def cheap(base_url: str, folder: Path, **sections) -> dict:
    """Settings against `base_url` (LLM and embeddings), the tiny generated corpus, the key in KEY_ENV."""
    settings = endpoint_settings(base_url, folder, **{"data": {"size": "tiny"}, **sections})
    settings["llm"]["api_key_env"] = settings["embeddings"]["api_key_env"] = KEY_ENV
    return settings


def check(batch: Path, tmp_path: Path, capsys, *extra: str) -> tuple[int, str, str]:
    code = main(["check", str(batch), "--outputs", str(tmp_path / "out"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def keyless(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)


def test_a_good_batch_passes_after_real_requests_to_its_endpoints(scripted, tmp_path, capsys, keyless):
    batch = write_batch(tmp_path, cheap(scripted.base_url, tmp_path))
    code, out, err = check(batch, tmp_path, capsys)
    assert code == 0, err
    assert f"{batch}: 2 runs: settings, notebooks, names and paths are valid" in out
    assert f"LLM endpoint {scripted.base_url}: GET /models lists 'scripted'" in out
    assert "a 1-token chat completion of 'scripted' answered" in out
    assert f"embeddings endpoint {scripted.base_url}: 'emb' answered one vector of dimension 3" in out
    assert f"{KEY_ENV} is not set: no key was sent, and none was needed" in out
    assert f"{batch}: ready to run (2 runs)" in out
    paths = [r["path"] for r in scripted.requests]
    assert paths == ["/v1/models", "/v1/chat/completions", "/v1/embeddings"]  # once for both runs
    assert scripted.requests[1]["body"]["max_tokens"] == 1
    assert not (tmp_path / "out").exists()  # nothing written


def test_validate_is_the_same_command(scripted, tmp_path, capsys, keyless):
    batch = write_batch(tmp_path, cheap(scripted.base_url, tmp_path))
    assert main(["validate", str(batch), "--outputs", str(tmp_path / "out")]) == 0
    assert "ready to run" in capsys.readouterr().out


def test_bad_yaml_names_the_file_and_the_line(tmp_path, capsys):
    batch = tmp_path / "batch.yaml"
    batch.write_text("runs:\n  - notebook: 00_backend_check\n  settings: [unclosed\n")
    code, _, err = check(batch, tmp_path, capsys)
    assert code == 2 and f"{batch}: not valid YAML" in err and "line" in err


def test_an_unknown_top_level_key_is_named(scripted, tmp_path, capsys):
    batch = write_batch(tmp_path, cheap(scripted.base_url, tmp_path), worker=2)
    code, _, err = check(batch, tmp_path, capsys)
    assert code == 2 and str(batch) in err and "worker" in err
    assert scripted.requests == []  # the first problem stops the check before any request


def test_an_unknown_settings_key_is_named_with_its_run(scripted, tmp_path, capsys):
    settings = cheap(scripted.base_url, tmp_path, retrieval={"kk": 3})
    code, _, err = check(write_batch(tmp_path, settings), tmp_path, capsys)
    assert code == 2 and "(runs.0, notebook 00_backend_check)" in err and "retrieval.kk" in err


def test_a_value_out_of_its_bounds_is_named(scripted, tmp_path, capsys):
    code, _, err = check(
        write_batch(tmp_path, cheap(scripted.base_url, tmp_path, retrieval={"k": 0})), tmp_path, capsys
    )
    assert code == 2 and "retrieval.k" in err and "greater than or equal to 1" in err


@pytest.mark.parametrize(
    ("section", "key", "name"),
    [
        ({"data": {"dataset": "no_such_set"}}, "data.dataset", "no_such_set"),
        ({"qa": {"methods": ["naive_rag", "no_such_method"]}}, "qa.methods", "no_such_method"),
    ],
)
def test_an_unknown_name_is_named_with_its_key(scripted, tmp_path, capsys, section, key, name):
    settings = cheap(scripted.base_url, tmp_path)
    settings.update(section)
    if key == "data.dataset":
        settings["data"]["path"] = str(tmp_path)
    code, _, err = check(write_batch(tmp_path, settings), tmp_path, capsys)
    assert code == 2 and f"key '{key}" in err and "unknown" in err and name in err


def test_a_missing_path_is_named(scripted, tmp_path, capsys):
    settings = cheap(
        scripted.base_url, tmp_path, data={"dataset": "text_folder", "path": str(tmp_path / "nowhere")}
    )
    code, _, err = check(write_batch(tmp_path, settings), tmp_path, capsys)
    assert code == 2 and "key 'data.path': no folder" in err and str(tmp_path / "nowhere") in err


def test_a_notebook_that_needs_gold_fails_on_a_text_folder(scripted, tmp_path, capsys):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "carol.txt").write_text("Scrooge kept the counting house. Marley was his partner.")
    settings = cheap(
        scripted.base_url, tmp_path, data={"dataset": "text_folder", "path": str(tmp_path / "corpus")}
    )
    runs = [{"notebook": "01_build_index"}, {"notebook": "04_rag_vs_graphrag_qa"}]
    code, _, err = check(write_batch(tmp_path, settings, runs), tmp_path, capsys)
    assert code == 2
    assert "(runs.1, notebook 04_rag_vs_graphrag_qa): key 'data.dataset'" in err
    assert (
        "notebook 04_rag_vs_graphrag_qa cannot run on data set 'text_folder'" in err and "no answers" in err
    )
    assert scripted.requests == []  # the data is checked before the endpoints


def test_a_dead_port_says_nothing_listens_at_the_redacted_url(tmp_path, capsys, keyless):
    url = f"http://user:secret@127.0.0.1:{free_port()}/v1"
    code, _, err = check(write_batch(tmp_path, cheap(url, tmp_path)), tmp_path, capsys)
    assert code == 1
    assert "key 'llm.base_url': nothing listens at http://***@127.0.0.1:" in err and "secret" not in err


def test_a_refused_key_is_named_by_its_variable_and_never_shown(scripted, tmp_path, capsys, monkeypatch):
    scripted.required_key = "the-right-key"
    monkeypatch.setenv(KEY_ENV, "a-wrong-key-value")
    code, _, err = check(write_batch(tmp_path, cheap(scripted.base_url, tmp_path)), tmp_path, capsys)
    assert code == 1
    assert f"key 'llm.base_url': {scripted.base_url} refused the key in {KEY_ENV} (HTTP 401" in err
    assert "a-wrong-key-value" not in err


def test_a_missing_key_variable_is_named(scripted, tmp_path, capsys, keyless):
    scripted.required_key = "the-right-key"
    code, _, err = check(write_batch(tmp_path, cheap(scripted.base_url, tmp_path)), tmp_path, capsys)
    assert code == 1 and f"(HTTP 401: Incorrect API key provided) and {KEY_ENV} is not set" in err


def test_the_right_key_read_at_call_time_passes(scripted, tmp_path, capsys, monkeypatch):
    scripted.required_key = "the-right-key"
    monkeypatch.setenv(KEY_ENV, "the-right-key")
    code, out, err = check(write_batch(tmp_path, cheap(scripted.base_url, tmp_path)), tmp_path, capsys)
    assert code == 0, err
    assert {r["authorization"] for r in scripted.requests} == {"Bearer the-right-key"}
    assert "the-right-key" not in out


def test_a_server_error_says_the_server_failed(scripted, tmp_path, capsys, keyless):
    scripted.script.append(("status", 500))  # the chat completion's reply; GET /models answers
    code, _, err = check(write_batch(tmp_path, cheap(scripted.base_url, tmp_path)), tmp_path, capsys)
    assert code == 1
    assert "(runs.0, notebook 00_backend_check): key 'llm.base_url': the server at" in err
    assert "failed (HTTP 500: scripted 500)" in err


def test_the_embeddings_endpoint_is_checked_too(scripted, tmp_path, capsys, keyless):
    settings = cheap(scripted.base_url, tmp_path)
    settings["embeddings"]["base_url"] = f"http://127.0.0.1:{free_port()}/v1"
    code, _, err = check(write_batch(tmp_path, settings), tmp_path, capsys)
    assert code == 1 and "key 'embeddings.base_url': nothing listens at http://127.0.0.1:" in err


def test_an_upstream_system_that_may_not_be_installed_is_named(
    scripted, tmp_path, capsys, keyless, monkeypatch
):
    monkeypatch.setenv("RAGTRIAL_SYSTEMS_HOME", str(tmp_path / "systems"))  # no environment there
    settings = cheap(scripted.base_url, tmp_path, systems={"install": "never"})
    runs = [
        {
            "notebook": "11_upstream_systems",
            "settings": {
                "upstream": {
                    "methods": ["graphrag_local", "local_search"],
                    "pairs": [["graphrag_local", "local_search"]],
                }
            },
        }
    ]
    code, _, err = check(write_batch(tmp_path, settings, runs), tmp_path, capsys)
    assert code == 1 and "key 'systems.install': never, and system graphrag has no environment" in err
    assert "ragtrial systems install graphrag" in err


def test_run_makes_the_same_checks_before_its_first_notebook(tmp_path):
    settings = endpoint_settings("http://127.0.0.1:9/v1", tmp_path, retrieval={"k": 0})
    with pytest.raises(ParamsError, match="retrieval.k"):
        run_batch(
            write_batch(tmp_path, settings), root=Path.cwd(), outputs=tmp_path / "out", log=lambda _: None
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.fault
def test_a_data_set_with_no_documents_is_not_ready_for_the_index(scripted, tmp_path, capsys):
    """`limit_documents: 0` on a set whose questions cite no gold document kept none: check said 01 was
    ready on 0 documents. It names the data set's folder and why, before any request.
    """
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "carol.txt").write_text("Scrooge kept the counting house.")
    data = {"dataset": "text_folder", "path": str(tmp_path / "corpus"), "limit_documents": 0}
    settings = cheap(scripted.base_url, tmp_path, data=data)
    code, out, err = check(
        write_batch(tmp_path, settings, [{"notebook": "01_build_index"}]), tmp_path, capsys
    )
    assert code == 2 and "ready" not in out
    assert f"file {tmp_path / 'corpus'}: no documents after limit_documents=0" in err
    assert len(err.strip().splitlines()) == 1
    assert scripted.requests == []


@pytest.mark.fault
def test_a_cache_file_that_takes_no_write_is_not_ready(scripted, tmp_path, capsys, keyless, unwritable):
    """An immutable SQLite cache: check said "ready", then the run paid calls it could not store."""
    ResponseCache(tmp_path / "cache.sqlite").close()
    unwritable(tmp_path / "cache.sqlite")
    code, out, err = check(write_batch(tmp_path, cheap(scripted.base_url, tmp_path)), tmp_path, capsys)
    assert code == 1 and "ready to run" not in out
    assert f"key 'cache.url': response cache {tmp_path / 'cache.sqlite'}: attempt to write a readonly" in err
    assert scripted.requests == []  # the cache is checked before the endpoints


def test_a_writable_cache_is_checked_and_left_as_it_was(scripted, tmp_path, capsys, keyless):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache.put_completion("k", "m", "kept", 1, 1)
    code, out, err = check(write_batch(tmp_path, cheap(scripted.base_url, tmp_path)), tmp_path, capsys)
    assert code == 0, err
    assert f"ok  response cache {tmp_path / 'cache.sqlite'}: takes a write" in out
    assert cache.counts() == {"completions": 1, "embeddings": 0}


@pytest.mark.fault
def test_a_refused_cache_password_is_not_ready_naming_the_setting(
    scripted, tmp_path, capsys, keyless, postgres_server
):
    settings = cheap(scripted.base_url, tmp_path)
    settings["cache"] = {"url": postgres_server.url(password="not-the-password")}
    code, out, err = check(write_batch(tmp_path, settings), tmp_path, capsys)
    assert code == 1 and "ready to run" not in out
    assert "key 'cache.url': response cache postgresql://***@127.0.0.1:" in err
    assert "password authentication failed" in err and "check the user and the password" in err
    assert "not-the-password" not in err and len(err.strip().splitlines()) == 1
