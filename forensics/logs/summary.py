"""What reading a set of logs produced: per-file counts, node verdicts, evidence, and the
disagreements between the logs and a case's nodes file. JSON-able, deterministic."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from forensics.logs.audit import NodeAudit, RunAudit
from forensics.logs.counters import FileCounters
from forensics.logs.evidence import Evidence
from forensics.logs.parse import FileResult


@dataclass(frozen=True)
class FileSummary:
    file: str
    node: str
    engine: str | None
    lines: int
    parsed: int
    truncated: int
    ignored: int
    spliced: int
    kinds: dict[str, int]
    truncated_kinds: dict[str, int]
    cut: tuple[tuple[int, str], ...] = ()  # (line, kinds it began as): quarantined by ingest

    @classmethod
    def of(cls, res: FileResult) -> FileSummary:
        return cls(
            res.file.rel,
            res.file.node,
            res.engine,
            res.lines,
            res.parsed,
            res.truncated,
            res.ignored,
            res.spliced,
            dict(sorted(res.kinds.items())),
            dict(sorted(res.truncated_kinds.items())),
            tuple(res.cut),
        )

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "cut"}


@dataclass
class LogsSummary:
    files: list[FileSummary]
    nodes: list[NodeAudit]
    evidence: list[Evidence]
    duplicate_evidence: int = 0
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    counters: list[FileCounters] = field(default_factory=list)  # token counter lines, per file

    @property
    def lines_read(self) -> int:
        return sum(f.lines for f in self.files)

    @property
    def lines_parsed(self) -> int:
        return sum(f.parsed for f in self.files)

    @property
    def lines_ignored(self) -> int:
        return sum(f.ignored for f in self.files)

    @property
    def lines_truncated(self) -> int:
        return sum(f.truncated for f in self.files)

    @property
    def parsed_by_kind(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for f in self.files:
            total.update(f.kinds)
        return dict(sorted(total.items()))

    @property
    def evidence_by_kind(self) -> dict[str, int]:
        return dict(sorted(Counter(e.kind for e in self.evidence).items()))

    @property
    def misfits(self) -> list[NodeAudit]:
        """Nodes where one full-length request does not fit, or the verdict is unknown."""
        return [n for n in self.nodes if n.fits is not True]

    def to_json(self) -> dict[str, Any]:
        return {
            "lines_read": self.lines_read,
            "lines_parsed": self.lines_parsed,
            "lines_truncated": self.lines_truncated,
            "lines_ignored": self.lines_ignored,
            "parsed_by_kind": self.parsed_by_kind,
            "evidence_rows": len(self.evidence),
            "evidence_by_kind": self.evidence_by_kind,
            "duplicate_evidence_dropped": self.duplicate_evidence,
            "files": [f.to_json() for f in self.files],
            "nodes": [node_json(n) for n in self.nodes],
            "disagreements": self.disagreements,
        }


def _run_json(run: RunAudit) -> dict[str, Any]:
    return {
        "run": run.index,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "pool_slots": run.value("pool_slots"),
        "context_len": run.value("context_len"),
        "page_size": run.value("page_size"),
        "ratio": run.ratio,
        "fits": run.fits,
        "provenance": {k: f.provenance for k, f in sorted(run.facts.items())},
        "notes": run.notes,
    }


def node_json(node: NodeAudit) -> dict[str, Any]:
    """One node as `audit-logs --json` prints it: the deciding start's values on top, every
    start under `runs`."""
    run = node.verdict_run
    top = _run_json(run)
    return {
        "node": node.node,
        "engine": node.engine,
        "engine_version": run.value("engine_version"),
        "role": run.value("role"),
        "model": run.value("model"),
        **{
            k: top[k]
            for k in (
                "pool_slots",
                "context_len",
                "ratio",
                "fits",
                "page_size",
                "started_at",
                "provenance",
                "notes",
            )
        },
        "reason": node.reason,
        "files": node.files,
        "runs": [_run_json(r) for r in node.runs],
    }
