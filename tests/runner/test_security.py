"""Hostile model and endpoint text, and credentials, against whole batches: model- and
endpoint-provided strings never become live HTML in a report, and no credential reaches any file
a batch writes (outputs, cache, indexes).
"""

from typing import Any

import pytest
import yaml
from conftest import PROJECT_ROOT
from hostile import INJECTION, injecting_reply, live_elements

from ragtrial.runner.batch import run_batch

pytestmark = pytest.mark.fault


def hostile_batch(tmp_path, llm: dict[str, Any], notebooks: list[str]) -> str:
    path = tmp_path / "batch.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "settings": {
                    "llm": {"backend": "openai_compatible", "model": "scripted", "max_retries": 0, **llm},
                    "cache_path": str(tmp_path / "cache" / "cache.sqlite"),
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
