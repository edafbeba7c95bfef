"""Where a case's ledger is kept when the command does not say (docs/guides/scoping.md,
"Where the ledger lives").

A case whose kv_events/ folder holds Parquet parts in node=NAME/ folders and nothing else is
analysed in place by default: ingest checks the parts and records their SHA-256, the case
database keeps a view over them, and every analysis checks the hashes again. The case database
then needs its case folder (the parts) beside it, where it was. `--ledger-load` loads the
ledger into the case database instead; CSV and JSONL ledgers, and Parquet files outside
node=NAME/ folders, are always loaded."""

from __future__ import annotations

from pathlib import Path

from forensics.errors import UsageError
from forensics.ledger.external import PARQUET
from forensics.ledger.store import ExternalLedger

CASE_LEDGER = "kv_events"  # the case folder's ledger folder
# Files of these endings under kv_events/ make the ledger one to load.
LOADED_ONLY = (".csv", ".jsonl", ".json", ".gz", ".zst")


def in_place_by_default(case_dir: Path) -> bool:
    """Whether the case folder's kv_events/ holds only Parquet parts in node=NAME/ folders
    (at least one), the layout a ledger read in place needs."""
    root = case_dir / CASE_LEDGER
    if not root.is_dir():
        return False
    parts = 0
    for path in root.rglob("*"):
        name = path.name.lower()
        if path.name.startswith(".") or not path.is_file():
            continue
        if name.endswith(PARQUET):
            inside = path.relative_to(root).parts[:-1]
            if not any(folder.startswith("node=") for folder in inside):
                return False
            parts += 1
        elif name.endswith(LOADED_ONLY):
            return False
    return parts > 0


def choose_ledger(
    case_dir: Path, external: str | None, load: bool, ray: str | None
) -> ExternalLedger | None:
    """The ledger to read in place (None: load it): --ledger-external LOCATION as given,
    --ledger-load never, and otherwise the case's kv_events/ when in_place_by_default."""
    if external and load:
        raise UsageError("--ledger-external and --ledger-load contradict each other: give one")
    if external:
        return ExternalLedger(external, ray)
    if load or not in_place_by_default(case_dir):
        return None
    return ExternalLedger(CASE_LEDGER, ray)
