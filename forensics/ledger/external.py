"""A KV ledger kept outside the case database: Parquet parts in hive folders `node=NAME/`, in a
local folder or at an fsspec URL that every worker can read.

`ingest --ledger-external` validates it partition by partition (forensics.ledger.check; each
partition one Ray task with `--ray`) with the same checks as a loaded ledger: the per-file
counts and SHA-256 go to input_files (and so the manifest), bad rows to quarantine, unknown
requests to ingest_warnings. Only those and `ledger_files` (one row per part, with what its
kept rows are) are written to the case database. Each connection then sees `kv_events` as a
temporary view over the parts (queries/ledger/view.sql), leaving out the quarantined rows, so
every later stage reads it like the loaded table; the analysis sweeps each partition in its
own task, which reads only that partition (forensics.analysis.partitions). This module lists
the parts, computes their checksums and opens connections able to read them; their columns are
read by forensics.ledger.schemas.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from forensics.base.hashing import Hashed, blocks, changed_since, stamp_of
from forensics.case.discover import INSIDE, OUTSIDE, outside_case
from forensics.casedb.scratch import ScratchDatabases, scratch_connection
from forensics.errors import InputError
from forensics.ledger.storage import answering, raise_storage_failure

PARQUET = (".parquet", ".pq")


@dataclass(frozen=True)
class LedgerFile:
    url: str  # what the readers open: an absolute local path or an fsspec URL
    rel: str  # its name in input_files and quarantine (relative to the case folder, or the URL)
    node: str  # from the node=NAME folder
    rank: int  # position in path order: gives the events' input order


def is_url(location: str) -> bool:
    return "://" in location


def folder_of(url: str) -> str:
    """The folder a part lies in (its node=NAME folder), as a path or a URL."""
    return url.rsplit("/", 1)[0] if is_url(url) else str(Path(url).parent)


def resolve(case_dir: Path, location: str) -> str:
    """A URL as given; a folder relative to the case folder unless absolute."""
    if is_url(location):
        return location
    path = Path(location)
    return str((path if path.is_absolute() else case_dir / path).resolve())


def list_files(
    case_dir: Path,
    location: str,
    follow_links: bool = False,
    skipped: list[tuple[str, str]] | None = None,
) -> list[LedgerFile]:
    """The ledger's Parquet parts, sorted by path; every part must sit in a node=NAME folder.
    A symbolic link that leads outside the case folder (and outside the ledger folder, where
    that is given outside the case) is not read unless follow_links is true: it is added to
    `skipped` (relative path, why), as ingest lists the case's own skipped files."""
    skipped = [] if skipped is None else skipped
    root = resolve(case_dir, location)
    if is_url(root):
        try:
            with answering():
                fs = filesystem(root)
                base = fs._strip_protocol(root).rstrip("/")
                listed = fs.find(base)
        except OSError as exc:  # a StorageError, or the store refused credentials or a bucket
            raise_storage_failure(exc, root, "the list of its parts", os_errors=True)
            raise
        found = [(fs.unstrip_protocol(p), p[len(base) :].lstrip("/")) for p in listed]
    else:
        if not Path(root).is_dir():
            raise InputError(
                "the external ledger folder does not exist",
                path=root,
                fix="give the folder that holds the node=NAME/ folders",
            )
        found = local_parts(case_dir, location, follow_links, skipped)
    parts = sorted((inner, url) for url, inner in found if inner.lower().endswith(PARQUET))
    _refuse_other_data(found)
    if not parts:
        raise InputError(
            "no Parquet parts in the external ledger",
            path=root,
            fix="write the ledger as node=NAME/part-*.parquet",
        )
    out = []
    case_base = case_dir.resolve()
    for rank, (inner, url) in enumerate(parts):
        folder = inner.split("/")[-2] if "/" in inner else ""
        if not folder.startswith("node=") or len(folder) == len("node="):
            raise InputError(
                "a ledger part outside a node=NAME folder",
                path=url,
                fix="move each node's parts into a folder named node=NAME",
            )
        rel = url if is_url(root) else _case_rel(case_base, Path(url))
        out.append(LedgerFile(url, rel, folder[len("node=") :], rank))
    return out


# Names of files that hold ledger rows but are not Parquet parts an external ledger can read in
# place (a compressed part, another format); other files, and those whose name starts with "."
# or "_" (what Hive and Spark writers leave beside their parts), are not the ledger's.
_OTHER_DATA = (".parquet.", ".pq.", ".csv", ".jsonl", ".json", ".gz", ".gzip", ".zst", ".zstd")


def _refuse_other_data(found: list[tuple[str, str]]) -> None:
    """Refuse a file of ledger rows the external ledger cannot read in place: left out, its
    rows would be lost without a word."""
    for url, inner in sorted(found, key=lambda f: f[1]):
        name = inner.rsplit("/", 1)[-1].lower()
        hidden = name.startswith((".", "_"))  # a writer's own (_SUCCESS, .part.parquet.crc)
        if not hidden and not name.endswith(PARQUET) and any(x in name for x in _OTHER_DATA):
            raise InputError(
                "a file in the external ledger that is not a Parquet part: an external "
                "ledger is read in place, and only Parquet parts can be",
                path=url,
                fix="unpack a compressed part beside the others (Parquet compresses inside the "
                "file), move other files out of the ledger folder, or ingest without "
                "--ledger-external",
            )


def local_parts(
    case_dir: Path, location: str, follow_links: bool, skipped: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The files of a local ledger folder (path, path inside the folder), by the rule of the
    case's own files (forensics.case.discover): a link is followed only where it stays in the
    case folder, or in the ledger folder where the examiner named one outside the case, unless
    follow_links is true. A link to a folder is not walked into without follow_links."""
    given = Path(location)
    case_base = case_dir.resolve()
    root = Path(resolve(case_dir, location))
    roots = [case_base, root] if given.is_absolute() else [case_base]

    def outside(path: Path) -> bool:
        return all(outside_case(path, r) for r in roots)

    if not follow_links and outside(root):  # the ledger folder is itself such a link
        raise InputError(
            "the external ledger folder is a symbolic link to a place outside the case folder; "
            "not followed",
            path=location,
            fix="give --follow-links to read it, or give the folder it leads to as LOCATION",
        )
    found = []
    for base, dirs, files in os.walk(root, followlinks=follow_links):
        for name in sorted(dirs):
            link = Path(base) / name
            if link.is_symlink() and not follow_links:
                why = OUTSIDE if outside(link) else INSIDE
                skipped.append((_case_rel(case_base, link), why))
        for name in files:
            path = Path(base) / name
            if path.is_symlink() and not follow_links and outside(path):
                skipped.append((_case_rel(case_base, path), OUTSIDE))
            elif path.is_file():
                found.append((str(path), path.relative_to(root).as_posix()))
    return found


def _case_rel(case_base: Path, path: Path) -> str:
    """path relative to the case folder (case_base: resolved), or whole when outside it."""
    try:
        return path.relative_to(case_base).as_posix()
    except ValueError:
        return str(path)


def filesystem(url: str) -> Any:
    """The fsspec filesystem of a URL; for fsspec's memory filesystem, one whose every open for
    reading has a position of its own (independent_reads)."""
    import fsspec

    return independent_reads(fsspec.core.url_to_fs(url)[0])


def independent_reads(fs: Any) -> Any:
    """fs, unless it is fsspec's memory filesystem, which hands every reader of a file the same
    file object, position and all: two readers at once (DuckDB's reads and the SHA-256 computed
    beside them, or two of DuckDB's threads) then read each other's bytes. For that one, a
    filesystem over the same files whose opens for reading each get a copy of the file."""
    from fsspec.implementations.memory import MemoryFileSystem

    return _memory_reads()() if isinstance(fs, MemoryFileSystem) else fs


@functools.cache
def _memory_reads() -> type:
    """fsspec's memory filesystem (the same files: fsspec keeps them on the class) with a copy
    of the file for every open for reading (independent_reads)."""
    from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

    class MemoryReads(MemoryFileSystem):
        def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
            stripped = self._strip_protocol(path)
            if mode == "rb" and stripped in self.store:
                return MemoryFile(None, stripped, self.store[stripped].getvalue())
            return super()._open(path, mode, *args, **kwargs)

    return MemoryReads


@contextmanager
def open_connection(
    urls: list[str],
    memory_limit: str | None = None,
    spill_beside: Path | None = None,
    pool: ScratchDatabases | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB connection with the project's macros and input schema, able to read
    the given URLs: in a database of `pool` (forensics.casedb.scratch), or without one in a database
    of its own, within memory_limit (None: the default) and spilling beside the case database
    `spill_beside` where it is on this machine."""
    with scratch_connection(pool, memory_limit, spill_beside) as con:
        register_filesystems(con, urls)
        yield con


def register_filesystems(con: duckdb.DuckDBPyConnection, urls: list[str]) -> None:
    """The fsspec filesystems of the URLs, in con's database (where a connection before it,
    in a database that tasks share, may have registered them already)."""
    done = set(con.list_filesystems())
    for url in urls:
        protocol = url.split("://", 1)[0] if is_url(url) else None
        if protocol and protocol not in done:
            try:
                con.register_filesystem(filesystem(url))
            except duckdb.InvalidInputException as exc:  # under another of its names
                if "already been registered" not in str(exc):
                    raise
            done.add(protocol)


def sha256_of(url: str, copy: Path | None = None) -> tuple[str, int]:
    """SHA-256 and size of a part, local or remote; with `copy`, its bytes are also written
    there as they are read (forensics.ledger.mirror)."""
    digest = hashlib.sha256()
    size = 0
    with answering(), contextlib.ExitStack() as files:  # a remote storage's failure: a StorageError
        if is_url(url):
            stream = files.enter_context(filesystem(url).open(url, "rb"))
        else:
            stream = files.enter_context(open(url, "rb", buffering=0))
        out = files.enter_context(copy.open("wb")) if copy is not None else None
        for block in blocks(stream, 1 << 22):
            digest.update(block)
            if out is not None:
                out.write(block)
            size += len(block)
    return digest.hexdigest(), size


def runs_together(
    sizes: list[int], limit: int, share: int, workers: int, most: int
) -> list[list[int]]:
    """Indexes of partitions (by their sizes, in partition order) in runs to be worked on
    together: consecutive partitions while the run holds at most `limit`, and at most 1 / share
    of each worker's share of the whole, and at most `most` partitions; a larger partition is a
    run of its own. Small partitions checked or swept together pay a task's fixed cost once."""
    cap = min(limit, max(1, sum(sizes) // (share * max(1, workers))))
    out: list[list[int]] = []
    held = 0
    for i, size in enumerate(sizes):
        if out and len(out[-1]) < most and held + size <= cap:
            out[-1].append(i)
            held += size
        else:
            out.append([i])
            held = size
    return out


def check_digests(
    digests: list[tuple[LedgerFile, Future[tuple[str, int]]]],
    recorded: dict[str, tuple[str, int]],
) -> None:
    """check_digest for each part read and its digest computed beside the read."""
    for f, digest in digests:
        check_digest(f, digest.result(), recorded.get(f.rel))


def check_digest(
    part: LedgerFile, found: tuple[str, int], recorded: tuple[str, int] | None
) -> None:
    """A part read for an analysis must be what ingest recorded (SHA-256, size): a part
    changed since is an error, never a silent analysis of other evidence."""
    if recorded is None or tuple(found) != tuple(recorded):
        was = f"SHA-256 {recorded[0]}, {recorded[1]:,} bytes" if recorded else "no record"
        raise InputError(
            f"the part {part.rel} changed since it was ingested: now SHA-256 {found[0]}, "
            f"{found[1]:,} bytes; ingest recorded {was}",
            path=part.url,
            fix="restore the part as it was ingested (input_files lists each part's SHA-256), "
            "or ingest the case anew",
        )


def local_stamps(files: list[LedgerFile]) -> dict[str, tuple[int, ...]]:
    """The stamp (forensics.base.hashing.stamp_of) of each part on this machine's disk, by name,
    taken before any of them is read (a part that cannot be stat'ed is named by its read)."""
    out = {}
    for f in files:
        if not is_url(f.url):
            with contextlib.suppress(OSError):
                out[f.rel] = stamp_of(Path(f.url).stat())
    return out


def check_unchanged(part: LedgerFile, before: Hashed) -> None:
    """A local part checked at ingest is, after the check, still the part hashed (same bytes,
    same stamp as before the check read it): else the checksum recorded would not be that of
    the rows checked."""
    why = changed_since(Path(part.url), before)
    if why is not None:
        raise InputError(
            f"this ledger part changed while it was ingested: {why}; nothing was loaded from "
            "the case",
            path=part.rel,
            fix="stop whatever writes to the ledger (work on a read-only copy of the evidence), "
            "then ingest again",
        )
