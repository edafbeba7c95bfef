"""`kvforensics reconstruct`: rebuild the page trace of ledger-less nodes from the request log."""

from __future__ import annotations

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import (
    Db,
    Json,
    Orders,
    ReconstructAllocator,
    ReplayBudget,
    ReplayDevice,
    ReplayModel,
    SkewMs,
)
from forensics.cli.progress import run_on_case
from forensics.options import ReconstructOptions


@app.command()
def reconstruct(
    db: Db,
    allocator: ReconstructAllocator = ReconstructOptions.allocator,
    orders: Orders = ReconstructOptions.orders,
    skew_ms: SkewMs = ReconstructOptions.skew_ms,
    replay_model: ReplayModel = ReconstructOptions.replay_model,
    replay_device: ReplayDevice = ReconstructOptions.replay_device,
    replay_budget: ReplayBudget = ReconstructOptions.replay_budget,
    json_out: Json = False,
) -> None:
    """Rebuild kv_events for nodes without a KV ledger by driving the node's real allocator
    with the allocations and frees the request log implies; `analyze` then lists the pairs it
    finds as `reconstructed` exposures. Exit code 1 when cross-account pairs were found."""
    from forensics.reconstruct.stage import reconstruct as run_reconstruct

    options = ReconstructOptions(
        allocator=allocator,
        orders=orders,
        skew_ms=skew_ms,
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
        nodes = (
            ", ".join(
                f"{n['node']} ({n['allocator']}, {n['orders']} orders)" for n in summary["nodes"]
            )
            or "none"
        )
        console.print(
            f"reconstruct: nodes {nodes}; {summary['events']} events, {summary['pairs']} "
            f"(receiver, leaker) pairs, {summary['cross_account_pairs']} cross-account; replay "
            f"confirmed {summary['confirmed']} and cleared {summary['cleared']}",
            markup=False,
        )
    finish(bool(summary["findings"]))
