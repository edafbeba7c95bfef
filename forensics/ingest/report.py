"""Print what an ingest did: per table and file, rows read = loaded + quarantined."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from forensics.base.textsafe import visible
from forensics.case.result import FileCounts, IngestResult

# A loaded Parquet ledger at least this large gets the tip to keep it outside the database.
EXTERNAL_HINT_EVENTS = 10_000_000

# A folder holding more files of one table than this is one row of the summary, its files
# summed (an external ledger's node folder can hold tens of thousands of parts).
FOLDER_ROWS = 10

SummaryRow = tuple[str, str, int, int, int]  # file or folder, table, read, loaded, quarantined


def print_ingest_summary(console: Console, result: IngestResult) -> None:
    if result.unchanged:
        console.print("Inputs unchanged since the last ingest (same checksums); nothing reloaded.")
    table = Table(title="Ingest", show_lines=False)
    for name in ("file", "table", "read", "loaded", "quarantined"):
        table.add_column(name, justify="left" if name in ("file", "table") else "right")
    for name, table_name, read, loaded, quarantined in summary_rows(result.files):
        shown = escape(visible(name, keep_newlines=False))  # a file name is shown as it is
        table.add_row(shown, table_name, f"{read:,}", f"{loaded:,}", f"{quarantined:,}")
    table.add_row(
        "[b]total[/b]",
        "",
        f"{result.rows_read:,}",
        f"{result.rows_loaded:,}",
        f"{result.rows_quarantined:,}",
    )
    console.print(table)
    for path, why in result.skipped:
        console.print(f"skipped {visible(path, keep_newlines=False)}: {why}", markup=False)
    if result.rows_quarantined:
        console.print(
            f"{result.rows_quarantined:,} rows quarantined: see the quarantine table "
            "(investigate also writes quarantine.csv)"
        )
    for note in result.notes:
        console.print(f"warning: {visible(note, keep_newlines=False)}", markup=False)
    if result.warnings:
        console.print(
            f"{result.warnings:,} warnings (loaded rows or input columns worth a look): see the "
            "ingest_warnings table"
        )
    loaded = result.loaded_parquet_events()
    if loaded >= EXTERNAL_HINT_EVENTS and not result.unchanged:
        console.print(
            f"tip: {loaded:,} ledger events were loaded into the case database; for a Parquet "
            "ledger this size, `--ledger-external` (ingest, investigate) checks the parts in "
            "place instead, about 3 times faster to ingest at 10 M to 100 M events, and keeps "
            "only the small tables in the database (README: Beyond one machine)",
            markup=False,
        )


def summary_rows(files: list[FileCounts]) -> list[SummaryRow]:
    """A row per file, in the files' order, except that the files of a folder of more than
    FOLDER_ROWS files of one table are summed in one row, where its first file would be,
    named by the folder, how many files it holds and how many of them have quarantined rows
    (the quarantine table names them; input_files and the manifest list every file)."""
    per_folder = Counter((_folder(f.path), f.table) for f in files)
    rows: list[list] = []
    at: dict[tuple[str, str], int] = {}
    for f in files:
        key = (_folder(f.path), f.table)
        if per_folder[key] <= FOLDER_ROWS:
            rows.append([f.path, f.table, f.rows_read, f.rows_loaded, f.rows_quarantined, 0])
            continue
        if key not in at:
            at[key] = len(rows)
            rows.append([key[0], f.table, 0, 0, 0, 0])
        row = rows[at[key]]
        row[2:] = [
            row[2] + f.rows_read,
            row[3] + f.rows_loaded,
            row[4] + f.rows_quarantined,
            row[5] + bool(f.rows_quarantined),
        ]
    for key, i in at.items():
        flagged = rows[i][5]
        some = f", {flagged:,} with quarantined rows" if flagged else ""
        rows[i][0] = f"{key[0]}/ ({per_folder[key]:,} files{some})"
    return [(str(n), str(t), int(r), int(ld), int(q)) for n, t, r, ld, q, _ in rows]


def _folder(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else "."
