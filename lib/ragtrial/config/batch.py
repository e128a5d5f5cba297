"""Batch files: `settings` shared by `runs`, each run a notebook with its own settings and an
optional grid, and `--set` overrides; expanded into validated `RunSpec`s. `resources` (batch-wide,
and per run over it) say what one run asks of a Ray cluster (`ragtrial run --engine ray`); they are
not settings, so they change no run id.

A grid entry of two points or more is followed by its sweep report (notebook 15, `sweep_spec`), which
reads the points once they ran.

A params file states only what it changes. Resolution order for one run: code defaults <- the
`settings_from` fragments (settings several batches share) <- batch `settings` <- run `settings` <-
grid point <- command-line `--set`.
Every error names the file and the dotted key, and is raised before any model call.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragtrial.config.base import ParamsError, params_error
from ragtrial.config.notebooks import SWEEP_NOTEBOOK
from ragtrial.config.settings import Settings, validate_settings
from ragtrial.redact import redact_url


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def dotted_to_nested(key: str, value: Any) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    cursor = nested
    parts = key.split(".")
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return nested


def yaml_problem(err: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where (PyYAML's own text spans several lines)."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or err}{where}"


def parse_set_overrides(items: list[str]) -> dict[str, Any]:
    """`--set llm.model=gpt-4o-mini --set qa.k=5`: values are parsed as YAML scalars/lists."""
    merged: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"--set {item!r}: expected key.sub=value")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise ParamsError(f"--set {item!r}: the value is not valid YAML: {yaml_problem(err)}") from None
        merged = deep_merge(merged, dotted_to_nested(key.strip(), value))
    return merged


def split_overrides(text: str) -> list[str]:
    """`"llm.model=x; qa.k=5"` (a notebook's `overrides` parameter) as `--set` items."""
    return [item.strip() for item in text.split(";") if item.strip()]


def settings_hash(settings: Settings) -> str:
    # hashed with URL credentials masked: they are not part of a run's identity, and the run id is
    # published, so it must not be a hash an offline guess of the password could be checked against
    canonical = redact_url(
        json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


# The units of `resources.memory` (any case): decimal (MB, GB) and binary (MiB, GiB), as Kubernetes
# and Ray write them.
BYTE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
BYTE_UNITS |= {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
BYTE_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


class RunResources(BaseModel):
    """What one run asks of a Ray cluster: Ray starts it on a node with that much free. The threaded
    runner runs `workers` runs at a time whatever these say.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    num_cpus: float = Field(
        1.0,
        gt=0,
        description="CPUs the run holds while it executes (a fraction below 1 packs several runs on one CPU: "
        "a run mostly waits on model calls)",
    )
    memory: int | None = Field(
        None,
        gt=0,
        description="memory the run holds, in bytes or as a size such as 4GiB or 500MB (default: none "
        "reserved)",
    )

    @field_validator("num_cpus")
    @classmethod
    def _whole_above_one(cls, cpus: float) -> float:
        if cpus > 1 and not cpus.is_integer():
            raise ValueError(f"{cpus}: a share above 1 CPU must be a whole number (Ray's rule)")
        return cpus

    @field_validator("memory", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        match = BYTE_SIZE.fullmatch(value)
        units = {name.lower(): size for name, size in BYTE_UNITS.items()} | {"": 1}
        if not match or match[2].lower() not in units:
            raise ValueError(
                f"{value!r} is not a size: give bytes, or a number and one of {', '.join(BYTE_UNITS)}"
            )
        return int(float(match[1]) * units[match[2].lower()])


class RunSpec(BaseModel):
    """One notebook execution: the notebook name and its fully resolved settings."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    notebook: str
    settings: Settings
    label: str = ""
    source: str = ""  # where the run is set: "<batch file> (runs.<i>, notebook <name>)", for errors
    resources: RunResources = Field(default_factory=RunResources)  # not part of the run's identity

    @property
    def run_id(self) -> str:
        return f"{self.notebook}-{settings_hash(self.settings)}"


# A notebook is named by its file name in notebooks/ without `.ipynb`: no folder, no `..`, no path.
NOTEBOOK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class _RunEntry(BaseModel):
    """One run (a notebook, with a grid of settings) or `include`: the runs of another batch file in its
    order, with that file's own settings (its path relative to the including file's folder), so one
    batch holds another's runs without a copy.
    """

    model_config = ConfigDict(extra="forbid")
    notebook: str = ""
    include: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    label: str = ""
    resources: RunResources | None = None  # over the batch's, key by key

    @model_validator(mode="after")
    def _a_run_or_an_include(self) -> _RunEntry:
        if bool(self.notebook) == bool(self.include):
            raise ValueError("give either notebook (a run) or include (another batch file's runs)")
        if self.include and (self.settings or self.grid or self.label or self.resources):
            raise ValueError("an include takes the included file's runs as they are: no other key")
        return self

    @field_validator("notebook")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if name and not NOTEBOOK_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not a notebook name: give the file name of a notebook in notebooks/ without "
                "'.ipynb' (letters, digits, '_' and '-'; no folder, no path)"
            )
        return name

    @field_validator("grid")
    @classmethod
    def _every_axis_has_values(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        empty = [key for key, values in grid.items() if not values]
        if empty:
            raise ValueError(f"grid key(s) {', '.join(empty)} list no value, so the grid has no point to run")
        return grid


class SettingsFragment(BaseModel):
    """A file of settings several batches share (`settings_from`): no runs of its own."""

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)


class BatchFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    # fragments (paths relative to this file) whose settings this file's `settings` are laid over, in order
    settings_from: list[str] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    runs: list[_RunEntry] = Field(min_length=1)
    workers: int = Field(1, ge=1)
    resources: RunResources = Field(default_factory=RunResources)


def load_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise ParamsError(
            f"{path}: not a UTF-8 text file (byte {err.start}); a params file is YAML"
        ) from None
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {yaml_problem(err)}") from None


def notebook_file(notebooks_dir: Path, name: str, where: str) -> Path:
    """`<notebooks_dir>/<name>.ipynb`, which must exist and resolve to a file inside `notebooks_dir`."""
    folder = Path(notebooks_dir).resolve()
    candidate = folder / f"{name}.ipynb"
    if not candidate.resolve().is_relative_to(folder):  # a `..`, an absolute name or a link out
        raise ParamsError(f"{where}: {name!r} does not name a notebook inside {folder}")
    if not candidate.is_file():
        raise ParamsError(f"{where}: no notebook {name}.ipynb in {folder}")
    return candidate


def shared_settings(path: Path, fragments: list[str]) -> dict[str, Any]:
    """The settings of `fragments` (`settings_from` of the batch at `path`), merged in order."""
    merged: dict[str, Any] = {}
    for i, name in enumerate(fragments):
        fragment = path.parent / name
        if not fragment.is_file():
            raise ParamsError(f"{path}: key 'settings_from.{i}': no params file {fragment}")
        try:
            shared = SettingsFragment.model_validate(load_yaml(fragment))
        except ValidationError as err:
            raise params_error(str(fragment), err) from None
        merged = deep_merge(merged, shared.settings)
    return merged


def load_batch(
    path: str | Path,
    overrides: dict[str, Any] | None = None,
    notebooks_dir: Path | None = None,
    including: tuple[Path, ...] = (),
) -> tuple[list[RunSpec], int]:
    """Expand a batch file into validated run specs (and its worker count); an `include` entry expands
    to the included file's runs in its place (`including`: the files that include this one, to refuse
    a cycle).
    """
    path = Path(path)
    raw = load_yaml(path)
    try:
        batch = BatchFile.model_validate(raw)
    except ValidationError as err:
        raise params_error(str(path), err) from None
    batch_settings = deep_merge(shared_settings(path, batch.settings_from), batch.settings)
    specs: list[RunSpec] = []
    for i, entry in enumerate(batch.runs):
        if entry.include:
            included = path.parent / entry.include
            if included.resolve() in {p.resolve() for p in (*including, path)}:
                raise ParamsError(f"{path}: key 'runs.{i}.include': {entry.include} includes itself")
            if not included.is_file():
                raise ParamsError(f"{path}: key 'runs.{i}.include': no params file {included}")
            specs += load_batch(included, overrides, notebooks_dir, (*including, path))[0]
            continue
        if notebooks_dir is not None:
            notebook_file(notebooks_dir, entry.notebook, f"{path}: key 'runs.{i}.notebook'")
        base = deep_merge(batch_settings, entry.settings)
        own = entry.resources.model_dump(exclude_unset=True) if entry.resources else {}
        resources = batch.resources.model_copy(update=own)
        keys = list(entry.grid)
        points: list[RunSpec] = []
        for point in itertools.product(*(entry.grid[k] for k in keys)) if keys else [()]:
            values = base
            for key, value in zip(keys, point, strict=True):
                values = deep_merge(values, dotted_to_nested(key, value))
            values = deep_merge(values, overrides or {})
            source = f"{path} (runs.{i}, notebook {entry.notebook})"
            settings = validate_settings(values, source)
            label = entry.label or ", ".join(f"{k}={v}" for k, v in zip(keys, point, strict=True))
            points.append(
                RunSpec(
                    notebook=entry.notebook,
                    settings=settings,
                    label=label,
                    source=source,
                    resources=resources,
                )
            )
        specs += points
        if len(points) > 1:
            where = f"{path}: the sweep report of key 'runs.{i}.grid'"
            if notebooks_dir is not None:
                notebook_file(notebooks_dir, SWEEP_NOTEBOOK, where)
            specs.append(sweep_spec(entry, points, base, overrides or {}, where, batch.resources))
    return specs, batch.workers


def sweep_spec(
    entry: _RunEntry,
    points: list[RunSpec],
    base: dict[str, Any],
    overrides: dict[str, Any],
    source: str,
    resources: RunResources,
) -> RunSpec:
    """The sweep report a grid entry adds after its points (notebook 15): the entry's settings with
    `sweep.runs` naming the points in grid order (so its run id changes with theirs), `sweep.notebook`
    and `sweep.keys` the grid's, then `--set`.
    """
    keys = list(entry.grid)
    sweep = {"sweep": {"runs": [p.run_id for p in points], "notebook": entry.notebook, "keys": keys}}
    settings = validate_settings(deep_merge(deep_merge(base, sweep), overrides), source)
    label = f"sweep of {entry.label or entry.notebook} over {' x '.join(keys)}"
    return RunSpec(
        notebook=SWEEP_NOTEBOOK, settings=settings, label=label, source=source, resources=resources
    )
