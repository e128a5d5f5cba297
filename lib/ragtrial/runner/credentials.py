"""URL credentials never reach a run's written parameters.

A setting whose value is a URL with user-info (`http://user:pass@host/v1` in `llm.base_url`) is
handed to papermill masked, so the executed notebook's parameters cell, `run.json` and the report
show `http://***@host/v1`; the real value travels in the kernel's environment only (one variable per
settings key, `runner.kernel`), and `open_run` puts it back before the first call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ragtrial.config.base import ParamsError
from ragtrial.redact import MASK, redact_url, setting_strings

VARIABLE_PREFIX = "RAGTRIAL_CREDENTIAL_"


def credential_variable(key: str) -> str:
    """The kernel environment variable that carries the real value of settings key `key`."""
    return VARIABLE_PREFIX + key.upper().replace(".", "__")


def _replaced(values: Mapping[str, Any], replacements: Mapping[str, str], prefix: str = "") -> dict[str, Any]:
    out = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            out[name] = _replaced(value, replacements, f"{key}.")
        else:
            out[name] = replacements.get(key, value)
    return out


def credential_keys(settings: Mapping[str, Any]) -> dict[str, str]:
    """The settings keys (dotted) of `settings` (a JSON dump) whose values are URLs with user-info, and
    those values.
    """
    return {key: value for key, value in setting_strings(settings) if redact_url(value) != value}


def mask_credentials(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`settings` (a JSON dump) with the user-info of every URL masked, and the kernel environment
    variables that carry the real values.
    """
    real = credential_keys(settings)
    masked = _replaced(settings, {key: redact_url(value) for key, value in real.items()})
    return masked, {credential_variable(key): value for key, value in real.items()}


def restore_credentials(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`settings` with every masked URL replaced by the real one from this process's environment.
    A masked URL whose real value is not there (or does not mask to it) raises, naming the key.
    """
    real = {}
    for key, value in setting_strings(settings):
        if redact_url(value) != value or f"://{MASK}@" not in value:
            continue
        variable = credential_variable(key)
        carried = os.environ.get(variable, "")
        if redact_url(carried) != value:
            raise ParamsError(
                f"{where}: key '{key}' has masked credentials and the environment variable {variable} "
                "does not carry its real value (run the notebook through `ragtrial run`, or give the "
                "URL itself)"
            )
        real[key] = carried
    return _replaced(settings, real)
