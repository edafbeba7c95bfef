"""A partition task's local copy of its parts kept at an fsspec URL (an object store), for the
analysis and for ingest's checks.

A task reads its partition several times (its request ids and hashes, the sweep's input, the
events its pieces name) and computes each part's SHA-256 beside those reads. Over a network,
through the store's fsspec filesystem, each of those reads fetched the part again: on the
bench's 11 M-event ledger served by a real S3 server on this machine, the analysis took 9.0 to
9.5 s where the same parts on disk took 3.5 to 3.9 s. So a task first fetches each remote
part once, byte for byte, into a folder of its own, computing the part's SHA-256 and size as
the bytes arrive, and reads that copy. The digests are checked against what ingest recorded
before anything is read, and the bytes analysed are the bytes hashed: a part that changes in
the store while the task runs cannot be half read from one version and hashed from another.

The folder is named as a spill folder (forensics.dbopen.scratch_spill_folder: beside the case
database on this machine, in the system's temporary folder elsewhere), so that one a killed
run leaves is removed by the next, and it is removed when the task ends.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from forensics.dbopen import scratch_spill_folder
from forensics.ledger.external import LedgerFile, is_url, sha256_of
from forensics.ledger.view import PartView


@contextmanager
def mirrored(
    parts: list[PartView], beside: Path | None
) -> Iterator[tuple[list[PartView], dict[str, tuple[str, int]]]]:
    """The parts as the task reads them, each remote one replaced by its local copy (same
    name, rank and node), and the SHA-256 and size of each copy by part name; the copies are
    removed on leaving. Parts on this machine's disk are read where they are."""
    with mirrored_files([p.file for p in parts], beside) as (files, found):
        yield [replace(p, file=f) for p, f in zip(parts, files, strict=True)], found


@contextmanager
def mirrored_files(
    files: list[LedgerFile], beside: Path | None
) -> Iterator[tuple[list[LedgerFile], dict[str, tuple[str, int]]]]:
    """mirrored for the files themselves (ingest's checks read files, not views of them)."""
    remote = [f for f in files if is_url(f.url)]
    if not remote:
        yield files, {}
        return
    folder = Path(scratch_spill_folder(beside))  # a spill folder's name: a stale one is removed
    try:
        folder.mkdir(parents=True)
        local: dict[str, LedgerFile] = {}
        found: dict[str, tuple[str, int]] = {}
        for i, f in enumerate(remote):
            # a folder per part, the copy under the part's own name: a reader's error names it
            path = folder / f"{i:06d}" / f.url.rsplit("/", 1)[-1]
            path.parent.mkdir()
            found[f.rel] = sha256_of(f.url, path)
            local[f.rel] = replace(f, url=str(path))
        yield [local.get(f.rel, f) for f in files], found
    finally:
        shutil.rmtree(folder, ignore_errors=True)
