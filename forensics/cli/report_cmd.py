"""`kvforensics report`: notification lists, notices, timeline and HTML report from a case
database."""

from __future__ import annotations

import shlex

from forensics.cli.app import app, command_line, console, emit_json, finish
from forensics.cli.params import (
    Account,
    AwareAt,
    Db,
    Json,
    Out,
    Rules,
    Since,
    Templates,
    Until,
)
from forensics.figures import figures_line
from forensics.notify.deadlines import check_aware_at, load_rules
from forensics.notify.templates import check_templates
from forensics.options import InvestigateOptions, make_scope
from forensics.report.casedb import open_case
from forensics.report.stage import ExportResult, read_manifest, write_all
from forensics.run.outdir import staged_parts


def _print_summary(result: ExportResult) -> None:
    f = result.figures
    if result.scope_empty:
        console.print(f"the scope ({result.scope.words()}) held nothing", markup=False)
    elif not result.scope.whole:
        console.print(f"within the scope ({result.scope.words()}):", markup=False)
    console.print(figures_line(f), markup=False)
    if result.aware_at is None:
        console.print("notify_by is empty: give --aware-at TIME to compute the deadlines")
    if result.missing_tables:
        console.print(f"stages not run (tables missing): {', '.join(result.missing_tables)}")
    console.print(
        f"wrote {len(result.written)} files under {result.out_dir}, "
        f"report: {result.out_dir / 'report.html'}"
    )


@app.command()
def report(
    db: Db,
    out: Out,
    aware_at: AwareAt = InvestigateOptions.aware_at,
    rules: Rules = InvestigateOptions.rules,
    templates: Templates = InvestigateOptions.templates,
    since: Since = InvestigateOptions.since,
    until: Until = InvestigateOptions.until,
    account: Account = None,
    json_out: Json = False,
) -> None:
    """Write notification lists (CSV, JSON, Parquet), per-account notices, timeline.csv and a
    self-contained report.html from an existing case database. They are built beside OUT and
    put in place when complete; notices of an earlier run do not survive."""
    rule_set = load_rules(rules)
    aware = check_aware_at(aware_at, rule_set) if aware_at else None
    scope = make_scope(since, until, account)
    check_templates(templates)
    con = open_case(db)
    try:
        with staged_parts(out) as staging:
            result = write_all(
                con,
                staging,
                aware_at=aware,
                rules_file=rules,
                case_label=db.name,
                manifest=read_manifest(out),
                command=shlex.join(command_line()),
                templates=templates,
                scope=scope,
            )
    finally:
        con.close()
    result.written = [out / p.relative_to(staging) for p in result.written]
    result.out_dir = out
    if json_out:
        emit_json(result.to_json())
    else:
        _print_summary(result)
    finish(result.findings)
