"""Exclusive locks on folders that one process at a time may write: a run folder, an index build.

A lock is `fcntl.flock` on a lock file that also holds the holder's pid. The kernel releases a
flock when its holder dies, even by `kill -9`, so there is no stale lock to clean up; the pid in
the file is for messages and for telling a live `running` record from a dead one. The lock file is
never deleted (deleting it would let a second process lock a new file of the same name while the
first still holds the old one): whoever clears a locked folder keeps the lock file.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class LockHeld(RuntimeError):
    """Another process holds the lock; the message names it and the lock file."""

    def __init__(self, path: Path, pid: int | None):
        self.path, self.pid = path, pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(f"{path.parent} is in use by {holder} (lock file {path})")


def holder_pid(path: Path) -> int | None:
    """The pid written in a lock file, or None when there is none (never locked, or released)."""
    try:
        text = Path(path).read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def pid_alive(pid: object) -> bool:
    """Whether a process with this pid runs on this machine (False for no pid, and for a zombie: a
    killed process its parent has not reaped, as a container's init may never do).
    """
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    try:
        # the state follows the parenthesized command name, which may itself hold spaces or ")"
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): os.kill said it exists
    return state != "Z"


class FolderLock:
    """`with FolderLock(path):` holds the lock file `path` exclusively, as a context manager.

    `wait=False` raises `LockHeld` at once when another process holds it; `wait=True` blocks until
    it is free (`on_wait(holder pid)` is called once before blocking, to say why nothing happens).
    """

    def __init__(self, path: Path, wait: bool = False, on_wait=None):
        self.path, self.wait, self.on_wait = Path(path), wait, on_wait
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not self.wait:
                    raise LockHeld(self.path, holder_pid(self.path)) from None
                if self.on_wait is not None:
                    self.on_wait(holder_pid(self.path))
                fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)  # a released lock names no holder
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
