"""What `bench` measures of a stage run in its own process: its own peak memory, not the bench
process's, and the CPU time of the workers it waited for."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

from forensics.bench.measure import measure

BIG = 400 << 20  # what the process that starts the stage holds


def small_stage() -> dict[str, Any]:
    return {"held": 0}


def stage_with_a_worker() -> dict[str, Any]:
    worker = mp.get_context("spawn").Process(target=_busy, args=(0.6,))
    worker.start()
    worker.join()
    return {}


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_stage_reports_its_own_peak_not_its_starters() -> None:
    held = bytearray(BIG)
    held[:: 1 << 12] = b"\1" * (BIG >> 12)  # every page resident
    m = measure("small", small_stage)
    assert m.error is None and m.result == {"held": 0}
    assert m.peak_rss_mb < 150, m.peak_rss_mb  # the stage is a bare interpreter, not 400 MiB
    del held


def test_a_stage_counts_the_cpu_of_its_workers() -> None:
    m = measure("worker", stage_with_a_worker)
    assert m.error is None
    assert m.cpu_seconds >= 0.5, m.cpu_seconds
