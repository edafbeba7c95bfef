"""export_stage as an investigate stage on a RunContext with a read-write case database."""

from __future__ import annotations

from pathlib import Path

import duckdb
from support.paths import SAMPLE
from support.report_case import build_case, seq_tables

from forensics.casedb.sql import tables
from forensics.context import RunContext
from forensics.options import InvestigateOptions
from forensics.report.render import STAGE_OF_TABLE
from forensics.report.stage import export_stage
from forensics.run.pipeline import STAGES


def test_export_stage_on_a_run_context(tmp_path: Path) -> None:
    db = build_case(tmp_path / "case.duckdb", seq_tables())
    con = duckdb.connect(str(db))
    ctx = RunContext(
        case_dir=tmp_path / "case",
        out_dir=tmp_path / "out",
        con=con,
        params=InvestigateOptions(aware_at="2026-08-28T09:00:00+02:00"),
    )
    result = export_stage(ctx)
    summary = result.summary
    assert summary["aware_at"] == "2026-08-28T07:00:00.000000Z"
    missing = summary["missing_tables"]  # the replay stage did not run: only its tables are missing
    assert "replay_results" in missing and {STAGE_OF_TABLE[t] for t in missing} == {"replay"}
    assert summary["figures"]["listed_receiving_accounts"] == 4
    written = {p.relative_to(ctx.out_dir).as_posix() for p in result.files}
    assert {
        "report.html",
        "timeline.csv",
        "notifications/leaking_accounts.parquet",
        "notifications/summary.json",
        "notifications/notices",
    } <= written
    assert not [w for w in written if w.startswith("notifications/notices/")]  # folder only
    assert summary["findings"] is True and result.findings is True
    assert summary["headline"].startswith("to notify (cross-account): receiving ")
    assert "/ 4 accounts, leaking " in summary["headline"]
    assert result.headline == summary["headline"]
    # the stand-ins were temporary: no table added, none left shadowing a later stage's
    temp = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()
    assert temp == (0,)
    assert "replay_results" not in tables(con)
    con.close()


def test_export_is_the_last_stage_of_investigate() -> None:
    names = [s.name for s in STAGES]
    assert names == ["ingest", "reconstruct", "analyze", "replay", "export"]
    assert all(s.help for s in STAGES)


def test_an_empty_case_database_still_gives_every_output(tmp_path: Path) -> None:
    from forensics.report.casedb import open_case
    from forensics.report.stage import write_all

    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    con = open_case(db)
    result = write_all(con, tmp_path / "out")
    con.close()
    assert {"requests", "exposures", "replay_results", "engine_evidence"} <= set(
        result.missing_tables
    )
    assert not result.findings
    report = (tmp_path / "out" / "report.html").read_text()
    for stage in ("ingest", "analysis", "screening", "replay", "engine log reading"):
        assert f"The {stage} stage has not run on this case" in report
    assert (tmp_path / "out" / "notifications" / "affected_requests.parquet").is_file()


def test_a_case_database_of_an_older_version_is_reported_with_its_missing_columns(
    tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    """Columns an older version did not write (here the screening's signals and the holes'
    seq range) are shown empty and named, never an internal error; the case database is not
    changed."""
    db = tmp_path / "case.duckdb"
    sample = SAMPLE
    assert cli("ingest", sample, "--db", db)[0] == 0
    assert cli("analyze", "--db", db)[0] == 1
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER TABLE screening DROP COLUMN signals")
        con.execute("ALTER TABLE ledger_holes DROP COLUMN first_seq")
    code, _, err = cli("report", "--db", db, "--out", tmp_path / "out")
    assert code == 1, err
    page = (tmp_path / "out" / "report.html").read_text()
    assert "lacks ledger_holes.first_seq, screening.signals" in page
    with duckdb.connect(str(db), read_only=True) as con:
        cols = {r[0] for r in con.execute("DESCRIBE screening").fetchall()}
    assert "signals" not in cols
