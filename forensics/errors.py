"""The project's own exceptions. Library code raises these; only the CLI turns them into
messages and exit codes (see forensics.cli)."""

from __future__ import annotations

import errno

import duckdb


class KvfError(Exception):
    """Base class: a failure the user can act on. The message says what to do next."""

    exit_code = 2

    def __reduce__(self) -> tuple[object, ...]:
        """Rebuilt whole when it crosses from a worker process (a subclass's own constructor
        arguments are not its args)."""
        return (_restore, (type(self), self.args, self.__dict__))


def _restore(cls: type[KvfError], args: tuple[object, ...], state: dict[str, object]) -> KvfError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, *args)
    exc.__dict__.update(state)
    return exc


class UsageError(KvfError):
    """The command was called wrongly (a missing folder, a bad option value)."""


class InputError(KvfError):
    """An input file cannot be used at all (not a single bad row: those are quarantined)."""

    def __init__(self, message: str, *, path: str | None = None, fix: str | None = None):
        self.path = path
        self.fix = fix
        parts = [f"{path}: {message}" if path else message]
        if fix:
            parts.append(f"Fix: {fix}")
        super().__init__("\n".join(parts))


class MissingColumnError(InputError):
    """A required column is absent from a file."""

    def __init__(self, path: str, table: str, column: str, found: list[str], hint: str | None):
        self.table = table
        self.column = column
        self.found = found
        fix = f"did you mean '{hint}'? Rename the column" if hint else "add the column"
        super().__init__(
            f"the {table} table needs a column '{column}'; columns found: {', '.join(found)}",
            path=path,
            fix=fix,
        )


class CaseError(KvfError):
    """The case database is missing, or lacks a stage the command needs."""


class StageUnavailable(KvfError):
    """A stage needs an optional dependency that is not installed."""


class ReplayError(KvfError):
    """A suspect cannot be replayed (missing contents, positions beyond a writer's tokens, ...)."""


def first_line(exc: BaseException) -> str:
    """An error's first line (DuckDB appends the statement it ran, which names no user input)."""
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


class Interrupted(Exception):
    """Ctrl-C, seen by work outside DuckDB that looks for it between its steps
    (forensics.casedb.interrupts.stop_if_interrupted)."""


def interrupted(exc: BaseException) -> bool:
    """Whether exc is Ctrl-C: Python's own, or DuckDB's when the signal came while a statement
    ran (DuckDB stops the statement and raises an error of its own: an InterruptException, or in
    some releases a plain RuntimeError saying the query was interrupted)."""
    if isinstance(exc, KeyboardInterrupt | Interrupted):
        return True
    interrupt = getattr(duckdb, "InterruptException", None)
    if interrupt is not None and isinstance(exc, interrupt):
        return True
    return type(exc) is RuntimeError and str(exc) == "Query interrupted"


NO_ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # a disk full, or the user's quota on it
_NO_ROOM_TEXTS = ("No space left on device", "Disk quota exceeded")  # DuckDB's words for them


def disk_full(exc: BaseException) -> str | None:
    """What says, in exc or the errors it was raised from or while handling, that a disk ran out
    of room (an OSError ENOSPC or EDQUOT, or DuckDB's error of one, whose first line may only say
    that the database was invalidated by it): the innermost such line; None when none does."""
    found = None
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if isinstance(at, OSError) and at.errno in NO_ROOM_ERRNOS:
            found = first_line(at)
        elif isinstance(at, duckdb.Error):
            lines = [ln for ln in str(at).splitlines() if any(t in ln for t in _NO_ROOM_TEXTS)]
            found = lines[0].strip() if lines else found
        at = at.__cause__ or at.__context__
    return found
