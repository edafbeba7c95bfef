"""The rows of the report's tables, one type per table: each mirrors the columns of the
queries/report/*.sql (or of the notification list) that fills it, so its constructor fails if a
query's columns drift. The templates reach them through the context (forensics.report.context)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


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
    variants: str | None  # how the node was rebuilt, as reconstruct recorded it
    consistent: bool | None  # whether a run fit its log (False: the node cleared nobody)


@dataclass(frozen=True)
class FreeListRow:
    """Leaking accounts the rebuilt SGLang reads name under one free list, or over every one
    followed (way 'any') (queries/reconstruct/free_lists.sql)."""

    way: str
    accounts: int


@dataclass(frozen=True)
class OtherWayRow:
    """A leaking account only the ways the SGLang nodes' release does not build name, and not
    listed (queries/report/other_ways.sql)."""

    account_id: str
    requests: int  # its requests whose data those ways' runs had read
    receivers: int  # the receiving requests that would have read them
    nodes: str
    tokens: int  # most slots one such read took
    total: int  # all such accounts


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
