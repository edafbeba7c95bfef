"""`kvforensics tap ENGINE -- COMMAND …`: serve with the KV ledger tap switched on."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app
from forensics.errors import UsageError

ENGINES = ("sglang", "vllm")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def tap(
    ctx: typer.Context,
    engine: str = typer.Argument(..., help="sglang or vllm."),
    out: Path = typer.Option(Path("tap"), "--dir", help="Folder the ledger is written to."),
    node: str = typer.Option(
        None, "--node", help="Node name in the ledger (default: host:port of the server)."
    ),
    contents: bool = typer.Option(
        False, "--contents", help="Also record prompt and output token ids (for replay)."
    ),
) -> None:
    """Run a serving engine's command (after `--`) with the KV ledger tap on: the engine
    writes kv_events, nodes and, with --contents, contents into --dir as rotating Parquet."""
    from forensics.tap.launch import launch

    if engine not in ENGINES:
        raise UsageError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    command = list(ctx.args)
    if not command:
        raise UsageError(
            "give the server's command after --, e.g. "
            "kvforensics tap sglang -- python -m sglang.launch_server …"
        )
    raise typer.Exit(launch(engine, command, out, node, contents))
