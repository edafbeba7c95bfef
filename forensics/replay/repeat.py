"""Whether investigate's replay would only repeat the case's latest run.

investigate starts from the previous case database in OUT when the inputs are unchanged, and
replay keeps every run (forensics.replay.store). Run again as it was, investigate would add a
run that says what the last one said, and the timeline, the explain pages and the report would
differ from a fresh folder's for nothing. A run is a repeat when the case's inputs are
unchanged since the last ingest, and the latest run had this tool version, the same suspects,
the same model as given (and the same SHA-256 of its config and weight files), served-model
name and device. Then its verdicts stand, and `kvforensics replay` runs them again on
request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from forensics import __version__
from forensics.casedb.sql import one_row, sql, tables


@dataclass(frozen=True)
class LatestRun:
    run_id: str
    confirmed: int  # of its suspects, confirmed by a run with the request log's model


def repeated_run(
    con: duckdb.DuckDBPyConnection,
    model: str | None,
    device: str,
    suspects: Sequence[str],
    served_model: str | None = None,
) -> LatestRun | None:
    """The latest run when replaying `suspects` with `model` (None: no model, every suspect
    cannot-replay) on `device` would repeat it; else None. The caller checks that the inputs
    are unchanged."""
    if "replay_runs" not in tables(con):
        return None
    row = one_row(con.execute(sql("replay/latest_run")))
    if row is None:
        return None
    run_id, given, served, config, weights, ran_on, version, ran, confirmed = row
    if version != __version__ or list(ran or []) != sorted(suspects) or given != (model or ""):
        return None
    from forensics.replay.testmodel import resolve_device

    if ran_on != resolve_device(device):
        return None
    if model is not None:
        from forensics.replay.loader import identify

        identity = identify(model, served_model)
        if (served, config, list(weights or [])) != (
            identity.served_model,
            identity.config_sha256,
            identity.weight_sha256,
        ):
            return None
    return LatestRun(str(run_id), int(confirmed))
