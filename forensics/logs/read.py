"""Read a set of log files into a LogsSummary (no database): the core of `audit-logs` and of
the case loader."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import groupby
from pathlib import Path

from forensics.logs import evidence
from forensics.logs.audit import audit_node
from forensics.logs.counters import FileCounters
from forensics.logs.naming import LogFile, classify
from forensics.logs.parse import FileResult, parse_file
from forensics.logs.summary import FileSummary, LogsSummary

PARALLEL_BYTES = 8 << 20  # 8 MiB of log files, about half a second of parsing on one core


def read_logs(
    paths: list[tuple[Path, str, str]],
    node_map: list[tuple[str, str]] | None = None,
    parallel_bytes: int | None = None,
) -> LogsSummary:
    """Parse (path, name for naming, name shown) triples; one NodeAudit per node, sorted."""
    results = parse_files(classify(paths, node_map or []), parallel_bytes)
    nodes = [
        audit_node(node, list(group)) for node, group in groupby(results, key=lambda r: r.file.node)
    ]
    rows, dropped = evidence.dedupe([e for r in results for e in r.evidence])
    rows = evidence.fill_rooms(rows, _rooms(results))
    files = sorted((FileSummary.of(r) for r in results), key=lambda f: f.file)
    counters = sorted(
        (FileCounters.of(r) for r in results if r.prefill_counts or r.stats), key=lambda c: c.file
    )
    return LogsSummary(files, nodes, rows, dropped, counters=counters)


def parse_files(files: list[LogFile], parallel_bytes: int | None = None) -> list[FileResult]:
    """Each file parsed, in the order given. With more than one core and at least
    `parallel_bytes` of files (PARALLEL_BYTES by default), in worker processes, one per core,
    largest file first; below that, starting the workers would cost more than they save."""
    threshold = PARALLEL_BYTES if parallel_bytes is None else parallel_bytes
    sizes = [_size(f.path) for f in files]
    workers = min(len(files), _cores())
    if workers < 2 or sum(sizes) < threshold:
        return [parse_file(f) for f in files]
    spawn = multiprocessing.get_context("spawn")  # never fork a process that holds DuckDB threads
    try:
        with ProcessPoolExecutor(
            workers, mp_context=spawn, initializer=exit_with_parent, initargs=(os.getpid(),)
        ) as pool:
            started = {
                i: pool.submit(parse_file, files[i])
                for i in sorted(range(len(files)), key=lambda i: -sizes[i])
            }
            return [started[i].result() for i in range(len(files))]
    except (BrokenProcessPool, OSError):  # no worker could start, or one was killed
        return [parse_file(f) for f in files]


def exit_with_parent(parent: int) -> None:
    """In a worker: end it once the process that started it is gone (killed in the middle of
    an ingest, say), instead of leaving it to wait for work that never comes."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="kvforensics-parent-watch", daemon=True).start()


PARENT_CHECK_S = 0.5


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # parse_file reports an unreadable file with its reason


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def _rooms(results: list[FileResult]) -> dict[tuple[str, int], str]:
    rooms: dict[tuple[str, int], str] = {}
    for res in results:
        for room, rid in res.rooms.items():
            rooms.setdefault((res.file.node, room), rid)
    return rooms
