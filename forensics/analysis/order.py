"""Put each node's events in their total order, run the compiled sweep per node, store what it
found.

DuckDB gives each node's events as integer columns (queries/analysis/sweep_input.sql: int codes
for requests and content hashes, the sort key, the event's key); numpy sorts them into the
node's total order. The sweep runs per node on those arrays, nodes in parallel threads (the
compiled code releases the GIL), and while one node is swept the next is fetched. What it
found goes back into DuckDB: exposure and violation pieces naming events by their key
(kv_events.input_order) and per-request read counts, for the SQL in queries/analysis/*.sql.
No per-event table is written, so the analysis costs one pass over the ledger plus the sweep.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from forensics.analysis.budget import MemoryBudget, sweep_budget
from forensics.analysis.codes import OPS
from forensics.analysis.coverage import read_counts, run_numbers
from forensics.analysis.sweep import cells_of, sweep_cells_of
from forensics.progress import ProgressFn, no_progress
from forensics.sql import ident, run, run_script, sql

FETCH_ROWS = 1 << 20  # rows per batch when fetching a node's events


@dataclass(frozen=True)
class NodeEvents:
    """One node's events in their total order."""

    node: str
    key: np.ndarray  # int64: the event's kv_events.input_order
    req: np.ndarray  # int32 request codes
    op: np.ndarray  # int8 op codes (forensics.analysis.codes.OPS)
    content_hash: np.ndarray  # int32 hash codes, -1 when absent
    # [slot_start, slot_end]: int32 where the node's slots fit (NodeInfo.slot_dtype), else
    # int64; emptied when made into cells.
    slots: list[np.ndarray]


@dataclass(frozen=True)
class NodeFindings:
    """What the sweep found on one node, events named by key."""

    node: str
    # [read key, write key, kind, slot_start, slot_end, receiver code, leaker code, run number]
    exposures: np.ndarray
    violations: np.ndarray  # [event key, violation, other request code or -1, slot_start, slot_end]
    read_counts: np.ndarray  # [request code, reads, distinct slots per category]


@dataclass(frozen=True)
class NodeInfo:
    node: str
    events: int
    by_seq: bool
    slot_end_max: int = 0  # the node's highest slot end

    @property
    def slot_dtype(self) -> type[np.signedinteger]:
        """int32 when every slot of the node fits (slots are >= 0), else int64."""
        return np.int32 if self.slot_end_max <= np.iinfo(np.int32).max else np.int64


def make_codes(con: duckdb.DuckDBPyConnection) -> None:
    """Write work.analysis_request_codes and work.analysis_hash_codes (and, on the way,
    temp.analysis_request_nodes)."""
    run_script(con, sql("analysis/request_nodes"))
    run_script(con, sql("analysis/codes"))


def prepare_pieces(con: duckdb.DuckDBPyConnection) -> None:
    """The request and hash codes, and empty tables for the sweep's pieces."""
    make_codes(con)
    run_script(con, sql("analysis/pieces_create"))


def node_list(con: duckdb.DuckDBPyConnection) -> list[NodeInfo]:
    """The nodes to sweep, from one pass over the ledger that also keeps what screening and
    the summary need of it (temp.analysis_ledger_nodes)."""
    run_script(con, sql("analysis/ledger_nodes"))
    rows = con.execute(sql("analysis/nodes")).fetchall()
    return [
        NodeInfo(node, int(events), bool(by_seq), int(end)) for node, events, by_seq, end in rows
    ]


_FETCHED = (
    ("rank", np.int64),
    ("event_key", np.int64),
    ("op_code", np.int8),
    ("req_code", np.int32),
    ("slot_start", None),  # NodeInfo.slot_dtype
    ("slot_end", None),
    ("hash_code", np.int32),
)


def load_node(con: duckdb.DuckDBPyConnection, info: NodeInfo) -> NodeEvents:
    """One node's events in its total order. Batches are copied into arrays sized from the
    node's event count, so the node is held once, not twice."""
    return events_of(info, fetch_batches(con, info))


def fetch_batches(con: duckdb.DuckDBPyConnection, info: NodeInfo) -> pa.RecordBatchReader:
    """One node's coded events (queries/analysis/sweep_input.sql), in batches."""
    params = {"node": info.node, "by_seq": info.by_seq, "ops": list(OPS)}
    rel = con.sql(sql("analysis/sweep_input"), params=params)
    return rel.to_arrow_reader(FETCH_ROWS)


def events_of(info: NodeInfo, batches: Iterable[pa.RecordBatch]) -> NodeEvents:
    """The node's events in order, from the batches of fetch_batches."""
    cols = {name: np.empty(info.events, dtype or info.slot_dtype) for name, dtype in _FETCHED}
    at = 0
    for batch in batches:
        end = at + batch.num_rows
        if end > info.events:
            raise RuntimeError(f"node {info.node}: more events than counted ({info.events})")
        for name, _ in _FETCHED:
            cols[name][at:end] = batch.column(name).to_numpy(zero_copy_only=False)
        at = end
    if at != info.events:
        raise RuntimeError(f"node {info.node}: {at} events fetched, {info.events} counted")
    return _in_order(info.node, cols)


def total_order(rank: np.ndarray, key: np.ndarray) -> np.ndarray | None:
    """The permutation that sorts events by (rank, key), keys being unique; None when they
    are in that order already.

    DuckDB returns a node's events in the order they were loaded, which for a ledger is usually
    their key order and often their rank order too: checking that costs one pass, where a full
    two-key sort costs many. With the keys ascending, a stable sort on the rank alone gives the
    same permutation as the two-key sort (ties keep their key order), and numpy's stable sort
    is fast on the nearly sorted ranks that a ledger written in time order has."""
    keys_ascending = bool(np.all(key[1:] > key[:-1]))
    if keys_ascending and bool(np.all(rank[1:] >= rank[:-1])):
        return None
    if keys_ascending:
        return np.argsort(rank, kind="stable")
    return np.lexsort((key, rank))


def _in_order(node: str, cols: dict[str, np.ndarray]) -> NodeEvents:
    """Sort by (rank, event_key) and drop the rank, one column at a time so that the node is
    never held twice."""
    order = total_order(cols.pop("rank"), cols["event_key"])

    def take(name: str) -> np.ndarray:
        values = cols.pop(name)
        return values if order is None else values[order]

    key = take("event_key")
    req = take("req_code")
    op = take("op_code")
    content_hash = take("hash_code")
    slots = [take("slot_start"), take("slot_end")]
    return NodeEvents(node, key, req, op, content_hash, slots)


def find_on_node(ev: NodeEvents) -> NodeFindings:
    """Sweep one node and turn event positions into event keys and read counts. The slot
    ranges are taken out of `ev` and dropped once they are cells."""
    end, start = ev.slots.pop(), ev.slots.pop()
    cells = cells_of(start, end)
    del start, end
    ex, cat, vio = sweep_cells_of(ev.req, ev.op, cells, ev.content_hash)
    key = ev.key
    receiver, leaker = ev.req[ex[:, 0]], ev.req[ex[:, 3]]
    order, run = run_numbers((receiver, leaker, ex[:, 4]), ex[:, 1], ex[:, 2])
    ex = ex[order]
    return NodeFindings(
        ev.node,
        exposures=np.column_stack(
            [
                key[ex[:, 0]],
                key[ex[:, 3]],
                ex[:, 4],
                ex[:, 1],
                ex[:, 2],
                receiver[order],
                leaker[order],
                run,
            ]
        ),
        violations=np.column_stack([key[vio[:, 0]], vio[:, 3], vio[:, 4], vio[:, 1], vio[:, 2]]),
        read_counts=read_counts(ev.req, ev.op, cat, cells.bounds),
    )


def sweep_case(
    con: duckdb.DuckDBPyConnection, workers: int = 2, progress: ProgressFn = no_progress
) -> dict[str, int]:
    """Sweep every node and store what it found. Nodes run `workers` at a time in threads; the
    main thread loads the next node meanwhile, when its arrays fit in the memory budget
    beside those of the nodes being swept (forensics.analysis.budget). Returns the rows stored
    per table."""
    prepare_pieces(con)
    nodes = node_list(con)
    counts = dict.fromkeys(_TABLES, 0)
    pending: deque[Future[NodeFindings]] = deque()
    workers = max(1, workers)
    done = 0

    def store_oldest() -> None:
        nonlocal done
        for table, rows in store_findings(con, pending.popleft().result()).items():
            counts[table] += rows
        done += 1
        progress("sweep", done, len(nodes))

    with sweep_budget(con) as budget, ThreadPoolExecutor(max_workers=workers) as pool:
        for i, info in enumerate(nodes):
            progress("load events", i + 1, len(nodes))
            need = budget.need(info.events)
            budget.take(need)  # waits for sweeps to finish when the node does not fit yet
            try:
                events = load_node(con, info)
            except BaseException:
                budget.give(need)
                raise
            pending.append(pool.submit(_find_within, events, budget, need))
            del events
            while len(pending) > workers:
                store_oldest()
        while pending:
            store_oldest()
    return counts


def _find_within(ev: NodeEvents, budget: MemoryBudget, held: int) -> NodeFindings:
    """find_on_node, giving the node's share of the budget back when done."""
    try:
        return find_on_node(ev)
    finally:
        budget.give(held)


_TABLES = {
    "temp.analysis_exposure_pieces": (
        "exposures",
        (
            "read_key",
            "write_key",
            "kind_code",
            "slot_start",
            "slot_end",
            "receiver_code",
            "leaker_code",
            "run_no",
        ),
    ),
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


def store_findings(con: duckdb.DuckDBPyConnection, found: NodeFindings) -> dict[str, int]:
    """Append one node's findings to the three tables; returns the rows added to each."""
    counts = {}
    for table, (attr, names) in _TABLES.items():
        rows = getattr(found, attr)
        node = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(rows), np.int32)), pa.array([found.node], pa.string())
        ).cast(pa.string())
        frame = pa.table(
            [node, *(pa.array(rows[:, i]) for i in range(len(names)))], names=["node", *names]
        )
        con.register("_analysis_pieces", frame)
        try:
            run(con, "analysis/store_pieces", table=ident(table))
        finally:
            con.unregister("_analysis_pieces")
        counts[table] = len(rows)
    return counts
