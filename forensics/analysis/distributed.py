"""The per-node analysis as Ray tasks (`analyze --ray [ADDRESS]`).

The analysis is independent per engine node, so each node is one task: the task gets the
node's events (from the case database through the object store, or, for a ledger kept outside
the database, by reading its own partition), orders them, sweeps them and returns the node's
findings; the driver stores them in the case database exactly as the local engine does, so
every table is the same. Ray is an optional extra (`pip install 'kvforensics[ray]'`); without
an address it starts on this machine for the run and stops after it.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import duckdb
import pyarrow as pa

from forensics.analysis import order
from forensics.analysis.order import NodeFindings, NodeInfo
from forensics.base.progress import ProgressFn, no_progress
from forensics.base.raytasks import EMBEDDED as EMBEDDED  # the --ray address of an embedded Ray
from forensics.base.raytasks import cluster_cpus, ray_session, run_tasks, task_memory


def sweep_node_table(info: NodeInfo, table: pa.Table) -> NodeFindings:
    """The task body for a ledger inside the case database: the node's coded events (fetched
    by the driver) -> ordered, swept findings."""

    def batches(ordered: bool) -> list[pa.RecordBatch]:
        if ordered:  # the node's events came out of order: sort them here
            return table.sort_by([("rank", "ascending"), ("event_key", "ascending")]).to_batches()
        return table.to_batches()

    return order.find_on_node(order.events_of(info, batches))


def sweep_case_ray(
    con: duckdb.DuckDBPyConnection,
    address: str | None,
    workers: int = 2,
    progress: ProgressFn = no_progress,
    warming: Future[None] | None = None,
) -> dict[str, int]:
    """order.sweep_case with each node's order/sweep/emit as a Ray task. The driver fetches a
    node's coded events from the case database (only it can read the file) into the object
    store; the tasks run wherever the cluster places them. Returns the rows stored per table.
    warming: the compiled code being loaded here, when the caller started it: the tasks start
    once it is, so that they load it rather than compile it."""
    order.prepare_pieces(con)
    nodes = order.node_list(con)
    if warming is not None:
        order.warmed_up(warming, progress)
    counts: dict[str, int] = {}
    with ray_session(address, workers) as ray:
        task = ray.remote(num_cpus=1, max_retries=1)(sweep_node_table)

        memory = task_memory(ray)

        def submit(info: NodeInfo) -> Any:
            progress("load events", 0, None)
            table = pa.Table.from_batches(list(order.fetch_batches(con, info)))
            # the task holds the node's Arrow table besides the arrays it sweeps
            need = order.need_of(info) + table.nbytes
            return task.options(**memory(need)).remote(info, ray.put(table))

        def take(_info: NodeInfo, found: NodeFindings) -> None:
            for name, rows in order.store_findings(con, found).items():
                counts[name] = counts.get(name, 0) + rows

        run_tasks(ray, nodes, submit, take, in_flight=cluster_cpus(ray) + 1, progress=progress)
    return counts
