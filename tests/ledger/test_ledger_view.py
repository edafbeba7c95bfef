"""The kv_events view over an external ledger reads each group of parts with its own typing: a
partition whose parts hold typed columns (TIMESTAMPTZ, BIGINT) beside parts that hold them as
text (numbers as text, timestamps with offsets), some of their rows quarantined, gives the rows
and values of the loaded ledger, and the same analysis tables; so does a case whose ingest did
not record the parts' schemas."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.cases import query
from support.ledgercases import split_decode0
from support.samples import differences, hive_sample, task_per_partition

from forensics.cli import run
from forensics.db import connect

# Every column of kv_events, ts as microseconds (the table holds TIMESTAMPTZ, the view TIMESTAMP)
# and input_order as the event's place in input order (a loaded ledger's ranks count the case's
# other input files too).
ROWS = """SELECT epoch_us(ts) AS ts, seq, node, request_id, op, slot_start, slot_count,
                 pos_start, source, content_hash, request_known, src_file, src_row,
                 row_number() OVER (ORDER BY input_order) AS place
          FROM kv_events"""
PLUS9 = timezone(timedelta(hours=9))


def view_text(db: Path) -> str:
    con = connect(db, read_only=True)
    try:
        row = con.execute(
            "SELECT sql FROM duckdb_views() WHERE view_name = 'kv_events' AND temporary"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return str(row[0])


def rows_differ(a: Path, b: Path) -> tuple[int, int]:
    """Rows of kv_events in one case and not the other, each way (as multisets)."""
    ca, cb = connect(a, read_only=True), connect(b, read_only=True)
    try:
        ra, rb = Counter(ca.execute(ROWS).fetchall()), Counter(cb.execute(ROWS).fetchall())
    finally:
        ca.close()
        cb.close()
    return sum((ra - rb).values()), sum((rb - ra).values())


def ingested_both_ways(tmp_path: Path) -> tuple[Path, Path]:
    """The sample with decode-0 split into a typed and a text part, ingested loaded and with
    the ledger kept outside (both quarantine rows: exit code 1)."""
    case = hive_sample(tmp_path)
    split_decode0(case)
    loaded, external = tmp_path / "loaded.duckdb", tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 1
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) == 1
    return loaded, external


def test_typed_and_text_parts_of_a_partition_give_the_loaded_ledger(tmp_path) -> None:
    loaded, external = ingested_both_ways(tmp_path)
    assert query(loaded, "SELECT count(*) FROM quarantine") == [(4,)]
    # the view reads each kind of part its own way: typed and clean, typed with quarantined rows
    # (range-checked), text with quarantined rows (the full macro), text and clean (prefill)
    text = view_text(external)
    assert "make_timestamp(epoch_us" in text
    assert "kvf_ts_kept(" in text
    assert "kvf_ts(" in text
    assert rows_differ(loaded, external) == (0, 0)
    assert run(["analyze", "--db", str(loaded)]) == 1
    assert run(["analyze", "--db", str(external)]) == 1
    assert differences(loaded, external) == {}


def test_a_case_ingested_without_the_parts_schemas_reads_them_from_the_parts(tmp_path) -> None:
    loaded, external = ingested_both_ways(tmp_path)
    con = connect(external)
    try:
        (value,) = con.execute(
            "SELECT value FROM case_meta WHERE key = 'ledger_external'"
        ).fetchone() or ("",)
        meta = json.loads(value)
        del meta["schemas"]
        con.execute(
            "UPDATE case_meta SET value = ? WHERE key = 'ledger_external'", [json.dumps(meta)]
        )
    finally:
        con.close()
    assert rows_differ(loaded, external) == (0, 0)
    assert run(["analyze", "--db", str(loaded)]) == 1
    assert run(["analyze", "--db", str(external)]) == 1
    assert differences(loaded, external) == {}


def test_text_timestamps_of_kept_rows_parse_as_ingest_parses_them() -> None:
    """kvf_ts_kept gives what kvf_ts gives for every text it accepts (a naive oracle: the
    datetime each string names, in UTC)."""
    from forensics.casedb.dbopen import open_database

    base = datetime(2026, 8, 27, 0, 0, 1, 938555, tzinfo=UTC)
    cases = {
        base.isoformat(): base,
        base.astimezone(PLUS9).isoformat(): base,
        "2026-08-27T00:00:01Z": base.replace(microsecond=0),
        "  2026-08-26 19:30:01.5-04:30 ": datetime(2026, 8, 27, 0, 0, 1, 500000, tzinfo=UTC),
        str(int(base.timestamp() * 1_000_000)): base,
        "-1000000": datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    }
    con = open_database(":memory:", schema=False)
    try:
        for text, when in cases.items():
            got = con.execute(
                "SELECT kvf_ts_kept(?::VARCHAR), kvf_ts(?::VARCHAR, false)", [text, text]
            ).fetchone()
            assert got is not None
            assert got[0] == got[1] == when.replace(tzinfo=None), text
    finally:
        con.close()


def pad_text(part: Path, column: str, every: int) -> None:
    """Blanks around every `every`-th non-null value of a text column of the part (ingest
    keeps the value trimmed)."""
    table = pq.read_table(part)
    values = table[column].to_pylist()
    padded = [f" {v}  " if v is not None and i % every == 0 else v for i, v in enumerate(values)]
    index = table.schema.get_field_index(column)
    pq.write_table(table.set_column(index, column, pa.array(padded, pa.string())), part)


def task_views(monkeypatch) -> list[str]:
    """The kv_events views the partition tasks make (each task runs in a thread here)."""
    from forensics.analysis import partitions

    made: list[str] = []
    real = partitions.run_script

    def recording(con, script, *args, **kwargs):
        if 'TEMP VIEW "kv_events" AS' in script:
            made.append(script)
        return real(con, script, *args, **kwargs)

    monkeypatch.setattr(partitions, "run_script", recording)
    return made


def test_text_read_as_it_is_only_where_no_value_needs_trimming(tmp_path, monkeypatch) -> None:
    """A partition whose request ids and content hashes need no trimming is read without the
    trim; one with a blank-padded value (here some of prefill-0's content hashes and
    decode-1's request ids) is read again with it, and both give the loaded ledger's tables."""
    task_per_partition(monkeypatch)
    case = hive_sample(tmp_path)
    pad_text(next((case / "kv_events" / "node=prefill-0").glob("*.parquet")), "content_hash", 2)
    pad_text(next((case / "kv_events" / "node=decode-1").glob("*.parquet")), "request_id", 7)
    loaded, external = tmp_path / "loaded.duckdb", tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(loaded), "--ledger-load"]) == 0
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) == 0
    assert query(loaded, "SELECT count(*) FROM quarantine") == [(0,)]
    views = task_views(monkeypatch)
    assert run(["analyze", "--db", str(loaded)]) == 1
    assert run(["analyze", "--db", str(external), "--workers", "1"]) == 1
    assert differences(loaded, external) == {}
    by_node: dict[str, list[bool]] = {}
    for view in views:
        node = _node_of(view)
        by_node.setdefault(node, []).append('kvf_str("request_id")' in view)
    # trimmed: first without, then again with the trim, where a value needs it
    assert by_node == {
        "decode-0": [False],
        "decode-1": [False, True],
        "prefill-0": [False, True],
        "prefill-1": [False],
    }, by_node


def _node_of(view: str) -> str:
    for node in ("decode-0", "decode-1", "prefill-0", "prefill-1"):
        if f"'{node}' AS node" in view:
            return node
    raise AssertionError(view)


# The kept rows of a partition's view whose keys are in temp.analysis_named_keys, as plain SQL
# picks them out of the whole view: the oracle for kv_named_events.
NAMED_BY_FILTER = """SELECT * EXCLUDE (input_order), input_order FROM kv_events
                     WHERE input_order IN (SELECT event_key FROM temp.analysis_named_keys)"""
NAMED = "SELECT * EXCLUDE (input_order), input_order FROM kv_named_events"
VIEW_TEXT = "SELECT sql FROM duckdb_views() WHERE view_name = ?"


def split_in_three(case: Path, node: str) -> None:
    """The node's one ledger part written as three parts of the same schema."""
    (part,) = (case / "kv_events" / f"node={node}").glob("*.parquet")
    table = pq.read_table(part)
    part.unlink()
    third = table.num_rows // 3
    for i, (lo, n) in enumerate(((0, third), (third, third), (2 * third, None))):
        rows = table.slice(lo) if n is None else table.slice(lo, n)
        pq.write_table(rows, part.parent / f"{node}-part-{i + 1:05d}.parquet")


@pytest.mark.parametrize("alone", ["none", "first", "middle", "all"])
def test_the_named_view_holds_exactly_the_kept_rows_named(tmp_path, alone) -> None:
    """Every third kept row of each partition named, with the keys of its quarantined rows,
    of rows past the end of its parts and of a part it does not hold: the named view holds the
    rows the named keys pick out of the whole view, each once, and nothing else, whether a
    partition's parts of one schema are read in one scan (decode-1's two typed parts), the
    first by itself, the middle one by itself (which splits decode-1's scan in three), or each
    by itself (decode-0's two parts, typed and text, both with quarantined rows, are two groups
    anyway)."""
    from forensics.analysis.tasks import tasks_of
    from forensics.casedb.sql import append_rows
    from forensics.ledger.external import open_connection
    from forensics.ledger.store import ledger_meta
    from forensics.ledger.view import view_sql

    case = hive_sample(tmp_path)
    split_decode0(case)
    split_in_three(case, "decode-1")
    external = tmp_path / "external.duckdb"
    assert run(["ingest", str(case), "--db", str(external), "--ledger-external"]) == 1
    con = connect(external, read_only=True)
    try:
        args, _ = tasks_of(con, ledger_meta(con) or {}, None, 1)
        quarantined = con.execute(
            "SELECT f.rank * 1099511627776 + q.row FROM quarantine q "
            "JOIN ledger_files f ON f.rel = q.file"
        ).fetchall()
    finally:
        con.close()
    assert len(quarantined) == 4 and len(args) == 4
    checked = 0
    shapes: list[tuple[int, int]] = []  # (parts, scans of the whole view) per partition
    for parts, utc, quarantine, *_ in args:
        with open_connection([p.file.url for p in parts]) as task:
            append_rows(task, "quarantine", quarantine)
            task.execute(view_sql(parts, utc))
            scans = task.execute(VIEW_TEXT, ["kv_events"]).fetchall()
            kept = [k for (k,) in task.execute("SELECT input_order FROM kv_events").fetchall()]
            ranks = sorted({k >> 40 for k in kept})
            past = [(r << 40) + 10**6 for r in ranks]
            other = [(max(ranks) + 7 << 40) + 1]
            keys = sorted(kept)[::3] + [k for (k,) in quarantined] + past + other + kept[:1]
            task.execute("CREATE TEMP TABLE analysis_named_keys (event_key BIGINT)")
            task.executemany("INSERT INTO analysis_named_keys VALUES (?)", [[k] for k in keys])
            ranks_alone = {
                "none": set(),
                "first": set(ranks[:1]),
                "middle": set(ranks[1:2]),
                "all": set(ranks),
            }[alone]
            task.execute(view_sql(parts, utc, named=True, alone=frozenset(ranks_alone)))
            text = task.execute(VIEW_TEXT, ["kv_named_events"]).fetchall()[0][0]
            # as many scans as the whole view, unless parts are read by themselves: then a scan
            # per part, but for decode-1's last two, which still follow on when its first is
            # read by itself (its middle one by itself splits them)
            alike = scans[0][0].count("read_parquet(")
            want = alike if alone == "none" else len(parts)
            if alone == "first" and len(parts) == 3:
                want = 2
            assert text.count("read_parquet(") == want
            shapes.append((len(parts), alike))
            named = Counter(task.execute(NAMED).fetchall())
            expected = Counter(task.execute(NAMED_BY_FILTER).fetchall())
        assert named == expected
        assert sum(named.values()) == len(set(sorted(kept)[::3]) | set(kept[:1]))
        checked += len(parts)
    assert checked == 7  # decode-0 in two parts, decode-1 in three
    assert sorted(shapes) == [(1, 1), (1, 1), (2, 2), (3, 1)]  # decode-1 in one scan


def test_only_parts_of_many_events_have_their_named_rows_read_by_themselves() -> None:
    """A part's events are the span of its keys (rank * 2^40 + row) in the node's record."""
    from forensics.analysis.fetch import NodeInfo
    from forensics.analysis.partitions import _large_parts
    from forensics.ledger.view import NAMED_ALONE_ROWS as N

    def span(rank: int, rows: int) -> tuple[int, int]:
        return (rank << 40) + 1, (rank << 40) + rows

    first = NodeInfo("a", 0, False, files=(span(0, N), span(1, N - 1)))
    second = NodeInfo("b", 0, False, files=(span(5, 10 * N), span(7, 1)))
    assert _large_parts([first, second]) == {0, 5}
    assert _large_parts([]) == frozenset()
