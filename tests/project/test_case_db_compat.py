"""A case database written by the project opens in an older DuckDB release (1.1, the oldest the
storage format promises) as well as in the installed one.

The old release is installed from the package index into a virtual environment kept in pytest's
cache folder, so later runs reuse it; without a reachable index the test is skipped, saying so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from support.paths import SAMPLE

from forensics.cli import run

# Run inside the old release: print its version and a few facts read from the case.
READER = """
import json, sys
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
out = {
    "version": duckdb.__version__,
    "requests": con.execute("SELECT count(*) FROM requests").fetchone()[0],
    "exposures": con.execute("SELECT count(*), sum(slot_count) FROM exposures").fetchone(),
    "accounts": con.execute(
        "SELECT side, account_id, tokens FROM affected_accounts ORDER BY side, account_id"
    ).fetchall(),
    "first_read": con.execute(
        "SELECT CAST(timezone('UTC', min(first_read_at)) AS VARCHAR) FROM exposures"
    ).fetchone()[0],
    "types": con.execute(
        "SELECT data_type FROM information_schema.columns "
        "WHERE table_name = 'exposures' AND column_name = 'first_read_at'"
    ).fetchone()[0],
}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def case_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ingest + analyze of the sample incident, through the CLI."""
    db = tmp_path_factory.mktemp("compat") / "case.duckdb"
    assert run(["ingest", str(SAMPLE), "--db", str(db)]) in (0, 1)
    assert run(["analyze", "--db", str(db)]) == 1  # the sample holds findings
    return db


def _read_with(python: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", READER, str(db)], capture_output=True, text=True, timeout=120
    )


def test_case_opens_in_duckdb_1_1(old_python: Path, case_db: Path) -> None:
    done = _read_with(old_python, case_db)
    assert done.returncode == 0, done.stderr
    old = json.loads(done.stdout)
    assert old["version"].startswith("1.1.")  # really the old release
    assert duckdb.__version__ != old["version"]
    here = json.loads(_read_with(Path(sys.executable), case_db).stdout)
    assert here["version"] == duckdb.__version__
    # The same figures in both releases, and they are not empty.
    for key in ("requests", "exposures", "accounts", "first_read", "types"):
        assert old[key] == here[key], key
    assert old["requests"] > 0 and old["exposures"][0] > 0 and old["accounts"]


def test_the_default_format_would_not_open(old_python: Path, tmp_path: Path) -> None:
    """The check above can fail: a file in the installed release's own newest format is refused
    by the old release (so the case database's format is a choice, not luck)."""
    path = tmp_path / "newest.duckdb"
    con = duckdb.connect(str(path), config={"storage_compatibility_version": "latest"})
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    con.close()
    done = _read_with(old_python, path)
    if done.returncode == 0:
        pytest.skip(f"duckdb {duckdb.__version__}'s newest format is still readable by 1.1")
    assert "version" in done.stderr.lower() or "serializ" in done.stderr.lower(), done.stderr
