"""The export stage: notification lists, notices, timeline.csv and report.html from a case
database. `export_stage(ctx)` is the investigate stage; `write_all` serves `kvforensics report`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from forensics.analysis.evidence import Confidence
from forensics.base.hashing import sha256_file
from forensics.base.isotime import iso_utc
from forensics.base.manifest import environment
from forensics.casedb.sql import QueryLog, recording, tables
from forensics.context import RunContext, StageResult
from forensics.errors import CaseError
from forensics.figures import as_json, figures_line, headline_figures, held_nothing
from forensics.ingest.load import input_notes
from forensics.notify.deadlines import load_rules, parse_aware_at
from forensics.notify.exports import (
    ExportFacts,
    Exports,
    build_exports,
    cleanup,
    notify_plan,
    write_exports,
    write_summary,
)
from forensics.notify.notices import write_notices
from forensics.notify.scope import scoped
from forensics.notify.templates import check_templates
from forensics.notify.timeline import write_timeline
from forensics.options import Scope
from forensics.report.casedb import column_stand_ins, older_columns_note, stand_ins
from forensics.report.context import ExplainLink
from forensics.report.explain import write_pages
from forensics.report.render import build_context, render_report
from forensics.report.rows import AccountRow, NotifyPlanRow

DEFAULT_SENDER = "our security incident team (reply to the address this notice came from)"


class ExportRecord(ExportFacts):
    """The export's facts, in this order: missing_tables, ExportFacts, aware_at, notify_by."""

    missing_tables: list[str]
    aware_at: str | None
    notify_by: str


class ExportJson(ExportRecord):
    """`report --json`: out and written first, then the record."""

    out: str
    written: list[str]


class ExportSummary(ExportRecord):
    """stages.export in manifest.json: the record, then findings and headline."""

    findings: bool
    headline: str


@dataclass
class ExportResult:
    out_dir: Path
    written: list[Path] = field(default_factory=list)
    missing_tables: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    aware_at: datetime | None = None
    scope: Scope = field(default_factory=Scope)
    notice_templates: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def scope_empty(self) -> bool:
        """A scope was given and nothing of the case falls in it (not an all-clear)."""
        return not self.scope.whole and held_nothing(self.figures)

    def scope_words(self) -> str:
        """The scope for the report's header ('' for the whole case)."""
        return "" if self.scope.whole else self.scope.words()

    def extra(self) -> ExportFacts:
        """What summary.json and --json add to the lists' own facts."""
        return {
            "figures": self.figures,
            "scope_filter": {**self.scope.record(), "matched_nothing": self.scope_empty},
            "notice_templates": self.notice_templates,
        }

    def record(self) -> ExportRecord:
        """The export's facts without its paths (the manifest lists the outputs, relative)."""
        return {
            "missing_tables": self.missing_tables,
            **self.extra(),
            "aware_at": iso_utc(self.aware_at) or None,
            "notify_by": "computed" if self.aware_at else "empty: no --aware-at given",
        }

    def to_json(self) -> ExportJson:
        """`report --json`: the record after the folder and the files written."""
        return {
            "out": str(self.out_dir),
            "written": [str(p) for p in self.written],
            **self.record(),
        }

    @property
    def findings(self) -> bool:
        return bool(
            self.figures.get("listed_receiving_accounts")
            or self.figures.get("listed_leaking_accounts")
            or self.figures.get("possible_receivers")
        )


def generation_time() -> str:
    """Now, as ISO-8601 UTC; the SOURCE_DATE_EPOCH environment variable (seconds since the
    epoch, the reproducible-builds convention) fixes it, so that a report can be rebuilt
    byte for byte."""
    fixed = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    now = datetime.fromtimestamp(int(fixed), UTC) if fixed.isdigit() else datetime.now(UTC)
    return iso_utc(now)


def account_rows(exports: Exports) -> dict[str, list[AccountRow]]:
    """The per-account tables of the report, one per side."""
    keys = (
        "account_id",
        "name",
        "jurisdiction",
        "requests",
        "tokens",
        "confidence",
        "counterpart_accounts",
        "notify_by",
    )
    return {
        "receiving": [AccountRow(**{k: r[k] for k in keys}) for r in exports.receiving_accounts],
        "leaking": [AccountRow(**{k: r[k] for k in keys}) for r in exports.leaking_accounts],
    }


CONFIDENCE_ORDER: dict[str, int] = {level: rank for rank, level in enumerate(Confidence)}


def receivers_listed(exports: Exports) -> list[dict[str, Any]]:
    """The receiving requests of the lists, most certain and largest first, then by id."""
    found = [r for r in exports.affected_requests if r["side"] == "receiving"]
    return sorted(
        found,
        key=lambda r: (
            CONFIDENCE_ORDER.get(str(r["confidence"]), 9),
            -(r["tokens"] or 0),
            str(r["request_id"]),
        ),
    )


def write_explain_pages(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    exports: Exports,
    missing: list[str],
) -> list[ExplainLink]:
    """OUT/explain/<name>.html for the first PAGE_LIMIT receiving requests of the lists; the
    links to them, in the lists' order. The pages carry no time of their own, so that they are
    the same when rebuilt."""
    listed = receivers_listed(exports)
    ids = [str(r["request_id"]) for r in listed]
    pages = write_pages(con, out_dir / "explain", ids, missing=missing)
    return [
        ExplainLink(
            str(r["request_id"]),
            str(r["account_id"]),
            str(r["confidence"]),
            r["tokens"],
            pages[str(r["request_id"])].relative_to(out_dir).as_posix(),
        )
        for r in listed
        if str(r["request_id"]) in pages
    ]


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """OUT/manifest.json as written by investigate, or {} when there is none."""
    path = out_dir / "manifest.json"
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CaseError(
            f"{path} is not readable JSON ({exc}); remove it or re-run investigate"
        ) from exc
    return value if isinstance(value, dict) else {}


def _manifest_sha256(out_dir: Path, given: dict[str, Any] | None) -> str:
    """The SHA-256 of OUT/manifest.json when the report shows it; for the run writing one,
    where it will be."""
    if given is not None:
        return "written after this report: in manifest.json.sha256, and printed by investigate"
    path = out_dir / "manifest.json"
    return sha256_file(path) if path.is_file() else ""


def write_all(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    *,
    aware_at: datetime | None = None,
    rules_file: Path | None = None,
    case_label: str = "",
    command: str = "",
    sender: str = DEFAULT_SENDER,
    manifest: dict[str, Any] | None = None,
    queries: QueryLog | None = None,
    templates: Path | None = None,
    scope: Scope | None = None,
) -> ExportResult:
    """Write every export, notice, the timeline and the report under out_dir. `manifest` is
    shown in the report's evidence section; None reads OUT/manifest.json if there is one.
    `queries`: the run's query log (a new one where none is given or recording); `templates`:
    the --templates folder of notice templates; `scope`: what the outputs cover (the whole
    case when None)."""
    scope = scope or Scope()
    with recording(queries) as log:  # the report lists the queries it used
        rules = load_rules(rules_file)
        result = ExportResult(out_dir, aware_at=aware_at, scope=scope)
        result.notice_templates = check_templates(templates)
        out_dir.mkdir(parents=True, exist_ok=True)
        with (
            stand_ins(con) as missing,
            column_stand_ins(con) as lacking,
            scoped(con, scope),
        ):
            result.missing_tables = missing
            exports = build_exports(con, aware_at, rules)
            notes = out_dir / "notifications"
            result.written += write_exports(con, notes)
            cleanup(con)
            result.figures = as_json(headline_figures(con))
            result.written.append(
                write_summary(
                    notes / "summary.json", exports, aware_at, rules, missing, result.extra()
                )
            )
            result.written += write_notices(exports, notes / "notices", sender, templates)
            result.written += write_timeline(con, out_dir)
            links = write_explain_pages(con, out_dir, exports, missing)
            result.written += [out_dir / link.href for link in links]
            plan = [NotifyPlanRow(**row) for row in notify_plan(exports)]
            context = build_context(
                con,
                case_label=case_label,
                missing=missing,
                manifest=read_manifest(out_dir) if manifest is None else manifest,
                manifest_sha256=_manifest_sha256(out_dir, manifest),
                command=command,
                notify_plan=plan,
                accounts=account_rows(exports),
                generated_at=generation_time(),
                queries=log,
                explain_pages=links,
                explain_listed=len(receivers_listed(exports)),
                scope=result.scope_words(),
            )
        if lacking:
            context.notes.append(older_columns_note(lacking))
        if "ingest_warnings" in tables(con):
            context.notes.extend(f"Input warning: {note}" for note in input_notes(con))
        if aware_at is None:
            context.notes.append(
                "No awareness time was given (--aware-at), so the notify_by "
                "deadlines in the notification lists are empty."
            )
        else:
            context.notes.append(
                f"Notification deadlines count from the awareness time {iso_utc(aware_at)}."
            )
        report = out_dir / "report.html"
        report.write_text(render_report(context), encoding="utf-8")
        result.written.append(report)
        return result


def export_stage(ctx: RunContext) -> StageResult:
    """investigate stage: ctx.params.aware_at (ISO text) and ctx.params.rules, both optional.

    OUT/manifest.json is written after the stages, so a file there now is a previous run's; the
    report shows this run's parameters and stages instead."""
    aware = ctx.params.aware_at
    aware_at = parse_aware_at(aware) if aware is not None else None
    rules = ctx.params.rules
    this_run = {
        "parameters": ctx.params.parameters(),
        "stages_before_export": sorted(ctx.results),
        "run_id": ctx.run_id,
        "custody": ctx.custody,
        "environment": environment(),
    }
    result = write_all(
        ctx.con,
        ctx.out_dir,
        aware_at=aware_at,
        rules_file=rules,
        case_label=str(ctx.case_dir),
        manifest=this_run,
        queries=ctx.queries,
        templates=ctx.params.templates,
        scope=ctx.params.scope(),
    )
    notices = ctx.out_dir / "notifications" / "notices"
    files = [path for path in result.written if notices not in path.parents]
    if notices.is_dir():
        files.append(notices)
    f = result.figures
    headline = f"{figures_line(f)}; " + (
        "notify_by computed" if aware_at else "notify_by empty (no --aware-at)"
    )
    if result.scope_empty:
        headline = f"the scope ({result.scope.words()}) held nothing: {headline}"
    elif not result.scope.whole:
        headline = f"within the scope ({result.scope.words()}): {headline}"
    summary: ExportSummary = {**result.record(), "findings": result.findings, "headline": headline}
    return StageResult(summary, headline, result.findings, files=tuple(files))
