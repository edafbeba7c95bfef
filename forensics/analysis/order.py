"""Put each node's events in their total order, run the compiled sweep per node, store what it
found.

DuckDB gives each node's events as integer columns (queries/analysis/sweep_input.sql: int codes
for requests and content hashes, the sort key, the event's key), which forensics.analysis.fetch
puts into the node's total order in compact arrays. The sweep runs per node on those arrays,
nodes in parallel threads (the compiled code releases the GIL), and while one node is swept the
next is fetched. What it found goes back into DuckDB: exposure and violation pieces naming
events by their key (kv_events.input_order) and per-request read counts, for the SQL in
queries/analysis/*.sql.
No per-event table is written, so the analysis costs one pass over the ledger plus the sweep.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from forensics.analysis.budget import DUCKDB_STREAM_SHARE, MemoryBudget, node_need, sweep_budget
from forensics.analysis.codes import OPS
from forensics.analysis.coverage import read_counts, run_numbers
from forensics.analysis.fetch import (  # noqa: F401  (re-exported names)
    FETCH_ROWS,
    NodeEvents,
    NodeInfo,
    events_of,
    fetch_batches,
    load_node,
    make_ledger_nodes,
    node_list,
)
from forensics.analysis.runfacts import (
    ExposurePieces,
    ExposureRuns,
    event_facts,
    exposure_pieces,
    fold_runs,
    runs_table,
)
from forensics.analysis.sweep import cells_of, sweep_cells_of, table_applies
from forensics.base.arrow import from_numpy, repeated
from forensics.base.progress import ProgressFn, no_progress
from forensics.casedb.sql import append_rows, run_script, sql


@dataclass(frozen=True)
class NodeFindings:
    """What the sweep found on one node, events named by key."""

    node: str
    # Exposure pieces in run order (forensics.analysis.runfacts), naming events by their keys
    exposures: ExposurePieces
    violations: np.ndarray  # [event key, violation, other request code or -1, slot_start, slot_end]
    read_counts: np.ndarray  # [request code, reads, distinct slots per category]


def make_codes(con: duckdb.DuckDBPyConnection, node: str | None = None) -> None:
    """Write work.analysis_request_codes and work.analysis_hash_codes (and, on the way,
    temp.analysis_request_nodes). node: kv_events holds only this node's events (a partition
    task)."""
    if node is None:
        run_script(con, sql("analysis/request_nodes"))
    else:
        run_script(con, sql("analysis/request_nodes_partition"), {"node": node})
    run_script(con, sql("analysis/codes"))


def prepare_pieces(con: duckdb.DuckDBPyConnection) -> None:
    """The request and hash codes, and empty tables for the sweep's pieces."""
    make_codes(con)
    run_script(con, sql("analysis/pieces_create"))


def find_on_node(ev: NodeEvents) -> NodeFindings:
    """Sweep one node and turn event positions into event keys and read counts. What the rest
    does not need is dropped as soon as it is used (a node can have tens of millions of
    events): the slot ranges once they are cells, the cells and content hashes once swept."""
    end, start = ev.slots.pop(), ev.slots.pop()
    cells = cells_of(start, end, in_place=True)
    del start, end
    content_hash, ev.content_hash = ev.content_hash, ev.content_hash[:0]
    ex, cat, vio = sweep_cells_of(ev.req, ev.op, cells, content_hash)
    bounds = cells.bounds
    del cells, content_hash
    order, run = run_numbers((ev.req[ex[:, 0]], ev.req[ex[:, 3]], ex[:, 4]), ex[:, 1], ex[:, 2])
    pieces = exposure_pieces(ex, order, run, ev.req)
    del order, run, ex
    return NodeFindings(
        ev.node,
        exposures=pieces._replace(named=ev.keys(pieces.named)),
        violations=np.column_stack(
            [ev.keys(vio[:, 0]), vio[:, 3], vio[:, 4], vio[:, 1], vio[:, 2]]
        ),
        read_counts=read_counts(ev.req, ev.op, cat, bounds),
    )


WARM_UP_NODE = "(warm-up)"  # the node name of warm_up's six events


def warm_up() -> None:
    """Sweep a node of six events, so that the compiled code is loaded (about a third of a
    second, the first time in a process) while DuckDB prepares the codes and lists the nodes.
    Its arrays have the usual types (int32 slots), so it loads what the first node will use."""
    op = np.array([OPS.index(o) for o in ("alloc", "write", "free")] * 2, np.int8)
    op[4] = OPS.index("read")  # the second request reads what the first left
    start = np.zeros(6, np.int32)
    req = np.repeat(np.arange(2, dtype=np.int32), 3)
    hashes = np.full(6, -1, np.int32)
    find_on_node(NodeEvents(WARM_UP_NODE, None, req, op, hashes, [start, start + 4]))


# A warm-up that takes longer than this is building the compiled code, not loading it.
COMPILE_NOTE_S = 2.0
COMPILE_NOTE = "compiling the sweep (once per installed version; a minute or so on 2 cores)"


def warming_up() -> Future[None]:
    """warm_up in a thread of its own, which ends with it: the caller goes on with its SQL and
    calls warmed_up before it waits for a sweep. A daemon thread: a run stopped by Ctrl-C while
    the compiled code is being built (a minute, the first time) ends at once, where a pool's
    thread would hold the process until the build ended (numba writes its cache files whole,
    so a build cut short leaves none)."""
    warmed: Future[None] = Future()

    def build() -> None:
        if not warmed.set_running_or_notify_cancel():
            return
        try:
            warm_up()
        except BaseException as exc:  # handed to whoever waits for it
            warmed.set_exception(exc)
        else:
            warmed.set_result(None)

    threading.Thread(target=build, name="kvforensics-warm-up", daemon=True).start()
    return warmed


def warmed_up(warming: Future[None], progress: ProgressFn) -> None:
    """Wait for warm_up. The first analysis after an install or upgrade compiles the sweep's
    code (numba caches it on disk for later runs), which takes far longer than loading it:
    if the warm-up is still running after COMPILE_NOTE_S, say so, as a stage of its own (so
    that a log shows it too), then wait on."""
    try:
        warming.result(timeout=COMPILE_NOTE_S)
    except TimeoutError:
        progress(COMPILE_NOTE, 0, None)
        warming.result()


def sweep_case(
    con: duckdb.DuckDBPyConnection,
    workers: int = 2,
    progress: ProgressFn = no_progress,
    warming: Future[None] | None = None,
) -> dict[str, int]:
    """Sweep every node and store what it found. Nodes run `workers` at a time in threads; the
    main thread loads the next node meanwhile, when its arrays fit in the memory budget
    beside those of the nodes being swept (forensics.analysis.budget). Returns the rows stored
    per table."""
    # the compiled code, beside the SQL and the first node's load, which let go of the GIL
    warmed = warming or warming_up()
    prepare_pieces(con)
    nodes = node_list(con)
    counts = dict.fromkeys([_RUNS, *_TABLES], 0)
    pending: deque[Future[NodeFindings]] = deque()
    workers = max(1, workers)
    done = 0

    def store_oldest() -> None:
        nonlocal done
        for table, rows in store_findings(con, pending.popleft().result()).items():
            counts[table] += rows
        done += 1
        progress("sweep", done, len(nodes))

    with (
        sweep_budget(con, DUCKDB_STREAM_SHARE) as budget,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        for i, info in enumerate(nodes):
            progress("load events", i + 1, len(nodes))
            events, held = load_within(con, info, budget)
            pending.append(pool.submit(find_within, events, budget, held))
            del events
            warmed_up(warmed, progress)  # at once after the first node: loaded meanwhile
            while len(pending) > workers:
                store_oldest()
        warmed_up(warmed, progress)
        while pending:
            store_oldest()
    return counts


def need_of(info: NodeInfo) -> int:
    """The node's arrays at their worst moment (forensics.analysis.budget.node_need)."""
    slot_bytes = np.dtype(info.slot_dtype).itemsize
    table = table_applies(info.slot_end_max, info.events)  # its span can only be smaller
    return node_need(
        info.events,
        info.reads,
        info.acquisitions,
        key_bytes=0 if info.dense_keys else np.dtype(info.key_dtype).itemsize,
        slot_bytes=slot_bytes,
        ranked=not info.dense_keys,
        cells_apart=slot_bytes > 4 or not table,
    )


def load_within(
    con: duckdb.DuckDBPyConnection, info: NodeInfo, budget: MemoryBudget
) -> tuple[NodeEvents, int]:
    """Load a node once its share of the budget is held (waiting for sweeps to finish when it
    does not fit yet); returns its events and the share held."""
    held = budget.need(info.events, need_of(info))
    budget.take(held)

    def more(nbytes: int) -> None:  # the node holds its keys after all
        nonlocal held
        held = budget.more(held, nbytes)

    try:
        return events_of(info, lambda ordered: fetch_batches(con, info, ordered), more), held
    except BaseException:
        budget.give(held)
        raise


def find_within(ev: NodeEvents, budget: MemoryBudget, held: int) -> NodeFindings:
    """find_on_node, giving the node's share of the budget back when done."""
    try:
        return find_on_node(ev)
    finally:
        budget.give(held)


_RUNS = "temp.analysis_exposure_runs"
_TABLES = {
    "temp.analysis_violation_pieces": (
        "violations",
        ("event_key", "violation_code", "other_code", "slot_start", "slot_end"),
    ),
    "temp.analysis_read_counts": (
        "read_counts",
        (
            "req_code",
            "reads",
            "own_slots",
            "shared_verified",
            "shared_unverified",
            "foreign_slots",
            "uninitialised_slots",
        ),
    ),
}


def store_findings(
    con: duckdb.DuckDBPyConnection, found: NodeFindings, runs: ExposureRuns | None = None
) -> dict[str, int]:
    """Append one node's findings (exposure runs, violation pieces, read counts) to their
    tables; returns the rows added to each. runs:
    the node's exposure runs when already made (a partition task makes them from its own
    parts); else they are made here, from kv_events."""
    if runs is None:
        runs = exposure_runs(con, found)
    rows = findings_rows(found, runs)
    for table, frame in rows.items():
        append_rows(con, table, frame)
    return {table: frame.num_rows for table, frame in rows.items()}


def findings_rows(found: NodeFindings, runs: ExposureRuns) -> dict[str, pa.Table]:
    """One node's findings as the rows of their tables (exposure runs, violation pieces, read
    counts), by table."""
    out = {_RUNS: runs_table(found.node, runs)}
    for table, (attr, names) in _TABLES.items():
        rows = getattr(found, attr)
        node = repeated(found.node, len(rows))
        out[table] = pa.table(
            [node, *(from_numpy(rows[:, i]) for i in range(len(names)))], names=["node", *names]
        )
    return out


def exposure_runs(con: duckdb.DuckDBPyConnection, found: NodeFindings) -> ExposureRuns:
    """The node's exposure runs, the events its pieces name read from kv_events."""
    return fold_runs(found.exposures, event_facts(con, found.exposures.named))
