"""Run every stage of an investigation and write the evidence manifest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from forensics.base.manifest import (
    SIDECARS,
    Manifest,
    anchor,
    build_manifest,
    custody,
    output_files,
    utc_now,
    write_manifest,
)
from forensics.base.progress import ProgressFn, no_progress
from forensics.base.signing import SigningKey, load_signing_key, sign_file
from forensics.case.result import IngestResult
from forensics.casedb.schema_docs import apply_comments
from forensics.casedb.sql import QueryLog
from forensics.context import RunContext, StageResult
from forensics.db import connect
from forensics.errors import UsageError
from forensics.ledger.default import CASE_LEDGER
from forensics.ledger.external import resolve
from forensics.notify.deadlines import check_aware_at, load_rules
from forensics.options import Device, InvestigateOptions
from forensics.replay import replay_available
from forensics.replay.loader import HUB_ID, resolve_folder
from forensics.run.outdir import check_out, staged
from forensics.run.pipeline import STAGES, run_stage


class InvestigateJson(TypedDict):
    """`investigate --json`."""

    out_dir: str
    findings: bool
    stages: dict[str, Mapping[str, Any]]  # each stage's summary, as manifest.json records it
    tables: dict[str, list[str]]  # stage -> the case-database tables it wrote
    written: list[str]
    manifest_sha256: str
    signing_key: str | None


@dataclass
class InvestigateResult:
    out_dir: Path
    results: dict[str, StageResult]  # by stage name, in the order the stages ran
    written: list[Path]
    ingest: IngestResult | None = None
    custody: dict[str, str | None] = field(default_factory=dict)

    @property
    def manifest_sha256(self) -> str:
        """The manifest's own SHA-256, as the run wrote it beside the manifest."""
        text = (self.out_dir / SIDECARS[0]).read_text(encoding="utf-8")
        return text.split()[0] if text.strip() else ""

    @property
    def stages(self) -> dict[str, Mapping[str, Any]]:
        """Each stage's summary, as manifest.json records it."""
        return {name: result.summary for name, result in self.results.items()}

    @property
    def findings(self) -> bool:
        return any(result.findings for result in self.results.values())

    @property
    def signing_key(self) -> str | None:
        """The fingerprint of the key that signed the manifest (None: not signed)."""
        return self.custody.get("signing_key")

    def to_json(self) -> InvestigateJson:
        return {
            "out_dir": str(self.out_dir),
            "findings": self.findings,
            "stages": self.stages,
            "tables": {name: list(result.tables) for name, result in self.results.items()},
            "written": [str(p) for p in self.written],
            "manifest_sha256": self.manifest_sha256,
            "signing_key": self.signing_key,
        }


def investigate(
    case_dir: Path, out_dir: Path, options: InvestigateOptions, progress: ProgressFn = no_progress
) -> InvestigateResult:
    """Check every option and path first (nothing is created under OUT before), then run the
    stages in a staging folder beside OUT and swap it in complete (see forensics.run.outdir)."""
    started = utc_now()
    check_options(options)
    key = load_signing_key(options.sign_key) if options.sign_key else None
    check_case(case_dir)
    check_apart(case_dir, out_dir)
    out_dir = check_out(out_dir)
    with staged(out_dir) as staging:
        ctx = _run(case_dir, staging, options, progress, started, key)
        written = [out_dir / p.relative_to(staging) for p in ctx.written]
    return InvestigateResult(out_dir, ctx.results, written, ctx.ingest, ctx.custody)


def _run(
    case_dir: Path,
    staging: Path,
    options: InvestigateOptions,
    progress: ProgressFn,
    started: str,
    key: SigningKey | None,
) -> RunContext:
    queries = QueryLog()
    with queries.recording():
        con = connect(staging / "case.duckdb")
        ctx = RunContext(
            case_dir,
            staging,
            con,
            params=options,
            progress=progress,
            run_id=started,
            queries=queries,
            custody=custody(options.examiner, options.case_ref, key.fingerprint if key else None),
        )
        ctx.wrote(staging / "case.duckdb")
        try:
            for spec in STAGES:
                run_stage(spec, ctx)
            apply_comments(con)  # every stage's tables described in the case database
        finally:
            con.close()
    manifest_path = ctx.wrote(staging / "manifest.json")
    write_manifest(manifest_path, _manifest(ctx, options, started))
    anchor(manifest_path)
    ctx.wrote(staging / SIDECARS[0])
    if key is not None:
        sign_file(key, manifest_path, ctx.wrote(staging / SIDECARS[1]))
    return ctx


def check_case(case_dir: Path) -> None:
    if case_dir.is_file():
        raise UsageError(f"{case_dir} is a file; give the case folder that holds it")
    if not case_dir.is_dir():
        raise UsageError(f"case folder not found: {case_dir}")


def check_apart(case_dir: Path, out_dir: Path) -> None:
    """OUT neither inside the case folder (the evidence would then hold the run's own outputs,
    which a later ingest lists, and verify reports as added) nor holding it (OUT is replaced
    whole)."""
    case, out = case_dir.resolve(), out_dir.resolve()
    if out == case or out.is_relative_to(case):
        raise UsageError(
            f"--out {out_dir} is inside the case folder {case_dir}: the run's outputs would "
            "mix with the evidence; give an output folder outside the case folder"
        )
    if case.is_relative_to(out):
        raise UsageError(
            f"the case folder {case_dir} is inside --out {out_dir}, which a run replaces "
            "whole; give an output folder outside the case folder"
        )


def check_options(options: InvestigateOptions) -> None:
    """Every option value is checked before any work starts (exit 2 with the fix)."""
    rules = load_rules(options.rules)
    if options.aware_at is not None:
        check_aware_at(options.aware_at, rules)
    check_replay_options(options.replay_model, options.replay_device)


def check_replay_options(
    model: str | None,
    device: Device,
    names: tuple[str, str] = ("--replay-model", "--replay-device"),
) -> None:
    """The model is 'test', a local model folder or an org/name in the local cache; cuda only
    where CUDA is present. names: the two options as the command spells them."""
    if model is not None and model != "test" and not Path(model).expanduser().is_dir():
        if not HUB_ID.fullmatch(model):
            raise UsageError(
                f"{names[0]} '{model}' is neither 'test', a model folder nor an "
                "org/name; give a local Hugging Face model directory"
            )
        resolve_folder(model)  # an org/name must be in the local cache (exit 2 otherwise)
    if device is Device.CUDA:
        if replay_available():
            import torch

            if not torch.cuda.is_available():
                raise UsageError(
                    f"{names[1]} cuda: no CUDA device is available here; use auto or cpu"
                )


def _manifest(ctx: RunContext, options: InvestigateOptions, started: str) -> Manifest:
    ingest = ctx.ingest
    inputs = [f.as_row() for f in ingest.files] if ingest else []
    skipped = [{"path": p, "why": w} for p, w in ingest.skipped] if ingest else []
    outputs = output_files(ctx.out_dir)
    return build_manifest(
        case_dir=str(ctx.case_dir.resolve()),
        inputs=inputs,
        skipped=skipped,
        params=options.parameters(),
        stages=ctx.summaries(),
        outputs=outputs,
        queries=ctx.queries.used(),
        started_at=started,
        finished_at=utc_now(),
        command=list(options.command),
        custody=ctx.custody,
        ledger_storage=ledger_storage(ctx, options),
    )


def ledger_storage(ctx: RunContext, options: InvestigateOptions) -> dict[str, Any]:
    """Where the case's KV ledger lives, for the manifest: in the case database, or read in
    place (its parts' SHA-256 checked at every analysis), in which case the case database
    needs that folder beside it, unchanged."""
    if ctx.ingest is None or not ctx.ingest.ledger_external:
        return {"kept": "in the case database", "location": None}
    return {
        "kept": "in place, outside the case database",
        "location": resolve(ctx.case_dir, options.ledger_external or CASE_LEDGER),
        "needs": "the ledger's parts at this location, unchanged: the case database holds a "
        "view over them and every analysis checks their SHA-256 (--ledger-load loads them "
        "into the case database instead)",
    }
