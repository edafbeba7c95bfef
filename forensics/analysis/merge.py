"""The driver's side of the sweep of a ledger kept outside the case database
(forensics.analysis.partitions): what a partition task returns, and how the driver stores
every task's findings in the case database with case-wide request codes, so that the tables
that follow are those of a loaded ledger. A partition task numbers the requests its parts name
by itself; the driver numbers them over the whole case (the same codes as
queries/analysis/codes.sql would give) and renumbers each node's findings."""

from __future__ import annotations

from dataclasses import dataclass, replace

import duckdb
import numpy as np
import pyarrow as pa

from forensics.analysis import order
from forensics.analysis.order import NodeFindings
from forensics.analysis.runfacts import ExposureRuns
from forensics.analysis.runfacts import renumbered as runs_renumbered
from forensics.base.arrow import from_numpy
from forensics.casedb.sql import append_rows, registered, run_script, sql


@dataclass
class PartitionFindings:
    found: list[NodeFindings]  # request codes local to the partition
    runs: list[ExposureRuns]  # each node's exposure runs, request codes local
    request_ids: pa.Table  # request_id, req_code (local)
    piece_events: pa.Table  # rows of analysis_piece_events
    ledger_nodes: pa.Table  # rows of temp.analysis_ledger_nodes
    request_nodes: pa.Table  # rows of temp.analysis_request_nodes


def store(con: duckdb.DuckDBPyConnection, results: list[PartitionFindings]) -> None:
    """Store every partition's findings with case-wide request codes: one append per table for
    all the nodes (a fleet's ledger has hundreds), in partition and node order."""
    ids = pa.concat_tables([r.request_ids.select(["request_id"]) for r in results])
    with registered(con, {"_ids": ids}):
        run_script(con, sql("analysis/codes_from_ids"))
    facts = {
        "_ledger_nodes": pa.concat_tables([r.ledger_nodes for r in results]),
        "_request_nodes": pa.concat_tables([r.request_nodes for r in results]),
    }
    with registered(con, facts):
        run_script(con, sql("analysis/ledger_facts_from_tasks"))
    run_script(con, sql("analysis/pieces_create"))
    run_script(con, sql("analysis/piece_events_create"))
    rows: dict[str, list[pa.Table]] = {}
    for r, to_global in zip(results, _global_codes(con, results), strict=True):
        for found, runs in zip(r.found, r.runs, strict=True):
            node = order.findings_rows(
                renumbered(found, to_global), runs_renumbered(runs, to_global)
            )
            for table, frame in node.items():
                rows.setdefault(table, []).append(frame)
    rows["temp.analysis_piece_events"] = [r.piece_events for r in results]
    for table, frames in rows.items():
        append_rows(con, table, pa.concat_tables(frames))


def _global_codes(
    con: duckdb.DuckDBPyConnection, results: list[PartitionFindings]
) -> list[np.ndarray]:
    """Per partition, to_global[local code] = the case-wide code of the same request."""
    local = pa.concat_tables(
        [
            r.request_ids.append_column("partition", from_numpy(np.full(r.request_ids.num_rows, i)))
            for i, r in enumerate(results)
        ]
    )
    with registered(con, {"_local": local}):
        rows = con.execute(sql("analysis/codes_to_global")).fetchnumpy()
    by_partition = np.argsort(np.asarray(rows["partition"], np.int64), kind="stable")
    which = np.asarray(rows["partition"], np.int64)[by_partition]
    local_code = np.asarray(rows["local_code"], np.int64)[by_partition]
    code = np.asarray(rows["req_code"], np.int64)[by_partition]
    bounds = np.searchsorted(which, np.arange(len(results) + 1))
    out = []
    for i, r in enumerate(results):
        lo, hi = bounds[i], bounds[i + 1]
        to_global = np.full(r.request_ids.num_rows, -1, np.int64)
        to_global[local_code[lo:hi]] = code[lo:hi]
        out.append(to_global)
    return out


def renumbered(found: NodeFindings, to_global: np.ndarray) -> NodeFindings:
    """The node's findings with case-wide request codes (-1, no other holder, stays)."""
    ex = found.exposures._replace(
        receiver=to_global[found.exposures.receiver], leaker=to_global[found.exposures.leaker]
    )
    vio = found.violations.copy()
    other = vio[:, 2] >= 0
    vio[other, 2] = to_global[vio[other, 2]]
    counts = found.read_counts.copy()
    counts[:, 0] = to_global[counts[:, 0]]
    return replace(found, exposures=ex, violations=vio, read_counts=counts)
