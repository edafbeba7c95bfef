"""Text timestamps, and text trimmed: the macros ingest and the external ledger's view type
them with (queries/schema/macros.sql) give, for every text, what the rules as first written
give (tests/data/timestamps_reference.sql: one pattern per rule, every value trimmed). The
macros try their patterns only where cheap tests leave a doubt, so the texts here are built to
sit on every edge of those tests: offsets of every form and size, spaces and other blanks
around the value, integers, instants out of range, and random mutations of all of them."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pyarrow as pa
import pytest
from support.paths import DATA

from forensics.casedb.sql import run_script
from forensics.db import connect

REFERENCE = DATA / "timestamps_reference.sql"

DATES = [
    "2026-08-27",
    "0001-01-01",
    "9999-12-31",
    "0000-12-31",
    "10000-01-01",
    "1969-12-31",
    "2026-02-30",
    "2026-8-7",
    "294247-01-10",
    "",
]
SEPARATORS = ["T", " ", "t"]
TIMES = [
    "00:00:00",
    "23:59:59.999999",
    "12:34",
    "12:34:56,5",
    "12:34:56.1234567",
    "24:00:00",
    "7:05:00",
    "12:34:56.",
]
OFFSETS = [
    "",
    "Z",
    "z",
    "+00:00",
    "-00:00",
    "+09:00",
    "+0900",
    "+09",
    "-04:30",
    "+12:59",
    "+13:00",
    "+13:59",
    "+13:61",
    "+13:99",
    "+14:00",
    "+14:01",
    "-14:01",
    "+1401",
    "+15",
    "+1500",
    "+99:99",
    "+5:30",
    "+05:3",
    " UTC",
    "+09:00:00",
    "ZZ",
    "+14:00Z",
    "-1300",
    "+0",
]
PADS = [
    ("", ""),
    (" ", ""),
    ("", " "),
    ("  ", "  "),
    ("\t", ""),
    ("", "\n"),
    ("\u00a0", ""),
    ("", "\u3000"),
    ("\u2003", "\u2009 "),
    ("\ufeff", ""),
    ("", "\u200b"),
    ("é", ""),
]
WHOLE = [
    "0",
    "-1",
    "1756252801938555",
    "-62135596800000000",
    "-62135596800000001",
    "253402300799999999",
    "253402300800000000",
    "9223372036854775807",
    "9223372036854775808",
    "+5",
    "--5",
    "1e3",
    "1_000",
    "\u0663",
    "infinity",
    "-infinity",
    "epoch",
    "now",
    "",
    " ",
    "NaN",
    "allballs",
    "\uff12\uff10\uff12\uff16",
    "2026-08-27T00:00:00+09:00\u00a0",
    "12",
    "-",
    "+",
    ":",
    "Z",
]
NOISE = "0123456789:-+TZz .,\t"


def texts(seed: int = 2026, mutations: int = 20_000) -> list[str]:
    built = [
        f"{pad[0]}{date}{sep if date else ''}{time}{space}{offset}{pad[1]}"
        for date, sep, time, space, offset, pad in itertools.product(
            DATES, SEPARATORS, TIMES, ["", " "], OFFSETS, PADS
        )
    ]
    built += [f"{a}{w}{b}" for w in WHOLE for a, b in PADS]
    rng = random.Random(seed)
    for _ in range(mutations):
        chars = list(rng.choice(built))
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(chars))
            what = rng.choice(("insert", "delete", "replace"))
            if what == "insert" or not chars:
                chars.insert(at, rng.choice(NOISE))
            elif what == "delete":
                del chars[min(at, len(chars) - 1)]
            else:
                chars[min(at, len(chars) - 1)] = rng.choice(NOISE)
        built.append("".join(chars))
    return sorted(set(built))


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    db = connect(Path(tmp_path_factory.mktemp("ts")) / "ts.duckdb")
    run_script(db, REFERENCE.read_text(encoding="utf-8"))
    db.register("texts", pa.table({"x": pa.array(texts(), pa.string())}))
    yield db
    db.close()


def differing(con, left: str, right: str) -> list[tuple[str, object, object]]:  # type: ignore[no-untyped-def]
    return con.sql(
        f"SELECT x, {left} AS got, {right} AS want FROM texts "
        f"WHERE {left} IS DISTINCT FROM {right} ORDER BY x LIMIT 10"
    ).fetchall()


@pytest.mark.parametrize("assume_utc", [False, True])
def test_text_is_typed_as_the_rules_type_it(con, assume_utc: bool) -> None:  # type: ignore[no-untyped-def]
    u = str(assume_utc).lower()
    assert differing(con, f"kvf_ts_any(x, {u})", f"ref_ts_any(x, {u})") == []
    assert differing(con, f"kvf_ts(x, {u})", f"ref_ts(x, {u})") == []


def test_kept_text_is_typed_as_the_rules_type_it(con) -> None:  # type: ignore[no-untyped-def]
    assert differing(con, "kvf_ts_kept(x)", "ref_ts_kept(x)") == []


def test_text_is_trimmed_as_trim_trims_it(con) -> None:  # type: ignore[no-untyped-def]
    """kvf_trimmed (and kvf_str, which every text column of every input goes through) calls
    trim only where it could remove something."""
    assert differing(con, "kvf_trimmed(x)", "trim(x)") == []
    assert differing(con, "kvf_str(x)", "nullif(trim(x), '')") == []


def test_the_texts_reach_every_rule(con) -> None:  # type: ignore[no-untyped-def]
    """The corpus holds texts each rule decides: so the comparisons above are not vacuous."""
    ((n, epoch, iso, beyond, no_offset, padded, out_of_range),) = con.sql(
        """
        SELECT count(*),
            count(*) FILTER (WHERE regexp_full_match(trim(x), '-?[0-9]+')
                             AND ref_ts(x, false) IS NOT NULL),
            count(*) FILTER (WHERE NOT regexp_full_match(trim(x), '-?[0-9]+')
                             AND ref_ts(x, false) IS NOT NULL),
            count(*) FILTER (WHERE ref_offset_minutes(x) > 840
                             AND ref_iso_text(x) IS NOT NULL),
            count(*) FILTER (WHERE ref_ts(x, false) IS NULL AND ref_ts(x, true) IS NOT NULL),
            count(*) FILTER (WHERE x <> trim(x) AND ref_ts(x, false) IS NOT NULL),
            count(*) FILTER (WHERE ref_ts_any(x, false) IS NOT NULL AND ref_ts(x, false) IS NULL)
        FROM texts
        """
    ).fetchall()
    assert n > 50_000
    assert epoch >= 5 and iso >= 1_000 and padded >= 500
    assert beyond >= 50  # offsets beyond 14:00 that would otherwise be instants
    assert no_offset >= 100 and out_of_range >= 5
