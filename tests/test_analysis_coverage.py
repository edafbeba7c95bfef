"""The per-node slot arithmetic on the sweep's pieces against naive slot sets."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis.codes import CATEGORIES, READ, WRITE
from forensics.analysis.coverage import (
    _by_groups_start_end,
    _by_request_category_start,
    read_counts,
    run_numbers,
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
    want: dict[int, list] = {}
    for r in set(req[reads].tolist()):
        slots = [set() for _ in CATEGORIES]
        for t, c, s, e in cat.tolist():
            if req[t] == r:
                slots[c].update(range(s, e))
        want[r] = [int((req[reads] == r).sum())] + [len(x) for x in slots]
    assert got == want


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
