"""A real Ray cluster on this machine for the tests: a head node and one worker node, each a
`ray start --block` process on 127.0.0.1 with one CPU and a small object store, stopped by the
fixture (its own processes, by process group) when the tests are done."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STORE_BYTES = 100 * 1024 * 1024
# Ray's memory resource per node: less than any sweep task asks for
# (forensics.analysis.budget.task_need), so every task runs through the cap to the largest
# node (forensics.base.raytasks.task_memory) and one at a time per node.
NODE_MEMORY = 64 * 1024 * 1024
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 2.0


def cluster_env() -> dict[str, str]:
    """Environment for the cluster's processes and its drivers: a token that only they know,
    and every address kept on the loopback interface (Ray otherwise swaps 127.0.0.1 for the
    machine's own address)."""
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    ray = Path(sys.executable).with_name("ray")
    return str(ray) if ray.exists() else (shutil.which("ray") or "ray")


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                _ray_cli(),
                "start",
                "--block",
                "--disable-usage-stats",
                "--num-cpus",
                "1",
                "--object-store-memory",
                str(STORE_BYTES),
                "--memory",
                str(NODE_MEMORY),
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=STOP_TIMEOUT_S)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


@contextmanager
def local_cluster(extra_env: dict[str, str]) -> Iterator[str]:
    """Start a head and a worker node on 127.0.0.1 with extra_env (cluster_env()); yields the
    head's address."""
    tmp = Path(tempfile.mkdtemp(prefix="kvf-ray-"))
    env = {**os.environ, **extra_env}
    port = free_port()
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            _start(
                [
                    "--head",
                    "--node-ip-address",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--include-dashboard",
                    "false",
                    "--temp-dir",
                    str(tmp / "ray"),
                ],
                env,
                tmp / "head.log",
            )
        )
        _wait(tmp / "head.log", procs[-1])
        procs.append(
            _start(
                ["--address", address, "--node-ip-address", "127.0.0.1"], env, tmp / "worker.log"
            )
        )
        _wait(tmp / "worker.log", procs[-1])
        yield address
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _wait(log: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until `ray start` says the node runs (it prints this once the node has joined)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and b"Ray runtime started" in log.read_bytes():
            return
        time.sleep(0.2)
    text = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"the local Ray node did not start:\n{text}")
