"""`kvforensics investigate`: every stage on a case folder, with a manifest."""

from __future__ import annotations

from forensics.cli.app import app, command_line, console, emit_json, finish
from forensics.cli.params import (
    Account,
    AssumeUtc,
    AwareAt,
    CaseDir,
    CaseRef,
    DeliveryJitterMs,
    Examiner,
    FollowLinks,
    Json,
    LedgerExternal,
    LedgerLoad,
    Out,
    Ray,
    ReplayDevice,
    ReplayModel,
    Rules,
    ServedModel,
    SglangFreeList,
    SignKey,
    Since,
    Templates,
    Until,
)
from forensics.cli.progress import progress_reporter
from forensics.cli.summary import print_investigation
from forensics.notify.templates import check_templates
from forensics.options import InvestigateOptions


@app.command()
def investigate(
    case_dir: CaseDir,
    out: Out,
    assume_utc: AssumeUtc = InvestigateOptions.assume_utc,
    aware_at: AwareAt = InvestigateOptions.aware_at,
    replay_model: ReplayModel = InvestigateOptions.replay_model,
    replay_device: ReplayDevice = InvestigateOptions.replay_device,
    served_model: ServedModel = InvestigateOptions.served_model,
    delivery_jitter_ms: DeliveryJitterMs = InvestigateOptions.delivery_jitter_ms,
    sglang_free_list: SglangFreeList = InvestigateOptions.free_list,
    rules: Rules = InvestigateOptions.rules,
    ray: Ray = InvestigateOptions.ray,
    ledger_external: LedgerExternal = InvestigateOptions.ledger_external,
    ledger_load: LedgerLoad = InvestigateOptions.ledger_load,
    follow_links: FollowLinks = InvestigateOptions.follow_links,
    examiner: Examiner = InvestigateOptions.examiner,
    case_ref: CaseRef = InvestigateOptions.case_ref,
    sign_key: SignKey = InvestigateOptions.sign_key,
    templates: Templates = InvestigateOptions.templates,
    since: Since = InvestigateOptions.since,
    until: Until = InvestigateOptions.until,
    account: Account = None,
    json_out: Json = False,
) -> None:
    """Run every stage on a case folder: ingest, analysis, exports, report, manifest. The
    outputs are built beside OUT and swapped in complete."""
    options = InvestigateOptions(
        assume_utc=assume_utc,
        aware_at=aware_at,
        replay_model=replay_model,
        replay_device=replay_device,
        served_model=served_model,
        delivery_jitter_ms=delivery_jitter_ms,
        free_list=sglang_free_list,
        rules=rules,
        follow_links=follow_links,
        ray=ray,
        ledger_external=ledger_external,
        ledger_load=ledger_load,
        examiner=examiner,
        case_ref=case_ref,
        sign_key=sign_key,
        templates=templates,
        since=since,
        until=until,
        accounts=tuple(account or ()),
        command=command_line(),
    )
    options.scope()  # a bad --since or --until, or a template missing a field: exit 2 now
    check_templates(options.templates)
    with progress_reporter(console, "investigate") as progress:
        from forensics.run.investigate import investigate as run_investigation  # the stages

        result = run_investigation(case_dir, out, options, progress=progress)
    if json_out:
        emit_json(result.to_json())
    else:
        print_investigation(console, result)
        console.print(
            f"manifest.json SHA-256 {result.manifest_sha256} (also in manifest.json.sha256); "
            "keep it with the case notes",
            markup=False,
        )
        if result.signing_key:
            console.print(
                f"manifest.json signed with the key {result.signing_key} (manifest.json.sig)",
                markup=False,
            )
    finish(result.findings)
