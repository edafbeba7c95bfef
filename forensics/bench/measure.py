"""Run one stage in a child process and measure it: wall time, CPU time and peak memory.

Each stage runs in its own process so its peak resident memory is its own: the high-water mark
of the stage's own memory (Linux's VmHWM). Not ru_maxrss, which a spawned process inherits
from the one that started it (Linux keeps it across the exec), so that every stage smaller than
the bench process would report the bench process's size. CPU time counts the worker processes a
stage waited for (the log parser's); their memory (about 15 MiB each) is not in the peak, since
theirs too is floored by the stage's own."""

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
    queue.put((seconds, cpu, own_peak_mb(), result, error))


def own_peak_mb() -> float:
    """This process's peak resident memory in MiB: VmHWM where /proc has it, else ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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
