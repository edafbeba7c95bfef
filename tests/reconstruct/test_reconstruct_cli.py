"""`kvforensics reconstruct` from the command line, through analyze to the notification lists:
the accounts listed as `reconstructed` are the simulator's true cross-account parties, each with
its support share (the LIFO pool, so no engines environment is needed); what screening adds
stays on the lists as `possible`."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import polars as pl
from support.cases import query

from forensics.simulate.run import SimOptions, simulate


def test_reconstruct_analyze_report(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    full = tmp_path / "full"
    simulate(
        full,
        SimOptions(
            requests=300,
            seed=4,
            scale=0.001,
            days=1.0,
            contents=False,
            overrides=(("accounts", 200),),
        ),
    )
    case = tmp_path / "case"
    shutil.copytree(full, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    db = tmp_path / "case.duckdb"
    assert cli("ingest", case, "--db", db)[0] == 0
    assert cli("analyze", "--db", db)[0] == 1
    screened_only = set(query(db, "SELECT side, account_id FROM affected_accounts"))
    code, out, _ = cli("reconstruct", "--db", db, "--allocator", "lifo", "--json")
    summary = json.loads(out)
    assert code == 1 and summary["cross_account_pairs"] > 0
    assert {n["allocator"] for n in summary["nodes"]} == {"lifo"}
    assert cli("reconstruct", "--db", db, "--orders", "0")[0] == 2  # usage error
    assert cli("analyze", "--db", db)[0] == 1
    # reconstruction ranks and adds: every account screening listed is still listed
    assert screened_only <= set(query(db, "SELECT side, account_id FROM affected_accounts"))
    assert cli("report", "--db", db, "--out", tmp_path / "out")[0] == 1
    truth = pl.read_csv(full / "ground_truth" / "accounts.csv", infer_schema_length=0)
    for side in ("receiving", "leaking"):
        with open(tmp_path / "out" / "notifications" / f"{side}_accounts.csv") as fh:
            rows = list(csv.DictReader(fh))
        want = set(truth.filter(pl.col("side") == side)["account_id"])
        rebuilt = [r for r in rows if r["confidence"] == "reconstructed"]
        assert {r["account_id"] for r in rebuilt} == want, side
        assert all(0 < float(r["support"]) <= 1 for r in rebuilt)
        # reconstruction ranks and adds; the screening pairs it did not find stay `possible`
        assert {r["confidence"] for r in rows} <= {"reconstructed", "possible"}
