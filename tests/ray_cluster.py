"""A real Ray cluster on 127.0.0.1, for tests and benchmarks only: a head node and `nodes - 1` worker
nodes, each a `ray start --block` process of its own (its raylet and workers below it) with
`cpus_per_node` CPUs, in a temporary folder of their own; every port the nodes listen on is a free
one picked here, so the cluster meets no other Ray on the machine.

`kill_node(n)` kills node n (n >= 1, a worker node) as a machine dies: every process of it at once
(SIGKILL), the notebook kernels its tasks started included. Leaving the `with` block stops every
node (SIGTERM, then SIGKILL for what is left) and removes the folder: nothing is left running.

Test-side code beside `latency_server.py`: `bench/ray_batch.py` starts clusters with it too.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

STARTED = "Ray runtime started."
CLUSTER_CPUS = re.compile(r"[\d.]+/([\d.]+) CPU")  # `ray status`: "0.0/2.0 CPU" in use / total
START_TIMEOUT_S = 120.0


def node_address(n: int) -> str:
    """Node n's own loopback address: Ray replaces 127.0.0.1 by the machine's outward address."""
    return f"127.0.0.{n + 2}"


HEAD_ADDRESS = node_address(0)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


TEST_KEY_ENV = "RAGTRIAL_RAY_TEST_KEY"
# The head marks a node dead after 3 missed health checks a second apart (Ray's defaults: 5, 3 s apart,
# after 5 s): a killed node's tasks are retried elsewhere ~10 s sooner, on loopback where no check is
# missed but for a dead node.
HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 1000,
    "health_check_failure_threshold": 3,
}


class LocalRayCluster:
    def __init__(self, nodes: int = 2, cpus_per_node: int = 1):
        self.n_nodes, self.cpus_per_node = nodes, cpus_per_node
        # an API key every node has in its environment (as `ray start` gives a real cluster's nodes
        # theirs), under TEST_KEY_ENV: a run may name it in llm.api_key_env
        self.test_key = "sk-ray-test-" + secrets.token_hex(12)

    def __enter__(self) -> LocalRayCluster:
        # Ray gives a starting node 30 s to register, which a loaded 2-core machine (make test's other
        # worker) can exceed: a start that fails is cleaned up and made once more, on fresh ports.
        try:
            return self._start_cluster()
        except RuntimeError as first:
            print(f"the Ray cluster did not start, starting it once more: {first}", file=sys.stderr)
            return self._start_cluster()

    def _start_cluster(self) -> LocalRayCluster:
        self.nodes: list[subprocess.Popen] = []
        self.killed: set[int] = set()
        self.folder = Path(tempfile.mkdtemp(prefix="rt-ray-", dir="/tmp"))  # short: socket paths live here
        self.port = free_port(HEAD_ADDRESS)
        self.address = f"{HEAD_ADDRESS}:{self.port}"
        try:
            self._start(
                "--head",
                f"--port={self.port}",
                f"--temp-dir={self.folder}",
                "--include-dashboard=false",
                f"--dashboard-port={free_port()}",
                f"--system-config={json.dumps(HEALTH_CHECKS)}",
            )
            for _ in range(self.n_nodes - 1):
                self._start(f"--address={self.address}")
            self._wait_for_every_node()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_for_every_node(self) -> None:
        """Until the GCS counts every node's CPUs: a node says it started before its raylet has
        registered, and a test that then asks for work on both nodes saw one (under load).
        """
        deadline, said = time.monotonic() + START_TIMEOUT_S, ""
        while time.monotonic() < deadline:
            status = subprocess.run(
                [str(Path(sys.executable).with_name("ray")), "status", f"--address={self.address}"],
                capture_output=True,
                text=True,
            )
            said = status.stdout + status.stderr
            total = CLUSTER_CPUS.search(said)
            if total and float(total.group(1)) >= self.n_nodes * self.cpus_per_node:
                return
            time.sleep(1)
        raise RuntimeError(f"not every ray node registered: {said[-500:]}")

    def _start(self, *arguments: str) -> None:
        command = [
            str(Path(sys.executable).with_name("ray")),
            "start",
            *arguments,
            f"--node-ip-address={node_address(len(self.nodes))}",
            f"--num-cpus={self.cpus_per_node}",
            "--num-gpus=0",
            "--disable-usage-stats",
            f"--node-manager-port={free_port()}",
            f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            "--block",
        ]
        environment = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", TEST_KEY_ENV: self.test_key}
        node = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
            start_new_session=True,
        )
        self.nodes.append(node)
        deadline, said = time.monotonic() + START_TIMEOUT_S, []
        while time.monotonic() < deadline:
            line = node.stdout.readline()
            if not line:
                break
            said.append(line.rstrip())
            if STARTED in line:
                # what it says from now on is not read: a thread keeps its pipe from filling up
                _drain(node)
                return
        raise RuntimeError(f"ray node {len(self.nodes) - 1} did not start: " + "\n".join(said[-20:]))

    def kill_node(self, n: int) -> None:
        """Node n (a worker node) dies at once, every process of it."""
        if n < 1:
            raise ValueError("node 0 is the head: killing it ends the cluster")
        node = self.nodes[n]
        processes = _tree(node.pid)
        for process in processes:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        node.wait(30)
        self.killed.add(n)

    def node_pids(self, n: int) -> set[int]:
        """The pids of node n's processes now (its `ray start` and everything below it)."""
        return {p.pid for p in _tree(self.nodes[n].pid)}

    def __exit__(self, *exc: object) -> None:
        for n, node in reversed(list(enumerate(self.nodes))):
            if n in self.killed:
                continue
            processes = _tree(node.pid)
            node.send_signal(signal.SIGTERM)  # `ray start --block` stops its node's processes
            try:
                node.wait(60)
            except subprocess.TimeoutExpired:
                pass
            _, alive = psutil.wait_procs([p for p in processes if p.is_running()], timeout=10)
            for process in alive:
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    pass
        shutil.rmtree(self.folder, ignore_errors=True)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _drain(node: subprocess.Popen) -> None:
    threading.Thread(target=lambda: [None for _ in node.stdout], daemon=True).start()
