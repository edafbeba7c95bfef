"""Ctrl-C (a real SIGINT) while DuckDB statements run in a worker thread and in the main
thread: every statement stops at once (forensics.casedb.interrupts), where before a worker's
statement ran to its end, and the main thread's missed some signals. Each run is a process of
its own, started as a terminal starts a command (Python's own Ctrl-C handler in place)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.paths import REPO, SAMPLE

import forensics.casedb.interrupts as interrupts

CHILD = textwrap.dedent(
    """
    import signal, sys, threading
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal starts it
    from concurrent.futures import ThreadPoolExecutor
    from forensics.casedb.dbopen import open_database
    from forensics.errors import interrupted
    from forensics.casedb.interrupts import reaching_every_statement

    LONG = "SELECT count(*) FROM range(1000000000000) t(x) WHERE x % 7 = 3"
    ready = threading.Barrier(2)

    def statement(who):
        con = open_database(":memory:", schema=False)
        if who == "worker":
            ready.wait()
        else:
            print("ready", flush=True)
        try:
            con.execute(LONG).fetchall()
            return "finished"
        except BaseException as exc:
            return "interrupted" if interrupted(exc) else repr(exc)

    def main_statement():
        ready.wait()
        return statement("main")

    with reaching_every_statement():
        with ThreadPoolExecutor(1) as pool:
            worker = pool.submit(statement, "worker")
            if sys.argv[1] == "main":
                try:  # the handler's KeyboardInterrupt may come just after the statement's end
                    result = main_statement()
                except KeyboardInterrupt:
                    result = "interrupted"
                print("main:", result, flush=True)
            else:
                ready.wait()
                print("ready", flush=True)
                try:
                    worker.result()
                except KeyboardInterrupt:
                    print("main: KeyboardInterrupt", flush=True)
    print("worker:", worker.result(), flush=True)
    print("handler restored:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """
)


def _python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter that imports this checkout."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=timeout,
    )


def _interrupted_run(tmp_path: Path, where: str) -> tuple[str, float]:
    """Start the child, SIGINT it once its statements run, return its output and how long it
    took to end after the signal."""
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, str(script), where],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
        restore_signals=True,
    )
    try:
        assert child.stdout is not None
        first = child.stdout.readline()
        assert first.strip() == "ready", first + child.stdout.read()
        time.sleep(0.5)  # both statements are running
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, _ = child.communicate(timeout=60)
        return out, time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("where", ["worker", "main"])
def test_one_ctrl_c_stops_the_statements_of_every_thread(tmp_path: Path, where: str) -> None:
    for _ in range(3):  # DuckDB alone missed about one SIGINT in four in its main thread
        out, took = _interrupted_run(tmp_path, where)
        assert "worker: interrupted" in out, out
        if where == "main":
            assert "main: interrupted" in out, out
        else:
            assert "main: KeyboardInterrupt" in out, out
        assert "handler restored: True" in out, out
        assert took < 20, f"{took:.1f} s to stop after Ctrl-C"


def test_a_ctrl_c_someone_else_handles_is_left_to_them() -> None:
    """A command run with SIGINT ignored (or handled by a program that embeds it) keeps that."""
    code = textwrap.dedent(
        """
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from forensics.casedb.interrupts import reaching_every_statement
        with reaching_every_statement():
            print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
        """
    )
    done = _python(code)
    assert done.stdout.strip() == "True", done.stderr


def test_every_command_runs_with_the_handler_and_every_connection_is_registered() -> None:
    """The command line runs each command inside reaching_every_statement, and each connection
    the project opens is one that Ctrl-C interrupts."""
    code = textwrap.dedent(
        """
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import forensics.cli as cli
        from forensics.casedb import interrupts
        from forensics.casedb.dbopen import open_database

        seen = []

        class Command:
            def main(self, **kwargs):
                seen.append(signal.getsignal(signal.SIGINT) is interrupts._on_interrupt)
                con = open_database(":memory:", schema=False)
                seen.append(con in interrupts._OPEN)
                return 0

        cli.command = Command
        print(cli.run([]), seen, signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        """
    )
    done = _python(code)
    assert done.stdout.strip() == "0 [True, True] True", done.stdout + done.stderr


def test_ctrl_c_while_the_compiled_code_is_built_ends_the_run_at_once(tmp_path: Path) -> None:
    """The first analysis after an install builds the compiled code (a minute); a Ctrl-C then
    ends the run at once, not when the build ends. The build is stood in for by a warm-up that
    takes two minutes."""
    from forensics.cli import run

    db = tmp_path / "case.duckdb"
    assert run(["ingest", str(SAMPLE), "--db", str(db)]) in (0, 1)
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import signal, sys, time
            signal.signal(signal.SIGINT, signal.default_int_handler)
            import forensics.analysis.order as order
            from forensics.cli import run

            def building():
                print("building", flush=True)
                time.sleep(120)

            order.warm_up = building
            sys.exit(run(["analyze", "--db", {str(db)!r}]))
            """
        ),
        encoding="utf-8",
    )
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "building"
        time.sleep(3)  # the analysis waits for the warm-up by now
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, _ = child.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 2, out
    assert "interrupted; nothing was changed" in out
    assert took < 20, f"{took:.1f} s to end after Ctrl-C"


def test_after_ctrl_c_a_worker_thread_begins_no_statement() -> None:
    """DuckDB's interrupt stops the statements running when Ctrl-C comes; a worker thread then
    begins no other (one begun later would run to its end), while the main thread, which sees
    KeyboardInterrupt and cleans up, still can."""
    import duckdb

    from forensics.casedb import interrupts
    from forensics.casedb.sql import first_row, run_script
    from forensics.errors import Interrupted

    con = duckdb.connect()
    interrupts._STOP.set()  # what a Ctrl-C sets while a command runs
    try:
        run_script(con, "CREATE TABLE t AS SELECT 1 AS x")
        with ThreadPoolExecutor(max_workers=1) as pool:
            for begin in (run_script, first_row):
                with pytest.raises(Interrupted):
                    pool.submit(begin, con, "SELECT count(*) FROM t").result()
    finally:
        interrupts._STOP.clear()
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(first_row, con, "SELECT count(*) FROM t").result() == (1,)


def test_each_ctrl_c_interrupts_the_connections_once(monkeypatch) -> None:
    """The handler and the watcher thread both see every SIGINT; the connections are
    interrupted once per SIGINT, by whichever comes first, so that the second cannot land on
    the clean-up (a rollback) the first set off."""
    calls: list[int] = []
    monkeypatch.setattr(interrupts, "interrupt_all", lambda: calls.append(1) or 0)
    monkeypatch.setattr(interrupts, "_ANSWERED", [0])
    interrupts._answer(1)  # the watcher, first
    interrupts._answer(1)  # the handler, for the same SIGINT
    assert len(calls) == 1
    interrupts._answer(2)  # a second Ctrl-C
    interrupts._answer(1)  # a late look at the first
    interrupts._answer(2)
    assert len(calls) == 2
