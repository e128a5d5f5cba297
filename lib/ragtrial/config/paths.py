"""Where the kit works: the project root, its notebooks, its outputs, and the settings paths under them.

- The **project root** is the folder a command works in: the nearest folder, from the working
  directory upward, that is a kit checkout (it has `notebooks/`) or a folder `ragtrial init` made (it
  has `ragtrial.yaml`); else the kit's own checkout (found from this package's location). Relative
  paths of settings (answer files, baselines) and batch files are read from it, and notebooks run
  with it as their working directory.
- The **notebooks** are the project root's `notebooks/` when it has them, else the kit checkout's.
- The **outputs folder** is `--outputs` when given, else `<project root>/outputs`. A run's kernel is
  told it in `OUTPUTS_ENV`, and a settings path that starts with `outputs/` (`cache.url`'s SQLite file,
  `index.store_path`) is resolved under it when used: `--outputs` moves the cache and the indexes
  with the runs, and the settings (so the run ids) stay the same.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragtrial.config.base import ParamsError

NOTEBOOKS_DIR = "notebooks"
WORKSPACE_FILE = "ragtrial.yaml"  # the batch `ragtrial init` writes into a folder of its own
OUTPUTS_DIR = "outputs"
OUTPUTS_ENV = "RAGTRIAL_OUTPUTS"


def kit_checkout() -> Path | None:
    """The checkout this package was installed from (an editable install: `<checkout>/lib/ragtrial`),
    when it holds the notebooks.
    """
    checkout = Path(__file__).resolve().parents[3]
    return checkout if (checkout / NOTEBOOKS_DIR).is_dir() else None


def is_project_root(folder: Path) -> bool:
    return (folder / NOTEBOOKS_DIR).is_dir() or (folder / WORKSPACE_FILE).is_file()


def project_root(start: str | Path | None = None) -> Path:
    """The project root for a command started in `start` (default: the working directory)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_project_root(folder):
            return folder
    checkout = kit_checkout()
    if checkout is None:
        raise ParamsError(
            f"no project root: neither {here} nor a folder above it has {NOTEBOOKS_DIR}/ or "
            f"{WORKSPACE_FILE}, "
            "and this installation of ragtrial is not a checkout with notebooks; run the command in the "
            "kit's checkout or in a folder `ragtrial init` made"
        )
    return checkout


def notebooks_dir(root: Path) -> Path:
    """The notebooks a project runs: its own, else the kit checkout's (a folder `init` made has none)."""
    own = Path(root) / NOTEBOOKS_DIR
    if own.is_dir():
        return own
    checkout = kit_checkout()
    if checkout is None:
        raise ParamsError(
            f"{root}: no {NOTEBOOKS_DIR}/ folder here, and ragtrial is not installed from a checkout"
        )
    return checkout / NOTEBOOKS_DIR


def outputs_dir(root: Path, outputs: str | Path | None = None) -> Path:
    """`outputs` (relative to the working directory) when given, else `<root>/outputs`; absolute."""
    return Path(outputs).expanduser().resolve() if outputs else (Path(root) / OUTPUTS_DIR).resolve()


def batch_file(value: str | Path, root: Path) -> Path:
    """A batch file named on the command line: as given when it exists (relative to the working
    directory), else relative to the project root (`ragtrial run params/default.yaml` from anywhere in
    the project); as given otherwise, so the error names what the user typed.
    """
    given = Path(value).expanduser()
    if given.exists() or given.is_absolute():
        return given
    under_root = Path(root) / given
    return under_root if under_root.exists() else given


def output_path(value: str | Path, root: str | Path | None = None, outputs: str | Path | None = None) -> Path:
    """A settings path as a location: absolute as given; `outputs/...` under the outputs folder
    (`outputs` when given, else $RAGTRIAL_OUTPUTS when set, else `<root>/outputs`); any other relative
    path under `root` (default: `project_root()`).
    """
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    base = Path(root) if root is not None else project_root()
    if path.parts and path.parts[0] == OUTPUTS_DIR:
        moved = outputs or os.environ.get(OUTPUTS_ENV, "").strip()
        return (Path(moved) if moved else base / OUTPUTS_DIR).joinpath(*path.parts[1:])
    return base / path
