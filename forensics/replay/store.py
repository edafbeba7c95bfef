"""Store a replay run in the case database and raise confirmed findings to `confirmed`.

Every run is kept (`replay_runs`, and its rows in `replay_results` and `replay_attention`):
a later run never replaces an earlier run's verdicts. Confidence comes from the runs whose model
is the one the request log names for the suspect, so a run with another model is recorded and
reported but cannot lower (or raise) anything."""

from __future__ import annotations

import duckdb

from forensics import __version__
from forensics.casedb.sql import one_row, sql, tables
from forensics.replay.evidence import Evidence
from forensics.replay.replay import ReplayRun, SuspectResult

CONFIRM_QUERIES = {
    "exposures": "replay/confirm_exposures",
    "affected_requests": "replay/confirm_affected_requests",
    "affected_accounts": "replay/confirm_affected_accounts",
}


def store_run(con: duckdb.DuckDBPyConnection, run: ReplayRun) -> list[str]:
    """Add the run and its rows; note what it matched and what earlier runs confirmed; update
    confidences. Returns the tables updated."""
    con.execute(sql("schema/replay"))
    count = one_row(con.execute(sql("replay/run_count")))
    run.run_id = f"run-{(count[0] if count else 0) + 1:04d}"
    con.execute(sql("replay/insert_run"), _run_row(run))
    for result in sorted(run.results, key=lambda r: r.request_id):
        con.execute(sql("replay/insert_result"), _result_row(result, run))
        for leaker, (share, slots) in sorted(result.attention.items()):
            con.execute(
                sql("replay/insert_attention"),
                {
                    "request_id": result.request_id,
                    "leaker_request_id": leaker,
                    "share": share,
                    "slots": slots,
                    "run_id": run.run_id,
                },
            )
    ids = [r.request_id for r in run.results]
    run.model_matches = dict(
        con.execute(sql("replay/run_matches"), {"run_id": run.run_id}).fetchall()
    )
    run.kept_confirmed = [
        row[0]
        for row in con.execute(
            sql("replay/earlier_confirmed"), {"run_id": run.run_id, "request_ids": ids}
        ).fetchall()
    ]
    return confirm_findings(con)


def _run_row(run: ReplayRun) -> dict[str, object]:
    identity = run.identity
    return {
        "run_id": run.run_id,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "model": run.model,
        "model_path": identity.path if identity else None,
        "served_model": run.served_model or None,
        "config_sha256": identity.config_sha256 if identity else None,
        "weight_files": identity.weight_files if identity else None,
        "weight_sha256": identity.weight_sha256 if identity else None,
        "device": run.device,
        "dtype": identity.dtype if identity else None,
        "tool_version": __version__,
        "suspects": len(run.results),
    }


def _result_row(result: SuspectResult, run: ReplayRun) -> dict[str, object]:
    return {
        "request_id": result.request_id,
        "verdict": result.verdict,
        "reason": result.reason,
        "delivered_sha256": result.delivered_sha256,
        "contaminated_sha256": result.contaminated_sha256,
        "clean_sha256": result.clean_sha256,
        "tokens": result.tokens,
        "seconds": result.seconds,
        "tokens_per_s": result.tokens_per_s,
        "device": run.device,
        "model": run.model,
        "decode_node": result.decode_node,
        "output_tokens": result.output_tokens,
        "foreign_slots": result.foreign_slots,
        "uninitialised_slots": result.uninitialised_slots,
        "uninitialised_share": result.uninitialised_share,
        "run_id": run.run_id,
        "served_model": run.served_model,
        "served_explicit": bool(run.identity is not None and run.identity.served_explicit),
        "basis": result.basis,
        **evidence_columns(result.evidence),
    }


def evidence_columns(evidence: Evidence | None) -> dict[str, object]:
    """replay_results' evidence columns (all NULL without scored delivered tokens)."""
    e = evidence
    return {
        "evidence_bits": e.bits if e else None,
        "scored_tokens": e.tokens if e else None,
        "tokens_for_contamination": e.favour_contaminated if e else None,
        "tokens_for_clean": e.favour_clean if e else None,
        "largest_token_bits": e.largest_for if e else None,
        "smallest_token_bits": e.largest_against if e else None,
        "contaminated_bits_per_token": e.contaminated_bits_per_token if e else None,
        "sampling_bits_per_token": e.sampling_bits_per_token if e else None,
        "plausibility_z": e.plausibility_z if e else None,
        "score_temperature": e.temperature if e else None,
    }


def confirm_findings(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Raise the findings of suspects a run with the request log's model confirmed to
    `confirmed`; returns the tables updated."""
    present = set(tables(con, views=True))
    if "affected_requests" in present:  # keeps confirmations of reconstructed layouts
        con.execute(sql("schema/reconstruct"))
    updated = []
    for table, query in CONFIRM_QUERIES.items():
        if table in present and (table != "affected_requests" or "requests" in present):
            con.execute(sql(query))
            updated.append(table)
    return updated
