"""Time the export stage (lists, notices, timeline, report.html) on a synthetic case.

Usage: python benchmarks/report_speed.py [--requests N] [--out DIR]

The case imitates the incident: two prefill and two decode nodes whose pools are shorter than
the context, a few over-long requests answered 200 with a short time to first token, each of
which read stale KV of the requests served before it. Prints seconds per step."""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forensics.casedb.sql import sql  # noqa: E402
from forensics.report.casedb import open_case  # noqa: E402
from forensics.report.stage import write_all  # noqa: E402

START = datetime(2026, 8, 27, 0, 0)
JURISDICTIONS = ("EU", "UK", "US-CA", "US-NY", "JP", "EU-DE")


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    if not rows:
        return
    con.register("staged_rows", pa.Table.from_pylist(rows))
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM staged_rows")
    con.unregister("staged_rows")


def synthetic_case(db: Path, n_requests: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    con = duckdb.connect(str(db))
    con.execute(sql("schema/case"))
    con.execute(sql("schema/analysis"))
    con.execute(sql("schema/replay"))
    nodes = [
        ("prefill-0", "prefill", 681_280),
        ("prefill-1", "prefill", 681_280),
        ("decode-0", "decode", 1_200_000),
        ("decode-1", "decode", 1_200_000),
    ]
    _insert(
        con,
        "nodes",
        [
            {
                "node": n,
                "role": role,
                "model": "m",
                "engine": "sglang",
                "engine_version": "0.5.2",
                "page_size": 64,
                "pool_slots": pool,
                "context_len": 1_048_576,
                "started_at": START - timedelta(days=1),
                "src_file": "nodes.csv",
                "src_row": i + 1,
            }
            for i, (n, role, pool) in enumerate(nodes)
        ],
    )
    accounts = [f"acct-{i:03d}" for i in range(60)]
    _insert(
        con,
        "accounts",
        [
            {
                "account_id": a,
                "name": f"Customer {i}",
                "contact_email": f"sec@{a}.example",
                "jurisdiction": JURISDICTIONS[i % len(JURISDICTIONS)],
                "src_file": "accounts.csv",
                "src_row": i + 1,
            }
            for i, a in enumerate(accounts)
        ],
    )
    requests: list[dict] = []
    exposures: list[dict] = []
    screening: list[dict] = []
    span = 14 * 86400
    for i in range(n_requests):
        rid = f"req-{i:07d}"
        at = START + timedelta(seconds=span * i / n_requests)
        over = rng.random() < 0.004
        prompt = rng.randint(700_000, 1_000_000) if over else int(rng.lognormvariate(7, 1.3)) + 1
        ttft = 0.05 + (0.02 if over else prompt / 9000)
        pre, dec = f"prefill-{i % 2}", f"decode-{(i // 2) % 2}"
        acct = accounts[rng.randrange(len(accounts))]
        requests.append(
            {
                "request_id": rid,
                "account_id": acct,
                "model": "m",
                "received_at": at,
                "first_token_at": at + timedelta(seconds=ttft * rng.uniform(0.9, 1.1)),
                "completed_at": at + timedelta(seconds=ttft + 3),
                "http_status": 200,
                "prompt_tokens": prompt,
                "completion_tokens": 200,
                "prefill_node": pre,
                "decode_node": dec,
                "src_file": "requests.csv",
                "src_row": i + 1,
            }
        )
        if over and i > 20:
            screening.append(
                {
                    "request_id": rid,
                    "account_id": acct,
                    "prefill_node": pre,
                    "decode_node": dec,
                    "reasons": ["fast-ttft", "over-pool"],
                    "ttft_ms": ttft * 1000,
                    "expected_ttft_ms": prompt / 9,
                    "ledger_covered": True,
                }
            )
            for k in range(1, rng.randint(2, 6)):
                leaker = requests[i - 2 * k]
                count = rng.randint(64, 4096)
                cross = leaker["account_id"] != acct
                exposures.append(
                    {
                        "receiver_request_id": rid,
                        "receiver_account_id": acct,
                        "leaker_request_id": leaker["request_id"],
                        "leaker_account_id": leaker["account_id"],
                        "node": dec,
                        "slot_start": 64 * k * 100,
                        "slot_count": count,
                        "leaker_pos_min": 0,
                        "leaker_pos_max": count - 1,
                        "leaker_part": "prompt",
                        "first_read_at": at + timedelta(seconds=0.1),
                        "last_read_at": at + timedelta(seconds=2),
                        "first_write_at": leaker["received_at"],
                        "last_write_at": leaker["received_at"],
                        "kind": "stale",
                        "cross_account": cross,
                        "confidence": "ledger",
                    }
                )
    _insert(con, "requests", requests)
    _insert(con, "exposures", exposures)
    _insert(con, "screening", screening)
    con.execute((Path(__file__).parent / "affected_from_exposures.sql").read_text())
    con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--out", type=Path, default=Path("out/bench-report"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.out / "case.duckdb"
    db.unlink(missing_ok=True)
    t0 = time.perf_counter()
    synthetic_case(db, args.requests)
    t1 = time.perf_counter()
    con = open_case(db)
    result = write_all(con, args.out, case_label="synthetic", aware_at=None)
    t2 = time.perf_counter()
    print(f"requests            {args.requests}")
    runs = result.figures["cross_runs"] + result.figures["same_account_runs"]
    print(f"exposure runs       {runs}")
    print(f"build case (s)      {t1 - t0:.2f}")
    print(f"export stage (s)    {t2 - t1:.2f}")
    print(f"report.html (bytes) {(args.out / 'report.html').stat().st_size}")


if __name__ == "__main__":
    main()
