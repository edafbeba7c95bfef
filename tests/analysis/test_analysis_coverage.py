"""The per-node slot arithmetic on the sweep's pieces against naive slot sets."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis.codes import CATEGORIES, READ, WRITE
from forensics.analysis.coverage import (
    LEXSORT,
    MARKS,
    SORTED,
    _by_groups_start_end,
    _by_request_category_start,
    add_unions,
    read_counts,
    run_numbers,
    union_method,
)

ranges = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 40), st.integers(1, 12)),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ranges)
def test_run_numbers_merge_overlapping_and_touching_ranges(rows):
    g1 = np.array([r[0] for r in rows], np.int64)
    g2 = np.array([r[1] for r in rows], np.int64)
    lo = np.array([r[2] for r in rows], np.int64)
    hi = lo + np.array([r[3] for r in rows], np.int64)
    order, run = run_numbers((g1, g2), lo, hi)
    got = defaultdict(lambda: [10**9, -1, None])
    for i, r in zip(order, run, strict=True):
        cur = got[int(r)]
        cur[0], cur[1] = min(cur[0], lo[i]), max(cur[1], hi[i])
        assert cur[2] in (None, (g1[i], g2[i])), "a run never spans two groups"
        cur[2] = (g1[i], g2[i])
    # naive: slots covered per group, split where a slot is missing
    slots = defaultdict(set)
    for a, b, s, n in rows:
        slots[(a, b)].update(range(s, s + n))
    want = set()
    for group, covered in slots.items():
        start = None
        for x in range(0, 60):
            if x in covered and start is None:
                start = x
            if x not in covered and start is not None:
                want.add((group, start, x))
                start = None
    assert {(v[2], v[0], v[1]) for v in got.values()} == want
    assert list(run) == sorted(run)


def _naive_slots(req, cat, n_req):
    """Distinct slots per (request, category), from sets of slots."""
    slots = [[set() for _ in CATEGORIES] for _ in range(n_req)]
    for t, c, s, e in cat.tolist():
        slots[req[t]][c].update(range(s, e))
    return [[len(x) for x in row] for row in slots]


@settings(max_examples=200, deadline=None)
@given(ranges, st.lists(st.integers(0, 3), min_size=1, max_size=30))
def test_read_counts_are_distinct_slots_per_request_and_category(rows, readers):
    req = np.array(readers, np.int32)
    op = np.array([READ if i % 3 else WRITE for i in range(len(readers))], np.int8)
    reads = np.flatnonzero(op == READ)
    if not len(reads):
        return
    cat = np.array(
        [
            [reads[i % len(reads)], c % len(CATEGORIES), s, s + n]
            for i, (_, c, s, n) in enumerate(rows)
        ],
        np.int64,
    ).reshape(-1, 4)
    got = {int(r[0]): list(r[1:]) for r in read_counts(req, op, cat)}
    naive = _naive_slots(req, cat, int(req.max()) + 1)
    want = {r: [int((req[reads] == r).sum())] + naive[r] for r in set(req[reads].tolist())}
    assert got == want


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 4), st.integers(0, 22), st.integers(0, 9)),
        max_size=80,
    ),
    st.lists(st.integers(1, 4), min_size=31, max_size=31),
    st.sampled_from([MARKS, SORTED, LEXSORT]),
)
def test_every_way_of_adding_unions_counts_distinct_slots(rows, widths, how):
    """Each of add_unions' ways against slot sets, in cells of uneven widths: rows in any
    order, repeated, nested and empty ranges."""
    req = np.arange(6, dtype=np.int32)  # event t is request t's read
    cat = np.array([[t, c, s, s + n] for t, c, s, n in rows], np.int32).reshape(-1, 4)
    bounds = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)  # 31 cells
    out = np.zeros((6, len(CATEGORIES)), np.int64)
    add_unions(req, cat, bounds, out, how)
    slots = [[set() for _ in CATEGORIES] for _ in range(6)]
    for t, c, s, e in cat.tolist():
        slots[t][c].update(range(bounds[s], bounds[e]))
    assert out.tolist() == [[len(x) for x in row] for row in slots]


def test_union_method_marks_narrow_rows_and_sorts_wide_or_large_ones():
    def rows(width: int, n: int = 10_000, at: int = 0) -> np.ndarray:
        return np.array([[0, 0, at, at + width]] * n, np.int64).reshape(-1, 4)

    assert union_method(rows(16)) == MARKS
    assert union_method(rows(200)) == SORTED
    assert union_method(rows(3, at=2**31)) == LEXSORT
    assert union_method(rows(0, n=0)) == MARKS


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4), st.integers(0, 2**40)), max_size=50),
    st.sampled_from([6, 2**25]),  # 2**25 requests and slots near 2**40 do not fit one key
)
def test_rows_sort_by_request_category_and_start(rows, n_req):
    who = np.array([r[0] for r in rows], np.int32)
    cat = np.array([r[1] for r in rows], np.int32)
    lo = np.array([r[2] for r in rows], np.int64)
    order = _by_request_category_start(who, cat, lo, n_req)
    got = list(zip(who[order].tolist(), cat[order].tolist(), lo[order].tolist(), strict=True))
    assert got == sorted(zip(who.tolist(), cat.tolist(), lo.tolist(), strict=True))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 3), st.integers(1, 4)),
        max_size=120,
    ),
    st.sampled_from([0, 2**61]),  # a group this large no longer fits one key with the starts
    st.integers(0, 80),  # rows added with one group and start: a stretch of ties past 32
)
def test_pieces_sort_like_lexsort_on_groups_start_end(rows, big, ties):
    rows = rows + [(1, 1, 2, 1 + i % 5) for i in range(ties)]
    g1 = np.array([r[0] for r in rows], np.int64) + big
    g2 = np.array([r[1] for r in rows], np.int64)
    lo = np.array([r[2] for r in rows], np.int64)
    hi = lo + np.array([r[3] for r in rows], np.int64)
    order = _by_groups_start_end((g1, g2), lo, hi)
    assert order.tolist() == np.lexsort((hi, lo, g2, g1)).tolist()
    # independently: the rows in that order, with input position breaking ties
    keyed = sorted(range(len(rows)), key=lambda i: (g1[i], g2[i], lo[i], hi[i], i))
    assert order.tolist() == keyed
