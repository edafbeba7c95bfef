"""The names of the folders an in-memory DuckDB connection spills into beside a case database
(`case.duckdb.kvforensics-spill-PID-HEX`, forensics.casedb.dbopen.scratch_spill_folder),
shared by the code that makes and removes them and by OUT's check of its own files
(forensics.run.outdir)."""

from __future__ import annotations

import re

SPILL_PREFIX = "kvforensics-spill-"
_SPILL = re.compile(re.escape(SPILL_PREFIX) + r"([0-9]+)-[0-9a-f]+")


def spill_pid(db_name: str, name: str) -> int | None:
    """The process id in `name` when it is the name of a spill folder of the database file
    named db_name, else None."""
    prefix = f"{db_name}."
    m = _SPILL.fullmatch(name[len(prefix) :]) if name.startswith(prefix) else None
    return int(m.group(1)) if m else None


def spill_folder_pid(name: str) -> int | None:
    """The process id in `name` when it ends as a spill folder's name (beside a case database
    or in the system's temporary folder), else None."""
    m = _SPILL.search(name)
    return int(m.group(1)) if m and m.end() == len(name) else None
