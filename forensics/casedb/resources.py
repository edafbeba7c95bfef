"""Locate the SQL in queries/ and the templates in templates/.

Both live at the top of the source tree and are copied into the wheel under
forensics/_resources/. Queries are loaded and run by forensics.casedb.sql."""

from __future__ import annotations

from pathlib import Path

from forensics.errors import KvfError

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the forensics package


def resource_dir(name: str) -> Path:
    """The folder `name` ('queries' or 'templates'), installed copy first, then the source tree."""
    for candidate in (_PACKAGE_DIR / "_resources" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise KvfError(f"cannot find the '{name}' folder; reinstall kvforensics")
