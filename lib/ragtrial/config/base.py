"""The base of every settings section and the parameters error.

`Section` forbids unknown keys and validates assignments; `ParamsError` names the file and the
dotted key, and `params_error` turns a pydantic ValidationError into one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class Section(BaseModel):
    """A settings section: an unknown key or a value of the wrong type is an error, also on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ParamsError(ValueError):
    """Bad parameters: the message names the file and the dotted key."""


def params_error(source: str, err: ValidationError, prefix: str = "") -> ParamsError:
    problems = []
    for e in err.errors():
        key = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(e["loc"]))
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        problems.append(f"key '{key}': {msg}")
    return ParamsError(f"{source}: " + "; ".join(problems))
