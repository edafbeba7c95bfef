"""Command-line interface: the one place where exceptions become messages and exit codes.

Exit codes: 0 clean; 1 ran, but rows were quarantined or findings exist; 2 usage error or
failure."""

from __future__ import annotations

import sys
import traceback

import duckdb
from rich.markup import escape
from typer.exceptions import Abort, TyperException

from forensics.base.textsafe import visible
from forensics.casedb.interrupts import reaching_every_statement
from forensics.cli import (  # noqa: F401  (each module registers its commands)
    analyze_cmd,
    audit_cmd,
    bench_cmd,
    explain_cmd,
    ingest_cmd,
    investigate_cmd,
    jitter_cmd,
    probe_cmd,
    reconstruct_cmd,
    replay_cmd,
    report_cmd,
    simulate_cmd,
    tap_cmd,
    verify_cmd,
)
from forensics.cli.app import app, command, console, set_command_args
from forensics.cli.ray_option import optional_values
from forensics.errors import KvfError, disk_full, first_line, interrupted
from forensics.ledger.storage import STORAGE_FIX, storage_failure

__all__ = ["app", "main", "run"]


def run(argv: list[str] | None = None) -> int:
    """Run the CLI with `argv` and return the exit code instead of exiting."""
    try:
        given = sys.argv[1:] if argv is None else list(argv)
        set_command_args(given)
        args = optional_values(given)
        with reaching_every_statement():  # Ctrl-C stops DuckDB's statements in every thread
            result = command().main(args=args, prog_name="kvforensics", standalone_mode=False)
    except KvfError as exc:
        # control characters of a hostile file, column or value name shown as escapes
        console.print(f"[bold red]error:[/] {escape(visible(str(exc)))}")
        return exc.exit_code
    except TyperException as exc:  # usage errors: unknown option, missing argument
        show = getattr(exc, "show", None)
        show() if callable(show) else console.print(f"error: {exc}", markup=False)
        return 2
    except (Abort, KeyboardInterrupt):
        console.print("interrupted; nothing was changed by the step in progress")
        return 2
    except duckdb.OutOfMemoryException as exc:  # a budget too small for the case: not a bug
        console.print(
            f"[bold red]error:[/] DuckDB ran out of its memory limit: {escape(first_line(exc))}\n"
            "nothing was changed by the step in progress; fix: give it more memory "
            "(KVFORENSICS_MEMORY_LIMIT=8GB, or bench's --memory-limit), or free some on "
            "this machine"
        )
        return 2
    except Exception as exc:  # the last boundary: never a bare traceback without an exit code
        if interrupted(exc):  # Ctrl-C while a DuckDB statement ran
            console.print("interrupted; nothing was changed by the step in progress")
            return 2
        full = disk_full(exc)  # the case database's disk, OUT's, or a spill's
        if full is not None:
            console.print(
                f"[bold red]error:[/] a disk ran out of room: {escape(visible(full))}\n"
                "nothing is left half-written (DuckDB commits a step whole or not at all, and "
                "OUT is replaced only once complete); fix: free room on that disk, or give the "
                "case database (--db) and OUT (--out) a disk with room, then run the command "
                "again"
            )
            return 2
        why = storage_failure(exc)  # a read of an external ledger whose storage failed
        if why is not None:
            console.print(
                f"[bold red]error:[/] cannot read from the ledger's storage: {escape(visible(why))}"
                f"\nnothing was changed by the step in progress; fix: {STORAGE_FIX}"
            )
            return 2
        console.print("[bold red]internal error[/] (please report it with this traceback):")
        console.print(traceback.format_exc(), markup=False)
        return 2
    if result == 130:  # click reports Ctrl-C as 130 when it handles it itself
        console.print("interrupted; nothing was changed by the step in progress")
        return 2
    return int(result) if isinstance(result, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))
