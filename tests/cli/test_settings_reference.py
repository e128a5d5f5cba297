"""The generated settings reference stays current, and lists every key with its bounds."""

from __future__ import annotations

from conftest import PROJECT_ROOT

from ragtrial.cli.settings import settings_reference
from ragtrial.config.settings import describe_settings


def test_docs_settings_md_is_the_generated_reference():
    committed = (PROJECT_ROOT / "docs" / "settings.md").read_text()
    assert committed == settings_reference(), (
        "docs/settings.md is stale: regenerate it with `ragtrial settings --markdown > docs/settings.md`"
    )


def test_every_key_is_in_the_reference_with_its_bounds():
    reference = settings_reference()
    for row in describe_settings():
        assert f"`{row.key}`" in reference
    assert "`retrieval.k` | int (>= 1) | `5` |" in reference


def test_a_section_alone():
    reference = settings_reference("retrieval")
    assert "## `retrieval`" in reference and "`llm.model`" not in reference
