"""The SGLang tap against SGLang's real paged KV allocator, driven in SGLang's call order by
tests/support/sglang_harness.py (prefill extend with a radix-cache prefix hit, disaggregated
transfer, decode steps, the 1-token stub): the analysis finds exactly the stale slots the stub
read, as the driver's own record of who last wrote each slot says."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import pytest
from support.engines import engines_python
from support.paths import REPO, TESTS_DIR

from forensics.cli import run as cli


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sglang")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [str(engines_python()), str(TESTS_DIR / "support" / "sglang_harness.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    db = out / "case.duckdb"
    # loaded, so that plain DuckDB reads kv_events below
    assert cli(["ingest", str(out / "case"), "--db", str(db), "--ledger-load"]) == 0
    code = cli(["analyze", "--db", str(db)])
    return {"db": db, "analyze": code, "truth": json.loads((out / "truth.json").read_text())}


def _rows(db: Path, text: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(text).fetchall()


def test_stub_reads_exactly_the_stale_slots(harness: dict[str, Any]) -> None:
    db, truth = harness["db"], harness["truth"]
    assert harness["analyze"] == 1
    stub = truth["s1"]
    want = {
        ("s1", writer, "decode-0", "stale", stub["decode_slots"][pos])
        for pos, writer in enumerate(stub["first_read"][: stub["prompt_tokens"]])
        if writer not in (None, "s1")
    }
    assert len(want) > 20  # the stub's pre-allocated pages held two earlier requests' KV
    got = {
        (r, w, node, kind, s)
        for r, w, node, kind, s0, n in _rows(
            db,
            "SELECT receiver_request_id, leaker_request_id, node, kind, slot_start, "
            "slot_count FROM exposures",
        )
        for s in range(s0, s0 + n)
    }
    assert got == want
    assert _rows(db, "SELECT count(*) FROM violations") == [(0,)]


def test_radix_prefix_hit_is_verified_and_nothing_else_leaks(harness: dict[str, Any]) -> None:
    db = harness["db"]
    stats = {
        (r, n): (own, sv, su)
        for r, n, own, sv, su in _rows(
            db,
            "SELECT request_id, node, own_slots, shared_verified, shared_unverified "
            "FROM read_stats",
        )
    }
    assert stats[("r3", "prefill-0")] == (10, 16, 0)  # 4 pages of r1's prefix, then its own
    receivers = {r for (r,) in _rows(db, "SELECT DISTINCT receiver_request_id FROM exposures")}
    assert receivers == {"s1"}
    frees = _rows(
        db,
        "SELECT node, sum(slot_count) FILTER (op = 'free'), "
        "sum(slot_count) FILTER (op IN ('alloc', 'share')) FROM kv_events "
        "GROUP BY 1 ORDER BY 1",
    )
    assert all(f == a for _n, f, a in frees)  # every page handed out was taken back
