"""Where each upstream system's Python lives: the kit's own environment when the system's pins fit
it (LightRAG), else a virtual environment of its own, created on first use (or by
`ragtrial systems install NAME`) and cached under `$RAGTRIAL_SYSTEMS_HOME` (default
`~/.cache/ragtrial/systems`), one folder per (system, pinned requirements, Python version), so a
change of pins builds a new environment and never edits one in use.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from ragtrial.locks import FolderLock
from ragtrial.registry import Registry

WORKERS = Path(__file__).parent / "workers"
READY = "ragtrial-ready.json"  # written last: a folder without it is an unfinished install
SYSTEMS_RECORD = "systems.json"  # in a run folder: the systems a run used; the runner puts it in run.json


@dataclass(frozen=True)
class SystemSpec:
    distribution: str  # the PyPI distribution whose version run.json records
    requirements: tuple[str, ...]  # pip requirements of its environment (empty: the kit's own)
    worker: str  # the worker script in `workers/`

    @property
    def isolated(self) -> bool:
        return bool(self.requirements)


SYSTEMS: Registry[SystemSpec] = Registry("system")
SYSTEMS.add(
    "graphrag",
    SystemSpec("graphrag", ("graphrag==3.3.0",), "graphrag_worker.py"),
    "Microsoft GraphRAG 3.3.0 (pins pandas~=3.0, numpy~=2.4 and litellm: its own environment)",
    published="https://pypi.org/project/graphrag/",
)
SYSTEMS.add(
    "lightrag",
    SystemSpec("lightrag-hku", (), "lightrag_worker.py"),
    "LightRAG (lightrag-hku 1.5.7, installed with the kit: its pins fit the kit's environment)",
    published="https://pypi.org/project/lightrag-hku/",
)
SYSTEMS.add(
    "fast_graphrag",
    SystemSpec("fast-graphrag", ("fast-graphrag==0.0.5", "sentencepiece==0.2.1"), "fast_graphrag_worker.py"),
    "fast-graphrag 0.0.5 (needs openai<2 and instructor<2; imports only with sentencepiece==0.2.1)",
    published="https://pypi.org/project/fast-graphrag/",
)


class SystemNotInstalled(RuntimeError):
    """An isolated system's environment is missing and installing it was not allowed, or failed."""


def systems_home() -> Path:
    return Path(os.environ.get("RAGTRIAL_SYSTEMS_HOME") or Path.home() / ".cache" / "ragtrial" / "systems")


def environment_folder(name: str) -> Path:
    """The cached environment of system `name`: its pins and this Python's version name it."""
    spec = SYSTEMS.get(name)
    identity = json.dumps([spec.requirements, platform.python_version()])
    return systems_home() / f"{name}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def environment_python(folder: Path) -> Path:
    return folder / "bin" / "python"


def is_installed(name: str) -> bool:
    spec = SYSTEMS.get(name)
    return not spec.isolated or (environment_folder(name) / READY).is_file()


def install(name: str, *, force: bool = False) -> Path:
    """Create (or, with `force`, re-create) system `name`'s environment; its Python. Concurrent
    installs of one system wait for each other; an unfinished folder is built again from scratch.
    """
    spec = SYSTEMS.get(name)
    if not spec.isolated:
        return Path(sys.executable)
    folder = environment_folder(name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FolderLock(folder.parent / f"{folder.name}.lock", wait=True):
        if (folder / READY).is_file() and not force:
            return environment_python(folder)
        venv.EnvBuilder(clear=True, with_pip=True).create(folder)
        log = folder / "install.log"
        python = environment_python(folder)
        with log.open("w") as out:
            for command in (
                [str(python), "-m", "pip", "install", "--upgrade", "pip"],
                [str(python), "-m", "pip", "install", *spec.requirements],
                [
                    str(python),
                    "-c",
                    f"import importlib.metadata as m; print(m.version({spec.distribution!r}))",
                ],
            ):
                if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                    raise SystemNotInstalled(
                        f"installing {name} failed at `{' '.join(command[2:])}`; see {log}"
                    )
        (folder / READY).write_text(json.dumps({"requirements": spec.requirements}))
        return python


def python_for(name: str, *, install_missing: bool = True) -> Path:
    """The interpreter that runs system `name`'s worker, installing its environment on first use
    unless `install_missing` is off (then a missing one names the command that installs it).
    """
    spec = SYSTEMS.get(name)
    if not spec.isolated:
        return Path(sys.executable)
    if is_installed(name):
        return environment_python(environment_folder(name))
    if not install_missing:
        raise SystemNotInstalled(
            f"{name} has no environment in {systems_home()}: run `ragtrial systems install {name}` "
            "(or set systems.install: lazy)"
        )
    return install(name)


def worker_script(name: str) -> Path:
    return WORKERS / SYSTEMS.get(name).worker
