"""The typed context of OUT/report.html: everything the templates may use, documented.

The templates see one variable, `r`, a ReportContext. The rows of its tables are declared in
forensics.report.rows; here are the context itself, its headline figures and summaries, the
manifest's facts and custody, the confidence levels, the links to the explain pages and the
charts. A test walks the templates and checks that every attribute they use is a declared
field."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from markupsafe import Markup

from forensics.report import rows


@dataclass(frozen=True)
class Headline:
    """The case's headline figures (queries/figures/headline.sql, which says what each counts).
    Tokens as DESIGN.md §6 defines them."""

    cross_runs: int  # cross-account exposure runs in the ledger
    cross_tokens: int  # cross-account token exposures
    receiving_requests: int  # requests that read another account's data
    receiving_accounts: int
    leaking_requests: int  # requests whose data another account read
    leaking_accounts: int
    same_account_runs: int  # exposures between requests of the same account (not notifiable)
    same_account_tokens: int
    same_account_receiving_requests: int  # requests that read KV of their own account's requests
    same_account_leaking_requests: int
    unknown_account_runs: int  # exposures where a request is missing from the request log
    nodes_affected: int
    first_exposure_at: datetime | None
    last_exposure_at: datetime | None
    violation_runs: int  # ownership violations (slot runs)
    confirmed_requests: int  # receiving requests confirmed by replay
    screened_suspects: int  # requests flagged by screening
    possible_receivers: int  # flagged requests no ledger covers
    requests_total: int
    quarantined_rows: int
    listed_receiving_requests: int  # the notification lists, every confidence
    listed_receiving_accounts: int
    listed_leaking_requests: int
    listed_leaking_accounts: int
    possible_receiving_accounts: int  # listed as possible (screening) only
    possible_leaking_accounts: int
    nodes_known: int  # engine nodes of the case (node_evidence)
    nodes_ledger: int  # judged on a complete ledger
    nodes_holes: int  # judged on a ledger with holes
    nodes_reconstructed: int  # no ledger; page trace rebuilt
    nodes_screening: int  # no ledger, no reconstruction
    ledger_holes: int  # known holes in the ledgers
    cleared_findings: int  # findings positive evidence took off the lists
    unscreened_requests: int  # requests without a ledger for which no stub signal exists
    unscreened_fitting_requests: int  # nor one for the stub of a prompt that fits the pool
    nodeless_suspects: int  # suspects whose serving node the request log does not name
    sole_node_requests: int  # requests naming no node, taken as the one engine node's
    condensed_second_reads: int  # possible second readers whose pairs were condensed


@dataclass(frozen=True)
class TimelineRow:
    """One time bucket with its receiving requests per node (in ReportContext.timeline_nodes
    order) and its total tokens."""

    bucket: datetime
    per_node: list[int]
    receivers: int
    tokens: int


@dataclass(frozen=True)
class TtftSummary:
    """Time to first token of suspects against normal requests."""

    suspects: int
    normal: int
    suspect_median_ms: float | None
    normal_median_ms: float | None
    suspect_median_prompt: float | None
    normal_median_prompt: float | None


@dataclass(frozen=True)
class Fact:
    """A key/value line of the evidence manifest."""

    key: str
    value: str


@dataclass(frozen=True)
class FactGroup:
    """Facts of the evidence manifest under one heading (forensics/report/facts.py)."""

    title: str
    facts: list[Fact]


@dataclass(frozen=True)
class Custody:
    """Who ran the analysis, for which case, where, with what: the manifest's custody and
    environment ('' where not recorded)."""

    examiner: str
    case_ref: str
    host: str
    signing_key: str  # the fingerprint of the key that signed the manifest, '' when unsigned
    manifest_sha256: str  # or why it is not known when the report is written
    python: str
    libraries: str  # name version, comma-separated


@dataclass(frozen=True)
class ConfidenceLevel:
    level: str
    meaning: str
    requests: int  # receiving requests at this level (cross-account)


@dataclass(frozen=True)
class ExplainLink:
    """A receiving request of the lists with its drill-down page (OUT/explain/)."""

    request_id: str
    account_id: str
    confidence: str
    tokens: int | None
    href: str  # explain/<name>.html, relative to report.html


@dataclass(frozen=True)
class Charts:
    """Inline SVG (from matplotlib); empty Markup when there is nothing to draw."""

    timeline: Markup
    nodes: Markup
    ttft: Markup


@dataclass(frozen=True)
class ReportContext:
    """Everything report.html shows."""

    title: str
    case_label: str  # the case folder or database the report was made from
    generated_at: str  # when this report was written (ISO-8601 UTC; SOURCE_DATE_EPOCH fixes it)
    run_id: str  # the investigate run (manifest.json's run_id), '' for `kvforensics report`
    tool_version: str
    missing_stages: list[str]  # sentences naming the stages (tables) that did not run
    headline: Headline
    bucket_unit: str  # 'second', 'minute', 'hour', 'day' or 'week', from the incident's span
    buckets: list[rows.Bucket]
    timeline_nodes: list[str]  # the nodes in the timeline, sorted
    timeline: list[TimelineRow]  # buckets with any exposure, in time order
    charts: Charts
    nodes: list[rows.NodeRow]
    overlong: list[rows.OverlongRow]
    ttft: TtftSummary
    exposures: list[rows.ExposureRow]
    kinds: list[rows.KindRow]
    violations: list[rows.ViolationRow]
    replay: list[rows.ReplayRow]
    evidence: list[rows.EvidenceRow]
    screening: list[rows.ScreeningRow]
    confidence_levels: list[ConfidenceLevel]
    notify_plan: list[rows.NotifyPlanRow]
    receiving_accounts: list[rows.AccountRow]  # accounts that received others' data
    leaking_accounts: list[rows.AccountRow]  # accounts whose data others received
    quarantine: list[rows.QuarantineRow]
    inputs: list[rows.InputRow]
    manifest: list[Fact]  # tool and query versions, parameters, command line
    row_limit: int  # tables list at most this many rows
    notes: list[str] = field(default_factory=list)  # other remarks for the reader
    reconstructed_nodes: list[rows.ReconstructedNodeRow] = field(default_factory=list)
    reconstructed: list[rows.ReconstructedPairRow] = field(default_factory=list)
    free_lists: list[rows.FreeListRow] = field(default_factory=list)  # SGLang: per way
    release_free_list: str | None = None  # the way the SGLang nodes' lists took from their
    # release (queries/reconstruct/listed_free_list.sql: one way, "mixed", or None)
    other_ways: list[rows.OtherWayRow] = field(default_factory=list)  # kept apart, not listed
    node_evidence: list[rows.NodeEvidenceRow] = field(default_factory=list)  # per node, by name
    holes: list[rows.HoleRow] = field(default_factory=list)  # known holes in the ledgers
    cleared: list[rows.ClearedRow] = field(default_factory=list)  # what positive evidence cleared
    custody: Custody | None = None  # None where no manifest or run says who ran it
    explain_pages: list[ExplainLink] = field(default_factory=list)  # receivers with a page
    explain_hrefs: dict[str, str] = field(default_factory=dict)  # request id: its page
    explain_listed: int = 0  # receiving requests on the lists (pages: at most PAGE_LIMIT)
    scope: str = ""  # what the report covers (--since, --until, --account); '' the whole case
    scope_empty: bool = False  # a scope was given and held nothing (not an all-clear)
    fact_groups: list[FactGroup] = field(default_factory=list)  # the manifest, by source
    query_groups: list[FactGroup] = field(default_factory=list)  # query checksums by stage
