"""The base of every settings section and the parameters error.

`Section` forbids unknown keys and validates assignments; `ParamsError` names the file and the
dotted key, and `params_error` turns a pydantic ValidationError into one, saying where a key that
moved is set now.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from ragtrial.config.moved_keys import MOVED_KEYS, REMOVED_KEYS


class Section(BaseModel):
    """A settings section: an unknown key or a value of the wrong type is an error, also on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ParamsError(ValueError):
    """Bad parameters: the message names the file and the dotted key."""


def _problem(key: str, error: dict) -> str:
    if error["type"] != "extra_forbidden":
        return f"key '{key}': {error['msg']}"
    if key in MOVED_KEYS:
        return f"key '{key}' moved to '{MOVED_KEYS[key]}'"
    if key in REMOVED_KEYS:
        return f"key '{key}' was removed: {REMOVED_KEYS[key]}"
    return f"key '{key}': unknown key"


def params_error(source: str, err: ValidationError) -> ParamsError:
    problems = [_problem(".".join(str(p) for p in e["loc"]), e) for e in err.errors()]
    return ParamsError(f"{source}: " + "; ".join(problems))
