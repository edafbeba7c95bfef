"""The documentation site: it builds with `mkdocs build --strict` (a broken link or anchor, or a
page the nav leaves out, fails), and its command-line and tables pages are what
scripts/cli_reference.py writes from the commands and the schema files, with a section and help
text for every command and a section for every table a schema file creates."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import typer.main
from support.paths import REPO

from forensics.cli import app

CLI_PAGE = REPO / "docs" / "reference" / "cli.md"


def test_the_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "glossary" / "index.html").is_file()


def test_the_generated_pages_are_what_the_script_writes():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_command_has_a_section_and_help_on_the_cli_page():
    page = CLI_PAGE.read_text(encoding="utf-8")
    commands = typer.main.get_group(app).commands
    assert {"ingest", "investigate"} <= set(commands)
    sections = dict(
        re.findall(r"^## `kvforensics ([\w-]+)`\n\n(.*?)(?=^## |\Z)", page, re.M | re.S)
    )
    for name, command in commands.items():
        assert (command.help or "").strip(), f"{name} has no help text"
        assert name in sections, f"{name} has no section in {CLI_PAGE.relative_to(REPO)}"
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert first in " ".join(sections[name].split()), f"{name}'s help is not in its section"
        for param in command.params:
            if param.name == "help":
                continue
            assert getattr(param, "help", None) or param.param_type_name == "argument", (
                f"{name} option {param.name} has no help text"
            )
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert f"`{opt}" in sections[name], f"{name} {opt} is not on the page"


def test_the_optional_pages_are_linked_when_they_exist():
    """The nav names pages that other work adds; the hook drops only those, and only while they
    are missing, so every page under docs/ is reached from the nav."""
    sys.path.insert(0, str(REPO / "scripts"))
    import mkdocs_hooks

    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    for page in mkdocs_hooks.OPTIONAL:
        assert f": {page}\n" in nav, page
    kept = mkdocs_hooks._pruned(
        [{"a": "x.md"}, {"s": [{"p": sorted(mkdocs_hooks.OPTIONAL)[0]}]}], Path("/nonexistent")
    )
    assert kept == [{"a": "x.md"}]


def test_every_table_has_a_section_on_the_tables_page():
    """An oracle apart from the script: the tables named by CREATE TABLE in the schema files."""
    page = (REPO / "docs" / "reference" / "tables.md").read_text(encoding="utf-8")
    created = set()
    for path in (REPO / "queries" / "schema").glob("*.sql"):
        text = path.read_text(encoding="utf-8")
        created |= set(re.findall(r"^CREATE TABLE IF NOT EXISTS\s+(?:main\.)?([\w.]+)", text, re.M))
    assert {"requests", "kv_events", "exposures", "replay_results"} <= created
    sections = set(re.findall(r"^## `([\w.]+)`", page, re.M))
    assert created <= sections, sorted(created - sections)
