"""The per-node analysis as Ray tasks (`analyze --ray [ADDRESS]`).

The analysis is independent per engine node, so each node is one task: the task gets the
node's events (from the case database through the object store, or, for a ledger kept outside
the database, by reading its own partition), orders them, sweeps them and returns the node's
findings; the driver stores them in the case database exactly as the local engine does, so
every table is the same. Ray is an optional extra (`pip install 'kvforensics[ray]'`); without
an address it starts on this machine for the run and stops after it.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import pyarrow as pa

from forensics.analysis import order
from forensics.analysis.order import NodeFindings, NodeInfo
from forensics.errors import UsageError
from forensics.progress import ProgressFn, no_progress

# Object store of an embedded Ray: enough for a few nodes' events in flight.
EMBEDDED = "local"  # the address that means: start Ray on this machine for the run
EMBEDDED_STORE_BYTES = int(os.environ.get("KVFORENSICS_RAY_STORE_BYTES", str(1 << 30)))


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UsageError(
            "--ray needs the optional Ray extra; install it with `pip install 'kvforensics[ray]'`"
        ) from exc
    return ray


@contextmanager
def ray_session(address: str | None, workers: int) -> Iterator[Any]:
    """Connect to the Ray cluster at `address`, or start an embedded one with `workers` CPUs
    when address is None or "local"; an embedded Ray, or a connection this call made, is shut
    down afterwards."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    if address in (None, "", EMBEDDED):
        ray.init(
            num_cpus=max(1, workers),
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=EMBEDDED_STORE_BYTES,
            configure_logging=False,
        )
    else:
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"cannot reach the Ray cluster at {address}: {exc}") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


def sweep_node_table(info: NodeInfo, table: pa.Table) -> NodeFindings:
    """The task body for a ledger inside the case database: the node's coded events (fetched
    by the driver) -> ordered, swept findings."""
    return order.find_on_node(order.events_of(info, table.to_batches()))


def run_tasks(
    ray: Any,
    items: list[Any],
    submit: Callable[[Any], Any],
    take: Callable[[Any, Any], None],
    in_flight: int,
    progress: ProgressFn = no_progress,
) -> None:
    """Submit one task per item, at most `in_flight` at a time (so the driver and the object
    store hold only that many nodes), and hand each result to `take` in submission order."""
    pending: deque[tuple[Any, Any]] = deque()
    done = 0
    for item in items:
        pending.append((item, submit(item)))
        while len(pending) >= max(1, in_flight):
            first, ref = pending.popleft()
            take(first, ray.get(ref))
            done += 1
            progress("sweep", done, len(items))
    while pending:
        first, ref = pending.popleft()
        take(first, ray.get(ref))
        done += 1
        progress("sweep", done, len(items))


def sweep_case_ray(
    con: duckdb.DuckDBPyConnection,
    address: str | None,
    workers: int = 2,
    progress: ProgressFn = no_progress,
) -> dict[str, int]:
    """order.sweep_case with each node's order/sweep/emit as a Ray task. The driver fetches a
    node's coded events from the case database (only it can read the file) into the object
    store; the tasks run wherever the cluster places them. Returns the rows stored per table."""
    order.prepare_pieces(con)
    nodes = order.node_list(con)
    counts: dict[str, int] = {}
    with ray_session(address, workers) as ray:
        task = ray.remote(num_cpus=1, max_retries=1)(sweep_node_table)

        def submit(info: NodeInfo) -> Any:
            progress("load events", 0, None)
            table = pa.Table.from_batches(list(order.fetch_batches(con, info)))
            return task.remote(info, ray.put(table))

        def take(_info: NodeInfo, found: NodeFindings) -> None:
            for name, rows in order.store_findings(con, found).items():
                counts[name] = counts.get(name, 0) + rows

        run_tasks(ray, nodes, submit, take, in_flight=cluster_cpus(ray) + 1, progress=progress)
    return counts


def cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))
