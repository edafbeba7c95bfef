"""`kvforensics bench --mix both`: the short and the long mix, each ledger of about N events,
their analyses timed alternately, so that the long mix's cost per event over the short one's
is measured at the same pace of the machine.

Both ledgers are made and ingested first. Then each round times the short mix's analysis and
scan floor, then the long mix's; with --repeat N there are N rounds. The ratio is taken round
by round (the long run over the short run just before it, per event), and its median is the
figure: two runs a few seconds apart share the machine's pace, which can move by a third
between runs minutes apart."""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, replace
from typing import Any

from forensics.base.progress import ProgressFn, no_progress
from forensics.bench.measure import Measured
from forensics.bench.run import (
    BenchOptions,
    BenchResult,
    check_options,
    finished,
    prepared,
    timed_round,
    work_folder,
)
from forensics.bench.stages import MIXES
from forensics.options import Mix

PAIRED = (Mix.SHORT.value, Mix.LONG.value)  # the order of a round's analyses


@dataclass(frozen=True)
class PairResult:
    short: BenchResult
    long: BenchResult

    def per_event_ratios(self, cpu: bool = False) -> list[float]:
        """Each round's long-mix analysis cost per event over the short mix's (wall, or CPU)."""
        return [
            (_cost(lo, cpu) / self.long.events) / (_cost(sh, cpu) / self.short.events)
            for sh, lo in zip(self.short.runs["analyze"], self.long.runs["analyze"], strict=True)
            if _cost(sh, cpu) > 0 and self.long.events and self.short.events
        ]

    def to_json(self) -> dict[str, Any]:
        wall, cpu = self.per_event_ratios(), self.per_event_ratios(cpu=True)
        return {
            "mix": Mix.BOTH.value,
            "repeat": len(wall),
            "long_over_short_per_event": _median(wall),
            "long_over_short_per_event_cpu": _median(cpu),
            "long_over_short_rounds": [round(r, 3) for r in wall],
            "short": self.short.to_json(),
            "long": self.long.to_json(),
        }


def _cost(m: Measured, cpu: bool) -> float:
    return m.cpu_seconds if cpu else m.seconds


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def run_pair(options: BenchOptions, progress: ProgressFn = no_progress) -> PairResult:
    """Both mixes at about options.events events each (options.mix is `both`), in two folders
    of one work folder."""
    check_options(options, (*MIXES, Mix.BOTH.value))
    root = work_folder(options.workdir)
    try:
        results = {}
        for mix in PAIRED:
            results[mix] = prepared(replace(options, mix=mix), root / mix, _tagged(progress, mix))
        for _ in range(options.repeat):
            for mix in PAIRED:
                timed_round(results[mix], root / mix, _tagged(progress, mix))
        for mix in PAIRED:
            finished(results[mix], root / mix, _tagged(progress, mix))
        return PairResult(results[Mix.SHORT.value], results[Mix.LONG.value])
    finally:
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)


def _tagged(progress: ProgressFn, mix: str) -> ProgressFn:
    """progress with each phase named after its mix."""

    def tagged(phase: str, done: int, total: int | None) -> None:
        progress(f"{mix} mix: {phase}", done, total)

    return tagged
