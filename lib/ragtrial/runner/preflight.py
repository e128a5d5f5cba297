"""The check of every run's names and paths before any run starts (so before any model call).

Settings validation (`ragtrial.config`) checks types, bounds and cross-field rules; what it cannot
check is what needs a registry, which sits above config (data sets, methods, retrievers, corpus
presets), or the file system (paths: the project root, or the data root for data sets and imported
indexes). The settings that hold such a value are marked with
`config.base.Names` / `ExistingPath`; this module checks each marked value, and the data set's
loader options against the loader's signature. An error names the batch file, the run and the
dotted key.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Iterable
from pathlib import Path

from ragtrial.config.base import ExistingPath, Names, ParamsError
from ragtrial.config.batch import RunSpec
from ragtrial.config.data import data_path, data_root_origin
from ragtrial.config.settings import MarkedValue, Settings, marked_values
from ragtrial.data.answer_files import method_answers
from ragtrial.data.registry import LOADERS
from ragtrial.data.synthetic import PRESETS
from ragtrial.evaluation.verdict_measures import MEASURES
from ragtrial.methods.registry import METHODS
from ragtrial.records import DataError
from ragtrial.retrieval.registry import RETRIEVERS

# The names each `Names` kind accepts.
KNOWN: dict[str, Collection[str]] = {
    "data set": LOADERS,
    "method": METHODS,
    "retriever": RETRIEVERS,
    "corpus size": PRESETS,
    "measure": MEASURES,
}
# Loader options that `data` settings of their own pass (the rest of `data.options` is the loader's).
_SHARED_LOADER_OPTIONS = ("limit_questions", "limit_documents", "seed")


def preflight(specs: Iterable[RunSpec], root: Path) -> None:
    """Raise `ParamsError` at the first run whose settings name an unknown thing or a missing path."""
    for spec in specs:
        where = spec.source or f"notebook {spec.notebook}"
        check_settings(spec.settings, f"{where} [{spec.label}]" if spec.label else where, root)


def check_settings(settings: Settings, source: str, root: Path) -> None:
    """Every marked name and path of `settings`, and the loader options; paths are relative to `root`
    (the project root) or, for data, to the data root under it.
    """
    problems = [p for marked in marked_values(settings) if (p := _problem(marked, root, settings))]
    problems += _loader_option_problems(settings)
    problems += _answer_file_problems(settings)
    if problems:
        raise ParamsError(f"{source}: " + "; ".join(problems))


def _problem(marked: MarkedValue, root: Path, settings: Settings) -> str:
    key, marker, value = marked
    if isinstance(marker, Names):
        known = KNOWN[marker.kind]
        imported = settings.methods.answer_files if marker.kind == "method" else {}
        if value in known or value in marker.also or value in imported:
            return ""
        return f"key '{key}': unknown {marker.kind} {value!r}; known: {', '.join([*known, *marker.also])}"
    if marker.under == "data":
        return _path_problem(key, marker, data_path(value, root), _missing_data_hint(key, settings))
    return _path_problem(key, marker, Path(value) if Path(value).is_absolute() else root / value)


def _missing_data_hint(key: str, settings: Settings) -> str:
    """What a reader needs when a data folder is absent: the data root's origin and the publication."""
    hint = f" (data root: {data_root_origin()})"
    dataset = settings.data.dataset
    if key == "data.path" and dataset in LOADERS:
        hint += f"; data set {dataset!r} is published at: {LOADERS.entry(dataset).metadata['published_at']}"
    return hint


def _path_problem(key: str, marker: ExistingPath, path: Path, missing_hint: str = "") -> str:
    if not path.exists():
        return f"key '{key}': no {marker.kind} {path}{missing_hint}"
    if (marker.kind == "file" and not path.is_file()) or (marker.kind == "folder" and not path.is_dir()):
        return f"key '{key}': {path} is not a {marker.kind}"
    return ""


def _answer_file_problems(settings: Settings) -> list[str]:
    """Each answers file of `methods.answer_files` read and validated now, not hours into a batch."""
    problems = []
    for name, spec in settings.methods.answer_files.items():
        if name in METHODS:
            problems.append(
                f"key 'methods.answer_files.{name}': {name!r} is a method of the kit; name it otherwise"
            )
            continue
        try:
            method_answers(name, spec)
        except DataError as err:
            problems.append(f"key 'methods.answer_files.{name}': {err}")
    for name in settings.benchmark.retrieval_files:
        named = settings.methods.answer_files.get(name)
        if named is None or not named.retrieval:
            problems.append(
                f"key 'benchmark.retrieval_files.{name}': not a retrieval file of methods.answer_files "
                "(one with retrieval: true)"
            )
    return problems


def _loader_option_problems(settings: Settings) -> list[str]:
    data = settings.data
    if data.dataset not in LOADERS:
        return []  # named by the data.dataset problem, or the generated corpus (no loader options)
    parameters = inspect.signature(LOADERS.get(data.dataset)).parameters
    own = [name for name in list(parameters)[1:] if name not in _SHARED_LOADER_OPTIONS]
    problems = []
    for option in data.options:
        if option in _SHARED_LOADER_OPTIONS:
            problems.append(f"key 'data.options.{option}': set it as data.{option}")
        elif option not in own:
            problems.append(
                f"key 'data.options.{option}': not an option of data set {data.dataset!r} "
                f"(its options: {', '.join(own) or 'none'})"
            )
    return problems
