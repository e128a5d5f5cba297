"""Batch files: `settings` shared by `runs`, each run a notebook with its own settings and an
optional grid, and `--set` overrides; expanded into validated `RunSpec`s.

A params file states only what it changes. Resolution order for one run:
code defaults <- batch `settings` <- run `settings` <- grid point <- command-line `--set`.
Every error names the file and the dotted key, and is raised before any model call.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragtrial.config.base import ParamsError, params_error
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


def parse_set_overrides(items: list[str]) -> dict[str, Any]:
    """`--set llm.model=gpt-4o-mini --set qa.k=5`: values are parsed as YAML scalars/lists."""
    merged: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"--set {item!r}: expected key.sub=value")
        merged = deep_merge(merged, dotted_to_nested(key.strip(), yaml.safe_load(raw)))
    return merged


def settings_hash(settings: Settings) -> str:
    # hashed with URL credentials masked: they are not part of a run's identity, and the run id is
    # published, so it must not be a hash an offline guess of the password could be checked against
    canonical = redact_url(
        json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


class RunSpec(BaseModel):
    """One notebook execution: the notebook name and its fully resolved settings."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    notebook: str
    settings: Settings
    label: str = ""

    @property
    def run_id(self) -> str:
        return f"{self.notebook}-{settings_hash(self.settings)}"


class _RunEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notebook: str
    settings: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    label: str = ""


class BatchFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    runs: list[_RunEntry]
    workers: int = Field(1, ge=1)


def load_yaml(path: Path) -> Any:
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None


def load_batch(
    path: str | Path, overrides: dict[str, Any] | None = None, notebooks_dir: Path | None = None
) -> tuple[list[RunSpec], int]:
    """Expand a batch file into validated run specs (and its worker count)."""
    path = Path(path)
    raw = load_yaml(path)
    try:
        batch = BatchFile.model_validate(raw)
    except ValidationError as err:
        raise params_error(str(path), err) from None
    specs: list[RunSpec] = []
    for i, entry in enumerate(batch.runs):
        if notebooks_dir is not None and not (notebooks_dir / f"{entry.notebook}.ipynb").is_file():
            raise ParamsError(
                f"{path}: key 'runs.{i}.notebook': no notebook {entry.notebook}.ipynb in {notebooks_dir}"
            )
        base = deep_merge(batch.settings, entry.settings)
        keys = list(entry.grid)
        for point in itertools.product(*(entry.grid[k] for k in keys)) if keys else [()]:
            values = base
            for key, value in zip(keys, point, strict=True):
                values = deep_merge(values, dotted_to_nested(key, value))
            values = deep_merge(values, overrides or {})
            settings = validate_settings(values, f"{path} (runs.{i}, notebook {entry.notebook})")
            label = entry.label or ", ".join(f"{k}={v}" for k, v in zip(keys, point, strict=True))
            specs.append(RunSpec(notebook=entry.notebook, settings=settings, label=label))
    return specs, batch.workers
