"""Writing one reconstructed node's runs to the reconstructed_* tables."""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import pyarrow as pa

from forensics.casedb.sql import run_script, sql
from forensics.reconstruct.trace import NodeTrace, Req


def insert_requests(
    con: duckdb.DuckDBPyConnection,
    node: str,
    reqs: list[Req],
    reasons: list[list[str]],
    waited: set[int],
    unread: set[int],
    contradicted: set[str],
    sampled: set[int],
) -> None:
    """reconstructed_requests: what each request was modelled as."""
    rows = zip(reqs, reasons, strict=True)
    con.executemany(
        sql("reconstruct/insert_request"),
        [
            {
                "request_id": r.request_id,
                "node": node,
                "stub": r.stub,
                "reasons": why,
                "waited": k in waited,
                "unread": k in unread,
                "contradicted": r.request_id in contradicted,
                "sampled": k in sampled,
            }
            for k, (r, why) in enumerate(rows)
        ],
    )


def store_runs(
    con: duckdb.DuckDBPyConnection,
    trace: NodeTrace,
    events: list[tuple[int, str, str, int, int, int, str | None]],
    support: Mapping[tuple[int, int], float],
    tokens: Mapping[tuple[int, int], int],
    verdicts: dict[tuple[int, int], str],
    ways: Mapping[tuple[int, int], set[str]] | None = None,
) -> None:
    """reconstructed_events (the logged order's run) and reconstructed_exposures (over the
    runs; support: the share of the runs that made the receiver's read that have the pair;
    ways: on an SGLang node, the free lists whose runs have it)."""
    ordered = sorted(enumerate(events), key=lambda e: (e[1][0], e[0]))
    ev = pa.table(
        {
            "ts": pa.array([e[0] for _, e in ordered], pa.timestamp("us")),
            "seq": pa.array(range(len(ordered)), pa.int64()),
            "node": pa.array([trace.node] * len(ordered), pa.string()),
            "request_id": [e[1] for _, e in ordered],
            "op": [e[2] for _, e in ordered],
            "slot_start": pa.array([e[3] for _, e in ordered], pa.int64()),
            "slot_count": pa.array([e[4] for _, e in ordered], pa.int64()),
            "pos_start": pa.array([e[5] for _, e in ordered], pa.int64()),
            "source": pa.array([e[6] for _, e in ordered], pa.string()),
        }
    )
    pairs = _ordered(trace, support)
    ex = _pairs_table(trace, pairs, support, tokens, ways or {})
    ex = ex.append_column("verdict", pa.array([verdicts.get(p) for p in pairs], pa.string()))
    con.register("_rc_events", ev)
    con.register("_rc_exposures", ex)
    try:
        run_script(con, sql("reconstruct/insert"))
    finally:
        con.unregister("_rc_events")
        con.unregister("_rc_exposures")


def store_other_ways(
    con: duckdb.DuckDBPyConnection,
    trace: NodeTrace,
    support: Mapping[tuple[int, int], float],
    tokens: Mapping[tuple[int, int], int],
    ways: Mapping[tuple[int, int], set[str]],
) -> None:
    """reconstructed_other_ways: the pairs kept out of the lists because only the runs of the
    ways the node's named release does not build have them."""
    if not support:
        return
    con.register("_rc_other", _pairs_table(trace, _ordered(trace, support), support, tokens, ways))
    try:
        run_script(con, sql("reconstruct/insert_other_ways"))
    finally:
        con.unregister("_rc_other")


def _ordered(trace: NodeTrace, support: Mapping[tuple[int, int], float]) -> list[tuple[int, int]]:
    rq = trace.reqs
    return sorted(support, key=lambda p: (rq[p[0]].request_id, rq[p[1]].request_id))


def _pairs_table(
    trace: NodeTrace,
    pairs: list[tuple[int, int]],
    support: Mapping[tuple[int, int], float],
    tokens: Mapping[tuple[int, int], int],
    ways: Mapping[tuple[int, int], set[str]],
) -> pa.Table:
    """One row per (receiver, leaker) pair, in the order given."""
    rq = trace.reqs
    return pa.table(
        {
            "receiver_request_id": pa.array([rq[a].request_id for a, _ in pairs], pa.string()),
            "receiver_account_id": pa.array([rq[a].account_id for a, _ in pairs], pa.string()),
            "leaker_request_id": pa.array([rq[b].request_id for _, b in pairs], pa.string()),
            "leaker_account_id": pa.array([rq[b].account_id for _, b in pairs], pa.string()),
            "node": pa.array([trace.node] * len(pairs), pa.string()),
            "tokens": pa.array([tokens[p] for p in pairs], pa.int64()),
            "support": pa.array([support[p] for p in pairs], pa.float64()),
            "read_at": pa.array([rq[a].first_token_us for a, _ in pairs], pa.timestamp("us")),
            "cross_account": pa.array(
                [rq[a].account_id != rq[b].account_id for a, b in pairs], pa.bool_()
            ),
            "free_lists": pa.array(
                [sorted(ways[p]) if p in ways else None for p in pairs], pa.list_(pa.string())
            ),
        }
    )
