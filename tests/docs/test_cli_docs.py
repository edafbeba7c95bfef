"""Documentation unit tests: the version line, usage errors, and the README's test command is
what CI runs. That every command has help text and a section in the generated command-line page
is tests/docs/test_docs_site.py's."""

from __future__ import annotations

import re

from support.paths import REPO


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
