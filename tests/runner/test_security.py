"""Hostile model and endpoint text, and credentials, against whole batches: model- and
endpoint-provided strings never become live HTML in a report, and no credential reaches any file
a batch writes (outputs, cache, indexes).
"""

import base64
import json
import secrets
from typing import Any

import pytest
import yaml
from conftest import PROJECT_ROOT
from hostile import INJECTION, injecting_reply, live_elements, written_secrets

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec
from ragtrial.config.settings import Settings
from ragtrial.redact import redact_url
from ragtrial.runner.batch import run_batch
from ragtrial.runner.credentials import credential_variable, mask_credentials, restore_credentials

pytestmark = pytest.mark.fault


def hostile_batch(tmp_path, llm: dict[str, Any], notebooks: list[str]) -> str:
    path = tmp_path / "batch.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "settings": {
                    "llm": {"backend": "openai_compatible", "model": "scripted", "max_retries": 0, **llm},
                    "cache": {"url": f"sqlite:///{tmp_path / 'cache' / 'cache.sqlite'}"},
                    "index": {
                        "store_path": str(tmp_path / "indexes"),
                        "llm_max_chunks": 3,
                        "max_summaries": 2,
                    },
                },
                "runs": [{"notebook": name} for name in notebooks],
            }
        )
    )
    return str(path)


@pytest.mark.usefixtures("notebook_kernels")
def test_model_and_endpoint_text_never_becomes_live_html_in_a_report(scripted, tmp_path):
    scripted.default_reply = injecting_reply
    # the completion probe of notebook 00 meets an endpoint error whose body carries the injection
    scripted.script.append(("body", 400, {"error": {"message": INJECTION, "type": "invalid_request"}}))
    batch = hostile_batch(tmp_path, {"base_url": scripted.base_url}, ["00_backend_check", "01_build_index"])
    results = run_batch(batch, root=PROJECT_ROOT, outputs=tmp_path / "out", log=lambda _: None)
    assert [r.status for r in results] == ["completed", "completed"], [r.error for r in results]
    pages = {r.notebook: (r.run_dir / "report.html").read_text() for r in results}
    assert all("onerror=alert(1)" in page for page in pages.values())  # the text is shown, as text
    assert {name: live_elements(page) for name, page in pages.items()} == {name: [] for name in pages}


@pytest.mark.usefixtures("notebook_kernels")
def test_a_password_in_the_endpoint_url_reaches_no_file_a_batch_writes(scripted, tmp_path):
    """`user:password@` in `llm.base_url` is used for the calls (HTTP basic auth) and appears in no file
    under the outputs, the cache or the index store, not even when the endpoint echoes the header.
    """
    scripted.default_reply = injecting_reply
    scripted.script.append(("echo_key", 401))  # notebook 00's completion probe: the header comes back
    password = "s3cretpass-" + secrets.token_hex(6)
    basic = base64.b64encode(f"scripted-user:{password}".encode()).decode()
    base_url = scripted.base_url.replace("http://", f"http://scripted-user:{password}@")
    batch = hostile_batch(tmp_path, {"base_url": base_url}, ["00_backend_check", "01_build_index"])
    results = run_batch(batch, root=PROJECT_ROOT, outputs=tmp_path / "out", log=lambda _: None)
    assert [r.status for r in results] == ["completed", "completed"], [r.error for r in results]
    assert {r["authorization"] for r in scripted.requests} == {f"Basic {basic}"}  # the password was used
    written = {p.name for p in tmp_path.rglob("*")}
    assert written >= {
        "report.html",
        "notebook.ipynb",
        "run.json",
        "ledger.csv",
        "manifest.json",
        "cache.sqlite",
    }
    assert written_secrets(tmp_path, [password, basic]) == {}
    run = json.loads((results[0].run_dir / "run.json").read_text())
    assert run["settings"]["llm"]["base_url"] == redact_url(base_url) and run["run_id"] == results[0].run_id
    assert (
        "Incorrect API key provided: Basic ***" in (results[0].run_dir / "tables" / "probes.csv").read_text()
    )


@pytest.mark.usefixtures("notebook_kernels")
def test_an_api_key_the_endpoint_echoes_reaches_no_file_a_batch_writes(scripted, tmp_path, monkeypatch):
    scripted.default_reply = injecting_reply
    scripted.script.append(("echo_key", 401))
    key = "sk-echoed-" + secrets.token_hex(12)
    monkeypatch.setenv("RAGTRIAL_KEY_UNDER_TEST", key)
    llm = {"base_url": scripted.base_url, "api_key_env": "RAGTRIAL_KEY_UNDER_TEST"}
    results = run_batch(
        hostile_batch(tmp_path, llm, ["00_backend_check"]),
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        log=print,
    )
    assert [r.status for r in results] == ["completed"], results[0].error
    assert {r["authorization"] for r in scripted.requests} == {f"Bearer {key}"}  # the key was sent
    assert "Incorrect API key provided" in (results[0].run_dir / "tables" / "probes.csv").read_text()
    assert written_secrets(tmp_path, [key]) == {}


def test_masked_settings_restore_in_the_kernel_and_keep_the_run_id(monkeypatch):
    real = "http://user:pa55word@example.org/v1"
    spec = RunSpec(
        notebook="00_backend_check", settings=Settings(llm={"backend": "openai_compatible", "base_url": real})
    )
    masked, carried = mask_credentials(spec.settings.model_dump(mode="json"))
    assert masked["llm"]["base_url"] == "http://***@example.org/v1" and "pa55word" not in json.dumps(masked)
    assert carried == {credential_variable("llm.base_url"): real}
    with pytest.raises(ParamsError, match=r"key 'llm\.base_url'.*RAGTRIAL_CREDENTIAL_LLM__BASE_URL"):
        restore_credentials(masked, "settings of notebook 00")
    for name, value in carried.items():
        monkeypatch.setenv(name, value)
    restored = Settings.model_validate(restore_credentials(masked, "settings of notebook 00"))
    assert restored.llm.base_url == real
    assert RunSpec(notebook="00_backend_check", settings=restored).run_id == spec.run_id
    # the id is not a hash of the password
    plain = Settings(llm={"backend": "openai_compatible", "base_url": "http://***@example.org/v1"})
    assert RunSpec(notebook="00_backend_check", settings=plain).run_id == spec.run_id
