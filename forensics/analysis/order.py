"""Order each node's events in DuckDB, run the compiled sweep per node, store its pieces.

DuckDB gives every event its place in the node's total order (queries/analysis_events.sql) and
int codes for requests and content hashes. The sweep runs per node on plain numpy arrays,
nodes in parallel threads (the compiled sweep releases the GIL). Its pieces go back into DuckDB
as the tables analysis_exposure_pieces, analysis_read_pieces and analysis_violation_pieces,
keyed by (node, ord) of the events involved, for the SQL in queries/analysis_*.sql.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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


def load_nodes(con: duckdb.DuckDBPyConnection) -> list[NodeEvents]:
    cols = con.execute(sql("analysis_sweep_input")).fetchnumpy()
    nodes = np.asarray(cols["node"], dtype=object)
    if len(nodes) == 0:
        return []
    cuts = np.flatnonzero(nodes[1:] != nodes[:-1]) + 1
    bounds = zip(np.r_[0, cuts], np.r_[cuts, len(nodes)], strict=True)
    return [
        NodeEvents(str(nodes[a]), *(np.asarray(cols[c][a:b], dtype=np.int64) for c in _COLS))
        for a, b in bounds
    ]


_COLS = ("req_code", "op_code", "slot_start", "slot_count", "hash_code")


def sweep_nodes(
    nodes: list[NodeEvents], workers: int = 2, progress: ProgressFn = no_progress
) -> list[Pieces]:
    """Sweep every node, `workers` at a time; results in node order."""

    def one(ev: NodeEvents) -> Pieces:
        return Pieces(
            ev.node, *sweep_node(ev.req, ev.op, ev.slot_start, ev.slot_count, ev.content_hash)
        )

    out: list[Pieces] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for i, pieces in enumerate(pool.map(one, nodes)):
            out.append(pieces)
            progress("sweep", i + 1, len(nodes))
    return out


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


def store_pieces(con: duckdb.DuckDBPyConnection, pieces: list[Pieces]) -> dict[str, int]:
    """Write the three piece tables; returns their row counts."""
    counts = {}
    for table, (attr, names) in _TABLES.items():
        arrays = [getattr(p, attr) for p in pieces]
        rows = np.concatenate(arrays) if arrays else np.empty((0, len(names)), np.int64)
        node = pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(len(pieces)), [len(a) for a in arrays]), pa.int32()),
            pa.array([p.node for p in pieces], pa.string()),
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
