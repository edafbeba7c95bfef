"""The evidence each node was judged on, in words (docs/DESIGN.md §4, "Say what evidence there
is"): the grades of node_evidence (queries/analysis/node_evidence.sql) and the phrases the
command line, the manifest and the report use, so that "no ledger was provided" is never
worded as "the ledgers show nothing"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from enum import StrEnum


class EvidenceLevel(StrEnum):
    """What a node was judged on (node_evidence.evidence), strongest first."""

    LEDGER = "ledger"
    LEDGER_WITH_HOLES = "ledger-with-holes"
    RECONSTRUCTED = "reconstructed"
    SCREENING = "screening"


class Confidence(StrEnum):
    """How sure a finding is (exposures, affected_requests and affected_accounts.confidence,
    the notification lists), most certain first. The SQL in queries/ spells the same values."""

    CONFIRMED = "confirmed"  # replay reproduced the output from the KV the request read
    LEDGER = "ledger"  # the KV ledger shows the read
    RECONSTRUCTED = "reconstructed"  # the page trace rebuilt from the request log shows it
    POSSIBLE = "possible"  # screening only: no complete ledger covers the request


# node_evidence.evidence, strongest first, with what each means for the node's requests.
GRADES: dict[str, str] = {
    EvidenceLevel.LEDGER: "a complete KV ledger: every read is seen",
    EvidenceLevel.LEDGER_WITH_HOLES: (
        "a KV ledger with holes: the requests a hole meets are judged as without a ledger"
    ),
    EvidenceLevel.RECONSTRUCTED: "no KV ledger; the page trace rebuilt from the request log",
    EvidenceLevel.SCREENING: "no KV ledger; judged from the gateway log and node facts only",
}

_SHORT: dict[str, str] = {
    EvidenceLevel.LEDGER: "with a complete ledger",
    EvidenceLevel.LEDGER_WITH_HOLES: "with a ledger that has holes",
    EvidenceLevel.RECONSTRUCTED: "without a ledger, reconstructed",
    EvidenceLevel.SCREENING: "without a ledger (screening only)",
}


def evidence_phrase(by_node: Mapping[str, str]) -> str:
    """'2 nodes with a complete ledger, 2 without a ledger (screening only)'; 'no engine
    node known' when the case names none."""
    counts = Counter(by_node.values())
    if not counts:
        return "no engine node known"
    parts = []
    for grade in (*GRADES, *sorted(set(counts) - set(GRADES))):
        if counts[grade]:
            n = counts[grade]
            parts.append(f"{n} node{'s' if n != 1 else ''} {_SHORT.get(grade, grade)}")
    return ", ".join(parts)


def ledger_complete(by_node: Mapping[str, str]) -> bool:
    """Every known node was judged on a complete ledger."""
    return bool(by_node) and all(g == EvidenceLevel.LEDGER for g in by_node.values())


def no_ledger(by_node: Mapping[str, str]) -> bool:
    """No node has a ledger at all."""
    return not any(
        g in (EvidenceLevel.LEDGER, EvidenceLevel.LEDGER_WITH_HOLES) for g in by_node.values()
    )
