"""The project's side of the allocator driver: one long-lived process in the engines' virtual
environment per run, requests batched over its pipes (frees are sent with the next allocation).

The environment is the one scripts/engines_venv.sh builds: KVFORENSICS_ENGINES_VENV, else
.venv-engines at the top of the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from forensics.errors import UsageError

DRIVER = Path(__file__).with_name("allocator_driver.py")
KINDS = ("sglang", "sglang-token", "vllm", "vllm-sched")


def engines_python() -> Path:
    """The engines environment's python, or a UsageError that says how to build it."""
    root = Path(__file__).resolve().parents[2]
    venv = Path(os.environ.get("KVFORENSICS_ENGINES_VENV", root / ".venv-engines"))
    python = venv / "bin" / "python"
    if not python.is_file():
        raise UsageError(
            f"the real engines' environment is missing ({python} not found); build it with "
            "scripts/engines_venv.sh, or point KVFORENSICS_ENGINES_VENV at one"
        )
    return python


class EngineAllocators:
    """Pools of real engine allocators in one driver process."""

    def __init__(self, python: Path | None = None):
        self._err: IO[bytes] = tempfile.TemporaryFile()
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "TQDM_DISABLE": "1"}
        self._proc = subprocess.Popen(
            [str(python or engines_python()), str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
        )
        self._pending: list[str] = []
        self._pools = 0

    def _send(self, line: str) -> None:
        self._pending.append(line)

    def _ask(self, line: str) -> str:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._pending.append(line)
        try:
            self._proc.stdin.write("".join(self._pending))
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass
        self._pending.clear()
        reply = self._proc.stdout.readline()
        if not reply:
            self._err.seek(0)
            tail = self._err.read().decode(errors="replace").strip()[-600:]
            raise UsageError(f"the engine allocator driver stopped: {tail}")
        return reply.strip()

    def versions(self) -> dict[str, str | None]:
        """The engine packages' versions in the driver's environment."""
        out: dict[str, str | None] = json.loads(self._ask("V\n"))
        return out

    def new_pool(
        self, kind: str, n_pages: int, page_size: int, need_sort: bool, *config: int
    ) -> int:
        """A fresh allocator over pages 1 .. n_pages-1; returns its pool number. config:
        vllm-sched's max_num_seqs, max_num_batched_tokens, chunked prefill and prefix caching
        (1 or 0 each)."""
        if kind not in KINDS:
            raise UsageError(f"unknown engine allocator '{kind}'; known: {', '.join(KINDS)}")
        pool = self._pools
        self._pools += 1
        extra = "".join(f" {int(c)}" for c in config)
        self._send(f"N {pool} {kind} {n_pages} {page_size} {int(need_sort)}{extra}\n")
        return pool

    def alloc(self, pool: int, k: int) -> list[int] | None:
        """k pages in the order the engine hands them out, or None when too few are free."""
        reply = self._ask(f"A {pool} {k}\n")
        return None if reply == "-" else [int(p) for p in reply.split()]

    def alloc_many(self, pool: int, ks: list[int]) -> list[list[int] | None]:
        """alloc(pool, k) for each k in turn, in one exchange with the driver."""
        if not ks:
            return []
        reply = self._ask(f"M {pool} {' '.join(map(str, ks))}\n")
        return [None if a == "-" else [int(p) for p in a.split()] for a in reply.split(",")]

    def free(self, pool: int, pages: list[int]) -> None:
        """Give these pages back in one call, in this order (sent with the next request)."""
        if pages:
            self._send(f"F {pool} {' '.join(map(str, pages))}\n")

    def clone(self, pool: int) -> int:
        """A copy of an sglang or vllm pool, with its free list in the same state; returns
        the copy's pool number."""
        new = self._pools
        self._pools += 1
        self._send(f"C {pool} {new}\n")
        return new

    def key(self, pool: int) -> str:
        """A digest of the pool's state: pools with equal digests answer every later
        allocation alike."""
        return self._ask(f"K {pool}\n")

    def drop(self, pool: int) -> None:
        """Forget a pool (sent with the next request)."""
        self._send(f"D {pool}\n")

    def add(self, pool: int, rid: str, stub: bool, n_out: int, prompt: list[int]) -> None:
        """vllm-sched: a request arrives with these prompt token ids (sent with the next)."""
        self._send(f"R {pool} {rid} {int(stub)} {n_out} {' '.join(map(str, prompt))}\n")

    def peek(self, pool: int, prompt: list[int]) -> int:
        """vllm-sched: the prefix-cache hit tokens this prompt would get now."""
        return int(self._ask(f"Q {pool} {' '.join(map(str, prompt))}\n"))

    def steps(self, pool: int, k: int) -> list[dict[str, list[Any]]]:
        """vllm-sched: run k engine steps; per step the requests scheduled for the first time
        ([id, computed tokens, blocks]), the blocks running ones added ([id, blocks]), and the
        ids that got their first token, finished, or were preempted."""
        out: list[dict[str, list[Any]]] = json.loads(self._ask(f"T {pool} {k}\n"))
        return out

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
            self._proc.wait(timeout=60)
        self._err.close()

    def __enter__(self) -> EngineAllocators:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
