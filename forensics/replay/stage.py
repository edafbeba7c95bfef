"""The replay stage: pick the suspects, replay them, store the verdicts.

Suspects are the receivers of the `exposures` table and the requests screening flagged; a
caller may also name requests. Runs as `kvforensics replay` and as a stage of `investigate`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import duckdb

from forensics.analysis.reasons import SUSPECT_REASONS
from forensics.casedb.dbopen import create_case_schema
from forensics.casedb.sql import sql, tables
from forensics.context import RunContext, StageResult
from forensics.errors import CaseError, StageUnavailable, UsageError
from forensics.replay import INSTALL_HINT, replay_available
from forensics.replay.verdicts import Basis, Verdict

if TYPE_CHECKING:  # replay.replay loads only once replay runs
    from forensics.replay.replay import ReplayRun, SuspectResult

SUSPECT_QUERIES = {
    "exposures": "replay/suspects_exposures",
    "screening": "replay/suspects_screening",
}


def find_suspects(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Receivers in exposures and screened requests, sorted; CaseError when neither table is."""
    present = set(tables(con, views=True))
    found = [t for t in SUSPECT_QUERIES if t in present]
    if not found:
        raise CaseError(
            "the case database has no exposures or screening table: run the "
            "analysis first (kvforensics analyze), or name suspects with --request"
        )
    ids: set[str] = set()
    for table in found:
        params = {"suspect_reasons": list(SUSPECT_REASONS)} if table == "screening" else {}
        ids.update(row[0] for row in con.execute(sql(SUSPECT_QUERIES[table]), params).fetchall())
    return sorted(ids)


def require_replay() -> None:
    if not replay_available():
        raise StageUnavailable(f"replay needs torch and transformers: {INSTALL_HINT}")


def run_case_replay(
    con: duckdb.DuckDBPyConnection,
    model: str | None,
    device: str,
    request_ids: Sequence[str] | None = None,
    progress: Any = None,
    device_map: str | None = None,
    served_model: str | None = None,
) -> Any:
    """Replay the named requests (default: every suspect), store the run, return it.

    model None: the test model when the request log names it for every suspect, else every
    suspect is cannot-replay (a real model must be given). A named request that the request
    log does not hold, or a model that cannot be found, raises UsageError."""
    require_replay()
    from forensics.replay.replay import replay_all
    from forensics.replay.store import store_run

    _ensure_tables(con)
    suspects = sorted(set(request_ids)) if request_ids else find_suspects(con)
    if request_ids:
        _known(con, suspects)
    chosen, why = (model, "") if model else default_model(con, suspects)
    run = replay_all(
        con,
        chosen,
        device,
        suspects,
        progress,
        missing_model=why,
        device_map=device_map,
        served_model=served_model,
    )
    run.updated_tables = store_run(con, run)
    return run


def _known(con: duckdb.DuckDBPyConnection, request_ids: Sequence[str]) -> None:
    unknown = [
        r[0]
        for r in con.execute(
            sql("replay/unknown_requests"), {"request_ids": list(request_ids)}
        ).fetchall()
    ]
    if unknown:
        shown = ", ".join(unknown[:5]) + (" …" if len(unknown) > 5 else "")
        raise UsageError(
            f"--request: {len(unknown)} id(s) not in the request log: {shown}; "
            "name requests that the case's requests table holds"
        )


def default_model(
    con: duckdb.DuckDBPyConnection, suspects: Sequence[str]
) -> tuple[str | None, str]:
    """('test', '') when every suspect was served by the test model; else (None, why)."""
    from forensics.replay.testmodel import TEST_MODEL, TEST_MODEL_NAME

    rows = con.execute(sql("replay/request_models"), {"request_ids": list(suspects)}).fetchall()
    models = [r[0] for r in rows]
    if models and all(m == TEST_MODEL_NAME for m in models):
        return TEST_MODEL, ""
    return None, (
        f"no local model directory was given for {', '.join(models) or 'the case'}; "
        "pass one with kvforensics replay --model PATH"
    )


def _ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    missing = {"requests", "kv_events"} - set(tables(con, views=True))
    if missing:
        raise CaseError(
            f"the case database lacks {', '.join(sorted(missing))}: run kvforensics ingest first"
        )
    create_case_schema(con)  # creates an empty contents table when none was kept


class ResultJson(TypedDict):
    """One replayed suspect in the summary (`seconds` and `tokens_per_s` with timings only)."""

    request_id: str
    verdict: Verdict
    basis: Basis | None
    evidence_bits: float | None
    reason: str
    model_matches: bool | None  # the run's model is the one the request log names
    delivered_sha256: str | None
    contaminated_sha256: str | None
    clean_sha256: str | None
    tokens: int
    attention: dict[str, float | None]  # leaker request -> share of attention
    seconds: NotRequired[float]
    tokens_per_s: NotRequired[float | None]


class ReplaySummary(TypedDict):
    """What `kvforensics replay --json` prints and stages.replay records in manifest.json."""

    headline: str
    findings: bool
    run_id: str
    model: str
    served_model: str
    device: str
    suspects: int
    verdicts: dict[Verdict, int]
    updated_tables: list[str]
    kept_confirmed: list[str]
    other_model: list[str]
    results: list[ResultJson]


class ReplayNote(TypedDict):
    """stages.replay when replay did not run: why (status unavailable, skipped, or repeat: the
    case's latest run was made with the same inputs, suspects, model and device)."""

    status: str
    headline: str


def summarise(run: ReplayRun, timings: bool = True) -> ReplaySummary:
    """The JSON summary of a replay run (without wall-clock figures when timings is False)."""
    counts = run.counts()
    return {
        "headline": headline(run),
        "findings": counts[Verdict.CONFIRMED] > 0 or bool(run.kept_confirmed),
        "run_id": run.run_id,
        "model": run.model,
        "served_model": run.served_model,
        "device": run.device,
        "suspects": len(run.results),
        "verdicts": counts,
        "updated_tables": run.updated_tables,
        "kept_confirmed": run.kept_confirmed,
        "other_model": _other_model(run),
        "results": [_result_json(r, run, timings) for r in run.results],
    }


def headline(run: ReplayRun) -> str:
    counts = run.counts()
    text = (
        f"{len(run.results)} suspect(s) replayed with {run.model or '(no model)'} on "
        f"{run.device}: {counts[Verdict.CONFIRMED]} confirmed, "
        f"{counts[Verdict.NOT_REPRODUCED]} not reproduced, "
        f"{counts[Verdict.CANNOT_REPLAY]} cannot be replayed"
    )
    other = _other_model(run)
    if other and run.model:
        text += (
            f"; {len(other)} were served by a model other than {run.served_model!r} "
            "(recorded, not counted; pass --served-model NAME if it is the same model)"
        )
    if run.kept_confirmed:
        text += (
            f"; {len(run.kept_confirmed)} stay confirmed by an earlier run with the served model"
        )
    return text


def _other_model(run: ReplayRun) -> list[str]:
    return sorted(r for r, same in run.model_matches.items() if not same)


def _result_json(r: SuspectResult, run: ReplayRun, timings: bool) -> ResultJson:
    out: ResultJson = {
        "request_id": r.request_id,
        "verdict": r.verdict,
        "basis": r.basis,
        "evidence_bits": r.evidence.bits if r.evidence else None,
        "reason": r.reason,
        "model_matches": run.model_matches.get(r.request_id),
        "delivered_sha256": r.delivered_sha256,
        "contaminated_sha256": r.contaminated_sha256,
        "clean_sha256": r.clean_sha256,
        "tokens": r.tokens,
        "attention": {w: share for w, (share, _) in sorted(r.attention.items())},
    }
    if timings:
        out["seconds"], out["tokens_per_s"] = r.seconds, r.tokens_per_s
    return out


def replay_stage(ctx: RunContext) -> StageResult:
    """investigate's replay stage: every suspect, with ctx.params.replay_model (default: the
    test model when the case was served by it) on ctx.params.replay_device.
    Without the extra it only says how to enable replay."""
    if not replay_available():
        off = f"replay is off; to confirm suspects, install it: {INSTALL_HINT}"
        note = ReplayNote(status="unavailable", headline=off)
        return StageResult(note, headline=off)
    try:
        find_suspects(ctx.con)
    except CaseError:
        skipped = "replay skipped: no analysis tables"
        note = ReplayNote(status="skipped", headline=skipped)
        return StageResult(note, headline=skipped)
    options = ctx.params
    repeat = _repeat(ctx)
    if repeat is not None:
        return repeat
    run = run_case_replay(
        ctx.con,
        options.replay_model,
        options.replay_device.value,
        None,
        ctx.progress,
        served_model=options.served_model,
    )
    summary = summarise(run, timings=False)
    return StageResult(
        summary,
        headline=str(summary["headline"]),
        findings=bool(summary["findings"]),
        tables=tuple(run.updated_tables),
    )


def _repeat(ctx: RunContext) -> StageResult | None:
    """The stage's result when this run would only repeat the case's latest replay run
    (forensics.replay.repeat): its verdicts stand, and the analysis' fresh tables get their
    confirmations back."""
    from forensics.replay.repeat import repeated_run
    from forensics.replay.store import confirm_findings

    if ctx.ingest is None or not ctx.ingest.unchanged:
        return None
    options = ctx.params
    suspects = find_suspects(ctx.con)
    model = options.replay_model or default_model(ctx.con, suspects)[0]
    latest = repeated_run(
        ctx.con, model, options.replay_device.value, suspects, options.served_model
    )
    if latest is None:
        return None
    updated = confirm_findings(ctx.con)
    text = (
        f"{len(suspects)} suspect(s), the model and the device are those of {latest.run_id} "
        f"on unchanged inputs: its verdicts stand ({latest.confirmed} confirmed); "
        "kvforensics replay runs them again"
    )
    note = ReplayNote(status="repeat", headline=text)
    return StageResult(note, headline=text, findings=latest.confirmed > 0, tables=tuple(updated))
