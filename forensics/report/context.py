"""The typed context of OUT/report.html: everything the templates may use, documented.

The templates see one variable, `r`, a ReportContext. Row types mirror the columns of the
queries/report/*.sql that fill them (the constructors fail if a query's columns drift). A test
walks the templates and checks that every attribute they use is a field declared here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from markupsafe import Markup


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


@dataclass(frozen=True)
class NodeEvidenceRow:
    """The evidence one node was judged on (queries/report/node_evidence.sql)."""

    node: str
    role: str | None
    requests: int
    ledger_events: int
    holes: int
    uncovered_requests: int
    evidence: str  # ledger | ledger-with-holes | reconstructed | screening
    note: str


@dataclass(frozen=True)
class HoleRow:
    """A known hole in a node's ledger (queries/report/ledger_holes.sql)."""

    node: str
    kind: str
    first_ts: datetime | None
    last_ts: datetime | None
    events_lost: int | None
    source: str
    detail: str


@dataclass(frozen=True)
class ClearedRow:
    """What positive evidence took off the lists, counted by evidence and reason."""

    evidence: str
    reason: str
    receivers: int
    pairs: int


@dataclass(frozen=True)
class Bucket:
    """Receiving requests per time bucket and node (queries/report/exposure_buckets.sql)."""

    bucket: datetime
    node: str
    receivers: int
    tokens: int


@dataclass(frozen=True)
class TimelineRow:
    """One time bucket with its receiving requests per node (in ReportContext.timeline_nodes
    order) and its total tokens."""

    bucket: datetime
    per_node: list[int]
    receivers: int
    tokens: int


@dataclass(frozen=True)
class NodeRow:
    """One engine node (queries/report/nodes.sql)."""

    node: str
    role: str | None
    engine: str | None
    engine_version: str | None
    pool_slots: int | None
    context_len: int | None
    started_at: datetime | None
    requests: int
    max_prompt_tokens: int | None
    receivers: int
    cross_tokens: int
    same_tokens: int
    pool_short: bool | None  # the pool holds fewer slots than the context length


@dataclass(frozen=True)
class OverlongRow:
    """A request answered 200 with a prompt longer than its node's pool (report/overlong.sql)."""

    request_id: str
    account_id: str
    prompt_tokens: int
    http_status: int
    serving_node: str
    pool_slots: int
    ttft_ms: float | None
    received_at: datetime
    total: int


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
class ExposureRow:
    """An exposure pair, receiver <- leaker on a node (queries/report/exposures_top.sql)."""

    receiver_request_id: str
    receiver_account_id: str | None
    leaker_request_id: str
    leaker_account_id: str | None
    node: str
    tokens: int
    runs: int
    first_read_at: datetime
    cross_account: bool | None
    confidence: str
    kinds: str
    total: int


@dataclass(frozen=True)
class ReconstructedNodeRow:
    """A node whose page trace was rebuilt (queries/report/reconstructed_nodes.sql)."""

    node: str
    role: str
    engine: str | None
    engine_version: str | None
    allocator: str
    allocator_version: str | None
    page_size: int
    pool_slots: int
    requests: int
    stubs: int
    ambiguous_groups: int
    orders: int
    deferred: int


@dataclass(frozen=True)
class ReconstructedPairRow:
    """A reconstructed cross-account pair (queries/report/reconstructed_pairs.sql)."""

    receiver_request_id: str
    receiver_account_id: str
    leaker_request_id: str
    leaker_account_id: str
    node: str
    tokens: int
    support: float
    read_at: datetime
    verdict: str | None
    total: int
    receivers: int


@dataclass(frozen=True)
class KindRow:
    kind: str
    relation: str
    runs: int
    slots: int
    receivers: int


@dataclass(frozen=True)
class ViolationRow:
    violation: str
    node: str
    runs: int
    slots: int
    requests: int
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True)
class ReplayRow:
    request_id: str
    verdict: str
    basis: str | None  # of a confirmation: reproduced | evidence
    evidence_bits: float | None  # log-likelihood ratio, contaminated against clean, in bits
    reason: str | None
    tokens: int | None
    device: str | None
    model: str | None
    contaminated_matches: bool | None
    clean_matches: bool | None
    verdict_total: int
    total: int


@dataclass(frozen=True)
class EvidenceRow:
    """Engine log findings per node and kind (queries/report/evidence.sql)."""

    node: str
    kind: str
    lines: int
    first_at: datetime | None
    last_at: datetime | None
    max_value: float | None
    limit_value: float | None
    example: str | None


@dataclass(frozen=True)
class ScreeningRow:
    reason: str
    requests: int
    without_ledger: int


@dataclass(frozen=True)
class QuarantineRow:
    status: str  # quarantined | warning
    table_name: str
    file: str
    reason: str
    rows: int


@dataclass(frozen=True)
class InputRow:
    path: str
    table_name: str
    sha256: str
    bytes: int
    rows_read: int
    rows_loaded: int
    rows_quarantined: int


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
class NotifyPlanRow:
    """Accounts to notify per side and deadline rule, from the notification lists."""

    side: str  # receiving | leaking
    rule: str  # the jurisdiction rule applied ('*' = the default)
    accounts: int
    requests: int
    earliest_notify_by: str  # ISO-8601 UTC; '' without an awareness time
    earliest_authority_by: str


@dataclass(frozen=True)
class AccountRow:
    """One account of a notification list (counterparts are only counted, never named)."""

    account_id: str
    name: str | None
    jurisdiction: str | None
    requests: int
    tokens: int | None  # None: possible only (screening), no token count
    confidence: str
    counterpart_accounts: int
    notify_by: str | None  # ISO-8601 UTC; None without an awareness time


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
    buckets: list[Bucket]
    timeline_nodes: list[str]  # the nodes in the timeline, sorted
    timeline: list[TimelineRow]  # buckets with any exposure, in time order
    charts: Charts
    nodes: list[NodeRow]
    overlong: list[OverlongRow]
    ttft: TtftSummary
    exposures: list[ExposureRow]
    kinds: list[KindRow]
    violations: list[ViolationRow]
    replay: list[ReplayRow]
    evidence: list[EvidenceRow]
    screening: list[ScreeningRow]
    confidence_levels: list[ConfidenceLevel]
    notify_plan: list[NotifyPlanRow]
    receiving_accounts: list[AccountRow]  # accounts that received others' data
    leaking_accounts: list[AccountRow]  # accounts whose data others received
    quarantine: list[QuarantineRow]
    inputs: list[InputRow]
    manifest: list[Fact]  # tool and query versions, parameters, command line
    row_limit: int  # tables list at most this many rows
    notes: list[str] = field(default_factory=list)  # other remarks for the reader
    reconstructed_nodes: list[ReconstructedNodeRow] = field(default_factory=list)
    reconstructed: list[ReconstructedPairRow] = field(default_factory=list)
    node_evidence: list[NodeEvidenceRow] = field(default_factory=list)  # per node, by name
    holes: list[HoleRow] = field(default_factory=list)  # known holes in the ledgers
    cleared: list[ClearedRow] = field(default_factory=list)  # what positive evidence cleared
    custody: Custody | None = None  # None where no manifest or run says who ran it
    explain_pages: list[ExplainLink] = field(default_factory=list)  # receivers with a page
    explain_hrefs: dict[str, str] = field(default_factory=dict)  # request id: its page
    explain_listed: int = 0  # receiving requests on the lists (pages: at most PAGE_LIMIT)
    scope: str = ""  # what the report covers (--since, --until, --account); '' the whole case
    scope_empty: bool = False  # a scope was given and held nothing (not an all-clear)
    fact_groups: list[FactGroup] = field(default_factory=list)  # the manifest, by source
    query_groups: list[FactGroup] = field(default_factory=list)  # query checksums by stage
