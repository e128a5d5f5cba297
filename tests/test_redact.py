"""Credentials are masked: URL user-info and the configured key's value."""

from __future__ import annotations

import base64

import pytest

from ragtrial.redact import MASK, redact, redact_url, url_secrets


def test_url_userinfo_is_masked_in_urls_and_in_text():
    assert redact_url("http://user:pa55@host:8000/v1") == f"http://{MASK}@host:8000/v1"
    said = "connect to https://alice:s3cret@example.org/v1 failed"
    assert "s3cret" not in redact_url(said) and "alice" not in redact_url(said)
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_the_configured_key_value_is_masked(monkeypatch):
    monkeypatch.setenv("RAGTRIAL_TEST_KEY", "sk-abcdef123456")
    echoed = 'error: invalid key "sk-abcdef123456" for model'
    assert redact(echoed, ["RAGTRIAL_TEST_KEY"]) == f'error: invalid key "{MASK}" for model'
    assert redact(echoed, []) == echoed  # only configured variables count
    monkeypatch.setenv("RAGTRIAL_TEST_KEY", "ab")  # too short to be a key: words stay intact
    assert redact("a tab", ["RAGTRIAL_TEST_KEY"]) == "a tab"


def test_an_echoed_authorization_credential_is_masked():
    basic = "Incorrect API key provided: Basic dXNlcjpzM2NyZXRwYXNz"  # base64 of user:s3cretpass
    assert redact(basic) == f"Incorrect API key provided: Basic {MASK}"
    assert redact("header was 'Bearer sk-live-0123456789'") == f"header was 'Bearer {MASK}'"
    assert redact("a bearer of somewhat bad news") == "a bearer of somewhat bad news"  # prose, no header


@pytest.mark.fault
def test_the_url_password_and_its_basic_encoding_are_masked_standing_alone():
    url = "http://scripted-user:pa55-word@127.0.0.1:8000/v1"
    basic = base64.b64encode(b"scripted-user:pa55-word").decode()
    echoed = f"you sent pa55-word as {basic}"
    assert redact(echoed, values=url_secrets(url)) == "you sent *** as ***"
    assert url_secrets("http://127.0.0.1:8000/v1") == []
