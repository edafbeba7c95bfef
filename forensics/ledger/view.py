"""The kv_events view over a ledger kept outside the case database (queries/ledger/view.sql).

Ingest records each part's columns and their types (the Parquet schema), so the view types a
column with a plain expression where the part holds it already typed (TIMESTAMPTZ, BIGINT)
and keeps the text-tolerant kvf_* macros for text and other types; parts of a node with the
same schema are read in one scan whose file_index gives each row its part's rank and name.
Only a part that has quarantined rows is anti-joined to the quarantine, and only one whose kept
rows name a request missing from the request log is checked against the requests: the others
are known, at ingest, to need neither. The rows and values are those of the loaded ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import duckdb

from forensics.case.contract import KV_EVENTS
from forensics.casedb.sql import Fragment, ident, literal, literals, sql, template
from forensics.ledger.external import LedgerFile
from forensics.ledger.schemas import columns_of

# How each column of the contract is typed: the kvf_* macro ingest uses, and the part's types
# that need no macro (the value is the same for every kept row).
_TS, _INT, _STR, _OP = "ts", "int", "str", "op"
KIND = {
    "ts": _TS,
    "seq": _INT,
    "request_id": _STR,
    "op": _OP,
    "slot_start": _INT,
    "slot_count": _INT,
    "pos_start": _INT,
    "source": _STR,
    "content_hash": _STR,
}
_ABSENT = {
    _TS: "NULL::TIMESTAMP",
    _INT: "NULL::BIGINT",
    _STR: "NULL::VARCHAR",
    _OP: "NULL::VARCHAR",
}

Schema = tuple[tuple[str, str], ...]  # (column, DuckDB type) of the contract's columns a part holds
Copies = dict[int, str]  # a group's local copy (its path), by the group's first part's rank


@dataclass(frozen=True)
class PartView:
    """What the view needs of one part, all known once the ledger is ingested."""

    file: LedgerFile
    schema: Schema
    flagged: bool  # ingest quarantined some of its rows
    unknown: bool  # some of its kept rows name a request not in the request log
    rows: int = 0  # the rows it holds (its footer's count, as ingest read it)


def schema_of(types: dict[str, str]) -> Schema:
    """A part's schema as the view keys it: the contract's columns it holds, in contract order."""
    return _schema_of(tuple(types.items()))  # a ledger's parts share a few schemas


@lru_cache(maxsize=256)
def _schema_of(items: tuple[tuple[str, str], ...]) -> Schema:
    types = dict(items)
    return tuple((c, types[c]) for c in KV_EVENTS.names if c in types)


def typed(
    column: str, found: str | None, exact: bool, assume_utc: bool, plain: bool = False
) -> Fragment:
    """The typed value of a column of a part that holds it as `found` (None: absent). `exact`:
    every row of the part is kept, so a timestamp needs none of the tests that only refuse a
    value (ingest refused none of its values): a typed instant is taken as it is, text is
    parsed by kvf_ts_kept. `plain`: the text column is known to hold only values that kvf_str
    leaves as they are (no blanks around them, none empty), so a part that holds it as text is
    read as it is (DuckDB then keeps the Parquet dictionary: codes and joins work per distinct
    value, not per row)."""
    kind = KIND[column]
    if found is None:
        return template(_ABSENT[kind])
    c = ident(column)
    if kind == _OP:
        return template("{c}::VARCHAR", c=c)
    if kind == _STR:
        return c if plain and found == "VARCHAR" else template("kvf_str({c})", c=c)
    if kind == _INT:
        return c if found == "BIGINT" else template("kvf_int({c})", c=c)
    if found == "TIMESTAMP WITH TIME ZONE" and exact:
        return template("make_timestamp(epoch_us({c}))", c=c)
    if found == "VARCHAR" and exact:
        return template("kvf_ts_kept({c})", c=c)
    utc = template("true" if assume_utc else "false")
    return template("kvf_ts({c}, {utc})", c=c, utc=utc)


def group_sql(
    parts: list[PartView],
    assume_utc: bool,
    named: bool = False,
    plain: frozenset[str] = frozenset(),
    copy: str | None = None,
) -> Fragment:
    """The SELECT of one group of parts (same node, schema and flags); named: only the rows
    whose keys are in temp.analysis_named_keys; plain: text columns read as they are (typed);
    copy: the path of a local copy of the group's rows to read instead of its parts
    (forensics.ledger.copies)."""
    first = parts[0]
    types = dict(first.schema)
    exact = not first.flagged
    cols = {c: typed(c, types.get(c), exact, assume_utc, c in plain) for c in KIND}
    rels = literals(p.file.rel for p in parts)
    known = (
        template("{rid} IN (SELECT request_id FROM requests)", rid=cols["request_id"])
        if first.unknown
        else template("true")
    )
    kept = template(sql("ledger/view_kept"), rels=rels) if first.flagged else template("")
    ranks = [p.file.rank for p in parts]
    assert ranks == list(range(ranks[0], ranks[0] + len(ranks))), "a group's ranks run on"
    rank = template(str(int(ranks[0])))
    return template(
        sql("ledger/view_group"),
        **{c: v for c, v in cols.items()},
        node=literal(first.file.node),
        rank=rank,
        rels=rels,
        scan=_scan(parts, copy),
        known=known,
        kept=kept,
        named=_named_rows(parts, rank) if named else template(""),
    )


def _scan(parts: list[PartView], copy: str | None) -> Fragment:
    if copy is None:
        return template(sql("ledger/view_parts"), files=literals(p.file.url for p in parts))
    return template(sql("ledger/view_copy"), copy=literal(copy))


def _named_rows(parts: list[PartView], rank: Fragment) -> Fragment:
    """The join that keeps a group's named rows (`rank`: its first part's; the others' follow
    on): on the row number alone for a part read by itself, on (part, row) for a scan of
    several."""
    if len(parts) == 1:
        return template(sql("ledger/view_named_rows"), rank=rank)
    last = template(str(int(parts[-1].file.rank)))
    return template(sql("ledger/view_named_rows_group"), rank=rank, last=last)


def named_groups(
    parts: list[PartView], alone: frozenset[int], copied: Copies | None = None
) -> list[list[PartView]]:
    """The groups the named view reads: each part whose rank is in `alone` by itself, the
    others of each group in runs of consecutive ranks (a part read by itself splits its
    group), cut as planned_near cuts them; a group read from its copy (`copied`) whole."""
    out = []
    for g in groups(parts):
        if copied and g[0].file.rank in copied:
            out.append(g)
            continue
        out += [[p] for p in g if p.file.rank in alone]
        rest = _runs([p for p in g if p.file.rank not in alone], _alike)
        out += [scan for run in rest for scan in planned_near(run)]
    return out


# A part of at least this many events has its named rows read in a scan of its own
# (queries/ledger/view_named_rows.sql), which decodes only those rows but costs about 5 ms
# more than a part read with others; decoding a row's columns costs about 65 ns.
NAMED_ALONE_ROWS = 1 << 17


def groups(parts: list[PartView]) -> list[list[PartView]]:
    """Parts read alike, in one scan: runs of parts of consecutive ranks (in path order) with
    the same node, schema and flags, each split where DuckDB would misjudge its size (see
    planned_near). A group's parts follow on, so a row's rank is its group's first plus the
    scan's file_index: looking it up in a list of the group's ranks made DuckDB copy the list
    for every vector it read, 7 s over 5.3 M rows of 20,000 parts."""
    runs = _runs(sorted(parts, key=lambda p: p.file.rank), _alike)
    return [scan for run in runs for scan in planned_near(run)]


def planned_near(run: list[PartView]) -> list[list[PartView]]:
    """The run in scans that DuckDB plans at a quarter of their rows or more. DuckDB plans a
    scan of several parts as its first part's rows times the number of parts: a node whose
    first parts are small and later ones large (a tap that closes a part a minute, on an engine
    started mid-minute) looked tiny, so its join built its hash table on the node's events
    instead of the request codes, handed the events back in no order, and the sorted refetch
    ran out of the task's memory. A run planned too small is cut before its first part of at
    least half its mean size, and each side is cut again as it needs: the parts cut off are
    each under half that mean, so the cuts shrink quickly and a run takes a few scans."""
    out: list[list[PartView]] = []
    todo = [run]
    while todo:
        scan = todo.pop()
        total = sum(p.rows for p in scan)
        if len(scan) == 1 or scan[0].rows * len(scan) * 4 >= total:
            out.append(scan)
            continue
        cut = next(i for i, p in enumerate(scan) if p.rows * len(scan) * 2 >= total)
        todo += [scan[cut:], scan[:cut]]  # the first part first
    return out


def _runs(
    parts: list[PartView], alike: Callable[[PartView, PartView], bool]
) -> list[list[PartView]]:
    """parts (in rank order) in runs of consecutive ranks whose neighbours are alike."""
    out: list[list[PartView]] = []
    for p in parts:
        last = out[-1][-1] if out else None
        if last is not None and p.file.rank == last.file.rank + 1 and alike(p, last):
            out[-1].append(p)
        else:
            out.append([p])
    return out


def _alike(a: PartView, b: PartView) -> bool:
    def kind(p: PartView) -> tuple[str, Schema, bool, bool]:
        return p.file.node, p.schema, p.flagged, p.unknown

    return kind(a) == kind(b)


def view_sql(
    parts: list[PartView],
    assume_utc: bool,
    named: bool = False,
    plain: frozenset[str] = frozenset(),
    alone: frozenset[int] = frozenset(),
    copied: Copies | None = None,
) -> str:
    """queries/ledger/view.sql for these parts (a view holds no parameters: the paths, names
    and ranks are literals); named: the view kv_named_events instead of kv_events, of only the
    events whose keys are in temp.analysis_named_keys, the parts whose ranks are in `alone`
    each read by itself (see named_groups); plain: the text columns whose values are known to
    need no trimming (see typed); copied: the groups read from a local copy of their rows
    instead of their parts, by their first part's rank (forensics.ledger.copies)."""
    copied = copied or {}
    alike = named_groups(parts, alone, copied) if named else groups(parts)
    selects = [group_sql(g, assume_utc, named, plain, copied.get(g[0].file.rank)) for g in alike]
    union = selects[0]
    for s in selects[1:]:
        union = template("{a}\nUNION ALL\n{b}", a=union, b=s)
    view = ident("kv_named_events" if named else "kv_events")
    return template(sql("ledger/view"), view=view, groups=union)


def part_views(
    con: duckdb.DuckDBPyConnection, files: list[LedgerFile], schemas: dict[str, dict[str, str]]
) -> list[PartView]:
    """The parts of the case database's ledger (ledger_files) with their schema, as ingest
    recorded it (a case ingested before it did: read from the part's footer), and flags."""
    flags = {
        rel: (bool(q), bool(u), int(n or 0))
        for rel, q, u, n in con.execute(sql("ledger/part_flags")).fetchall()
    }
    out = []
    for f in files:
        types = schemas.get(f.rel)
        if types is None:
            types = columns_of(con, f)
        flagged, unknown, rows = flags.get(f.rel, (True, True, 0))
        out.append(PartView(f, schema_of(types), flagged, unknown, rows))
    return out
