"""Cases made from the sample incident (data_samples/incident): its ledger in node=NAME/
folders (read in place by --ledger-external), a part edited or split, the sample without its
ledger; and the comparison of two case databases' tables, EXCEPT ALL both ways."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.paths import SAMPLE

TABLES = (
    "exposures",
    "violations",
    "read_stats",
    "exposure_tokens",
    "screening",
    "possible_exposures",
    "affected_requests",
    "affected_accounts",
    "input_files",
    "quarantine",
    "ingest_warnings",
)


def hive_sample(root: Path) -> Path:
    """The sample incident with each node's ledger part in kv_events/node=NAME/."""
    case = root / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("kv_events"))
    for part in sorted((SAMPLE / "kv_events").glob("*.parquet")):
        node = part.name.split("-part-")[0]
        (case / "kv_events" / f"node={node}").mkdir(parents=True)
        shutil.copy(part, case / "kv_events" / f"node={node}" / part.name)
    return case


def split_in_two(case: Path, node: str) -> None:
    """The node's one ledger part written as two parts of the same schema, half its rows each."""
    (part,) = (case / "kv_events" / f"node={node}").glob("*.parquet")
    table = pq.read_table(part)
    part.unlink()
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), part.parent / f"{node}-part-00001.parquet")
    pq.write_table(table.slice(half), part.parent / f"{node}-part-00002.parquet")


def edit_part(part: Path, row: int, column: str, value: object) -> None:
    table = pq.read_table(part)
    values = table[column].to_pylist()
    values[row] = value
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, column, pa.array(values, table[column].type)), part)


def differences(a: Path, b: Path) -> dict[str, tuple[int, int]]:
    con = duckdb.connect()
    for name, path in (("a", a), ("b", b)):
        quoted = str(path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {name} (READ_ONLY)")
    out = {}
    for t in TABLES:
        ab = con.execute(f"SELECT count(*) FROM (FROM a.{t} EXCEPT ALL FROM b.{t})").fetchall()
        ba = con.execute(f"SELECT count(*) FROM (FROM b.{t} EXCEPT ALL FROM a.{t})").fetchall()
        out[t] = (ab[0][0], ba[0][0])
    con.close()
    return {t: d for t, d in out.items() if d != (0, 0)}


# What the case database's own kv_events is: a view where the ledger is kept outside it.
OWN_LEDGER = (
    "SELECT table_type FROM information_schema.tables "
    "WHERE table_schema = 'main' AND table_name = 'kv_events'"
)


def task_per_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each partition swept by a task of its own (small ones are otherwise swept together:
    forensics.analysis.tasks.grouped)."""
    monkeypatch.setattr("forensics.analysis.tasks.TASK_ROWS", 0)


def small_case(root: Path) -> Path:
    """The sample incident without its ledger, logs and contents (fast to ingest)."""
    case = root / "case"
    case.mkdir()
    for name in ("accounts.csv", "nodes.csv", "requests.csv"):
        shutil.copy(SAMPLE / name, case / name)
    return case
