"""The analysis tasks of a ledger kept outside the case database (forensics.analysis.partitions):
each partition's task arguments, read from what ingest recorded of its parts, and small
partitions merged into one task."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from forensics.base.arrow import whole_numpy
from forensics.casedb.dbopen import thread_share
from forensics.casedb.sql import sql
from forensics.ledger.external import runs_together
from forensics.ledger.store import part_views_of
from forensics.ledger.view import PartView


def largest_first(rows: list[int]) -> list[int]:
    """Partition indexes by their rows, largest first (ties in partition order)."""
    return sorted(range(len(rows)), key=lambda i: (-rows[i], i))


# A partition task's arguments before its memory limit, budget and spill folder: its parts, whether
# times without a zone are UTC, its quarantined rows, its parts' recorded digests and facts, its
# threads.
TaskArgs = tuple[list[PartView], bool, pa.Table, dict[str, tuple[str, int]], pa.Table | None, int]


def tasks_of(
    con: duckdb.DuckDBPyConnection, meta: dict[str, Any], ray: str | None, workers: int
) -> tuple[list[TaskArgs], list[int]]:
    """Each partition's task arguments and kept rows, in partition order. What ingest recorded
    of the parts is read in one query per table for all the partitions (a fleet's ledger has a
    partition per engine node: hundreds of queries would hold every task back)."""
    groups = by_node(part_views_of(con, meta))
    utc = bool(meta["assume_utc"])
    # Each task's DuckDB gets its share of the cores (a Ray task holds one CPU): tasks that each
    # use every core only contend for them (a fifth more CPU for the same work on two cores).
    threads = thread_share(workers) if ray is None else 1
    files = [p.file.rel for g in groups for p in g]
    params = {"files": files, "groups": [i for i, g in enumerate(groups) for _ in g]}
    quarantine = _by_partition(con, "ledger/partitions_quarantine", params, len(groups))
    facts: list[pa.Table | None] = [None] * len(groups)
    if "events" in con.sql(sql("ledger/files_columns")).columns:
        facts = list(_by_partition(con, "ledger/partitions_facts", params, len(groups)))
    recorded = {
        path: (sha, int(size), int(kept or 0))
        for path, sha, size, kept in con.execute(
            sql("ledger/partitions_digests"), {"files": files}
        ).fetchall()
    }
    args: list[TaskArgs] = []
    rows: list[int] = []
    for g, quarantined, recorded_facts in zip(groups, quarantine, facts, strict=True):
        mine = {p.file.rel: recorded[p.file.rel] for p in g if p.file.rel in recorded}
        args.append(
            (
                g,
                utc,
                quarantined,
                {path: (sha, size) for path, (sha, size, _) in mine.items()},
                recorded_facts,
                threads,
            )
        )
        rows.append(sum(kept for _, _, kept in mine.values()))
    return args, rows


# Partitions of fewer events than TASK_ROWS are swept together, a run of them in node order to
# a task, up to TASK_ROWS events and TASK_NODES nodes a task. A task's fixed cost (its
# connection, its views, some twenty statements each planned anew) is about 0.1 s, what
# sweeping a quarter of a million events costs: a fleet's ledger of hundreds of nodes of tens
# of thousands of events each paid it hundreds of times. A task still reads only its own
# partitions' parts, and sweeps, stores and returns each node's findings as before.
TASK_ROWS = 1 << 20
TASK_NODES = 32
TASK_SHARE = 4  # a task holds at most 1 / TASK_SHARE of a worker's share of the events


def grouped(
    args: list[TaskArgs], rows: list[int], workers: int
) -> tuple[list[TaskArgs], list[int]]:
    """The partitions' tasks with runs of small partitions merged, in partition order
    (forensics.ledger.external.runs_together)."""
    runs = runs_together(rows, TASK_ROWS, TASK_SHARE, workers, TASK_NODES)
    merged = [_merged([args[i] for i in run]) for run in runs]
    return merged, [sum(rows[i] for i in run) for run in runs]


def _merged(tasks: list[TaskArgs]) -> TaskArgs:
    """One task's arguments for the partitions of `tasks` (consecutive, in node order)."""
    if len(tasks) == 1:
        return tasks[0]
    facts = [t[4] for t in tasks]
    return (
        [p for t in tasks for p in t[0]],
        tasks[0][1],
        pa.concat_tables([t[2] for t in tasks]),
        {path: got for t in tasks for path, got in t[3].items()},
        None if any(f is None for f in facts) else pa.concat_tables(facts),
        tasks[0][5],
    )


def by_node(parts: list[PartView]) -> list[list[PartView]]:
    """The partitions: the parts grouped by node, in node order, each in path order."""
    out: dict[str, list[PartView]] = {}
    for p in parts:
        out.setdefault(p.file.node, []).append(p)
    return [out[n] for n in sorted(out)]


def _by_partition(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any], partitions: int
) -> list[pa.Table]:
    """The rows of query `name`, in partition order with the partition's index first, as one
    table per partition (without that column)."""
    rows = con.sql(sql(name), params=params).to_arrow_table()
    index = whole_numpy(rows.column("partition"))
    rows = rows.drop_columns(["partition"])
    bounds = np.searchsorted(index, np.arange(partitions + 1), side="left")
    return [rows.slice(lo, hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
