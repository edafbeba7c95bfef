"""The replay stage: pick the suspects, replay them, store the verdicts.

Suspects are the receivers of the `exposures` table and the requests screening flagged; a
caller may also name requests. Runs as `kvforensics replay` and as a stage of `investigate`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from forensics.errors import CaseError, StageUnavailable
from forensics.replay import INSTALL_HINT, replay_available
from forensics.resources import sql

SUSPECT_QUERIES = {"exposures": "replay_suspects_exposures",
                   "screening": "replay_suspects_screening"}


def find_suspects(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Receivers in exposures and screened requests, sorted; CaseError when neither table is."""
    from forensics.replay.store import existing_tables

    tables = existing_tables(con)
    found = [t for t in SUSPECT_QUERIES if t in tables]
    if not found:
        raise CaseError("the case database has no exposures or screening table: run the "
                        "analysis first (kvforensics analyze), or name suspects with --request")
    ids: set[str] = set()
    for table in found:
        ids.update(row[0] for row in con.execute(sql(SUSPECT_QUERIES[table])).fetchall())
    return sorted(ids)


def require_replay() -> None:
    if not replay_available():
        raise StageUnavailable(f"replay needs torch and transformers: {INSTALL_HINT}")


def run_case_replay(con: duckdb.DuckDBPyConnection, model: str | None, device: str,
                    request_ids: Sequence[str] | None = None, progress: Any = None) -> Any:
    """Replay the named requests (default: every suspect), store the results, return the run.

    model None: the test model when the request log names it for every suspect, else every
    suspect is cannot-replay (a real model directory must be given)."""
    require_replay()
    from forensics.replay.replay import replay_all
    from forensics.replay.store import store_run

    _ensure_tables(con)
    suspects = sorted(set(request_ids)) if request_ids else find_suspects(con)
    chosen, why = (model, "") if model else default_model(con, suspects)
    run = replay_all(con, chosen, device, suspects, progress, missing_model=why)
    run.updated_tables = store_run(con, run)
    return run


def default_model(con: duckdb.DuckDBPyConnection, suspects: Sequence[str]
                  ) -> tuple[str | None, str]:
    """('test', '') when every suspect was served by the test model; else (None, why)."""
    from forensics.replay.testmodel import TEST_MODEL, TEST_MODEL_NAME

    rows = con.execute(sql("replay_request_models"), {"request_ids": list(suspects)}).fetchall()
    models = [r[0] for r in rows]
    if models and all(m == TEST_MODEL_NAME for m in models):
        return TEST_MODEL, ""
    return None, (f"no local model directory was given for {', '.join(models) or 'the case'}; "
                  "pass one with kvforensics replay --model PATH")


def _ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    from forensics.replay.store import existing_tables

    missing = {"requests", "kv_events"} - existing_tables(con)
    if missing:
        raise CaseError(f"the case database lacks {', '.join(sorted(missing))}: "
                        "run kvforensics ingest first")
    con.execute(sql("schema"))  # creates an empty contents table when none was kept


def summarise(run: Any, timings: bool = True) -> dict[str, Any]:
    """The JSON summary of a replay run (without wall-clock figures when timings is False)."""
    counts = run.counts()
    return {
        "headline": headline(run), "findings": counts["confirmed"] > 0,
        "model": run.model, "device": run.device, "suspects": len(run.results),
        "verdicts": counts, "updated_tables": run.updated_tables,
        "results": [_result_json(r, timings) for r in run.results],
    }


def headline(run: Any) -> str:
    counts = run.counts()
    return (f"{len(run.results)} suspect(s) replayed with {run.model or '(no model)'} on "
            f"{run.device}: {counts['confirmed']} confirmed, {counts['not-reproduced']} not "
            f"reproduced, {counts['cannot-replay']} cannot be replayed")


def _result_json(r: Any, timings: bool) -> dict[str, Any]:
    out = {
        "request_id": r.request_id, "verdict": r.verdict, "reason": r.reason,
        "delivered_sha256": r.delivered_sha256, "contaminated_sha256": r.contaminated_sha256,
        "clean_sha256": r.clean_sha256, "tokens": r.tokens,
        "attention": {w: share for w, (share, _) in sorted(r.attention.items())},
    }
    if timings:
        out.update(seconds=r.seconds, tokens_per_s=r.tokens_per_s)
    return out


def replay_stage(ctx: Any) -> dict[str, Any]:
    """investigate's replay stage: every suspect, with ctx.params['replay_model'] (default: the
    test model when the case was served by it) on ctx.params['replay_device'] (default auto).
    Without the extra it only says how to enable replay."""
    if not replay_available():
        return {"status": "unavailable",
                "headline": f"replay is off; to confirm suspects, install it: {INSTALL_HINT}"}
    try:
        suspects = find_suspects(ctx.con)
    except CaseError:
        return {"status": "skipped", "headline": "replay skipped: no analysis tables"}
    model = ctx.params.get("replay_model")
    device = str(ctx.params.get("replay_device") or "auto")
    run = run_case_replay(ctx.con, model, device, suspects, ctx.progress)
    return summarise(run, timings=False)
