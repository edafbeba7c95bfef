"""Run every stage of an investigation and write the evidence manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.db import connect
from forensics.errors import UsageError
from forensics.manifest import build_manifest, utc_now, write_manifest
from forensics.pipeline import RunContext, stages
from forensics.progress import ProgressFn, no_progress
from forensics.resources import reset_queries_used
from forensics.schema_docs import apply_comments


@dataclass
class InvestigateOptions:
    assume_utc: bool = False
    aware_at: str | None = None
    replay_model: str | None = None
    replay_device: str = "auto"
    served_model: str | None = None
    rules: str | None = None
    command: list[str] = field(default_factory=list)
    ray: str | None = None  # Ray cluster address, or "local"; None: the local engine
    ledger_external: str | None = None  # ledger kept outside the database: folder or URL

    def params(self) -> dict[str, Any]:
        out = {"assume_utc": self.assume_utc, "aware_at": self.aware_at,
               "replay_model": self.replay_model, "replay_device": self.replay_device,
               "served_model": self.served_model, "rules": self.rules}
        extra = {"ray": self.ray, "ledger_external": self.ledger_external}
        return {**out, **{k: v for k, v in extra.items() if v is not None}}


@dataclass
class InvestigateResult:
    out_dir: Path
    stages: dict[str, dict[str, Any]]
    written: list[Path]

    @property
    def findings(self) -> bool:
        return any(
            bool(s.get("findings")) or bool(s.get("rows_quarantined")) for s in self.stages.values()
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "findings": self.findings,
            "stages": self.stages,
            "written": [str(p) for p in self.written],
        }


def investigate(
    case_dir: Path, out_dir: Path, options: InvestigateOptions, progress: ProgressFn = no_progress
) -> InvestigateResult:
    if not case_dir.is_dir():  # before anything is created under OUT
        raise UsageError(f"case folder not found: {case_dir}; nothing was written to {out_dir}")
    started = utc_now()
    reset_queries_used()
    out_dir.mkdir(parents=True, exist_ok=True)
    con = connect(out_dir / "case.duckdb")
    ctx = RunContext(case_dir, out_dir, con, params=options.params(), progress=progress,
                     run_id=started)
    ctx.wrote(out_dir / "case.duckdb")
    try:
        for spec in stages():
            progress(spec.name, 0, None)
            ctx.summaries[spec.name] = spec.run(ctx)
        apply_comments(con)  # every stage's tables described in the case database
    finally:
        con.close()
    manifest_path = ctx.wrote(out_dir / "manifest.json")
    write_manifest(manifest_path, _manifest(ctx, options, started))
    return InvestigateResult(out_dir, ctx.summaries, ctx.written)


def _manifest(ctx: RunContext, options: InvestigateOptions, started: str) -> dict[str, Any]:
    ingest = ctx.ingest
    inputs = [f.as_row() for f in ingest.files] if ingest else []
    skipped = [{"path": p, "why": w} for p, w in ingest.skipped] if ingest else []
    outputs = [p.relative_to(ctx.out_dir).as_posix() for p in ctx.written]
    return build_manifest(
        inputs=inputs,
        skipped=skipped,
        params=ctx.params,
        stages=ctx.summaries,
        outputs=outputs,
        started_at=started,
        finished_at=utc_now(),
        command=options.command,
    )
