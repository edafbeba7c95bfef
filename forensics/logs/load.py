"""Load a case's engine logs into the case database: one row per node and engine start into
`node_starts` (and a `nodes` row for a node the nodes file lacks), where the nodes file and a
log disagree into `node_disagreements`, every value with its line into `node_facts`,
per-request evidence into `engine_evidence`, the engines' token counter lines into
`engine_counters`, counts into `log_files`. The caller owns the transaction."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from forensics.base.arrow import table_of
from forensics.casedb.sql import registered, sql
from forensics.errors import InputError
from forensics.logs.audit import NodeAudit
from forensics.logs.counters import counters_table
from forensics.logs.discover import is_log_file
from forensics.logs.naming import read_node_map
from forensics.logs.read import read_logs
from forensics.logs.summary import LogsSummary

NODE_MAP_NAME = "node_map.csv"  # logs/node_map.csv in a case folder, if present

_NODES = pa.schema(
    [
        ("node", pa.string()),
        ("role", pa.string()),
        ("model", pa.string()),
        ("engine", pa.string()),
        ("engine_version", pa.string()),
        ("page_size", pa.int64()),
        ("pool_slots", pa.int64()),
        ("context_len", pa.int64()),
        ("started_at", pa.timestamp("us")),
        ("src_file", pa.string()),
        ("src_row", pa.int64()),
    ]
)
_FACTS = pa.schema(
    [
        ("node", pa.string()),
        ("fact", pa.string()),
        ("value", pa.string()),
        ("src_file", pa.string()),
        ("src_line", pa.int64()),
        ("run", pa.int32()),
        ("source", pa.string()),
    ]
)
_EVIDENCE = pa.schema(
    [
        ("node", pa.string()),
        ("ts", pa.timestamp("us")),
        ("kind", pa.string()),
        ("request_id", pa.string()),
        ("value", pa.int64()),
        ("max_value", pa.int64()),
        ("message", pa.string()),
        ("src_file", pa.string()),
        ("src_line", pa.int64()),
        ("bootstrap_room", pa.int64()),
        ("slot_idx", pa.int64()),
        ("position", pa.int64()),
    ]
)
_FILES = pa.schema(
    [
        ("path", pa.string()),
        ("node", pa.string()),
        ("engine", pa.string()),
        ("sha256", pa.string()),
        ("bytes", pa.int64()),
        ("lines", pa.int64()),
        ("parsed", pa.int64()),
        ("truncated", pa.int64()),
        ("ignored", pa.int64()),
    ]
)


def load_logs(
    con: duckdb.DuckDBPyConnection, case_dir: Path, files: list[Path], node_map: Path | None = None
) -> LogsSummary:
    """Parse the case's log files and insert what they say. Loading the same files again
    replaces their earlier rows. Call it after the nodes file is loaded, so that disagreements
    between the two are found (the file's row stays the node's row in `nodes`)."""
    case_dir = case_dir.resolve()
    paths = sorted({f for p in files for f in _expand(_resolve(case_dir, p))})
    triples = [(p, _naming(case_dir, p), _shown(case_dir, p)) for p in paths if is_log_file(p)]
    map_file = node_map or case_dir / "logs" / NODE_MAP_NAME
    summary = read_logs(triples, read_node_map(map_file) if map_file.is_file() else [])
    con.execute(sql("schema/logs"))
    tables = {
        "logs_files_in": _files_table(summary, {shown: p for p, _, shown in triples}),
        "logs_nodes_in": table_of(_node_rows(summary.nodes), _NODES),
        "logs_facts_in": table_of(_fact_rows(summary.nodes), _FACTS),
        "logs_evidence_in": table_of(_evidence_rows(summary), _EVIDENCE),
        "logs_counters_in": counters_table(summary.counters),
    }
    with registered(con, tables):
        con.execute(sql("logs/clear"))
        for name in (
            "logs/insert_files",
            "logs/insert_nodes",
            "logs/insert_facts",
            "logs/insert_evidence",
            "logs/insert_counters",
        ):
            con.execute(sql(name))
        summary.disagreements = _disagreements(con)
    return summary


def _expand(path: Path) -> list[Path]:
    """A file as itself, a folder as its files (recursively); a missing path is an error."""
    if path.is_dir():
        return [p for p in path.rglob("*") if p.is_file()]
    if not path.is_file():
        raise InputError(
            "log file not found",
            path=str(path),
            fix="check the case folder's logs/ (was it moved while reading?)",
        )
    return [path]


def _resolve(case_dir: Path, path: Path) -> Path:
    return (path if path.is_absolute() else case_dir / path).resolve()


def _naming(case_dir: Path, path: Path) -> str:
    """The name the node rules see: relative to logs/ (or the case folder)."""
    for root in (case_dir / "logs", case_dir):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return path.name


def _shown(case_dir: Path, path: Path) -> str:
    return path.relative_to(case_dir).as_posix() if path.is_relative_to(case_dir) else str(path)


def _files_table(summary: LogsSummary, paths: dict[str, Path]) -> pa.Table:
    rows = []
    for f in summary.files:
        data = paths[f.file].read_bytes()
        rows.append(
            {
                "path": f.file,
                "node": f.node,
                "engine": f.engine,
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "lines": f.lines,
                "parsed": f.parsed,
                "truncated": f.truncated,
                "ignored": f.ignored,
            }
        )
    return table_of(rows, _FILES)


def _node_rows(nodes: list[NodeAudit]) -> list[dict[str, Any]]:
    rows = []
    for node in nodes:
        for run in node.runs:
            anchor = next(
                (
                    run.facts[k]
                    for k in ("pool_slots", "context_len", "page_size", "role", "model")
                    if k in run.facts and run.facts[k].src_file
                ),
                None,
            )
            if anchor is None:
                continue  # nothing read from this start: no row
            rows.append(
                {
                    "node": node.node,
                    "role": run.value("role"),
                    "model": run.value("model"),
                    "engine": node.engine,
                    "engine_version": run.value("engine_version"),
                    "page_size": run.value("page_size"),
                    "pool_slots": run.value("pool_slots"),
                    "context_len": run.value("context_len"),
                    "started_at": run.started_at,
                    "src_file": anchor.src_file,
                    "src_row": anchor.src_line,
                }
            )
    return rows


def _fact_rows(nodes: list[NodeAudit]) -> list[dict[str, Any]]:
    rows = []
    for node in nodes:
        for run in node.runs:
            for name, fact in sorted(run.facts.items()):
                rows.append(
                    {
                        "node": node.node,
                        "fact": name,
                        "value": str(fact.value),
                        "src_file": fact.src_file,
                        "src_line": fact.src_line,
                        "run": run.index,
                        "source": fact.source,
                    }
                )
            if run.fits is not None:
                rows.append(
                    {
                        "node": node.node,
                        "fact": "fits",
                        "value": str(run.fits).lower(),
                        "src_file": None,
                        "src_line": None,
                        "run": run.index,
                        "source": "derived: pool_slots >= context_len",
                    }
                )
    return rows


def _evidence_rows(summary: LogsSummary) -> list[dict[str, Any]]:
    keys = [name for name in _EVIDENCE.names]
    return [{k: getattr(ev, k) for k in keys} for ev in summary.evidence]


def _disagreements(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    con.execute(sql("logs/disagreements"))
    cursor = con.execute(sql("logs/disagreements_list"))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
