"""Habits of the command line: help without Python type placeholders or pointers into the
source, shell completion, one progress line per stage when output is piped, messages kept on
one line when piped, and no trace of a run on a case folder that does not exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from support.paths import EXAMPLES

from forensics.cli import app


def _kvforensics(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in its own process, stdout and stderr piped (not a terminal)."""
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "forensics", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


COMMANDS = sorted(typer.main.get_group(app).commands)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_names_values_in_words(name: str, cli) -> None:
    code, out, err = cli(name, "--help")
    assert code == 0, err
    assert not re.search(r"<[A-Za-z_\[\]|,. ]+>", out), out  # no '<str>', '<list[str]>'
    assert not re.search(r"forensics/|\.py\b|README\.md", out), out


def test_shell_completion_is_offered(cli) -> None:
    code, out, _ = cli("--help")
    assert code == 0
    assert "--install-completion" in out and "--show-completion" in out


def test_investigate_prints_a_line_per_stage_when_piped(tmp_path: Path) -> None:
    done = _kvforensics(
        "investigate", str(EXAMPLES / "semantics-seq"), "--out", str(tmp_path / "out")
    )
    assert done.returncode == 1, done.stderr  # the example holds findings
    stages = re.findall(r"^investigate: (\w+) \(\d+\.\d s\)$", done.stderr, re.M)
    assert stages[0] == "ingest" and "analyze" in stages and stages[-1] == "export", done.stderr
    assert "replay" in stages


def test_messages_are_not_wrapped_when_piped(tmp_path: Path) -> None:
    deep = tmp_path / ("a-long-folder-name-" * 6) / "case-folder-that-is-not-there"
    done = _kvforensics("investigate", str(deep), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert any(str(deep) in line for line in done.stderr.splitlines()), done.stderr
    assert not (tmp_path / "out").exists()  # nothing created for a missing case folder


def test_running_out_of_duckdbs_memory_is_an_error_with_its_fix(cli, monkeypatch, tmp_path) -> None:
    """A memory limit too small for the case is the user's to raise, not a bug to report."""
    import duckdb

    from forensics.analysis import stage

    def out_of_memory(*_args: object, **_kwargs: object) -> None:
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")

    monkeypatch.setattr(stage, "analyze", out_of_memory)
    db = tmp_path / "c.duckdb"
    code, _, err = cli("ingest", EXAMPLES / "semantics-seq", "--db", db)
    code, out, err = cli("analyze", "--db", db)
    text = out + err
    assert code == 2
    assert "ran out of its memory limit" in text and "KVFORENSICS_MEMORY_LIMIT" in text
    assert "internal error" not in text
