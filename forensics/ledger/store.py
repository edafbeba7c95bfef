"""The case database's side of a ledger kept outside it: check every partition (here, or as Ray
tasks), record what the checks found, and make `kv_events` a temporary view over the parts on
every connection (forensics.db.connect calls `attach`; this module never imports forensics.db)."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from forensics.base.arrow import column_of, from_numpy
from forensics.base.progress import ProgressFn, no_progress
from forensics.case.columns import seen_in_parts
from forensics.case.discover import Discovery
from forensics.case.result import FileCounts
from forensics.casedb.dbopen import (
    create_case_schema,
    database_file,
    ledger_outside,
    memory_limit_bytes,
    thread_share,
)
from forensics.casedb.scratch import ScratchDatabases
from forensics.casedb.sql import append_rows, literal, one_row, run, run_script, sql, template
from forensics.errors import first_line
from forensics.ledger.check import PartitionCheck, check_partition
from forensics.ledger.external import (
    LedgerFile,
    is_url,
    list_files,
    register_filesystems,
    resolve,
    runs_together,
)
from forensics.ledger.tasks import check_on_ray
from forensics.ledger.view import PartView, part_views, view_sql

META_KEY = "ledger_external"


@dataclass(frozen=True)
class ExternalLedger:
    """ingest --ledger-external: where the ledger is, and the Ray cluster to check it on."""

    location: str
    ray: str | None = None


def without_ledger(discovery: Discovery) -> Discovery:
    """The case's files less the kv_events ones (an external ledger is checked in place)."""
    return Discovery(
        discovery.case_dir,
        [f for f in discovery.files if f.table != "kv_events"],
        discovery.skipped,
    )


def partitions(files: list[LedgerFile]) -> list[list[LedgerFile]]:
    """The parts grouped by node, in node order."""
    by_node: dict[str, list[LedgerFile]] = defaultdict(list)
    for f in files:
        by_node[f.node].append(f)
    return [by_node[n] for n in sorted(by_node)]


def validate_ledger(
    con: duckdb.DuckDBPyConnection,
    case_dir: Path,
    location: str,
    assume_utc: bool,
    ray: str | None = None,
    progress: ProgressFn = no_progress,
    links: tuple[bool, list[tuple[str, str]]] = (False, []),
) -> list[FileCounts]:
    """Check the external ledger partition by partition and record the results in the case
    database (inside the caller's transaction; nodes and requests must be loaded). links:
    whether links outside the case are followed, and the list the parts not read go to."""
    files = list_files(case_dir, location, *links)
    groups = partitions(files)
    nodes = con.sql(sql("ledger/node_pools")).to_arrow_table()
    ids = con.sql(sql("ledger/request_ids")).to_arrow_table()
    if ray is None:
        checks = _check_here(con, groups, (nodes, ids), assume_utc, progress)
    else:
        checks = check_on_ray(ray, groups, nodes, ids, assume_utc, progress)
    for check in checks:
        append_rows(con, "quarantine", check.quarantine)
        append_rows(con, "ingest_warnings", check.warnings)
    _record_files(con, files, pa.concat_tables([check.facts for check in checks]))
    schemas = {rel: types for check in checks for rel, types in check.schemas.items()}
    seen_in_parts(con, "kv_events", {rel: list(types) for rel, types in schemas.items()})
    meta = {
        "location": resolve(case_dir, location),
        "columns": sorted({c for check in checks for c in check.columns}),
        "assume_utc": assume_utc,
        "schemas": schemas,
    }
    run_script(con, sql("ingest/case_meta_set"), {"key": META_KEY, "value": json.dumps(meta)})
    keep_outside(con, str(meta["location"]))
    attach(con)
    return [c for check in checks for c in check.counts]


# Partitions checked at once on this machine, each with its share of the cores and of the memory
# limit. On two cores, two checks of one DuckDB thread each keep the cores busier than one
# check of two: the 10.73 M-event bench ledger's checks took 0.5 s (a sixth) less.
CHECK_WORKERS = 2


def _check_here(
    con: duckdb.DuckDBPyConnection,
    groups: list[list[LedgerFile]],
    known: tuple[pa.Table, pa.Table],
    assume_utc: bool,
    progress: ProgressFn,
) -> list[PartitionCheck]:
    """check_partition for every partition on this machine (small ones together:
    checked_together), CHECK_WORKERS at once, the largest
    (by bytes, where the parts are local files) first; results in partition order. A check that
    fails does not stop the others, so that the failure reported is the first partition's that
    fails, whichever ends first. known: the node pools and the request ids."""
    case_file = database_file(con)  # the checks run here: they spill beside it
    groups = checked_together(groups, min(CHECK_WORKERS, len(groups)))
    workers = max(1, min(CHECK_WORKERS, len(groups)))
    share = (
        thread_share(workers),
        f"{max(1, memory_limit_bytes(con) // workers) >> 10}KiB",
    )
    starts = sorted(range(len(groups)), key=lambda i: (-sum(map(_local_bytes, groups[i])), i))
    found: dict[int, PartitionCheck] = {}
    progress("ledger", 0, len(groups))
    databases = ScratchDatabases(share[1], case_file)  # each thread's, for all its checks
    with (
        closing(databases),
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kvforensics-check") as pool,
    ):
        tasks = {
            pool.submit(
                check_partition, groups[i], *known, assume_utc, case_file, share, databases
            ): i
            for i in starts
        }
        failed: dict[int, Exception] = {}
        try:
            for done in as_completed(tasks):
                try:
                    found[tasks[done]] = done.result()
                except Exception as exc:  # raised below, in partition order
                    failed[tasks[done]] = exc
                progress("ledger", len(found) + len(failed), len(groups))
        except BaseException:  # an interrupt: the checks not yet started never start
            for task in tasks:
                task.cancel()
            raise
    if failed:
        raise failed[min(failed)]
    return [found[i] for i in range(len(groups))]


# Partitions of fewer bytes than CHECK_BYTES (about a million events) are checked together, a
# run of them in partition order to a check, up to CHECK_BYTES and CHECK_NODES nodes a check.
# DuckDB plans a check's statement (the ingest's validation nested in it) in 30 to 50 ms, what
# checking 100,000 events costs: a fleet's ledger of hundreds of small nodes paid that per node.
# Their parts are read in one scan where they share a schema with a node column
# (forensics.ledger.check.batches), each row checked against its own part's folder.
CHECK_BYTES = 16 << 20
CHECK_NODES = 32
CHECK_SHARE = 4  # a check holds at most 1 / CHECK_SHARE of a worker's share of the bytes


def checked_together(groups: list[list[LedgerFile]], workers: int) -> list[list[LedgerFile]]:
    """The partitions' parts as the checks that read them, in partition order: a large
    partition alone, runs of small ones together. Parts at a URL count as small (their size is
    not known without asking the store)."""
    sizes = [sum(map(_local_bytes, g)) for g in groups]
    runs = runs_together(sizes, CHECK_BYTES, CHECK_SHARE, workers, CHECK_NODES)
    return [[f for i in run for f in groups[i]] for run in runs]


def _local_bytes(f: LedgerFile) -> int:
    try:
        return 0 if is_url(f.url) else os.path.getsize(f.url)
    except OSError:
        return 0  # the check names a part it cannot read


def _record_files(con: duckdb.DuckDBPyConnection, files: list[LedgerFile], facts: pa.Table) -> None:
    """One row per part: where it is, its node and rank, and its facts (by part name)."""
    run_script(con, sql("ledger/files_create"))
    by_rel = {rel: i for i, rel in enumerate(facts.column("rel").to_pylist())}
    order = np.fromiter((by_rel[f.rel] for f in files), np.int64, len(files))
    taken = facts.drop_columns(["rel"]).take(from_numpy(order))
    where = {
        "url": column_of([f.url for f in files], pa.string()),
        "rel": column_of([f.rel for f in files], pa.string()),
        "node": column_of([f.node for f in files], pa.string()),
        "rank": column_of([f.rank for f in files], pa.int64()),
    }
    recorded = {name: taken.column(name) for name in taken.column_names}
    append_rows(con, "ledger_files", pa.table(where | recorded))


def ledger_meta(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """Where and how the case's ledger is kept outside the database; None when it is loaded."""
    try:
        rows = con.execute(sql("ledger/meta")).fetchall()
    except duckdb.Error:
        return None
    return json.loads(rows[0][0]) if rows and rows[0][0] else None


def ledger_loaded(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the case has a KV ledger: kept outside the database (known from its metadata,
    without reading its files, which may be remote or damaged) or loaded into it."""
    if ledger_meta(con) is not None:
        return True
    row = one_row(con.execute(sql("ledger/loaded")))
    return bool(row and row[0])


def ledger_files(con: duckdb.DuckDBPyConnection) -> list[LedgerFile]:
    rows = con.execute(sql("ledger/files_all")).fetchall()
    return [LedgerFile(url, rel, node, int(rank)) for url, rel, node, rank in rows]


def part_views_of(
    con: duckdb.DuckDBPyConnection, meta: dict[str, Any], files: list[LedgerFile] | None = None
) -> list[PartView]:
    """The case's ledger parts (`files`, when the caller has read them) as the kv_events view
    reads them."""
    files = ledger_files(con) if files is None else files
    return part_views(con, files, dict(meta.get("schemas") or {}))


def attach(con: duckdb.DuckDBPyConnection) -> None:
    """Make kv_events the view over the external ledger on this connection (nothing when the
    case's ledger is loaded)."""
    meta = ledger_meta(con)
    if meta is None:
        return
    files = ledger_files(con)
    if not files:
        return
    try:
        register_filesystems(con, [f.url for f in files])
        run_script(con, view_sql(part_views_of(con, meta, files), bool(meta["assume_utc"])))
    except (duckdb.Error, OSError, ImportError) as exc:
        why = first_line(exc).replace(";", ",")
        message = (
            f"the external ledger of this case ({meta['location']}) cannot be read "
            f"({why}): make it readable again, or ingest the case anew"
        )
        run(
            con,
            "ledger/refusing_view",
            view=template("TEMP VIEW kv_events"),
            message=literal(message),
        )


def keep_outside(con: duckdb.DuckDBPyConnection, location: str) -> None:
    """Make the case database's own kv_events a view that says where the ledger is when it is
    read, instead of a table that stays empty: a reader without kvforensics (the DuckDB CLI)
    would take that for a case without events."""
    if not ledger_outside(con):
        run_script(con, sql("ledger/drop_ledger_table"))
    message = (
        f"kv_events of this case is not in this file: its KV ledger is kept outside it, as the "
        f"Parquet parts at {location} that the table ledger_files lists (url; their counts and "
        f"checksums are in input_files); read them, or open the case with kvforensics, which "
        f"makes kv_events a view over them"
    )
    run(con, "ledger/refusing_view", view=template("VIEW main.kv_events"), message=literal(message))


def ledger_table(con: duckdb.DuckDBPyConnection) -> None:
    """Make the case database's own kv_events the table again where keep_outside left its view
    (before an ingest, which fills the table or replaces it by the view once more)."""
    if ledger_outside(con):
        run_script(con, sql("ledger/drop_outside_view"))
        create_case_schema(con)


def detach(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the temporary kv_events view (before an ingest replaces the case's inputs)."""
    run_script(con, sql("ledger/detach"))
