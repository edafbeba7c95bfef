"""Ctrl-C that stops every DuckDB statement running in the process, in any thread.

Python runs a signal's handler in the main thread, when that thread next runs Python code, and
DuckDB looks for one only in a statement the main thread runs, between the statement's tasks.
A statement run by another thread (a partition task's sweep input, a ledger part's check)
would not see Ctrl-C at all: the command would wait for it to end, however long it takes. A
statement in the main thread that is between such checks for long would not see it either.

While a command runs (`reaching_every_statement`), Ctrl-C therefore calls DuckDB's
`interrupt()` on every connection open in the process (each is registered when opened, by
forensics.casedb.dbopen): from a thread of its own that the signal wakes at once (Python's wakeup
file descriptor), or from the handler in the main thread when that comes first; the handler
then raises KeyboardInterrupt as Python's own does. Both see every SIGINT, and whichever comes
second leaves it (`_answer`): a second interrupt for the same Ctrl-C could otherwise land on
the clean-up the first one set off (a rollback, which it would leave undone). Each statement
stops with DuckDB's interrupt error, which the command line reports as an interrupt
(forensics.errors.interrupted). Work outside DuckDB that runs long in compiled code (a node's
sweep) looks between its steps (stop_if_interrupted) and stops with
forensics.errors.Interrupted.
"""

from __future__ import annotations

import os
import signal
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import duckdb

from forensics.errors import Interrupted

_OPEN: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()
_LOCK = threading.Lock()
_STOP = threading.Event()  # Ctrl-C came while the command runs
_ANSWERED = [0]  # how many of the command's SIGINTs were answered (under _ANSWER_LOCK)
_MAIN = threading.main_thread()


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Make `con` one of the connections that Ctrl-C interrupts (held weakly)."""
    with _LOCK:
        _OPEN.add(con)


def interrupt_all() -> int:
    """Interrupt the statement each open connection runs (a no-op for one that runs none), and
    ask work outside DuckDB to stop (stop_if_interrupted); returns how many connections were
    told."""
    _STOP.set()
    with _LOCK:
        cons = list(_OPEN)
    for con in cons:
        try:
            con.interrupt()
        except duckdb.Error:  # closed meanwhile
            pass
    return len(cons)


def stop_if_interrupted(workers_only: bool = False) -> None:
    """Raise Interrupted once Ctrl-C came while a command runs: for long work outside DuckDB
    (the compiled sweep) to call between its steps, in whichever thread it runs; and before
    each statement, with workers_only, in a thread other than the main one (a statement begun
    after the interrupt would run to its end; the main thread's own work, and the clean-up
    it does after Ctrl-C, see KeyboardInterrupt instead)."""
    if _STOP.is_set() and not (workers_only and threading.current_thread() is _MAIN):
        raise Interrupted("interrupted")


def _answer(kth: int) -> None:
    """interrupt_all for the command's kth SIGINT, unless it was answered already. The
    interrupts are made under the lock, so that the main thread's handler, once past this,
    knows they have all been made before it raises KeyboardInterrupt and cleans up."""
    with _ANSWER_LOCK:
        if _ANSWERED[0] < kth:
            _ANSWERED[0] = kth
            interrupt_all()


_ANSWER_LOCK = threading.Lock()
_SEEN_BY_HANDLER = [0]  # SIGINTs the main thread's handler has seen in this command


def _on_interrupt(_signum: int, _frame: FrameType | None) -> None:
    _SEEN_BY_HANDLER[0] += 1
    _answer(_SEEN_BY_HANDLER[0])
    raise KeyboardInterrupt


@contextmanager
def reaching_every_statement() -> Iterator[None]:
    """Within the block, Ctrl-C interrupts every open connection's statement, then raises
    KeyboardInterrupt in the main thread. Only where Python's own Ctrl-C handler is in place
    and this is the main thread: a Ctrl-C ignored or handled by whoever runs the command is
    left as it is."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter's main thread after all
        os.close(read_end)
        os.close(write_end)
        yield
        return
    watcher = threading.Thread(
        target=_watch, args=(read_end,), name="kvforensics-interrupts", daemon=True
    )
    watcher.start()
    _STOP.clear()
    _ANSWERED[0] = _SEEN_BY_HANDLER[0] = 0
    signal.signal(signal.SIGINT, _on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _STOP.clear()
        signal.set_wakeup_fd(previous_fd)
        os.close(write_end)  # the watcher reads the end of the pipe and stops
        watcher.join(timeout=1.0)


def _watch(read_end: int) -> None:
    """Interrupt every statement each time the wakeup pipe says SIGINT came (unless the
    handler did already); stop at the pipe's end."""
    seen = 0
    try:
        while chunk := os.read(read_end, 64):
            for _ in range(chunk.count(signal.SIGINT)):
                seen += 1
                _answer(seen)
    finally:
        os.close(read_end)
