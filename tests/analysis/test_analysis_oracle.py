"""The whole analysis (DuckDB ordering, compiled sweep, SQL aggregation) against the naive
per-slot oracle on random ledgers: exposure runs, violations, read_stats and tokens exactly."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st
from support import oracle
from support.analysis_case import EPOCH, insert, insert_ledger, new_case, request_row
from support.strategies import REQUESTS, busy_ledger, ledger, request_accounts

from forensics.analysis.stage import analyze


def _us(value) -> int:
    return round((value - EPOCH).total_seconds() * 1_000_000)


def _check(events: list[dict], requests: dict[str, tuple[str, int]]) -> None:
    con = new_case()
    insert_ledger(con, events)
    insert(
        con,
        "requests",
        [request_row(r, a, p, decode_node="n1") for r, (a, p) in requests.items()],
    )
    analyze(con)
    facts = oracle.run(events)
    prompts = {r: p for r, (_a, p) in requests.items()}

    got = {
        (r, w, n, k, s0, c, p0, p1, part, _us(fr), _us(lr), _us(fw), _us(lw))
        for (r, w, n, k, s0, c, p0, p1, part, fr, lr, fw, lw) in con.execute(
            "SELECT receiver_request_id, leaker_request_id, node, kind, slot_start, slot_count,"
            " leaker_pos_min, leaker_pos_max, leaker_part, first_read_at, last_read_at,"
            " first_write_at, last_write_at FROM exposures"
        ).fetchall()
    }
    assert got == oracle.exposure_runs(facts, prompts)

    got_v = {
        (r, n, v, o, s0, c, _us(f), _us(la))
        for (r, n, v, o, s0, c, f, la) in con.execute(
            "SELECT request_id, node, violation, other_request_id, slot_start, slot_count,"
            " first_at, last_at FROM violations"
        ).fetchall()
    }
    assert got_v == oracle.violation_runs(facts)

    assert set(con.execute("SELECT * FROM read_stats").fetchall()) == oracle.read_stats(facts)

    tokens = {
        (r, n, w): t
        for (r, n, w, t) in con.execute(
            "SELECT receiver_request_id, node, leaker_request_id, tokens FROM exposure_tokens"
        ).fetchall()
    }
    assert tokens == oracle.tokens(facts)

    expected = defaultdict(lambda: [set(), 0])
    for (r, _n, w), t in oracle.tokens(facts).items():
        ra, wa = requests[r][0], requests[w][0]
        if ra != wa:
            for side, req, acct in (("receiving", r, ra), ("leaking", w, wa)):
                expected[(side, acct)][0].add(req)
                expected[(side, acct)][1] += t
    got_a = {
        (s, a): (n, t)
        for (s, a, n, t) in con.execute(
            "SELECT side, account_id, requests, tokens FROM affected_accounts"
        ).fetchall()
    }
    assert got_a == {k: (len(v[0]), v[1]) for k, v in expected.items()}


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_analysis_matches_oracle_on_random_ledgers(data: st.DataObject) -> None:
    events = data.draw(ledger(max_events=30))
    _check(events, data.draw(request_accounts(list(REQUESTS))))


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_analysis_matches_oracle_on_busy_ledgers(data: st.DataObject) -> None:
    events = data.draw(busy_ledger())
    names = sorted({e["request_id"] for e in events})
    _check(events, data.draw(request_accounts(names)))
