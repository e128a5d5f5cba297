"""Credentials never reach an output: URL user-info and the configured API key's value are masked
in every string the kit records (errors, logs, run records, reports).

The key's value is read from the environment at the moment of redaction, as the client reads it
at call time, so nothing secret is ever held by the kit.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

MASK = "***"
# scheme://user:password@host -> scheme://***@host (also a bare user@ and userinfo inside text)
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s\"'<>]+)@")
# an Authorization header's credential quoted back by an endpoint: "Bearer sk-..." or "Basic <base64
# of user:password>" (the password in another form); the scheme word stays, the credential goes
_AUTH_CREDENTIAL = re.compile(r"\b(?P<scheme>Basic|Bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_MIN_SECRET_CHARS = 4  # a shorter value would mask ordinary words; no real key is that short


def redact_url(text: str) -> str:
    """`text` with the user-info of every URL in it masked."""
    return _USERINFO.sub(rf"\g<scheme>{MASK}@", text)


def secret_values(env_names: Iterable[str]) -> list[str]:
    """The values of those environment variables that are set (the configured API key)."""
    return [v for v in (os.environ.get(name, "") for name in env_names) if len(v) >= _MIN_SECRET_CHARS]


def url_secrets(url: str) -> list[str]:
    """The password of `url` and its HTTP Basic encoding (base64 of user:password), as an endpoint
    may quote them back without the URL or the scheme word around them.
    """
    parts = urlsplit(url)
    if not parts.password:
        return []
    basic = base64.b64encode(f"{parts.username or ''}:{parts.password}".encode()).decode()
    return [parts.password, basic]


def redact(text: str, env_names: Iterable[str] = (), values: Iterable[str] = ()) -> str:
    """`text` with URL user-info, quoted Authorization credentials, the values of the `env_names`
    variables and the `values` themselves (such as `url_secrets`) masked.
    """
    found = secret_values(env_names) + [v for v in values if len(v) >= _MIN_SECRET_CHARS]
    for value in sorted(found, key=len, reverse=True):
        text = text.replace(value, MASK)
    return _AUTH_CREDENTIAL.sub(rf"\g<scheme> {MASK}", redact_url(text))


def setting_strings(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every string setting of `values` (a JSON dump), nested sections included."""
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            yield from setting_strings(value, f"{key}.")
        elif isinstance(value, str):
            yield key, value


def password_key(values: Mapping[str, Any]) -> str | None:
    """The dotted key of the first setting of `values` (a JSON dump) whose URL carries a password (a
    user name alone is no secret: `postgresql://ragtrial@host/db` with the password in the environment).
    """
    return next(
        (
            key
            for key, value in setting_strings(values)
            if redact_url(value) != value and urlsplit(value).password
        ),
        None,
    )
