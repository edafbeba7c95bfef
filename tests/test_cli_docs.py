"""Documentation unit tests: every command has help text and appears in the README; the README
test command is what CI runs."""

from __future__ import annotations

import re

import typer.main
from conftest import REPO

from forensics.cli import app


def _commands() -> dict[str, object]:
    group = typer.main.get_group(app)
    return dict(group.commands)


def test_every_command_has_help_and_is_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = _commands()
    assert {"ingest", "investigate"} <= set(commands)
    for name, command in commands.items():
        assert (command.help or "").strip(), f"{name} has no help text"
        assert f"### `kvforensics {name}" in readme, f"{name} is not in the README CLI reference"
        for param in command.params:
            if param.name != "help":
                assert getattr(param, "help", None) or param.param_type_name == "argument", (
                    f"{name} option {param.name} has no help text"
                )


def test_version(cli):
    code, out, _ = cli("--version")
    assert code == 0 and re.fullmatch(r"kvforensics \d+\.\d+\.\d+\n", out)


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_command = next(b for b in blocks if "pytest" in b)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_usage_errors_exit_2(cli, tmp_path):
    code, _, err = cli("ingest", tmp_path / "missing", "--db", tmp_path / "c.duckdb")
    assert code == 2 and "case folder not found" in err
    code, _, _ = cli("ingest")
    assert code == 2
