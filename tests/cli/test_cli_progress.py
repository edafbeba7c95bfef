"""Progress lines show what the case names (a node, a folder) as text: control and
bidirectional characters escaped, brackets never read as markup, on a terminal or in a log."""

from __future__ import annotations

import io

from rich.console import Console

from forensics.cli.progress import progress_reporter

HOSTILE = "waiting for room on /t for the copies of node=a\x1b[31m\u202e[bold]b[/bold] (1 bytes)"


def test_a_log_line_escapes_what_the_case_names() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=300)
    with progress_reporter(console, "analyze") as progress:
        progress(HOSTILE, 0, None)
    line = out.getvalue()
    assert line.startswith("analyze: waiting for room on /t for the copies of node=a")
    assert "\\u001b[31m\\u202e[bold]b[/bold] (1 bytes) (" in line
    assert "\x1b" not in line and "\u202e" not in line


def test_the_live_display_shows_brackets_as_text() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=300, color_system=None)
    with progress_reporter(console, "analyze") as progress:
        progress(HOSTILE, 0, None)
        console.print("after")  # the display redrawn with the description above it
    shown = out.getvalue()
    assert "[bold]b[/bold]" in shown and "\\u202e" in shown and "\u202e" not in shown
