"""The typer application and the console every command writes to.

Commands live one group per module (forensics/cli/*_cmd.py) and register themselves on `app`."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import typer
import typer.main
from rich.console import Console
from rich.text import Text

from forensics import __version__
from forensics.base.textsafe import terminal_text

try:  # typer 0.29 and later build on their own copy of click
    from typer import _click as click  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - older typer
    import click  # type: ignore[no-redef,unused-ignore]

app = typer.Typer(
    name="kvforensics",
    help=(
        "Find out whose KV-cache data crossed to which customer, and prove it: ingest gateway "
        "logs and engine KV ledgers, rebuild what every read saw, write notification lists "
        "and an impact report."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# The arguments of the command line being run, as forensics.cli.run was given them (the process's
# own arguments only when it was run as `kvforensics`): manifests and reports record them, so a
# command run from Python is recorded as what it ran, not as the process that ran it.
_ARGS: ContextVar[tuple[str, ...] | None] = ContextVar("kvforensics_args", default=None)


def set_command_args(args: list[str]) -> None:
    _ARGS.set(tuple(args))


def command_line() -> tuple[str, ...]:
    """`kvforensics` and the arguments of the command being run."""
    args = _ARGS.get()
    return ("kvforensics", *(sys.argv[1:] if args is None else args))


# Human output goes to stderr so that --json output on stdout stays machine-readable. soft_wrap:
# a message is never broken in the middle of a value (a path, an id) when output is piped; the
# terminal wraps long lines itself.
class _TerminalConsole(Console):
    """A console that shows the control characters of every string it renders (a printed line,
    a table cell, a title) as escapes (terminal_text), so that no name from the case can send
    an escape sequence, a bell or a carriage return to the terminal; rich's own colours are
    added after and stay."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(terminal_text(text), **kwargs)


console = _TerminalConsole(stderr=True, highlight=False, soft_wrap=True)

# Help shows a plain word for each value instead of the Python type ('<list[str]>').
_METAVARS = {"path": "PATH", "int": "INTEGER", "float": "NUMBER", "str": "TEXT", "bool": "BOOL"}


def command() -> click.Command:
    """The click command behind `app`, every option's and argument's value named in words."""
    root = typer.main.get_command(app)
    for cmd in [root, *getattr(root, "commands", {}).values()]:
        for param in cmd.params:
            if param.metavar is not None or getattr(param, "is_flag", False):
                continue
            if param.param_type_name == "argument":  # named after itself: CASE_DIR, PATHS
                param.metavar = (param.name or "value").upper()
                setattr(param, "display_type_rich", _no_type)  # noqa: B010
            else:
                param.metavar = _metavar(param, click.Context(cmd))
    return root


def _no_type(ctx: click.Context) -> None:
    """An argument's help line shows its name and help, not its Python type."""


def _metavar(param: click.Parameter, ctx: click.Context) -> str:
    """'PATH', 'TEXT', ... for typer's '<path>', '<list[str]>', ...; a choice stays a|b."""
    shown = getattr(param, "display_type", lambda _ctx: "")(ctx) or ""
    kind = shown.strip("<>")
    if kind.startswith("list[") and kind.endswith("]"):
        kind = kind[5:-1]
    return _METAVARS.get(kind.lower(), kind.upper() if kind.isidentifier() else kind or "VALUE")


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


def emit_json(payload: Mapping[str, Any]) -> None:
    """Print one JSON object on stdout (for --json)."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def finish(findings: bool) -> None:
    """End a command with the exit-code policy: 0 clean, 1 ran but found something."""
    raise typer.Exit(1 if findings else 0)
