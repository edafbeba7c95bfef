"""Read a set of log files into a LogsSummary (no database): the core of `audit-logs` and of
the case loader."""

from __future__ import annotations

from itertools import groupby
from pathlib import Path

from forensics.logs import evidence
from forensics.logs.audit import audit_node
from forensics.logs.naming import classify
from forensics.logs.parse import FileResult, parse_file
from forensics.logs.summary import FileSummary, LogsSummary


def read_logs(
    paths: list[tuple[Path, str, str]], node_map: list[tuple[str, str]] | None = None
) -> LogsSummary:
    """Parse (path, name for naming, name shown) triples; one NodeAudit per node, sorted."""
    results = [parse_file(f) for f in classify(paths, node_map or [])]
    nodes = [
        audit_node(node, list(group)) for node, group in groupby(results, key=lambda r: r.file.node)
    ]
    rows, dropped = evidence.dedupe([e for r in results for e in r.evidence])
    rows = evidence.fill_rooms(rows, _rooms(results))
    files = sorted((FileSummary.of(r) for r in results), key=lambda f: f.file)
    return LogsSummary(files, nodes, rows, dropped)


def _rooms(results: list[FileResult]) -> dict[tuple[str, int], str]:
    rooms: dict[tuple[str, int], str] = {}
    for res in results:
        for room, rid in res.rooms.items():
            rooms.setdefault((res.file.node, room), rid)
    return rooms
