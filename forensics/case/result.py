"""What an ingest did, per file and in total."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypedDict

import pyarrow as pa

from forensics.base.arrow import columns_table


@dataclass
class FileCounts:
    path: str
    table: str
    sha256: str
    bytes: int
    rows_read: int
    rows_loaded: int
    rows_quarantined: int

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def files_table(files: list[FileCounts]) -> pa.Table:
    """The files as Arrow rows, a column per field (text or BIGINT), in field order."""
    schema = pa.schema(
        [(f.name, pa.string() if f.type == "str" else pa.int64()) for f in fields(FileCounts)]
    )
    return columns_table({f.name: [getattr(c, f.name) for c in files] for f in schema}, schema)


class Skipped(TypedDict):
    path: str
    why: str


class IngestJson(TypedDict):
    """`ingest --json` and stages.ingest in manifest.json, in this order."""

    case_dir: str
    unchanged: bool
    ledger_external: bool
    rows_read: int
    rows_loaded: int
    rows_quarantined: int
    warnings: int
    notes: list[str]
    tables: dict[str, dict[str, int]]  # table -> files, rows_read, rows_loaded, rows_quarantined
    files: list[dict[str, Any]]  # FileCounts.as_row()
    skipped: list[Skipped]


@dataclass
class IngestResult:
    case_dir: str
    files: list[FileCounts]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: int = 0
    unchanged: bool = False
    notes: list[str] = field(default_factory=list)  # warnings that change the analysis
    ledger_external: bool = False  # the ledger was checked in place, not loaded

    def loaded_parquet_events(self) -> int:
        """Ledger events loaded into the case database from Parquet files (0 when the ledger
        stays outside it)."""
        if self.ledger_external:
            return 0
        return sum(
            f.rows_loaded
            for f in self.files
            if f.table == "kv_events" and f.path.lower().endswith(".parquet")
        )

    @property
    def rows_read(self) -> int:
        return sum(f.rows_read for f in self.files)

    @property
    def rows_loaded(self) -> int:
        return sum(f.rows_loaded for f in self.files)

    @property
    def rows_quarantined(self) -> int:
        return sum(f.rows_quarantined for f in self.files)

    def by_table(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for f in self.files:
            t = out.setdefault(
                f.table, {"files": 0, "rows_read": 0, "rows_loaded": 0, "rows_quarantined": 0}
            )
            t["files"] += 1
            t["rows_read"] += f.rows_read
            t["rows_loaded"] += f.rows_loaded
            t["rows_quarantined"] += f.rows_quarantined
        return out

    def to_json(self) -> IngestJson:
        return {
            "case_dir": self.case_dir,
            "unchanged": self.unchanged,
            "ledger_external": self.ledger_external,
            "rows_read": self.rows_read,
            "rows_loaded": self.rows_loaded,
            "rows_quarantined": self.rows_quarantined,
            "warnings": self.warnings,
            "notes": self.notes,
            "tables": self.by_table(),
            "files": [f.as_row() for f in self.files],
            "skipped": [{"path": p, "why": why} for p, why in self.skipped],
        }
