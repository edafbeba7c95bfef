"""What ingest's result rests on besides its input files: the code that reads and checks them.

An unchanged case is not loaded again (forensics.ingest.load), but a case database an earlier
version of that code loaded is stale though its files are the same: a check added since, or a
fact read differently, would be missing from it. `ingest_code_digest` is recorded with each
ingest and compared before a stored result is reused."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from forensics import __version__
from forensics.casedb.resources import resource_dir

_PACKAGE = Path(__file__).resolve().parents[1]  # the forensics package
# The Python packages and SQL folders whose contents decide what ingest loads (folders, so
# written with their slash).
_PACKAGES = ("base/", "case/", "casedb/", "ingest/", "ledger/", "logs/", "tap/")
_QUERY_FOLDERS = ("ingest/", "ledger/", "logs/", "schema/")


@cache
def ingest_code_digest() -> str:
    """SHA-256 over the version and every file of the code ingest runs (paths and bytes)."""
    digest = hashlib.sha256(__version__.encode())
    queries = resource_dir("queries")
    files = [(p.relative_to(_PACKAGE), p) for d in _PACKAGES for p in (_PACKAGE / d).glob("*.py")]
    files += [
        (p.relative_to(queries), p) for d in _QUERY_FOLDERS for p in (queries / d).glob("*.sql")
    ]
    for rel, path in sorted(files):
        digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
