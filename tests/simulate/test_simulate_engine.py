"""Simulator engine behaviour: determinism, allocator invariants read back from the written
ledger, each bug switch visible in the ground truth (and absent when off), and --fixed-at."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from support.simhelp import ordered, read_ledger

from forensics.engines.pools import PagePool
from forensics.simulate.run import SimOptions, simulate

LONG = ("long_share", 0.12)
SMALL = dict(requests=160, seed=5, scale=0.0005, days=0.02, overrides=(LONG,))


def _run(tmp_path_factory, name, **kw):
    out = tmp_path_factory.mktemp(name) / "case"
    opts = {**SMALL, **kw}
    simulate(out, SimOptions(**opts))
    return out


def _digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return _run(tmp_path_factory, "clean", bugs=frozenset())


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    return _run(tmp_path_factory, "incident", bugs=frozenset({"oversize-stub"}))


def test_same_seed_gives_byte_identical_files(tmp_path, incident):
    again = tmp_path / "again"
    simulate(again, SimOptions(**SMALL, bugs=frozenset({"oversize-stub"})))
    assert _digest(again) == _digest(incident)
    other = tmp_path / "other"
    simulate(other, SimOptions(**{**SMALL, "seed": 6}, bugs=frozenset({"oversize-stub"})))
    assert _digest(other)["requests.csv"] != _digest(incident)["requests.csv"]


def test_page_pool_is_lifo_and_never_hands_out_page_zero():
    pool = PagePool(64, 4)  # 16 pages, page 0 reserved
    first = pool.alloc(15)
    assert first is not None and 0 not in first and pool.alloc(1) is None
    pool.release(first[3:6])
    assert list(pool.alloc(2)) == list(first[3:5])  # the most recently freed, in order
    pool.release(np.array([first[9]]))
    assert list(pool.alloc(2)) == [first[9], first[5]]


def _holdings_walk(case, page_size):
    """Replay the written ledger: (double holdings, reads outside holdings, writes outside
    holdings, allocs touching page 0)."""
    held = defaultdict(set)
    bad = {"double": 0, "read": 0, "write": 0, "page0": 0}
    for e in ordered(read_ledger(case)).iter_rows(named=True):
        slots = range(e["slot_start"], e["slot_start"] + e["slot_count"])
        r, node, op = e["request_id"], e["node"], e["op"]
        if op in ("alloc", "share") and e["slot_start"] < page_size:
            bad["page0"] += 1
        for s in slots:
            who = held[(node, s)]
            if op == "alloc":
                bad["double"] += bool(who - {r})
                who.add(r)
            elif op == "share":
                who.add(r)
            elif op == "free":
                who.discard(r)
            elif r not in who:
                bad[op] += 1
    return bad


def test_clean_engine_keeps_every_invariant(clean):
    bad = _holdings_walk(clean, 16)
    assert bad == {"double": 0, "read": 0, "write": 0, "page0": 0}
    truth = clean / "ground_truth"
    assert pl.read_csv(truth / "exposures.csv").height == 0
    assert pl.read_csv(truth / "violations.csv").height == 0


def test_decode_reuses_the_most_recently_freed_pages(tmp_path):
    out = tmp_path / "sparse"
    simulate(out, SimOptions(requests=12, seed=2, scale=0.0005, days=14, bugs=frozenset()))
    df = ordered(read_ledger(out)).filter(pl.col("node").str.starts_with("decode"))
    checked = 0
    for node in df["node"].unique():
        ev = df.filter(pl.col("node") == node)
        last_free_first_slot = None
        prev = None
        for e in ev.iter_rows(named=True):
            if e["op"] == "free" and (
                prev is None or prev["op"] != "free" or prev["request_id"] != e["request_id"]
            ):
                last_free_first_slot = e["slot_start"]
            if e["op"] == "alloc" and e["pos_start"] == 0 and last_free_first_slot is not None:
                assert e["slot_start"] == last_free_first_slot
                checked += 1
            prev = e
    assert checked >= 3


def _pool(case):
    """max_total_num_tokens from the prefill node's start-up log."""
    text = (case / "logs" / "prefill-0.log").read_text()
    return int(re.search(r"max_total_num_tokens=(\d+),", text).group(1))


def _requests(case):
    return pl.read_csv(case / "requests.csv")


def test_oversize_stub_is_the_incident(incident, clean):
    req = _requests(incident)
    pool = _pool(incident)
    long = req.filter(pl.col("prompt_tokens") > pool)
    assert long.height >= 2 and (long["http_status"] == 200).all()
    exp = pl.read_csv(incident / "ground_truth" / "exposures.csv")
    receivers = set(exp["receiver_request_id"])
    assert receivers and receivers <= set(long["request_id"])
    assert set(exp["kind"]) <= {"stale", "overwritten"}
    # early first token: far below the prefill time of the billed prompt at the normal rate
    ttft = pl.col("first_token_at").str.to_datetime(time_zone="UTC") - pl.col(
        "received_at"
    ).str.to_datetime(time_zone="UTC")
    fast = long.with_columns(ttft=ttft.dt.total_microseconds())["ttft"]
    assert (fast < 100_000).all()
    stubs = {r: p for r, p in long.select("request_id", "prompt_tokens").rows()}
    contents = pl.read_ndjson(incident / "contents.jsonl")
    for row in contents.filter(pl.col("request_id").is_in(list(stubs))).iter_rows(named=True):
        assert (
            len(row["processed_token_ids"]) == 1
            and len(row["prompt_token_ids"]) == stubs[row["request_id"]]
        )
    # bug off: the same prompts are refused with HTTP 400 and leave no KV events
    off = _requests(clean).filter(pl.col("prompt_tokens") > pool)
    assert (off["http_status"] == 400).all() and off["completion_tokens"].sum() == 0
    assert not set(off["request_id"]) & set(read_ledger(clean)["request_id"])


def test_fixed_at_refuses_later_over_long_prompts(tmp_path):
    fixed = datetime(2026, 8, 27, 0, 14, tzinfo=UTC)
    out = tmp_path / "fixed"
    simulate(out, SimOptions(**SMALL, bugs=frozenset({"oversize-stub"}), fixed_at=fixed))
    req = _requests(out)
    pool = _pool(out)
    long = req.filter(pl.col("prompt_tokens") > pool).with_columns(
        late=pl.col("received_at").str.to_datetime(time_zone="UTC") >= fixed
    )
    before, after = long.filter(~pl.col("late")), long.filter(pl.col("late"))
    assert before.height and after.height
    assert (before["http_status"] == 200).all() and (after["http_status"] == 400).all()
    assert after["first_token_at"].null_count() == after.height
    receivers = set(pl.read_csv(out / "ground_truth" / "exposures.csv")["receiver_request_id"])
    assert not receivers & set(after["request_id"])
    assert not set(after["request_id"]) & set(read_ledger(out)["request_id"])


@pytest.mark.parametrize(
    "bug, rate, expect",
    [
        ("late-transfer", ("late_transfer_rate", 0.3), {"write-after-free"}),
        ("double-alloc", ("double_alloc_rate", 0.3), {"double-allocation"}),
        ("prefix-collision", ("prefix_collision_rate", 0.5), {"prefix-mismatch"}),
    ],
)
def test_each_bug_shows_in_the_ground_truth(tmp_path, bug, rate, expect):
    out = tmp_path / bug
    busy = {**SMALL, "overrides": (LONG, rate), "days": 0.0002}  # a request every ~100 ms
    simulate(out, SimOptions(**busy, bugs=frozenset({bug})))
    vio = set(pl.read_csv(out / "ground_truth" / "violations.csv")["violation"])
    exp = pl.read_csv(out / "ground_truth" / "exposures.csv")
    found = vio | set(exp["kind"])
    assert expect <= found
    assert found <= expect | {"stale", "overwritten", "write-after-free", "double-allocation"}
    if bug == "late-transfer":
        assert (_requests(out)["http_status"] == 499).any()
        assert "overwritten" in set(exp["kind"])
    if bug == "double-alloc":
        assert "overwritten" in set(exp["kind"])
    if bug == "prefix-collision":
        assert set(exp["kind"]) == {"prefix-mismatch"} and vio == set()


def test_streaming_in_small_chunks_changes_nothing(tmp_path, incident):
    """Flushing every few thousand events gives the same ledger, outputs and ground truth."""
    small = tmp_path / "small"
    simulate(small, SimOptions(**SMALL, bugs=frozenset({"oversize-stub"}), flush_rows=3000))
    cols = ["node", "seq", "ts", "request_id", "op", "slot_start", "slot_count", "pos_start"]
    a = read_ledger(small).select(cols).sort(["node", "seq"])
    b = read_ledger(incident).select(cols).sort(["node", "seq"])
    assert a.height > 10 * 3000 and a.equals(b)
    for name in ("requests.csv", "contents.jsonl", "ground_truth/exposures.csv"):
        assert (small / name).read_bytes() == (incident / name).read_bytes()
