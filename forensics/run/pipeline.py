"""The investigate pipeline: files -> ingest -> reconstruct -> analysis -> (replay) -> exports
and report.

Each stage is a function `stage(ctx: RunContext) -> StageResult` (forensics.context) that reads
the case database, writes its own tables and files, and returns what it found. STAGES lists
them once, in the order they run. Every stage module imports at load time without the optional
extras (torch for replay, ray): a stage imports those inside the function that needs them."""

from __future__ import annotations

from dataclasses import dataclass

from forensics.analysis.stage import analyze_stage
from forensics.context import RunContext, Stage, StageResult
from forensics.ingest.stage import ingest_stage
from forensics.reconstruct.stage import reconstruct_stage
from forensics.replay.stage import replay_stage
from forensics.report.stage import export_stage


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Stage
    help: str


STAGES: tuple[StageSpec, ...] = (
    StageSpec("ingest", ingest_stage, "load and validate the case folder"),
    StageSpec("reconstruct", reconstruct_stage, "page traces of nodes without a ledger"),
    StageSpec("analyze", analyze_stage, "exposures, violations, screening, affected parties"),
    StageSpec("replay", replay_stage, "confirm suspects by replaying them on a model"),
    StageSpec("export", export_stage, "notification lists, notices, timeline, report"),
)


def run_stage(spec: StageSpec, ctx: RunContext) -> StageResult:
    """Run one stage and record its result and the files it wrote on ctx."""
    ctx.progress(spec.name, 0, None)
    result = spec.run(ctx)
    ctx.results[spec.name] = result
    ctx.written.extend(result.files)
    return result
