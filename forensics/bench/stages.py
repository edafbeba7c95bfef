"""The benchmark's stages, each a top-level function so it can run in its own process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forensics.casedb.sql import one_row, sql
from forensics.db import connect
from forensics.ledger.default import CASE_LEDGER

# Traffic of each mix: `short` is typical chat with, as in a real incident, a few over-pool
# prompts (one in 2,000, between 70 % of the context and all of it: each is stubbed and reads
# earlier customers' KV); `long` is long-context traffic, half of the prompts between 20 % of
# the context and the full 1,048,576 tokens.
MIXES: dict[str, tuple[tuple[str, Any], ...]] = {
    "short": (("long_share", 0.0005), ("long_low", 0.7)),
    "long": (("long_share", 0.5), ("long_low", 0.2)),
}


# A constant load: more events means a longer period, not more requests at once (the number of
# events per request grows with concurrency, as pages fragment).
REQUESTS_PER_DAY = 20_000


def ledger_parts(case_dir: str) -> str:
    """The glob of the ledger's Parquet parts: kv_events/, or its node=NAME/ folders."""
    return str(Path(case_dir) / CASE_LEDGER / "**" / "*.parquet")


def simulate_case(case_dir: str, mix: str, requests: int, seed: int) -> dict[str, Any]:
    from forensics.simulate.run import SimOptions, simulate

    opts = SimOptions(
        requests=requests,
        seed=seed,
        truth=False,
        contents=False,
        days=requests / REQUESTS_PER_DAY,
        overrides=MIXES[mix],
    )
    summary = simulate(Path(case_dir), opts)
    return {
        "events": summary["events"],
        "requests": summary["requests"],
        "events_per_second": summary["events_per_second"],
    }


def partition_ledger(folder: Path) -> None:
    """Move the simulator's parts (NODE-part-N.parquet) into node=NODE/ folders, the layout of a
    ledger kept outside the case database."""
    for part in sorted(folder.glob("*.parquet")):
        node = part.name.rsplit("-part-", 1)[0]
        (folder / f"node={node}").mkdir(exist_ok=True)
        part.rename(folder / f"node={node}" / part.name)


def ingest(
    case_dir: str, db_path: str, memory_limit: str | None, ledger: str | None = None
) -> dict[str, Any]:
    """Ingest the case; with `ledger` (a folder of the case), the ledger is checked in place and
    kept outside the database, as `ingest --ledger-external` does."""
    from forensics.case.discover import discover
    from forensics.ingest.load import ingest_into
    from forensics.ledger.store import ExternalLedger

    con = connect(Path(db_path), memory_limit=memory_limit)
    try:
        external = ExternalLedger(ledger) if ledger is not None else None
        result = ingest_into(con, Path(case_dir), discover(Path(case_dir)), ledger=external)
    finally:
        con.close()
    return {"rows_loaded": result.rows_loaded, "rows_quarantined": result.rows_quarantined}


def analyze(db_path: str, memory_limit: str | None) -> dict[str, Any]:
    from forensics.analysis.stage import analyze as run_analysis

    con = connect(Path(db_path), memory_limit=memory_limit)
    try:
        out = run_analysis(con)  # the default options: two nodes swept at once
    finally:
        con.close()
    kept = {
        "reads": out["reads"],
        "exposure_runs": out["exposure_runs"],
        "exposures_by_kind": out["exposures_by_kind"],
    }
    figures = out.get("figures") or {}
    tokens = {"cross_tokens": figures.get("cross_tokens"), "tokens": None}
    if figures:  # every token exposure of the ledger, cross-account and same-account
        tokens["tokens"] = figures["cross_tokens"] + figures["same_account_tokens"]
    return {**kept, **tokens}


def scan_floor(case_dir: str) -> dict[str, Any]:
    """DuckDB reading every column of every kv_events Parquet file: the floor for any analysis."""
    con = connect(":memory:")
    try:
        pattern = ledger_parts(case_dir)
        row = one_row(con.execute(sql("ingest/read_parquet_whole"), {"path": pattern}))
    finally:
        con.close()
    return {"rows": int(row[0]) if row else 0}


def read_floor(case_dir: str) -> dict[str, Any]:
    """DuckDB only reading the files ingest reads (every column of the kv_events Parquet parts
    and of the request log): the floor for ingest."""
    con = connect(":memory:")
    try:
        pattern = ledger_parts(case_dir)
        events = con.execute(sql("ingest/read_parquet_whole"), {"path": pattern}).fetchall()
        requests = con.execute(
            sql("bench/read_floor_csv"), {"path": str(Path(case_dir) / "requests.csv")}
        ).fetchall()
    finally:
        con.close()
    return {"rows": int(events[0][0]) + int(requests[0][0])}


def write_floor(case_dir: str, db_path: str, memory_limit: str | None) -> dict[str, Any]:
    """DuckDB reading the ledger's Parquet parts and writing them as they are into a new
    database file at db_path, in the case database's storage format and with ingest's settings
    (no checks, none of the columns ingest adds): the floor for a loaded ledger. The file is
    removed afterwards."""
    from forensics.casedb.dbopen import open_database
    from forensics.casedb.sql import run_script

    path = Path(db_path)
    con = open_database(path, memory_limit=memory_limit, schema=False)
    try:
        run_script(con, sql("ingest/settings"))
        run_script(con, sql("bench/write_floor"), {"pattern": ledger_parts(case_dir)})
        row = one_row(con.execute(sql("bench/write_floor_rows")))
    finally:
        con.close()
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
    return {"rows": int(row[0]) if row else 0}


def naive_per_slot(db_path: str) -> dict[str, Any]:
    """The trap of docs/DESIGN.md §7, and an independent check: explode every range into one row per
    slot, classify each read slot by joins, and compare with the analysis' tables. Returns the
    naive figures and the number of rows of read_stats, exposure_tokens and exposures that
    differ from them."""
    con = connect(Path(db_path), read_only=True)
    try:
        cur = con.execute(sql("bench/naive_per_slot"))
        names = [d[0] for d in cur.description]
        row = one_row(cur)
    finally:
        con.close()
    out = {n: int(v or 0) for n, v in zip(names, row or (), strict=True)}
    out["agrees"] = all(v == 0 for n, v in out.items() if n.endswith("_differences"))
    return out


def slot_volume(db_path: str) -> int:
    """How many per-slot rows the naive approach would make (sum of write and read ranges)."""
    con = connect(Path(db_path), read_only=True)
    try:
        row = one_row(con.execute(sql("bench/slot_volume")))
    finally:
        con.close()
    return int(row[0]) if row and row[0] is not None else 0
