"""`ragtrial init [FOLDER] [--dataset NAME] [--base-url URL] [--model M] [--api-key-env VAR] [--to PATH]
[--force]`: a commented batch file for a folder of text files (or a named data set) and an endpoint.

Every notebook of `config.notebooks.NOTEBOOKS` whose needs the data set meets gets a run, with its
`without_gold` settings when the data set has no questions of its own; each other one is named in a
comment saying why it cannot run. What the data set provides is read from the data itself when its
folder is there (the loader loads it), else from its loader's publication record. The sizes are a
first run's, small enough for the embedded model; the file says which to raise for a research run.
"""

from __future__ import annotations

import argparse
import os
import textwrap
import warnings
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import yaml

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import deep_merge, dotted_to_nested, load_batch
from ragtrial.config.data import DATA_ROOT_ENV, data_path, data_path_setting
from ragtrial.config.llm import LLMSettings
from ragtrial.config.notebooks import NOTEBOOKS, Gold, notebook_specs
from ragtrial.config.paths import (
    NOTEBOOKS_DIR,
    WORKSPACE_FILE,
    notebooks_dir,
    output_path,
    outputs_dir,
    project_root,
)
from ragtrial.config.settings import Settings, describe_settings
from ragtrial.data import LOADERS, load_dataset
from ragtrial.data.gold import gold_carried
from ragtrial.data.publications import FOLDERS, PUBLICATIONS
from ragtrial.llm.cache import cache_location
from ragtrial.records import DataError
from ragtrial.redact import redact_url

_WIDTH = 100
# A first run's sizes, stated so a reader sees what to raise for a research run: a sample of the data
# set, and the defaults of `index` and `llm` that keep the default batch within its 40 minutes on the
# embedded model (params/default.yaml).
_FIRST_RUN_QUESTIONS = {"data.limit_questions": 8}
_FIRST_RUN_DOCUMENTS = {"data.limit_documents": 40}
_FIRST_RUN_CALLS = {"index.llm_max_chunks": 12, "index.max_reports": 1, "llm.max_tokens": 256}


def add_parser(sub) -> None:
    init = sub.add_parser(
        "init",
        help="write a commented batch file for a folder of text files (or a named data set) and an endpoint",
    )
    init.add_argument(
        "folder",
        nargs="?",
        metavar="FOLDER",
        help="a folder of .txt/.md files, or with --dataset that data set's folder (default: its folder "
        "in the data root)",
    )
    init.add_argument(
        "--dataset", metavar="NAME", help="a data set `ragtrial datasets` lists (default: text_folder)"
    )
    init.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (default: the embedded model)",
    )
    init.add_argument("--model", metavar="M", help="the model the endpoint serves (with --base-url)")
    init.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the environment variable holding the endpoint's key, read at call time; the key is never "
        "written (with --base-url; default: OPENAI_API_KEY)",
    )
    init.add_argument(
        "--to",
        metavar="PATH",
        help=f"a .yaml file, or a folder (then <folder>/{WORKSPACE_FILE}, a project folder of its own); "
        f"default: params/<folder name>.yaml in a kit checkout, else ./{WORKSPACE_FILE}",
    )
    init.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    init.set_defaults(handler=init_command)


@dataclass(frozen=True)
class PlannedRun:
    """One notebook in an `init` batch: the dotted settings of its run, or why it is left out."""

    notebook: str
    settings: dict[str, Any] = field(default_factory=dict)
    left_out: str = ""

    def nested_settings(self) -> dict[str, Any]:
        return nested(self.settings)


def nested(dotted: dict[str, Any]) -> dict[str, Any]:
    """Dotted settings (`{"judge.trials": 1}`) as the nested sections a batch file holds."""
    sections: dict[str, Any] = {}
    for key, value in dotted.items():
        sections = deep_merge(sections, dotted_to_nested(key, value))
    return sections


def planned_runs(provided: Collection[Gold], embedded: bool) -> list[PlannedRun]:
    """Every notebook (but those a batch adds itself) on a data set that provides `provided`: a run
    (with its `without_gold` settings when the data set has no questions, and what the embedded model
    needs when `embedded`), or left out saying what it lacks and why it needs it.
    """
    runs = []
    for spec in (s for s in notebook_specs() if not s.added_by_batch):
        missing = [kind for kind in spec.needs if kind not in provided]
        if missing:
            runs.append(PlannedRun(spec.name, left_out=f"no {' and no '.join(missing)}, and {spec.why_not}"))
            continue
        settings = {} if "questions" in provided else dict(spec.without_gold)
        runs.append(PlannedRun(spec.name, {**settings, **(spec.on_embedded if embedded else {})}))
    return runs


@dataclass(frozen=True)
class Endpoint:
    """The model the batch calls: the embedded one (`base_url` None) or an OpenAI-compatible endpoint."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = LLMSettings.model_fields["api_key_env"].default

    @property
    def embedded(self) -> bool:
        return self.base_url is None

    def settings(self) -> dict[str, Any]:
        if self.embedded:
            return {"llm.backend": "embedded"}
        return {
            "llm.backend": "openai_compatible",
            "llm.base_url": self.base_url,
            "llm.model": self.model,
            "llm.api_key_env": self.api_key_env,
            "llm.json_mode": "json_schema",
            "llm.fold_system": False,
        }

    def described(self) -> str:
        return "the embedded model" if self.embedded else f"{self.model} at {self.base_url}"


def endpoint_from(args: argparse.Namespace) -> Endpoint:
    if args.base_url is None:
        if args.model or args.api_key_env:
            raise ParamsError(
                "--model and --api-key-env name an endpoint's model and key: give --base-url too"
            )
        return Endpoint()
    if redact_url(args.base_url) != args.base_url:
        raise ParamsError(
            "--base-url carries credentials (user:password@): init writes no secret into a file; give the "
            "URL without them and the key in the variable --api-key-env names"
        )
    if not args.model:
        raise ParamsError("--base-url needs --model: the name of the model the endpoint serves")
    return Endpoint(args.base_url, args.model, *([args.api_key_env] if args.api_key_env else []))


@dataclass(frozen=True)
class DataChoice:
    """The data set a batch reads: its loader, folder, what it provides and how that is known."""

    dataset: str
    folder: Path
    provided: frozenset[Gold]
    loaded: bool  # provided read from the data (else from the loader's publication record)
    documents: int | None = None


def data_choice(folder: str | None, dataset: str | None, run_root: Path) -> DataChoice:
    """The data set of `ragtrial init`: FOLDER as a text folder, or data set `dataset` in FOLDER or its
    default data-root folder. What it provides comes from loading it when the folder is there.
    """
    name = dataset or "text_folder"
    if name not in LOADERS:
        raise ParamsError(f"--dataset {name!r}: unknown data set; known: {', '.join(sorted(LOADERS))}")
    if folder is None:
        folders = PUBLICATIONS[name].folders
        if not folders:
            raise ParamsError(
                f"data set {name!r} reads your own files: name their folder (`ragtrial init FOLDER`)"
            )
        where = data_path(folders[0], run_root)
    else:
        where = Path(folder).expanduser().resolve()
    if not where.is_dir():
        if dataset is None or not PUBLICATIONS[name].folders:
            raise ParamsError(f"{where}: no such folder")
        return DataChoice(name, where, frozenset(PUBLICATIONS[name].provides), loaded=False)
    try:
        with warnings.catch_warnings():  # data warnings belong to a run's report, not to init
            warnings.simplefilter("ignore", UserWarning)
            loaded = load_dataset(name, where)
    except (DataError, ValueError, TypeError) as err:
        raise ParamsError(f"{where}: not readable as data set {name!r}: {err}") from None
    return DataChoice(
        name, where, frozenset(gold_carried(loaded)), loaded=True, documents=len(loaded.documents)
    )


def _description(key: str) -> str:
    return next(row.description for row in describe_settings(key) if row.key == key)


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip()


def _comment(text: str, indent: int) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(text, _WIDTH, initial_indent=f"{pad}# ", subsequent_indent=f"{pad}# ")


def _yaml(mapping: dict[str, Any], comments: dict[str, str], indent: int, prefix: str = "") -> list[str]:
    """`mapping` as block YAML, the comment of each dotted key in `comments` above it."""
    lines = []
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        lines += _comment(comments[dotted], indent) if dotted in comments else []
        if isinstance(value, dict) and value:
            lines.append(f"{' ' * indent}{key}:")
            lines += _yaml(value, comments, indent + 2, f"{dotted}.")
        else:
            lines.append(f"{' ' * indent}{key}: {_scalar(value)}")
    return lines


def batch_text(choice: DataChoice, endpoint: Endpoint, run_root: Path) -> str:
    """The commented batch file."""
    path_setting = data_path_setting(choice.folder, run_root)
    questions = _FIRST_RUN_QUESTIONS if "questions" in choice.provided else {}
    first_run = questions | _FIRST_RUN_DOCUMENTS | _FIRST_RUN_CALLS
    shared = {"data.dataset": choice.dataset, "data.path": path_setting}
    shared |= questions | _FIRST_RUN_DOCUMENTS | endpoint.settings() | _FIRST_RUN_CALLS
    relative = not Path(path_setting).is_absolute()
    comments = {
        "data.path": f"relative to the data root (${DATA_ROOT_ENV}, else the project's data/)"
        if relative
        else "an absolute path: a folder outside the data root (keep this file out of version control)",
        "llm.backend": "the embedded Gemma 3 270M, served on 127.0.0.1: it proves every pipeline offline; "
        "its answers, judgments and extractions are not research findings"
        if endpoint.embedded
        else f"an OpenAI-compatible endpoint; its key is read from ${endpoint.api_key_env} at call time and "
        "never written here",
        "llm.json_mode": "structured output as OpenAI, vLLM and Ollama take it (a llama.cpp server: "
        "json_object_schema)",
        "llm.fold_system": "an instruct model reads system messages",
    }
    comments |= {key: f"first run: {_description(key)}" for key in first_run}
    provided = sorted(choice.provided, key=get_args(Gold).index)
    how = "read from the data" if choice.loaded else "per its publication record; the folder is not there yet"
    header = [
        f"ragtrial batch written by `ragtrial init` for data set {choice.dataset} ({path_setting}) on "
        f"{endpoint.described()}.",
        f"The data set provides: {', '.join(provided) or 'documents only, no questions'} ({how}). Each "
        "notebook that can run on it has a run below; each one that cannot is named with why.",
        "The sizes marked 'first run' keep a first run short, small enough for the embedded model: raise "
        "these for a research run. Every key: `ragtrial settings [SECTION]`; a run's settings override the "
        "shared ones.",
    ]
    if choice.documents == 0:
        header.append(
            "The data set has no documents: the notebooks that build an index cannot run on it (see its "
            "loader's options in `ragtrial datasets`)."
        )
    lines = [line for text in header for line in _comment(text, 0)]
    lines.append(
        f"description: {_scalar(f'ragtrial init: {choice.dataset} ({path_setting}), {endpoint.described()}')}"
    )
    lines.append("settings:")
    lines += _yaml(nested(shared), comments, 2)
    lines.append("runs:")
    for run in planned_runs(choice.provided, endpoint.embedded):
        if run.left_out:
            lines += _comment(
                f"left out: {run.notebook} cannot run on this data set: it has {run.left_out}.", 2
            )
            continue
        spec = NOTEBOOKS.get(run.notebook)
        lines += _comment(f"{run.notebook}: {spec.question}", 2)
        lines.append(f"  - notebook: {run.notebook}")
        if spec.on_embedded and endpoint.embedded:
            lines += _comment(
                "what the embedded model needs here (params/default.yaml measured it): the systems' context "
                "budgets cut to its 8k-token window, replies capped, two questions, one trial",
                4,
            )
        if run.settings:
            without_gold = spec.without_gold
            comments = {
                key: f"the data set has no questions: ask generated ones (`ragtrial settings {key}`)"
                for key in without_gold
            }
            lines.append("    settings:")
            lines += _yaml(run.nested_settings(), comments, 6)
    return "\n".join(lines) + "\n"


def destination(to: str | None, folder_name: str) -> tuple[Path, Path]:
    """(the file to write, the project root it runs in): --to's file, or its folder's ragtrial.yaml;
    else params/<folder name>.yaml in a kit checkout, the ragtrial.yaml of a folder `init` made (when
    the working directory is in one), else ./ragtrial.yaml.
    """
    if to is not None:
        given = Path(to).expanduser().resolve()
        if given.suffix in (".yaml", ".yml"):
            return given, project_root()  # a batch file runs in the project the command is started in
        if given.exists() and not given.is_dir():
            raise ParamsError(f"--to {to}: neither a .yaml file nor a folder")
        return given / WORKSPACE_FILE, given
    here = Path.cwd().resolve()
    root = project_root(here)
    if not here.is_relative_to(root):  # no project here (the kit's own checkout is elsewhere)
        return here / WORKSPACE_FILE, here
    if (root / NOTEBOOKS_DIR).is_dir():
        return root / "params" / f"{folder_name}.yaml", root
    return root / WORKSPACE_FILE, root  # a folder `init` made


def init_command(args: argparse.Namespace) -> int:
    if args.folder is None and args.dataset is None:
        raise ParamsError(
            "name a folder of text files (`ragtrial init FOLDER`) or a data set (`--dataset NAME`; "
            "`ragtrial datasets` lists them)"
        )
    endpoint = endpoint_from(args)
    name = Path(args.folder).expanduser().resolve().name if args.folder else None
    if name is None and args.dataset in PUBLICATIONS and PUBLICATIONS[args.dataset].folders:
        name = PUBLICATIONS[args.dataset].folders[0]
    target, run_root = destination(args.to, name or "ragtrial")
    if target.exists() and not args.force:
        raise ParamsError(f"{target} exists; run again with --force to overwrite it")
    choice = data_choice(args.folder, args.dataset, run_root)
    text = batch_text(choice, endpoint, run_root)
    _write_checked(target, text, run_root)
    _print_next(target, choice, endpoint, run_root)
    return 0


def _write_checked(target: Path, text: str, run_root: Path) -> None:
    """Write `text` to `target` only once it loads as a batch (a temporary file beside it, renamed)."""
    draft = target.with_name(f".{target.name}.part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        draft.write_text(text, encoding="utf-8")
    except OSError as err:  # named by the file asked for, not by the temporary one
        raise ParamsError(f"--to {target}: cannot write it ({err.strerror})") from None
    try:
        load_batch(draft, notebooks_dir=notebooks_dir(run_root))
        draft.replace(target)
    finally:
        draft.unlink(missing_ok=True)


def _print_next(target: Path, choice: DataChoice, endpoint: Endpoint, run_root: Path) -> None:
    runs = planned_runs(choice.provided, endpoint.embedded)
    left_out = [r.notebook for r in runs if r.left_out]
    # a batch file is found relative to the project root from anywhere in the project (paths.batch_file)
    inside = Path.cwd().resolve().is_relative_to(run_root) and target.is_relative_to(run_root)
    shown = target.relative_to(run_root).as_posix() if inside else str(target)
    print(f"wrote {target}: {len(runs) - len(left_out)} runs on data set {choice.dataset} ({choice.folder})")
    if left_out:
        print(f"left out (they need gold this data set lacks; the file says why): {', '.join(left_out)}")
    if not choice.loaded:
        manifest = FOLDERS[PUBLICATIONS[choice.dataset].folders[0]]
        fetch = f"`ragtrial datasets download {choice.dataset} --to {choice.folder}` fetches it"
        print(f"{choice.folder} is not there yet: {manifest.instead or fetch}")
    if not endpoint.embedded and not os.environ.get(endpoint.api_key_env):
        print(f"note: ${endpoint.api_key_env} is not set here; set it to the endpoint's key before the run")
    defaults = Settings()
    print("next:")
    print(f"  ragtrial check {shown}    # every setting, name, path and the endpoint, before any model call")
    print(f"  ragtrial run {shown}      # the reports: {outputs_dir(run_root) / 'index.html'}")
    print(
        f"the index is built in {output_path(defaults.index.store_path, run_root)} (index.store_path), the "
        f"model's replies cached in {cache_location(defaults.cache, run_root)} (cache.url)"
    )
