"""Locate the SQL in queries/ and the templates in templates/.

Both live at the top of the source tree and are copied into the wheel under
forensics/_resources/. The loader records every query's SHA-256 so outputs can name the exact
SQL that produced them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from forensics.errors import KvfError

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The folder `name` ('queries' or 'templates'), installed copy first, then the source tree."""
    for candidate in (_PACKAGE_DIR / "_resources" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise KvfError(f"cannot find the '{name}' folder; reinstall kvforensics")


@dataclass(frozen=True)
class Query:
    name: str
    path: Path
    sql: str
    sha256: str


@cache
def _read_query(name: str) -> Query:
    path = resource_dir("queries") / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in path.parent.glob("*.sql")))
        raise KvfError(f"no query named '{name}'; known queries: {known}")
    text = path.read_text(encoding="utf-8")
    return Query(name, path, text, hashlib.sha256(text.encode("utf-8")).hexdigest())


_USED: dict[str, str] = {}


def load_query(name: str) -> Query:
    """Load queries/<name>.sql (names are file stems) and record it as used by this run."""
    query = _read_query(name)
    _USED[name] = query.sha256
    return query


def sql(name: str) -> str:
    """The text of queries/<name>.sql."""
    return load_query(name).sql


def queries_used() -> dict[str, str]:
    """{query name: sha256} of every query loaded since the last reset, sorted by name."""
    return dict(sorted(_USED.items()))


def record_queries_used(used: dict[str, str]) -> None:
    """Count queries a stored earlier result rests on as used by this run (an unchanged ingest
    is not repeated, but its validation queries still vouch for the loaded rows)."""
    for name, digest in used.items():
        _USED.setdefault(name, digest)


def reset_queries_used() -> None:
    _USED.clear()
