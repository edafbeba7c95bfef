"""The typer application and the console every command writes to.

Commands live one group per module (forensics/cli/*_cmd.py) and register themselves on `app`."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from forensics import __version__

app = typer.Typer(
    name="kvforensics",
    help=(
        "Find out whose KV-cache data crossed to which customer, and prove it: ingest gateway "
        "logs and engine KV ledgers, rebuild what every read saw, write notification lists "
        "and an impact report."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Human output goes to stderr so that --json output on stdout stays machine-readable.
console = Console(stderr=True, highlight=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvforensics {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """kvforensics: KV-cache cross-customer exposure forensics."""


def emit_json(payload: dict[str, Any]) -> None:
    """Print one JSON object on stdout (for --json)."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def finish(findings: bool) -> None:
    """End a command with the exit-code policy: 0 clean, 1 ran but found something."""
    raise typer.Exit(1 if findings else 0)
