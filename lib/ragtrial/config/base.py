"""The base of every settings section, the markers of names and paths, and the parameters error.

`Section` forbids unknown keys, rejects NaN and infinity in every float and validates assignments;
`conflict` is the error of a cross-field check, reported at the key it names. `Names` and
`ExistingPath` mark settings whose values `ragtrial.runner.preflight` checks before any model
call: the registries they name sit above config; paths resolve against the project root, or, for
data (`under="data"`), against the data root (`ragtrial.config.data.data_root`).
`ParamsError` names the file and the dotted key, and `params_error` turns a pydantic
ValidationError into one, saying where a key that moved is set now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from ragtrial.config.moved_keys import MOVED_KEYS, REMOVED_KEYS


class Section(BaseModel):
    """A settings section: an unknown key, a value of the wrong type or out of its bounds, and a
    non-finite float are errors, also on assignment.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


@dataclass(frozen=True)
class Names:
    """Marks a setting whose value (each value, in a list or pair) is a name in the registry `kind`."""

    kind: Literal["data set", "method", "retriever", "corpus size", "measure"]
    also: tuple[str, ...] = ()  # names accepted beside the registry's own


@dataclass(frozen=True)
class ExistingPath:
    """Marks a path setting: when set, it must exist and be a `kind`. A relative value is relative to
    the project root, or to the data root when `under` is "data" (data sets and imported indexes).
    """

    kind: Literal["file", "folder", "file or folder"]
    under: Literal["project", "data"] = "project"


def conflict(field: str, problem: str) -> PydanticCustomError:
    """The error of a section's cross-field check, reported at the section's key `field`."""
    return PydanticCustomError("setting_conflict", "{problem}", {"field": field, "problem": problem})


class ParamsError(ValueError):
    """Bad parameters: the message names the file and the dotted key."""


def _problem(key: str, error: ErrorDetails) -> str:
    if error["type"] != "extra_forbidden":
        return f"key '{key}': {error['msg']}"
    if key in MOVED_KEYS:
        return f"key '{key}' moved to '{MOVED_KEYS[key]}'"
    if key in REMOVED_KEYS:
        return f"key '{key}' was removed: {REMOVED_KEYS[key]}"
    return f"key '{key}': unknown key"


def _key(error: ErrorDetails) -> str:
    loc = error["loc"] + ((error["ctx"]["field"],) if error["type"] == "setting_conflict" else ())
    return ".".join(str(p) for p in loc)


def params_error(source: str, err: ValidationError) -> ParamsError:
    problems = [_problem(_key(e), e) for e in err.errors()]
    return ParamsError(f"{source}: " + "; ".join(problems))
