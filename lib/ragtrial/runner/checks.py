"""The checks of a batch before its first notebook, one function shared by `ragtrial run` and
`ragtrial check` (`check_batch`).

Every batch passes them: its file and settings validate (`config.batch.load_batch`: YAML, keys,
types, bounds, notebooks), `--only` names notebooks of the batch, each run folder stays inside the
outputs folder, and every name and path resolves (`runner.preflight`, answer files included).
`ragtrial check` adds the checks that read data or send a request (`reach=True`): the outputs
folder is writable; each run's data set loads and carries the gold its notebook needs
(`data.gold.require_gold`, the rule the notebook applies); each response cache takes a write;
each endpoint answers a real request
(`llm.endpoint_probe`); and the upstream systems a run's methods need have their environments.
The first problem raises, naming the batch file, the run and the dotted key: `ParamsError` for a
batch that is wrong, `NotReady` for a valid batch whose endpoint or system is not there.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec, load_batch
from ragtrial.config.notebooks import NOTEBOOKS
from ragtrial.config.paths import notebooks_dir
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.data.gold import gold_carried, require_gold
from ragtrial.records import Dataset
from ragtrial.runner.preflight import preflight


class NotReady(RuntimeError):
    """A valid batch that cannot run here yet: an endpoint that does not answer as a run needs, or an
    upstream system without its environment. The message names the run and the setting.
    """


@dataclass
class CheckedBatch:
    """A batch that passed the checks: every run (`specs`), those `--only` selects (`selected`),
    its worker count, and one line per thing checked.
    """

    specs: list[RunSpec]
    selected: list[RunSpec]
    workers: int
    checked: list[str] = field(default_factory=list)


def run_folder(outputs: Path, run_id: str) -> Path:
    """`outputs/<run_id>`, refused unless it is a real folder directly inside the outputs folder."""
    outputs = Path(outputs).resolve()
    run_dir = outputs / run_id
    if run_dir.is_symlink() or run_dir.resolve().parent != outputs:
        raise ParamsError(f"run {run_id!r}: its folder {run_dir} is not inside the outputs folder {outputs}")
    return run_dir


def select_runs(specs: list[RunSpec], only: list[str] | None, batch_path: str | Path) -> list[RunSpec]:
    """The runs `--only` asks for; a name that matches no run of the batch is an error, not a no-op."""
    if not only:
        return specs
    known = list(dict.fromkeys(s.notebook for s in specs))
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ParamsError(
            f"--only {', '.join(unknown)}: no run of that notebook in {batch_path} (its notebooks: "
            f"{', '.join(known)})"
        )
    return [s for s in specs if s.notebook in only]


def check_batch(
    batch_path: str | Path,
    overrides: dict[str, Any] | None,
    root: Path,
    outputs: Path,
    only: list[str] | None = None,
    *,
    reach: bool = False,
) -> CheckedBatch:
    """The batch's runs, checked as the module says (with `reach`, also data, endpoints and systems);
    raises at the first problem. Nothing is written and, without `reach`, nothing is read but the
    batch and the files its settings name.
    """
    specs, workers = load_batch(batch_path, overrides, notebooks_dir=notebooks_dir(root))
    selected = select_runs(specs, only, batch_path)
    for spec in selected:
        run_folder(outputs, spec.run_id)
    preflight(selected, root)
    chosen = f"; {len(selected)} selected by --only" if len(selected) < len(specs) else ""
    checked = CheckedBatch(
        specs,
        selected,
        workers,
        [
            f"{batch_path}: {len(specs)} run{'s' * (len(specs) != 1)}{chosen}: settings, notebooks, names "
            "and paths are valid"
        ],
    )
    if reach:
        checked.checked += [writable(outputs), *data_checks(selected), *cache_checks(selected, root, outputs)]
        checked.checked += endpoint_checks(selected)
        checked.checked += system_checks(selected)
    return checked


def _where(spec: RunSpec) -> str:
    where = spec.source or f"notebook {spec.notebook}"
    return f"{where} [{spec.label}]" if spec.label else where


def writable(outputs: Path) -> str:
    """That the outputs folder (or the nearest folder above it that exists) may be written."""
    problem = _unwritable(outputs)
    if problem:
        raise ParamsError(f"outputs folder {outputs}: {problem}")
    return f"outputs folder {outputs}: writable" + ("" if outputs.exists() else " (created by the run)")


def _unwritable(folder: Path) -> str:
    """Why `folder`, or the nearest folder above it that exists, may not be written; "" if it may."""
    existing = next(f for f in (folder, *folder.parents) if f.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not a folder this user may write"
    return ""


def cache_checks(specs: Iterable[RunSpec], root: Path, outputs: Path) -> list[str]:
    """That each distinct response cache of the runs takes a write (rolled back,
    `llm.cache.ResponseCache.check_writable`): a read-only or immutable SQLite file and refused
    PostgreSQL credentials fail here, not after a run's first paid call. A SQLite file the run will
    create is not created: its folder is checked instead.
    """
    from ragtrial.llm.cache import CacheError, ResponseCache, cache_location

    said: dict[str, str] = {}
    for spec in specs:
        settings = spec.settings.cache
        location = cache_location(settings, root, outputs)
        key = f"{location} {settings.password_env}"
        if key in said:
            continue
        try:
            if isinstance(location, Path) and not location.exists():
                problem = _unwritable(location.parent)
                if problem:
                    raise CacheError(f"response cache {location}: {problem}")
                said[key] = f"response cache {location}: its folder is writable (created by the run)"
                continue
            cache = ResponseCache(location, settings.password_env)
            try:
                cache.check_writable()
            finally:
                cache.close()
            said[key] = f"response cache {cache.where}: takes a write"
        except CacheError as err:
            raise NotReady(f"{_where(spec)}: key 'cache.url': {err}") from None
    return list(said.values())


def data_checks(specs: Iterable[RunSpec]) -> list[str]:
    """Each run's data set loaded (once per distinct `data` settings) and held to its notebook's gold
    rule; one line per data set: what it holds and the notebooks checked against it.
    """
    loaded: dict[str, tuple[Dataset, list[str]]] = {}
    for spec in specs:
        data = spec.settings.data
        key = data.model_dump_json()
        if key not in loaded:
            try:
                loaded[key] = (load_experiment_dataset(data), [])
            except (ValueError, OSError) as err:  # DataError (a ValueError) names the file and record
                raise ParamsError(
                    f"{_where(spec)}: key 'data': data set {data.dataset!r} does not load: {err}"
                ) from None
        dataset, notebooks = loaded[key]
        try:
            require_gold(dataset, spec.notebook)
        except ParamsError as err:
            raise ParamsError(f"{_where(spec)}: key 'data.dataset': {err}") from None
        notebooks.append(spec.notebook)
    lines = []
    for dataset, notebooks in loaded.values():
        carried = ", ".join(sorted(gold_carried(dataset) - {"questions"})) or "no gold"
        needing = [n for n in dict.fromkeys(notebooks) if n in NOTEBOOKS and NOTEBOOKS.get(n).needs]
        lines.append(
            f"data set {dataset.name!r}{f' ({dataset.source_path})' if dataset.source_path else ''}: "
            f"{len(dataset.documents)} documents, {len(dataset.questions)} questions ({carried})"
            + (f"; it has the gold {', '.join(needing)} need" if needing else "")
        )
    return lines


def endpoint_checks(specs: Iterable[RunSpec]) -> list[str]:
    """A real request to each distinct LLM and embeddings endpoint of the runs (`llm.endpoint_probe`)."""
    from ragtrial.llm.endpoint_probe import EndpointProblem, probe_embeddings, probe_llm

    said: dict[str, str] = {}
    for spec in specs:
        s = spec.settings
        probes = {
            "llm " + s.llm.model_dump_json(): lambda s=s: probe_llm(s.llm),
            f"embeddings {s.embeddings.model_dump_json()} {s.llm.timeout_s}": lambda s=s: probe_embeddings(
                s.embeddings, s.llm.timeout_s
            ),
        }
        for key, probe in probes.items():
            if key in said:
                continue
            try:
                said[key] = probe()
            except EndpointProblem as err:
                raise NotReady(f"{_where(spec)}: {err}") from None
    return list(dict.fromkeys(said.values()))


def systems_needed(spec: RunSpec) -> list[str]:
    """The upstream systems the run's notebook runs methods of, in order (`config.notebooks` `methods`)."""
    from ragtrial.methods.registry import METHODS

    names: list[str] = []
    for key in NOTEBOOKS.get(spec.notebook).methods if spec.notebook in NOTEBOOKS else ():
        value = cast(Any, functools.reduce(getattr, key.split("."), spec.settings))  # a setting: str or list
        names += [value] if isinstance(value, str) else list(value)
    imported = spec.settings.methods.answer_files
    systems = [METHODS.entry(n).metadata.get("system") for n in names if n not in imported]
    return list(dict.fromkeys(s for s in systems if s))


def system_checks(specs: Iterable[RunSpec]) -> list[str]:
    """That each upstream system a run needs has its environment (`methods.upstream.environments`),
    or, with `systems.install: lazy`, that the run will create it.
    """
    from ragtrial.methods.upstream.environments import SYSTEMS, environment_folder, is_installed, systems_home

    said: dict[str, str] = {}
    for spec in specs:
        for system in systems_needed(spec):
            if system in said:
                continue
            entry = SYSTEMS.get(system)
            if not entry.isolated:
                try:
                    version = importlib.metadata.version(entry.distribution)
                except importlib.metadata.PackageNotFoundError:
                    raise NotReady(
                        f"{_where(spec)}: system {system}: its package {entry.distribution} is not installed "
                        "in the kit's environment (it is a dependency of the kit: reinstall the kit)"
                    ) from None
                said[system] = f"system {system}: {entry.distribution} {version} in the kit's environment"
            elif is_installed(system):
                said[system] = f"system {system}: environment {environment_folder(system)}"
            elif spec.settings.systems.install == "never":
                raise NotReady(
                    f"{_where(spec)}: key 'systems.install': never, and system {system} has no "
                    f"environment in {systems_home()}: run `ragtrial systems install {system}`"
                )
            else:
                said[system] = (
                    f"system {system}: not installed; the run creates its environment on first use "
                    f"(systems.install: lazy; pip needs the network), or run `ragtrial systems install "
                    f"{system}` now"
                )
    return list(said.values())
