"""`kvforensics bench`: its figures, and the naive per-slot approach it runs as an independent
check, which must agree exactly with the analysis on ledgers with every kind of exposure."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from forensics.analysis.stage import analyze
from forensics.bench import stages
from forensics.bench.run import (
    NAIVE_SLOT_ROWS_PER_S,
    BenchOptions,
    BenchResult,
    _naive,
    naive_max_slot_rows,
    run_bench,
)
from forensics.case.discover import discover
from forensics.db import connect
from forensics.ingest.load import ingest_into
from forensics.simulate.run import SimOptions, simulate


def _analysed(root: Path, requests: int) -> Path:
    """A small ledger with every bug on and prefix sharing, ingested and analysed; the
    late-transfer bug at ten times its usual rate gives an `overwritten` exposure beside the
    `stale` ones in a few hundred requests (the naive check explodes every range into slots, so
    its time grows with the ledger)."""
    opts = SimOptions(
        requests=requests,
        seed=5,
        scale=0.005,
        truth=False,
        contents=False,
        bugs=frozenset({"oversize-stub", "late-transfer", "double-alloc"}),
        overrides=(("long_share", 0.3), ("late_transfer_rate", 0.3)),
    )
    simulate(root / "case", opts)
    con = connect(root / "case.duckdb")
    try:
        ingest_into(con, root / "case", discover(root / "case"))
        analyze(con)
    finally:
        con.close()
    return root / "case.duckdb"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    return _analysed(tmp_path_factory.mktemp("naive"), 300)


def test_naive_per_slot_agrees_exactly_with_the_analysis(analysed):
    out = stages.naive_per_slot(str(analysed))
    assert out["agrees"], out
    assert out["exposure_token_rows"] > 0 and out["tokens"] > 0, out
    assert out["read_stats_rows"] > 0 and out["slot_rows"] > out["read_stats_rows"], out
    con = connect(analysed, read_only=True)
    try:
        kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM exposures").fetchall()}
        shared = con.execute("SELECT sum(shared_verified) FROM read_stats").fetchone()[0]
    finally:
        con.close()
    assert {"stale", "overwritten"} <= kinds, kinds  # the check covers more than one rule
    assert shared, "the ledger must have prefix-cache hits"


def test_naive_per_slot_notices_a_wrong_answer(tmp_path):
    broken = _analysed(tmp_path, 100)
    con = connect(broken)
    try:
        con.execute(
            "UPDATE exposures SET kind = CASE kind WHEN 'stale' THEN 'overwritten' "
            "ELSE 'stale' END WHERE rowid = 0"
        )
        con.execute("UPDATE read_stats SET own_slots = own_slots + 1 WHERE rowid = 0")
    finally:
        con.close()
    out = stages.naive_per_slot(str(broken))
    assert not out["agrees"]
    assert out["exposure_kind_differences"] > 0 and out["read_stats_differences"] == 2, out


def test_naive_check_runs_only_where_its_slot_rows_fit_its_time(analysed):
    """The bench counts the naive check's slot rows before it runs it (the count the check
    itself makes), and runs it only when they fit the time it is allowed."""
    ran = BenchResult(BenchOptions())
    _naive(ran, ran.options, analysed)
    assert ran.naive_agrees() is True, ran.notes
    rows = ran.stages["naive"].result["slot_rows"]
    assert ran.naive_slot_rows == rows > 0 and ran.to_json()["naive_slot_rows"] == rows
    assert rows <= naive_max_slot_rows(ran.options.naive_timeout_s)
    just = (rows - 0.5) / NAIVE_SLOT_ROWS_PER_S  # the time allowed, half a row short of it
    assert naive_max_slot_rows(just) == rows - 1
    skipped = BenchResult(BenchOptions(naive_timeout_s=just))
    _naive(skipped, skipped.options, analysed)
    assert "naive" not in skipped.stages and skipped.naive_agrees() is None
    assert skipped.naive_slot_rows == rows
    assert skipped.notes == [
        f"naive per-slot approach not run: it would make {rows:,} slot rows (limit "
        f"{rows - 1:,}, what it makes in {just:.0f} s on 2 cores)"
    ]


def test_bench_prints_its_figures_as_json(cli, tmp_path):
    code, out, err = cli(
        "bench", "--events", "20000", "--json", "--workdir", str(tmp_path), "--write-floor"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["stages"]["write_floor"]["result"]["rows"] == data["events"]
    for key in ("events", "ingest_s", "analyze_s", "scan_floor_s", "write_floor_s", "peak_rss_mb"):
        assert data[key] and data[key] > 0, key
    assert 10_000 <= data["events"] <= 40_000, data["events"]
    assert data["naive_agrees"] is True, data["notes"]
    assert data["stages"]["analyze"]["result"]["reads"] > 0
    assert not list(tmp_path.iterdir()), "the bench removes its ledger unless --keep"


def test_bench_ledger_kept_outside_gives_what_the_loaded_ledger_gives(tmp_path):
    """The stages of bench --ledger-external: the simulated parts moved into node=NAME/ folders
    and ingested in place give the same rows and the same analysis as the loaded ledger, and
    the floors read the same events."""
    loaded, outside = tmp_path / "loaded", tmp_path / "outside"
    for root in (loaded, outside):
        stages.simulate_case(str(root / "case"), "short", 300, 7)
    stages.partition_ledger(outside / "case" / stages.CASE_LEDGER)
    assert len(list((outside / "case" / "kv_events").glob("node=*/*.parquet"))) == 4
    assert not list((outside / "case" / "kv_events").glob("*.parquet"))
    results = {}
    for root, ledger in ((loaded, None), (outside, stages.CASE_LEDGER)):
        case, db = str(root / "case"), str(root / "case.duckdb")
        ingested = stages.ingest(case, db, None, ledger)
        floors = (stages.read_floor(case), stages.scan_floor(case))
        results[ledger] = (ingested, stages.analyze(db, None), floors)
    assert results[stages.CASE_LEDGER] == results[None]
    ingested, analysed, _ = results[None]
    assert ingested["rows_loaded"] > 0 and analysed["reads"] > 0
    con = duckdb.connect(str(outside / "case.duckdb"), read_only=True)  # no ledger view
    try:
        with pytest.raises(duckdb.Error, match="not in this file"):  # never an empty table
            con.execute("SELECT count(*) FROM kv_events").fetchall()
        assert con.execute("SELECT count(*) FROM ledger_files").fetchall() == [(4,)]
    finally:
        con.close()


@pytest.mark.parametrize("load", [False, True])
def test_bench_takes_the_default_path_unless_asked_to_load(tmp_path, load):
    """By default the bench times what ingest does by default with a ledger as the tap writes
    it (node=NAME/ folders, read in place, never copied into the case database); with
    --ledger-load (ledger_load) the ledger is loaded into kv_events."""
    options = BenchOptions(events=3000, naive=False, keep=True, workdir=tmp_path, ledger_load=load)
    data = run_bench(options).to_json()
    assert data["ledger_external"] is not load
    (root,) = tmp_path.iterdir()
    parts = list((root / "case" / "kv_events").glob("node=*/*.parquet"))
    assert bool(parts) is not load
    con = duckdb.connect(str(root / "case.duckdb"), read_only=True)
    try:
        kind = con.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_name = 'kv_events'"
        ).fetchone()
    finally:
        con.close()
    assert kind == (("BASE TABLE",) if load else ("VIEW",))


def test_write_floor_writes_every_event(tmp_path):
    """The write floor writes every ledger event: as many as the scan floor reads and ingest
    loads into kv_events; its database file is removed afterwards."""
    case = str(tmp_path / "case")
    stages.simulate_case(case, "short", 300, 7)
    stages.ingest(case, str(tmp_path / "case.duckdb"), None)
    con = duckdb.connect(str(tmp_path / "case.duckdb"), read_only=True)
    row = con.execute("SELECT count(*) FROM kv_events").fetchone()
    con.close()
    floor_db = tmp_path / "floor.duckdb"
    written = stages.write_floor(case, str(floor_db), None)
    assert row is not None and written["rows"] == stages.scan_floor(case)["rows"] == row[0] > 0
    assert not floor_db.exists() and not Path(f"{floor_db}.wal").exists()


def test_bench_makes_a_missing_work_folder_and_refuses_one_it_cannot_make(cli, tmp_path):
    from forensics.bench.run import work_folder

    made = work_folder(tmp_path / "a" / "b")
    assert made.parent == tmp_path / "a" / "b" and made.is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli("bench", "--events", "20000", "--workdir", str(blocker / "sub"))
    assert code == 2, err
    assert "--workdir" in err and str(blocker / "sub") in err and "Traceback" not in err
