"""Re-ingest never duplicates; an interrupted ingest leaves the case exactly as it was."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.cases import query
from support.paths import REPO

REQ = "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
EV = "ts,node,request_id,op,slot_start,slot_count,pos_start\n"


def _case(case, n_requests: int):
    rows = "".join(
        f"R{i},a{i % 3},m,2026-08-27T10:00:0{i % 10}Z,200,{i}\n" for i in range(n_requests)
    )
    events = "".join(f"2026-08-27T10:00:00Z,n1,R{i},alloc,{i},1,0\n" for i in range(n_requests))
    return case(
        {
            "requests.csv": REQ + rows,
            "kv_events/p1.csv": EV + events,
            "kv_events/p2.csv": EV + events,
        }
    )


def _snapshot(db):
    return {
        t: query(db, f"SELECT * FROM {t} ORDER BY ALL")
        for t in ("requests", "kv_events", "quarantine", "input_files")
    }


def test_reingest_is_idempotent(case, cli, tmp_path):
    root = _case(case, 5)
    db = tmp_path / "c.duckdb"
    cli("ingest", root, "--db", db)
    first = _snapshot(db)
    code, out, _ = cli("ingest", root, "--db", db, "--json")
    assert code == 0 and json.loads(out)["unchanged"] is True
    assert _snapshot(db) == first
    (root / "requests.csv").write_text((root / "requests.csv").read_text() + "R9,a,m,1,200,1\n")
    code, out, _ = cli("ingest", root, "--db", db, "--json")
    assert json.loads(out)["unchanged"] is False
    assert query(db, "SELECT count(*) FROM requests") == [(6,)]
    assert query(db, "SELECT count(*) FROM kv_events") == [(10,)]


def test_exception_mid_ingest_rolls_back(case, cli, tmp_path, monkeypatch):
    import forensics.ingest.load as load

    root = _case(case, 5)
    db = tmp_path / "c.duckdb"
    cli("ingest", root, "--db", db)
    before = _snapshot(db)
    _case(case, 7)  # the case changes; the next ingest fails half-way
    real = load._load_file
    calls = {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(load, "_load_file", failing)
    code, _, err = cli("ingest", root, "--db", db)
    assert code == 2 and "interrupted" in err
    assert _snapshot(db) == before


@pytest.mark.parametrize("kill_at", [1, 3])
def test_hard_kill_mid_ingest_leaves_previous_state(case, cli, tmp_path, kill_at):
    root = _case(case, 5)
    db = tmp_path / "c.duckdb"
    cli("ingest", root, "--db", db)
    before = _snapshot(db)
    _case(case, 8)
    assert _killed_ingest(root, db, kill_at) == -9
    assert _snapshot(db) == before


def _killed_ingest(root, db, kill_at: int) -> int:
    """Ingest root into db in a process killed (SIGKILL) as it loads its kill_at-th file."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        import forensics.ingest.load as load
        real = load._load_file
        calls = [0]
        def dying(*a, **k):
            calls[0] += 1
            if calls[0] == {kill_at}:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*a, **k)
        load._load_file = dying
        load.ingest_case(Path(sys.argv[1]), Path(sys.argv[2]))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(root), str(db)],
        cwd=REPO,
        capture_output=True,
        env={"PYTHONPATH": str(REPO)},
        check=False,
    )
    return proc.returncode


@pytest.mark.parametrize("how", ["bad file", "interrupted"])
def test_a_failed_first_ingest_leaves_no_case_database(case, cli, tmp_path, monkeypatch, how):
    """Left with its tables and no rows, the database read as a case where nothing happened:
    `analyze` found no exposures in it and exited 0."""
    import forensics.ingest.load as load

    root = _case(case, 5)
    if how == "bad file":
        (root / "kv_events" / "p2.parquet").write_bytes(b"PAR1 not a parquet file")
    else:

        def interrupted(*_args, **_kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(load, "_load_file", interrupted)
    db = tmp_path / "new" / "c.duckdb"
    code, _, _ = cli("ingest", root, "--db", db)
    assert code == 2
    assert not db.exists() and not db.with_name("c.duckdb.wal").exists()
    code, _, err = cli("analyze", "--db", db)
    assert code == 2 and "no case database" in err


def test_a_killed_first_ingest_is_not_taken_for_a_case(case, cli, tmp_path):
    """A kill leaves the database the first ingest created, with its tables and no rows: the
    commands that work on the case refuse it, saying to ingest again; the report says that the
    ingest has not run."""
    root = _case(case, 5)
    db = tmp_path / "c.duckdb"
    assert _killed_ingest(root, db, 1) == -9 and db.exists()
    for argv in (["analyze", "--db", db], ["reconstruct", "--db", db], ["replay", "--db", db]):
        code, _, err = cli(*argv)
        assert code == 2, argv
        assert "holds no ingested case" in " ".join(err.split()), argv
    out = tmp_path / "out"  # the report says so in itself
    assert cli("report", "--db", db, "--out", out)[0] == 0
    assert "The ingest stage has not run on this case" in (out / "report.html").read_text()
    code, _, _ = cli("ingest", root, "--db", db)  # ingested again, it is a case
    assert code == 0
    code, _, _ = cli("analyze", "--db", db)
    assert code in (0, 1)


def test_a_case_loaded_by_other_code_is_loaded_again(case, cli, tmp_path, monkeypatch):
    """The same files, but ingest's code changed since they were loaded (another version, a
    check added): the stored result is stale and the case is loaded anew, not reused."""
    import forensics.ingest.load as load

    root = _case(case, 5)
    db = tmp_path / "c.duckdb"
    cli("ingest", root, "--db", db)
    monkeypatch.setattr(load, "ingest_code_digest", lambda: "another version's code")
    code, out, _ = cli("ingest", root, "--db", db, "--json")
    assert code == 0 and json.loads(out)["unchanged"] is False
    code, out, _ = cli("ingest", root, "--db", db, "--json")
    assert code == 0 and json.loads(out)["unchanged"] is True  # now recorded as this code's
