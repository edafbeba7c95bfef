"""Order each node's events in DuckDB, run the compiled sweep per node, store its pieces.

DuckDB gives every event its place in the node's total order (queries/analysis_events.sql) and
int codes for requests and content hashes. The sweep runs per node on plain numpy arrays,
nodes in parallel threads (the compiled sweep releases the GIL). Its pieces go back into DuckDB
as the tables analysis_exposure_pieces, analysis_read_pieces and analysis_violation_pieces,
keyed by (node, ord) of the events involved, for the SQL in queries/analysis_*.sql.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from forensics.analysis.sweep import sweep_node
from forensics.ingest.sqlrun import run_script
from forensics.progress import ProgressFn, no_progress
from forensics.resources import sql


@dataclass(frozen=True)
class NodeEvents:
    node: str
    req: np.ndarray
    op: np.ndarray
    slot_start: np.ndarray
    slot_count: np.ndarray
    content_hash: np.ndarray


@dataclass(frozen=True)
class Pieces:
    node: str
    exposures: np.ndarray  # [read ord, slot_start, slot_end, write ord, kind]
    categories: np.ndarray  # [read ord, category, slot_start, slot_end]
    violations: np.ndarray  # [ord, slot_start, slot_end, violation, other req_code or -1]


def order_events(con: duckdb.DuckDBPyConnection) -> None:
    """Write analysis_request_codes and analysis_events (see the query for the order)."""
    run_script(con, sql("analysis_events"))


def node_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute(sql("analysis_nodes")).fetchall()]


def load_node(con: duckdb.DuckDBPyConnection, node: str) -> NodeEvents:
    """One node's events in order, as int64 arrays."""
    cols = con.execute(sql("analysis_sweep_input"), {"node": node}).fetchnumpy()
    return NodeEvents(node, *(np.asarray(cols[c], dtype=np.int64) for c in _COLS))


_COLS = ("req_code", "op_code", "slot_start", "slot_count", "hash_code")


def _sweep_one(ev: NodeEvents) -> Pieces:
    return Pieces(
        ev.node, *sweep_node(ev.req, ev.op, ev.slot_start, ev.slot_count, ev.content_hash)
    )


def sweep_nodes(
    nodes: list[NodeEvents], workers: int = 2, progress: ProgressFn = no_progress
) -> list[Pieces]:
    """Sweep every node, `workers` at a time; results in node order."""
    out: list[Pieces] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for i, pieces in enumerate(pool.map(_sweep_one, nodes)):
            out.append(pieces)
            progress("sweep", i + 1, len(nodes))
    return out


def sweep_case(
    con: duckdb.DuckDBPyConnection, workers: int = 2, progress: ProgressFn = no_progress
) -> dict[str, int]:
    """Sweep every node of analysis_events and store the pieces. Nodes run `workers` at a time
    in threads; only the nodes in flight are held in memory. Returns the piece counts."""
    run_script(con, sql("analysis_pieces_create"))
    names = node_names(con)
    counts = dict.fromkeys(_TABLES, 0)
    pending: deque[Future[Pieces]] = deque()
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for name in names:
            pending.append(pool.submit(_sweep_one, load_node(con, name)))
            while len(pending) > max(1, workers) or (pending and name == names[-1]):
                for table, rows in store_pieces(con, pending.popleft().result()).items():
                    counts[table] += rows
                done += 1
                progress("sweep", done, len(names))
    return counts


_TABLES = {
    "analysis_exposure_pieces": (
        "exposures",
        ("read_ord", "slot_start", "slot_end", "write_ord", "kind_code"),
    ),
    "analysis_read_pieces": ("categories", ("read_ord", "category_code", "slot_start", "slot_end")),
    "analysis_violation_pieces": (
        "violations",
        ("ord", "slot_start", "slot_end", "violation_code", "other_code"),
    ),
}


def store_pieces(con: duckdb.DuckDBPyConnection, pieces: Pieces) -> dict[str, int]:
    """Append one node's pieces to the three piece tables; returns the rows added to each."""
    counts = {}
    for table, (attr, names) in _TABLES.items():
        rows = getattr(pieces, attr)
        node = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(rows), np.int32)), pa.array([pieces.node], pa.string())
        ).cast(pa.string())
        frame = pa.table(
            [node, *(pa.array(rows[:, i]) for i in range(len(names)))], names=["node", *names]
        )
        con.register("_analysis_pieces", frame)
        try:
            con.execute(sql(f"analysis_store_{attr}"))
        finally:
            con.unregister("_analysis_pieces")
        counts[table] = len(rows)
    return counts
