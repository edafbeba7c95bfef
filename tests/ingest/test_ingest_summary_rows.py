"""The ingest summary's rows: a row per file, but a folder of more than FOLDER_ROWS files of one
table summed in one row (an external ledger's node folder can hold tens of thousands of parts),
its counts the sums of its files' and its name saying how many files it holds and how many of
them had rows quarantined; the total row is unchanged."""

from __future__ import annotations

from rich.console import Console

from forensics.case.result import FileCounts, IngestResult
from forensics.ingest.report import FOLDER_ROWS, print_ingest_summary, summary_rows


def _file(path: str, table: str, read: int, bad: int) -> FileCounts:
    return FileCounts(path, table, "0" * 64, 10, read, read - bad, bad)


def _files() -> list[FileCounts]:
    many = [
        _file(f"kv/node=d0/p{i:03d}.parquet", "kv_events", 100 + i, 3 if i in (4, 9) else 0)
        for i in range(FOLDER_ROWS + 1)
    ]
    few = [_file(f"kv/node=d1/p{i:03d}.parquet", "kv_events", 50, 0) for i in range(FOLDER_ROWS)]
    return [_file("requests.csv", "requests", 7, 1), *many, *few, _file("nodes.csv", "nodes", 2, 0)]


def test_a_folder_of_many_files_is_one_row_of_their_sums() -> None:
    files = _files()
    rows = summary_rows(files)
    many = [f for f in files if "node=d0" in f.path]
    assert rows[0] == ("requests.csv", "requests", 7, 6, 1)
    assert rows[1] == (
        f"kv/node=d0/ ({FOLDER_ROWS + 1} files, 2 with quarantined rows)",
        "kv_events",
        sum(f.rows_read for f in many),
        sum(f.rows_loaded for f in many),
        6,
    )
    assert [r[0] for r in rows[2:-1]] == [f.path for f in files if "node=d1" in f.path]
    assert rows[-1] == ("nodes.csv", "nodes", 2, 2, 0)
    for i, field in ((2, "rows_read"), (3, "rows_loaded"), (4, "rows_quarantined")):
        assert sum(r[i] for r in rows) == sum(getattr(f, field) for f in files)  # none lost


def test_a_folder_without_quarantined_rows_says_only_its_files() -> None:
    files = [_file(f"logs/{i}.log", "logs", 1, 0) for i in range(FOLDER_ROWS + 5)]
    assert summary_rows(files) == [(f"logs/ ({FOLDER_ROWS + 5} files)", "logs", 15, 15, 0)]


def test_the_printed_summary_has_the_folders_row_and_the_total() -> None:
    console = Console(record=True, width=400)
    print_ingest_summary(console, IngestResult("case", _files()))
    text = console.export_text()
    assert f"kv/node=d0/ ({FOLDER_ROWS + 1} files, 2 with quarantined rows)" in text
    assert "node=d0/p005" not in text
    assert "kv/node=d1/p009.parquet" in text
    assert f"{sum(f.rows_read for f in _files()):,}" in text  # the total row
