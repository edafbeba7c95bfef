"""`kvforensics tap ENGINE -- COMMAND …`: serve with the KV ledger tap switched on."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app
from forensics.cli.params import TapContents, TapDir, TapEngine, TapNode
from forensics.errors import UsageError


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def tap(
    ctx: typer.Context,
    engine: TapEngine,
    out: TapDir = Path("tap"),
    node: TapNode = None,
    contents: TapContents = False,
) -> None:
    """Run a serving engine's command (after `--`) with the KV ledger tap on: the engine
    writes kv_events, nodes and, with --contents, contents into --dir as rotating Parquet."""
    from forensics.tap.launch import launch

    command = list(ctx.args)
    if not command:
        raise UsageError(
            "give the server's command after --, e.g. "
            "kvforensics tap sglang -- python -m sglang.launch_server …"
        )
    if command[0].startswith("-"):
        raise UsageError(
            f"tap has no option {command[0]}; its options (--dir, --node, --contents) go before "
            "--, the server's command after it"
        )
    try:
        code = launch(engine.value, command, out, node, contents)
    except (FileNotFoundError, PermissionError) as exc:
        raise UsageError(
            f"cannot run the server's command {command[0]!r} ({exc.strerror}); fix: give a "
            "command on PATH, or its path, after --"
        ) from exc
    raise typer.Exit(code)
