"""Ray plumbing shared by the analysis and the external ledger's checks: a session on a cluster
or on an embedded Ray, tasks submitted with a bounded number in flight, the cluster's CPUs, and
the memory a task asks Ray for.

Ray is an optional extra (`pip install 'kvforensics[ray]'`): it is imported only inside
`ray_session`, with the install hint as a usage error when it is missing."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from forensics.base.progress import ProgressFn, no_progress
from forensics.errors import KvfError, UsageError, disk_full

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
            take(first, result_of(ray, ref))
            done += 1
            progress("sweep", done, len(items))
    while pending:
        first, ref = pending.popleft()
        take(first, result_of(ray, ref))
        done += 1
        progress("sweep", done, len(items))


def result_of(ray: Any, ref: Any) -> Any:
    """A task's result. A task that stopped on an error of the inputs (a KvfError: a part that
    changed, a storage that failed) or on a full disk raises that error, as the local run does:
    Ray hands it back wrapped in an error whose text is the worker's whole traceback."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, KvfError) or (cause is not None and disk_full(cause) is not None):
            raise cause from None
        raise


def cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def task_memory(ray: Any) -> Callable[[int], dict[str, int]]:
    """Ray options for a task whose arrays peak at `need` bytes (forensics.analysis.budget): it
    asks for that much of Ray's `memory` resource, so that Ray places on a node only as many
    tasks as its memory holds, not as many as it has CPUs. A request is capped at the largest
    live node's memory, so that a task bigger than every node still runs (alone on the
    largest) instead of waiting forever for a node that does not exist."""
    largest = max(
        (int(n.get("Resources", {}).get("memory", 0)) for n in ray.nodes() if n.get("Alive")),
        default=0,
    )

    def options(need: int) -> dict[str, int]:
        return {"memory": max(1, min(int(need), largest))} if largest > 0 else {}

    return options
