"""A worker for the boundary tests only: speaks the protocol (lib/ragtrial/methods/upstream/workers/
protocol.py) with scripted behaviours: echo, fail, print to stdout, die, hang.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1] / "lib" / "ragtrial" / "methods" / "upstream" / "workers")
)
import protocol  # noqa: E402


def echo(payload):
    print("a library's stray print goes to stderr, not into the protocol")
    return {
        "echo": payload.get("value"),
        "env_key": os.environ.get("OPENAI_API_KEY", ""),
        "secret_seen": "RAGTRIAL_TEST_SECRET" in os.environ,
    }


def fail(payload):
    raise ValueError("scripted failure")


def die(payload):
    sys.stderr.write("dying now\n")
    sys.stderr.flush()
    os._exit(3)


def hang(payload):
    time.sleep(60)
    return {}


protocol.serve(
    {
        "hello": lambda p: {"system": "test", "version": "0", "python": sys.version.split()[0]},
        "echo": echo,
        "fail": fail,
        "die": die,
        "hang": hang,
    }
)
