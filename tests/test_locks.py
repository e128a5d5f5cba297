"""Folder locks: exclusive, naming the holder, released by the kernel when the holder is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ragtrial.locks import FolderLock, LockHeld, holder_pid, pid_alive

# A process that takes the lock named by its argument and holds it until its input ends a line.
HOLD = (
    "import sys; from ragtrial.locks import FolderLock; FolderLock(sys.argv[1]).acquire(); "
    "print('held', flush=True); input()"
)


def test_a_held_lock_refuses_a_second_holder_naming_the_first(tmp_path):
    path = tmp_path / "run" / "run.lock"
    with FolderLock(path):
        assert holder_pid(path) == os.getpid()
        with pytest.raises(LockHeld, match=f"in use by process {os.getpid()} \\(lock file {path}\\)"):
            FolderLock(path).acquire()
    assert holder_pid(path) is None  # released: the file names no holder
    with FolderLock(path):  # and it can be taken again
        pass


def test_a_killed_holder_leaves_no_lock_behind(tmp_path):
    path = tmp_path / "run.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(LockHeld) as held:
        FolderLock(path).acquire()
    assert held.value.pid == holder.pid and pid_alive(holder.pid)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert holder_pid(path) == holder.pid and not pid_alive(holder.pid)  # its pid stays, the lock does not
    with FolderLock(path):
        assert holder_pid(path) == os.getpid()


def test_waiting_for_a_lock_says_who_holds_it(tmp_path):
    path = tmp_path / "index.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    waited_for = []

    def on_wait(pid):
        waited_for.append(pid)
        holder.stdin.write("\n")  # the holder exits, so the wait ends
        holder.stdin.flush()

    with FolderLock(path, wait=True, on_wait=on_wait):
        assert waited_for == [holder.pid]
    holder.wait(timeout=30)


@pytest.mark.fault
def test_a_killed_process_not_reaped_yet_is_not_alive():
    """A zombie (a killed kernel whose parent died, in a container whose init reaps nothing) looked
    alive, so a resumed run waited out the dead kernel's cache claim.
    """
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(child.pid):  # dead, and still not waited for: a zombie
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert os.waitpid(child.pid, os.WNOHANG)[0] == child.pid  # it was a zombie until now
    finally:
        child.kill()
        child.wait()
