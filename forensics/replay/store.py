"""Store replay verdicts in the case database and raise confirmed findings to `confirmed`."""

from __future__ import annotations

import duckdb

from forensics.replay.replay import ReplayRun, SuspectResult
from forensics.resources import sql

CONFIRM_QUERIES = {
    "exposures": "replay_confirm_exposures",
    "affected_requests": "replay_confirm_affected_requests",
    "affected_accounts": "replay_confirm_affected_accounts",
}


def existing_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.execute(sql("replay_tables")).fetchall()}


def store_run(con: duckdb.DuckDBPyConnection, run: ReplayRun) -> list[str]:
    """Replace these suspects' rows, then update confidences; returns the tables updated."""
    con.execute(sql("schema_replay"))
    ids = [r.request_id for r in run.results]
    con.execute(sql("replay_delete_results"), {"request_ids": ids})
    con.execute(sql("replay_delete_attention"), {"request_ids": ids})
    for result in sorted(run.results, key=lambda r: r.request_id):
        con.execute(sql("replay_insert_result"), _result_row(result, run))
        for leaker, (share, slots) in sorted(result.attention.items()):
            con.execute(sql("replay_insert_attention"), {
                "request_id": result.request_id, "leaker_request_id": leaker,
                "share": share, "slots": slots})
    return _confirm(con)


def _result_row(result: SuspectResult, run: ReplayRun) -> dict[str, object]:
    return {
        "request_id": result.request_id, "verdict": result.verdict, "reason": result.reason,
        "delivered_sha256": result.delivered_sha256,
        "contaminated_sha256": result.contaminated_sha256, "clean_sha256": result.clean_sha256,
        "tokens": result.tokens, "seconds": result.seconds, "tokens_per_s": result.tokens_per_s,
        "device": run.device, "model": run.model, "decode_node": result.decode_node,
        "output_tokens": result.output_tokens, "foreign_slots": result.foreign_slots,
        "unwritten_slots": result.unwritten_slots, "unwritten_share": result.unwritten_share,
    }


def _confirm(con: duckdb.DuckDBPyConnection) -> list[str]:
    tables = existing_tables(con)
    if "affected_requests" in tables:  # keeps confirmations of reconstructed layouts
        con.execute(sql("schema_reconstruct"))
    updated = []
    for table, query in CONFIRM_QUERIES.items():
        if table in tables and (table != "affected_requests" or "requests" in tables):
            con.execute(sql(query))
            updated.append(table)
    return updated
