"""The investigate pipeline: files -> ingest -> reconstruct -> analysis -> (replay) -> exports
and report.

Each stage is a function `stage(ctx) -> dict` that reads the case database, writes its own
tables and files, and returns a small JSON-able summary. Stages run in the order of STAGES."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from forensics.progress import ProgressFn, no_progress
from forensics.sql import QueryLog


@dataclass
class RunContext:
    case_dir: Path
    out_dir: Path
    con: duckdb.DuckDBPyConnection
    params: dict[str, Any] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    progress: ProgressFn = no_progress
    ingest: Any = None  # the IngestResult of this run, once ingest has run
    run_id: str = ""  # names this run in the manifest and the report
    queries: QueryLog = field(default_factory=QueryLog)  # the queries this run loaded

    def wrote(self, path: Path) -> Path:
        self.written.append(path)
        return path


Stage = Callable[[RunContext], dict[str, Any]]


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Stage
    help: str


def stages() -> list[StageSpec]:
    """The stages of `investigate`, in order. Imported lazily so optional extras stay optional."""
    from forensics.analysis.stage import analyze_stage
    from forensics.ingest.stage import ingest_stage
    from forensics.reconstruct.stage import reconstruct_stage
    from forensics.replay.stage import replay_stage
    from forensics.report.stage import export_stage

    return [
        StageSpec("ingest", ingest_stage, "load and validate the case folder"),
        StageSpec("reconstruct", reconstruct_stage, "page traces of nodes without a ledger"),
        StageSpec("analyze", analyze_stage, "exposures, violations, screening, affected parties"),
        StageSpec("replay", replay_stage, "confirm suspects by replaying them on a model"),
        StageSpec("export", export_stage, "notification lists, notices, timeline, report"),
    ]
