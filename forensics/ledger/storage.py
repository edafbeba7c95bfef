"""When the storage of a ledger kept at an fsspec URL does not answer.

A ledger at `s3://...` (or any fsspec URL) is read through the URL's fsspec filesystem, by this
code (listing the parts, hashing them) and by DuckDB (reading them). When the storage fails (a
connection refused, credentials refused, a timeout), the filesystem raises its own errors
(botocore's, aiohttp's), which are no OSError, and DuckDB reports an error raised inside such
a filesystem as its base `duckdb.Error` whose text is that error's Python traceback. Either
way the run stopped as an internal error with a traceback, where it is an input the responder
can fix. Here both are recognised, and said as the storage's failure, with the part or folder
it was reading and what to check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from forensics.errors import InputError, UsageError, interrupted

STORAGE_FIX = (
    "check that the ledger's storage answers from this machine and from every worker: its "
    "address, credentials and network (fsspec takes them from the storage's usual settings, "
    "e.g. AWS_ENDPOINT_URL and the AWS credentials for s3://), then run again"
)
_TRACEBACK = "Traceback (most recent call last):"
_STATEMENT_PLACE = re.compile(r"\n\s*\nLINE \d+:")


class StorageError(OSError):
    """A part's storage failed to answer: the filesystem's own error, as an OSError, so that
    every read of a part that reports an unreadable part (an OSError) reports this one too."""


def storage_failure(exc: BaseException) -> str | None:
    """What the storage said, where exc is its failure: a StorageError, or DuckDB's report of
    an error raised inside a registered (fsspec) filesystem, whose last line names the error
    and, for object stores, the URL; None for any other error."""
    if isinstance(exc, StorageError):
        return str(exc)
    if type(exc) is not duckdb.Error:  # DuckDB's own errors are subclasses
        return None
    # DuckDB may add the statement's place after the traceback: "\n\nLINE 1: ...", "^^^"
    text = _STATEMENT_PLACE.split(str(exc), maxsplit=1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if len(lines) > 1 and lines[0] == _TRACEBACK else None


@contextmanager
def answering() -> Iterator[None]:
    """Calls of an fsspec filesystem, whose errors other than OSError (and Ctrl-C) are
    raised as a StorageError (the caller names what it was reading); a filesystem that is not
    installed is a usage error saying what to install."""
    try:
        yield
    except OSError:
        raise
    except ImportError as exc:  # fsspec's "Install s3fs to access S3"
        raise UsageError(
            f"reading this ledger needs its fsspec filesystem, which is not installed: {exc} "
            "(for s3://: pip install 'kvforensics[s3]')"
        ) from exc
    except Exception as exc:
        if interrupted(exc):
            raise
        raise StorageError(f"{type(exc).__name__}: {exc}") from exc


def raise_storage_failure(
    exc: BaseException, path: str, reading: str, os_errors: bool = False
) -> None:
    """An InputError saying the storage failed while `reading` (e.g. "the list of its parts"),
    where exc is such a failure, or with os_errors any OSError (an object store refuses
    credentials or a bucket as PermissionError or FileNotFoundError); nothing otherwise."""
    why = storage_failure(exc)
    if why is None and os_errors and isinstance(exc, OSError):
        why = str(exc) or type(exc).__name__
    if why is not None:
        raise InputError(
            f"cannot read {reading} from the ledger's storage: {why}",
            path=path,
            fix=STORAGE_FIX,
        ) from exc
