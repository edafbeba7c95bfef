"""`kvforensics reconstruct`: rebuild the page trace of ledger-less nodes from the request log."""

from __future__ import annotations

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import (
    Db,
    DeliveryJitterMs,
    Json,
    Orders,
    ReconstructAllocator,
    ReplayBudget,
    ReplayDevice,
    ReplayModel,
    SglangFreeList,
    SkewMs,
)
from forensics.cli.progress import run_on_case
from forensics.options import ReconstructOptions
from forensics.reconstruct.headline import reconstruct_headline


@app.command()
def reconstruct(
    db: Db,
    allocator: ReconstructAllocator = ReconstructOptions.allocator,
    orders: Orders = ReconstructOptions.orders,
    skew_ms: SkewMs = ReconstructOptions.skew_ms,
    delivery_jitter_ms: DeliveryJitterMs = ReconstructOptions.delivery_jitter_ms,
    sglang_free_list: SglangFreeList = ReconstructOptions.free_list,
    replay_model: ReplayModel = ReconstructOptions.replay_model,
    replay_device: ReplayDevice = ReconstructOptions.replay_device,
    replay_budget: ReplayBudget = ReconstructOptions.replay_budget,
    json_out: Json = False,
) -> None:
    """Rebuild kv_events for nodes without a KV ledger by driving the node's real allocator
    with the allocations and frees the request log implies; `analyze` then lists the pairs it
    finds as `reconstructed` exposures. Exit code 1 when cross-account pairs were found, 2 when
    a node needs the real engines' environment and it is missing (scripts/engines_venv.sh)."""
    from forensics.reconstruct.stage import reconstruct as run_reconstruct

    options = ReconstructOptions(
        allocator=allocator,
        orders=orders,
        skew_ms=skew_ms,
        delivery_jitter_ms=delivery_jitter_ms,
        free_list=sglang_free_list,
        replay_budget=replay_budget,
        replay_model=replay_model,
        replay_device=replay_device,
    )
    summary = run_on_case(
        console, db, "reconstruct", lambda con, progress: run_reconstruct(con, options, progress)
    )
    if json_out:
        emit_json(summary)
    else:
        console.print(f"reconstruct: {reconstruct_headline(summary)}", markup=False)
        for skipped in summary["skipped"]:
            console.print(
                f"reconstruct: not rebuilt: {skipped['node']}: {skipped['why']}", markup=False
            )
    if summary["engines_missing"]:  # the headline says why and how to enable it
        raise typer.Exit(2)
    finish(bool(summary["findings"]))
