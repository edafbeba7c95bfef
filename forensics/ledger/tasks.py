"""The external ledger's partition checks as Ray tasks (`ingest --ledger-external --ray`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from forensics.base.progress import ProgressFn, no_progress
from forensics.base.raytasks import cluster_cpus, ray_session, run_tasks
from forensics.ledger.check import PartitionCheck, check_partition
from forensics.ledger.external import LedgerFile


def check_on_ray(
    address: str,
    groups: list[list[LedgerFile]],
    nodes: pa.Table,
    request_ids: pa.Table,
    assume_utc: bool,
    progress: ProgressFn = no_progress,
) -> list[PartitionCheck]:
    """check_partition for every partition, one task each; results in partition order."""
    out: list[PartitionCheck] = []
    with ray_session(address, 2) as ray:
        task = ray.remote(num_cpus=1, max_retries=1)(check_partition)
        shared = (ray.put(nodes), ray.put(request_ids))

        def submit(group: list[LedgerFile]) -> Any:
            return task.remote(group, *shared, assume_utc, None, (1, None))  # a task, a core

        def take(_group: list[LedgerFile], check: PartitionCheck) -> None:
            out.append(check)

        run_tasks(ray, groups, submit, take, in_flight=2 * cluster_cpus(ray), progress=progress)
    return out
