"""Run one stage in a child process and measure it: wall time, CPU time and peak memory.

Each stage runs in its own process so its peak resident memory is its own (a process's
ru_maxrss only ever grows). CPU time counts the worker processes a stage waited for; peak memory
adds the largest of them to the stage's own."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Measured:
    name: str
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    result: dict[str, Any]
    error: str | None = None

    @property
    def cores_busy(self) -> float:
        """Average number of cores kept busy (CPU time / wall time)."""
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0


def _child(fn: Callable[..., dict[str, Any]], args: tuple[Any, ...], queue: Any) -> None:
    started = time.perf_counter()
    cpu0 = _cpu_all_threads()
    try:
        result, error = fn(*args), None
    except Exception as exc:  # reported to the parent, which prints it
        result, error = {}, f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    cpu = _cpu_all_threads() - cpu0
    own, workers = (resource.getrusage(who) for who in _WHO)
    peak_mb = (own.ru_maxrss + workers.ru_maxrss) / 1024  # the largest worker beside the stage
    queue.put((seconds, cpu, peak_mb, result, error))


# The stage's process, and the worker processes it started and waited for (the log parser's).
_WHO = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)


def _cpu_all_threads() -> float:
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, _WHO))


def measure(
    name: str, fn: Callable[..., dict[str, Any]], *args: Any, timeout: float | None = None
) -> Measured:
    """Run fn(*args) in a fresh process; a timeout ends it and records why."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, queue))
    started = time.perf_counter()
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return Measured(
            name, time.perf_counter() - started, 0.0, 0.0, {}, f"stopped after {timeout:.0f} s"
        )
    if queue.empty():
        return Measured(
            name,
            time.perf_counter() - started,
            0.0,
            0.0,
            {},
            f"the stage's process ended with code {proc.exitcode}",
        )
    seconds, cpu, peak, result, error = queue.get()
    return Measured(name, seconds, cpu, peak, result, error)
