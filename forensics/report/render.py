"""Build the report context from a case database and render OUT/report.html.

Templates: templates/report.html and its partials templates/_*.html, jinja2 with autoescape on.
The only markup not escaped is the SVG that matplotlib writes (forensics.report.charts)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb
import jinja2

from forensics import __version__
from forensics.analysis.evidence import Confidence
from forensics.db import rows
from forensics.figures import headline_figures, held_nothing
from forensics.report.context import (
    Charts,
    ConfidenceLevel,
    ExplainLink,
    Headline,
    ReportContext,
    TimelineRow,
    TtftSummary,
)
from forensics.report.facts import custody_of, fact_groups, manifest_facts, query_groups
from forensics.report.rows import (
    AccountRow,
    Bucket,
    ClearedRow,
    EvidenceRow,
    ExposureRow,
    FreeListRow,
    HoleRow,
    InputRow,
    KindRow,
    NodeEvidenceRow,
    NodeRow,
    NotifyPlanRow,
    OtherWayRow,
    OverlongRow,
    QuarantineRow,
    ReconstructedNodeRow,
    ReconstructedPairRow,
    ReplayRow,
    ScreeningRow,
    ViolationRow,
)

if TYPE_CHECKING:
    from forensics.report import charts
from forensics.base.textsafe import html_value
from forensics.casedb.resources import resource_dir
from forensics.casedb.sql import QueryLog, sql

T = TypeVar("T")
ROW_LIMIT = 20

STAGE_OF_TABLE = {
    "requests": "ingest",
    "nodes": "ingest",
    "accounts": "ingest",
    "quarantine": "ingest",
    "ingest_warnings": "ingest",
    "input_files": "ingest",
    "case_meta": "ingest",
    "contents": "ingest",
    "kv_events": "ingest",
    "exposures": "analysis",
    "violations": "analysis",
    "read_stats": "analysis",
    "affected_requests": "analysis",
    "affected_accounts": "analysis",
    "screening": "screening",
    "possible_exposures": "screening",
    "replay_results": "replay",
    "replay_attention": "replay",
    "replay_runs": "replay",
    "reconstructed_nodes": "reconstruct",
    "reconstructed_requests": "reconstruct",
    "reconstructed_events": "reconstruct",
    "reconstructed_exposures": "reconstruct",
    "reconstructed_other_ways": "reconstruct",
    "reconstruct_skipped": "reconstruct",
    "node_evidence": "analysis",
    "ledger_holes": "analysis",
    "cleared_findings": "analysis",
    "engine_evidence": "engine log reading",
    "node_facts": "engine log reading",
    "log_files": "engine log reading",
}
STAGE_EFFECT = {
    "ingest": "inputs, quarantine or the input hashes are shown as empty",
    "analysis": "no ledger exposure or violation is reported",
    "screening": "no possible (screened) receiver is reported",
    "reconstruct": "no reconstructed exposure of a ledger-less node is reported",
    "replay": "no exposure is marked confirmed",
    "engine log reading": "no engine log evidence is shown",
}
CONFIDENCE_MEANINGS = (
    (
        Confidence.CONFIRMED,
        "Replay rebuilt the memory the response was decoded from and reproduced the "
        "delivered output from it, while a clean replay from the request's own prompt did not.",
    ),
    (
        Confidence.LEDGER,
        "The engine's KV ledger shows the request reading memory last written by "
        "another request. Exact, but the effect on the output is not re-derived.",
    ),
    (
        Confidence.RECONSTRUCTED,
        "No ledger covers the node: its page trace was rebuilt from the request "
        "log with the engine's real allocator, and the request read memory another request "
        "wrote in that trace. The support share says in how many of the explored event orders.",
    ),
    (
        Confidence.POSSIBLE,
        "Screening only: no complete ledger covers the request. A receiver matches the "
        "fault in the gateway log, node facts or engine logs (prompt longer than the pool yet "
        "answered 200, an implausibly short time to first token, an engine rejection); a "
        "leaker ran on the same node before the receiver ended, so its data may still have "
        "been in the pages the receiver read (freed pages are not zeroed).",
    ),
)


def _typed(cls: Callable[..., T], records: list[dict[str, Any]]) -> list[T]:
    return [cls(**record) for record in records]


def missing_stage_notes(missing: list[str]) -> list[str]:
    """One sentence per stage whose tables are missing from the case database."""
    by_stage: dict[str, list[str]] = {}
    for table in missing:
        by_stage.setdefault(STAGE_OF_TABLE.get(table, "unknown"), []).append(table)
    return [
        f"The {stage} stage has not run on this case (missing: {', '.join(sorted(tables))}); "
        f"{STAGE_EFFECT.get(stage, 'its findings are absent')}."
        for stage, tables in sorted(by_stage.items())
    ]


# The timeline's bucket: the first unit whose limit the incident's span stays within, so the
# chart has tens of bars whether the incident lasted seconds or months.
BUCKET_LIMITS = (
    ("second", 120.0),
    ("minute", 2 * 3600.0),
    ("hour", 3 * 86400.0),
    ("day", 60 * 86400.0),
)


def _bucket_unit(headline: Headline) -> str:
    first, last = headline.first_exposure_at, headline.last_exposure_at
    if first is None or last is None:
        return "hour"
    span = (last - first).total_seconds()
    return next((unit for unit, limit in BUCKET_LIMITS if span <= limit), "week")


def _pivot(buckets: list[Bucket]) -> tuple[list[str], list[TimelineRow]]:
    nodes = sorted({b.node for b in buckets})
    rows = []
    for when in sorted({b.bucket for b in buckets}):
        here = {b.node: b for b in buckets if b.bucket == when}
        counts = [here[n].receivers if n in here else 0 for n in nodes]
        tokens = sum(int(b.tokens) for b in here.values())
        rows.append(TimelineRow(when, counts, sum(counts), tokens))
    return nodes, rows


def _ttft(points: list[charts.TtftPoint]) -> TtftSummary:
    def median(values: list[float]) -> float | None:
        return float(statistics.median(values)) if values else None

    sus = [p for p in points if p.suspect]
    norm = [p for p in points if not p.suspect]
    return TtftSummary(
        len(sus),
        len(norm),
        median([p.ttft_ms for p in sus]),
        median([p.ttft_ms for p in norm]),
        median([float(p.prompt_tokens) for p in sus]),
        median([float(p.prompt_tokens) for p in norm]),
    )


def _confidence(
    headline: Headline, reconstructed: list[ReconstructedPairRow]
) -> list[ConfidenceLevel]:
    counts = {
        Confidence.CONFIRMED: headline.confirmed_requests,
        Confidence.LEDGER: headline.receiving_requests - headline.confirmed_requests,
        Confidence.RECONSTRUCTED: reconstructed[0].receivers if reconstructed else 0,
        Confidence.POSSIBLE: headline.possible_receivers,
    }
    return [
        ConfidenceLevel(level, meaning, counts[level]) for level, meaning in CONFIDENCE_MEANINGS
    ]


def build_context(
    con: duckdb.DuckDBPyConnection,
    *,
    case_label: str,
    missing: list[str],
    manifest: dict[str, Any] | None = None,
    command: str = "",
    row_limit: int = ROW_LIMIT,
    notify_plan: list[NotifyPlanRow] | None = None,
    accounts: dict[str, list[AccountRow]] | None = None,
    generated_at: str = "",
    queries: QueryLog | None = None,
    manifest_sha256: str = "",
    explain_pages: list[ExplainLink] | None = None,
    explain_listed: int = 0,
    scope: str = "",
) -> ReportContext:
    """The report context from a case database whose missing tables have stand-ins; `queries`:
    the run's query log, of which the report lists its own queries (once all are loaded);
    manifest_sha256: that of the manifest shown, or why it is not known."""
    # matplotlib takes about a second to import: only a command that draws a report pays it
    from forensics.report import charts

    manifest = manifest or {}
    headline = Headline(**headline_figures(con))
    unit = _bucket_unit(headline)
    buckets = _typed(Bucket, rows(con, "report/exposure_buckets", [unit]))
    timeline_nodes, timeline = _pivot(buckets)
    nodes = _typed(NodeRow, rows(con, "report/nodes"))
    rebuilt = _typed(ReconstructedPairRow, rows(con, "report/reconstructed_pairs", [row_limit]))
    points = [
        charts.TtftPoint(r["prompt_tokens"], float(r["ttft_ms"]), bool(r["suspect"]))
        for r in rows(con, "report/ttft_points")
    ]
    context = ReportContext(
        title="KV-cache cross-customer exposure: impact report",
        case_label=case_label,
        generated_at=generated_at,
        run_id=str(manifest.get("run_id", "")),
        tool_version=__version__,
        missing_stages=missing_stage_notes(missing),
        headline=headline,
        bucket_unit=unit,
        buckets=buckets,
        timeline_nodes=timeline_nodes,
        timeline=timeline,
        charts=Charts(
            charts.timeline_chart(buckets, unit),
            charts.nodes_chart(nodes),
            charts.ttft_chart(points),
        ),
        nodes=nodes,
        overlong=_typed(OverlongRow, rows(con, "report/overlong", [row_limit])),
        ttft=_ttft(points),
        exposures=_typed(ExposureRow, rows(con, "report/exposures_top", [row_limit])),
        kinds=_typed(KindRow, rows(con, "report/kinds")),
        violations=_typed(ViolationRow, rows(con, "report/violations")),
        replay=_typed(ReplayRow, rows(con, "report/replay", [row_limit])),
        evidence=_typed(EvidenceRow, rows(con, "report/evidence")),
        screening=_typed(ScreeningRow, rows(con, "report/screening")),
        confidence_levels=_confidence(headline, rebuilt),
        notify_plan=notify_plan or [],
        receiving_accounts=(accounts or {}).get("receiving", []),
        leaking_accounts=(accounts or {}).get("leaking", []),
        quarantine=_typed(QuarantineRow, rows(con, "report/quarantine")),
        inputs=_typed(InputRow, rows(con, "report/inputs")),
        manifest=[],
        row_limit=row_limit,
        reconstructed_nodes=_typed(ReconstructedNodeRow, rows(con, "report/reconstructed_nodes")),
        reconstructed=rebuilt,
        free_lists=_typed(FreeListRow, rows(con, "reconstruct/free_lists")),
        release_free_list=rows(con, "reconstruct/listed_free_list")[0]["way"],
        other_ways=_typed(OtherWayRow, rows(con, "report/other_ways", [row_limit])),
        node_evidence=_typed(NodeEvidenceRow, rows(con, "report/node_evidence")),
        holes=_typed(HoleRow, rows(con, "report/ledger_holes", [row_limit])),
        cleared=_typed(ClearedRow, rows(con, "report/cleared")),
    )
    con.execute(sql("report/cleanup"))
    facts = manifest_facts(manifest, con, command, queries.used() if queries else {})
    custody = custody_of(manifest, manifest_sha256)
    pages = explain_pages or []
    return ReportContext(
        **{
            **context.__dict__,
            "manifest": facts,
            "fact_groups": fact_groups(facts),
            "query_groups": query_groups(facts),
            "custody": custody,
            "explain_pages": pages,
            "explain_hrefs": {p.request_id: p.href for p in pages},
            "explain_listed": explain_listed,
            "scope": scope,
            "scope_empty": bool(scope) and held_nothing(headline.__dict__),
        }
    )


def _num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() or abs(value) >= 1000 else f"{value:,.1f}"
    return f"{value:,}"


def _ts(value: datetime | None) -> str:
    if value is None:
        return "–"
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def _bucket(value: datetime, unit: str) -> str:
    formats = {
        "second": "%Y-%m-%d %H:%M:%S",
        "minute": "%Y-%m-%d %H:%M",
        "hour": "%Y-%m-%d %H:00",
        "day": "%Y-%m-%d",
        "week": "week of %Y-%m-%d",
    }
    return (
        value.astimezone(UTC).strftime(formats[unit])
        if value.tzinfo
        else value.strftime(formats[unit])
    )


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value / 1000:,.2f} s" if value >= 10_000 else f"{value:,.1f} ms"


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=html_value,
    )
    env.filters.update(num=_num, ts=_ts, ms=_ms, bucket=_bucket)
    return env


def render_report(context: ReportContext) -> str:
    return environment().get_template("report.html").render(r=context)
