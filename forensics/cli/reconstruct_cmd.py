"""`kvforensics reconstruct`: rebuild the page trace of ledger-less nodes from the request log."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.progress import progress_reporter
from forensics.errors import CaseError


@app.command()
def reconstruct(
    db: Path = typer.Option(..., "--db", help="Case database written by `kvforensics ingest`."),
    allocator: str = typer.Option(
        "auto",
        "--allocator",
        help="Allocator to drive: auto (from each node's engine: SGLang's or vLLM's real "
        "class, the LIFO model when unknown), sglang, vllm or lifo.",
    ),
    orders: int = typer.Option(
        8,
        "--orders",
        help="Orders of events explored per node where the timestamps do not decide.",
    ),
    skew_ms: float = typer.Option(
        5.0,
        "--skew-ms",
        help="Operations closer than this (clock resolution and skew between the gateway "
        "and the nodes) are not ordered by their timestamps.",
    ),
    replay_model: str = typer.Option(
        None,
        "--replay-model",
        help="Model to replay the explored layouts with (a local model folder, or test); "
        "default: the test model when the request log names it, else no replay.",
    ),
    replay_device: str = typer.Option("auto", "--replay-device", help="auto, cpu or cuda."),
    replay_budget: int = typer.Option(
        4, "--replay-budget", help="Layouts replayed per stub receiver, most frequent first."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Rebuild kv_events for nodes without a KV ledger by driving the node's real allocator
    with the allocations and frees the request log implies; `analyze` then lists the pairs it
    finds as `reconstructed` exposures. Exit code 1 when cross-account pairs were found."""
    from forensics.db import connect
    from forensics.reconstruct.stage import reconstruct as run_reconstruct

    if not db.is_file():
        raise CaseError(
            f"no case database at {db}; create it with `kvforensics ingest CASE --db {db}`"
        )
    con = connect(db)
    try:
        params = {
            "allocator": allocator,
            "orders": orders,
            "skew_ms": skew_ms,
            "replay_model": replay_model,
            "replay_device": replay_device,
            "replay_budget": replay_budget,
        }
        with progress_reporter(console, "reconstruct") as progress:
            summary = run_reconstruct(con, params, progress)
    finally:
        con.close()
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
