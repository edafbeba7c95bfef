"""Run every stage of an investigation and write the evidence manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.db import connect
from forensics.errors import UsageError
from forensics.ingest.hashing import sha256_file
from forensics.manifest import build_manifest, output_files, utc_now, write_manifest
from forensics.outdir import check_out, staged
from forensics.pipeline import RunContext, stages
from forensics.progress import ProgressFn, no_progress
from forensics.schema_docs import apply_comments
from forensics.sql import QueryLog


@dataclass
class InvestigateOptions:
    assume_utc: bool = False
    aware_at: str | None = None
    replay_model: str | None = None
    replay_device: str = "auto"
    served_model: str | None = None
    rules: str | None = None
    follow_links: bool = False
    command: list[str] = field(default_factory=list)
    ray: str | None = None  # Ray cluster address, or "local"; None: the local engine
    ledger_external: str | None = None  # ledger kept outside the database: folder or URL

    def params(self) -> dict[str, Any]:
        """The parameters every stage reads and the manifest records (the rules file with its
        SHA-256, so the deadlines can be traced to the exact rules)."""
        out = {
            "assume_utc": self.assume_utc,
            "aware_at": self.aware_at,
            "replay_model": self.replay_model,
            "replay_device": self.replay_device,
            "served_model": self.served_model,
            "rules": self.rules,
            "follow_links": self.follow_links,
            "rules_sha256": sha256_file(Path(self.rules)) if self.rules else None,
        }
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
    """Check every option and path first (nothing is created under OUT before), then run the
    stages in a staging folder beside OUT and swap it in complete (see forensics.outdir)."""
    started = utc_now()
    check_options(options)
    check_case(case_dir)
    out_dir = check_out(out_dir)
    with staged(out_dir) as staging:
        summaries, written = _run(case_dir, staging, options, progress, started)
    return InvestigateResult(out_dir, summaries, [out_dir / rel for rel in written])


def _run(
    case_dir: Path, staging: Path, options: InvestigateOptions, progress: ProgressFn, started: str
) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    queries = QueryLog()
    with queries.recording():
        con = connect(staging / "case.duckdb")
        ctx = RunContext(
            case_dir,
            staging,
            con,
            params=options.params(),
            progress=progress,
            run_id=started,
            queries=queries,
        )
        ctx.wrote(staging / "case.duckdb")
        try:
            for spec in stages():
                progress(spec.name, 0, None)
                ctx.summaries[spec.name] = spec.run(ctx)
            apply_comments(con)  # every stage's tables described in the case database
        finally:
            con.close()
    manifest_path = ctx.wrote(staging / "manifest.json")
    write_manifest(manifest_path, _manifest(ctx, options, started))
    return ctx.summaries, [p.relative_to(staging) for p in ctx.written]


def check_case(case_dir: Path) -> None:
    if case_dir.is_file():
        raise UsageError(f"{case_dir} is a file; give the case folder that holds it")
    if not case_dir.is_dir():
        raise UsageError(f"case folder not found: {case_dir}")


def check_options(options: InvestigateOptions) -> None:
    """Every option value is checked before any work starts (exit 2 with the fix)."""
    from forensics.notify.deadlines import check_aware_at, load_rules

    rules = load_rules(Path(options.rules) if options.rules else None)
    if options.aware_at is not None:
        check_aware_at(options.aware_at, rules)
    check_replay_options(options.replay_model, options.replay_device)


def check_replay_options(
    model: str | None, device: str, names: tuple[str, str] = ("--replay-model", "--replay-device")
) -> None:
    """The device is auto, cpu or cuda (cuda only where CUDA is present); the model is 'test'
    or a local model folder. names: the two options as the command spells them."""
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"{names[1]} '{device}' is not a device; use auto, cpu or cuda")
    if model is not None and model != "test" and not Path(model).expanduser().is_dir():
        from forensics.replay.loader import HUB_ID, resolve_folder

        if not HUB_ID.fullmatch(model):
            raise UsageError(
                f"{names[0]} '{model}' is neither 'test', a model folder nor an "
                "org/name; give a local Hugging Face model directory"
            )
        resolve_folder(model)  # an org/name must be in the local cache (exit 2 otherwise)
    if device == "cuda":
        from forensics.replay import replay_available

        if replay_available():
            import torch

            if not torch.cuda.is_available():
                raise UsageError(
                    f"{names[1]} cuda: no CUDA device is available here; use auto or cpu"
                )


def _manifest(ctx: RunContext, options: InvestigateOptions, started: str) -> dict[str, Any]:
    ingest = ctx.ingest
    inputs = [f.as_row() for f in ingest.files] if ingest else []
    skipped = [{"path": p, "why": w} for p, w in ingest.skipped] if ingest else []
    outputs = output_files(ctx.out_dir)
    return build_manifest(
        case_dir=str(ctx.case_dir.resolve()),
        inputs=inputs,
        skipped=skipped,
        params=ctx.params,
        stages=ctx.summaries,
        outputs=outputs,
        queries=ctx.queries.used(),
        started_at=started,
        finished_at=utc_now(),
        command=options.command,
    )
