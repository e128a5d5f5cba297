"""A real PostgreSQL server for the tests, started from the machine's PostgreSQL binaries.

`running_postgres()` makes a cluster in a fresh temporary folder (initdb; password authentication,
a random password for the superuser `postgres`), starts it on 127.0.0.1 on a free port with no Unix
socket, and stops and removes it afterwards. initdb and the server refuse to run as root: as root
they run as the `postgres` user (Debian's package creates it), on a folder that user owns.
Durability is off (fsync, synchronous commit): a test server loses nothing it needs.

The conftest fixtures `postgres_server` (one per session) and `postgres_url` (a fresh database per
test) serve any test of a PostgreSQL backend. Without PostgreSQL on the machine the fixture fails,
saying what to install: it never skips.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

SUPERUSER = "postgres"
SERVER_USER = "postgres"  # the system user initdb and the server run as when the tests run as root
START_TIMEOUT_S = 60


def server_binaries() -> Path:
    """The folder of initdb and pg_ctl: the newest /usr/lib/postgresql/<version>/bin, else $PATH's."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for folder in reversed(versions):
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin or on PATH: "
        "install the `postgresql` package (apt-get install postgresql; .ci/run does) to run the "
        "PostgreSQL cache tests"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One running cluster: its port, superuser password, and the databases made in it."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.data = folder / "data"
        self.log = folder / "server.log"
        self.bin = server_binaries()
        self.password = secrets.token_hex(12)
        self.host = "127.0.0.1"
        self.port = 0
        self._as_root = os.geteuid() == 0
        self._made = 0

    def url(self, database: str = "postgres", user: str = SUPERUSER, password: str | None = None) -> str:
        password = self.password if password is None else password
        return f"postgresql://{user}:{password}@{self.host}:{self.port}/{database}"

    def _run(self, *command: str) -> None:
        """A server binary, as the server's user when the tests run as root; fails with its output."""
        prefix = ["runuser", "-u", SERVER_USER, "--"] if self._as_root else []
        done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(command)} failed ({done.returncode}): {done.stderr or done.stdout}{log}"
            )

    def init(self) -> None:
        if self._as_root:
            shutil.chown(self.folder, SERVER_USER)
        password_file = self.folder / "password"
        password_file.write_text(self.password)
        if self._as_root:
            shutil.chown(password_file, SERVER_USER)
        try:
            self._run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            )
        finally:
            password_file.unlink()

    def start(self) -> None:
        self.port = free_port()
        options = (
            f"-c listen_addresses={self.host} -p {self.port} -c unix_socket_directories='' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "start",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-o",
            options,
        )

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w")

    def create_database(self, prefix: str = "test") -> str:
        """A new empty database; its URL."""
        self._made += 1
        name = f"{prefix}_{self._made}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    folder = Path(tempfile.mkdtemp(prefix="ragtrial-postgres-"))
    server = PostgresServer(folder)
    try:
        server.init()
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
