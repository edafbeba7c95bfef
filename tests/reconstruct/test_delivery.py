"""`kvforensics jitter`: the gateway's delivery jitter measured against a KV ledger
(forensics/reconstruct/delivery.py), on a case small enough to work out by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from support.cases import write_case

T0 = 1_787_824_800_000_000  # 2026-08-27T10:00:00Z in microseconds
STEP = 1_000  # the node's steps at T0 + 1, 2, 3 ms

# a: 3 outputs (steps 1, 2, 3); b: 2 outputs (steps 1, 2); c: no ledger rows; d: prefilled on
# n2 and decoded on n1 (disaggregated: two clocks), logged far off, not measured.
REQUESTS = (
    "request_id,account_id,model,received_at,first_token_at,completed_at,http_status,"
    "prompt_tokens,completion_tokens\n"
    f"a,x,m,{T0},{T0 + STEP + 500},{T0 + 3 * STEP + 700},200,4,3\n"
    f"b,y,m,{T0},{T0 + STEP + 2_500},{T0 + 2 * STEP + 300},200,4,2\n"
    f"c,y,m,{T0},{T0 + 9 * STEP},{T0 + 9 * STEP},200,4,1\n"
    f"d,y,m,{T0},{T0 + 90 * STEP},{T0 + 99 * STEP},200,4,2\n"
)
LEDGER = (
    "ts,node,request_id,op,slot_start,slot_count,pos_start,source\n"
    + "".join(
        f"{T0 + step * STEP},n1,{rid},write,{slot},1,{pos},{source}\n"
        for rid, slot, writes in (
            ("a", 0, [(1, 0, "prefill"), (2, 4, "decode"), (3, 5, "decode")]),
            ("b", 8, [(1, 0, "prefill"), (2, 4, "decode")]),
        )
        for step, pos, source in writes
    )
    + (f"{T0 + STEP},n2,d,write,0,1,0,prefill\n{T0 + 2 * STEP},n1,d,write,16,1,4,decode\n")
)


def _case(tmp: Path, cli: Callable[..., tuple[int, str, str]], ledger: bool = True) -> Path:
    files = {"requests.csv": REQUESTS, **({"kv_events.csv": LEDGER} if ledger else {})}
    case = write_case(tmp / "case", files)
    db = tmp / "case.duckdb"
    code, _, err = cli("ingest", case, "--db", db)
    assert code == 0, err
    return db


def test_the_widest_gap_to_an_output_of_the_same_or_an_earlier_step_is_the_jitter(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """Logged (step): a's first 1.5 ms (1), b's first 3.5 ms (1), b's completion 2.3 ms (2),
    a's completion 3.7 ms (3). a's first token was logged 2.0 ms before b's, of its own step:
    the jitter is 2.0 ms (b's completion, 1.2 ms before b's first token of an earlier step,
    is within it). Delays after the step: 0.5, 2.5, 0.3, 0.7 ms. c has no ledger: not
    counted."""
    db = _case(tmp_path, cli)
    code, out, _ = cli("jitter", "--db", db, "--json")
    assert code == 0
    assert json.loads(out)["nodes"] == [
        {
            "node": "n1",
            "requests": 2,
            "outputs": 4,
            "steps": 3,
            "needed_us": 2_000,
            "delay_min_us": 300,
            "delay_median_us": 500,
            "delay_p99_us": 2_500,
            "delay_max_us": 2_500,
        }
    ]
    code, _, err = cli("jitter", "--db", db)  # the console writes to stderr
    assert code == 0
    text = " ".join(err.split())
    assert "logged up to 2.0 ms apart" in text and "--delivery-jitter-ms 2.0 or more" in text


def test_a_case_without_a_ledger_is_told_where_to_measure(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    db = _case(tmp_path, cli, ledger=False)
    code, _, err = cli("jitter", "--db", db)
    text = " ".join(err.split())
    assert code == 2 and str(db) in text and "kvforensics tap" in text, text


def test_a_decode_node_is_told_how_far_the_logged_times_reorder_its_allocations(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    """p is allocated at 1 ms on the node (logged arrival 0) and freed at 9 ms (logged
    completion 10 ms); q is allocated at 9.5 ms, after p's free, but its arrival was logged at
    8 ms, 2 ms before p's completion: out of order by 2 ms, so --skew-ms must be above 2. q's
    free (19 ms, logged 20 ms) keeps its place."""
    requests = (
        "request_id,account_id,model,received_at,first_token_at,completed_at,http_status,"
        "prompt_tokens,completion_tokens,prefill_node,decode_node\n"
        f"p,x,m,{T0},{T0 + 5_000},{T0 + 10_000},200,4,3,pf,d1\n"
        f"q,y,m,{T0 + 8_000},{T0 + 15_000},{T0 + 20_000},200,4,3,pf,d1\n"
    )
    ledger = "ts,node,request_id,op,slot_start,slot_count\n" + "".join(
        f"{T0 + t},d1,{rid},{op},{slot},8\n"
        for t, rid, op, slot in (
            (1_000, "p", "alloc", 0),
            (9_000, "p", "free", 0),
            (9_500, "q", "alloc", 0),
            (19_000, "q", "free", 0),
        )
    )
    case = write_case(tmp_path / "case", {"requests.csv": requests, "kv_events.csv": ledger})
    db = tmp_path / "case.duckdb"
    assert cli("ingest", case, "--db", db)[0] == 0
    code, out, _ = cli("jitter", "--db", db, "--json")
    assert code == 0
    got = json.loads(out)
    assert got["nodes"] == []
    assert got["decode_nodes"] == [
        {"node": "d1", "requests": 2, "operations": 4, "needed_us": 2_000, "out_of_order": 1}
    ]
    code, _, err = cli("jitter", "--db", db)
    assert code == 0 and "by up to 2.0 ms" in " ".join(err.split())
