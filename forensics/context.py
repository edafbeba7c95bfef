"""What every stage of `investigate` is given (RunContext) and what it gives back (StageResult).

A leaf of the package: it imports no stage, so every stage module can import it and
forensics.run.pipeline can import every stage (docs/DESIGN.md §8, "Layers")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from forensics.base.progress import ProgressFn, no_progress
from forensics.case.result import IngestResult
from forensics.casedb.sql import QueryLog
from forensics.options import InvestigateOptions


@dataclass(frozen=True)
class StageResult:
    """One stage's outcome.

    summary: the stage's entry under `stages` in manifest.json (JSON-able, no absolute paths; a
    TypedDict that names its keys, or a dict);
    headline: the one line `investigate` prints for the stage ("" prints nothing);
    findings: the stage found something (exposures, violations, quarantined rows...): exit 1;
    tables: the case-database tables the stage wrote;
    files: the files and folders it wrote under OUT (listed in manifest.json)."""

    summary: Mapping[str, Any]
    headline: str = ""
    findings: bool = False
    tables: tuple[str, ...] = ()
    files: tuple[Path, ...] = ()


@dataclass
class RunContext:
    """The run a stage belongs to: the case folder, the (staging) output folder, the open case
    database, the parameters every stage reads, and what earlier stages returned."""

    case_dir: Path
    out_dir: Path
    con: duckdb.DuckDBPyConnection
    params: InvestigateOptions = field(default_factory=InvestigateOptions)
    results: dict[str, StageResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    progress: ProgressFn = no_progress
    ingest: IngestResult | None = None  # what the ingest stage loaded, once it has run
    run_id: str = ""  # names this run in the manifest and the report
    queries: QueryLog = field(default_factory=QueryLog)  # the queries this run loaded
    custody: dict[str, str | None] = field(default_factory=dict)  # forensics.base.manifest.custody

    def wrote(self, path: Path) -> Path:
        self.written.append(path)
        return path

    def summaries(self) -> dict[str, Mapping[str, Any]]:
        """Each finished stage's manifest entry, in the order the stages ran."""
        return {name: result.summary for name, result in self.results.items()}


Stage = Callable[[RunContext], StageResult]
