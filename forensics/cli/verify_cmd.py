"""`kvforensics verify`: check OUT and the case folder against OUT/manifest.json."""

from __future__ import annotations

from pathlib import Path

import typer

from forensics.cli.app import app, console, emit_json, finish
from forensics.verify import verify as run_verify


@app.command()
def verify(
    out: Path = typer.Argument(..., help="Output folder written by investigate."),
    case: Path = typer.Option(
        None,
        "--case",
        help="The case folder, where it has moved since the run (default: the "
        "folder the manifest names).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Re-hash every input and output the manifest lists: exit 0 when all match, 1 listing
    what differs (changed, missing, or not in the manifest)."""
    result = run_verify(out, case)
    if json_out:
        emit_json(result.to_json())
    else:
        for d in result.differences:
            console.print(f"{d.side} {d.path}: {d.why}", markup=False)
        state = (
            "all match" if not result.differences else (f"{len(result.differences)} difference(s)")
        )
        console.print(
            f"verify: {result.checked} file(s) checked against the manifest; {state}", markup=False
        )
    finish(bool(result.differences))
