"""The total order of a node's events: the shortcuts of forensics.analysis.fetch.total_order
give exactly the permutation of a plain two-key sort (numpy's lexsort, the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.analysis.fetch import total_order


def _oracle(rank: np.ndarray, key: np.ndarray) -> np.ndarray:
    return np.lexsort((key, rank))


def _applied(rank: np.ndarray, key: np.ndarray) -> np.ndarray:
    order = total_order(rank, key)
    return np.arange(len(rank)) if order is None else order


@pytest.mark.parametrize("seed", range(20))
def test_same_permutation_as_a_two_key_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    key = np.sort(rng.choice(10 * n + 10, size=n, replace=False)).astype(np.int64)
    rank = np.sort(rng.integers(0, max(n // 3, 1), size=n)).astype(np.int64)  # ties included
    cases = {
        "both in order": (rank, key),
        "keys in order, ranks nearly": (_swap_some(rng, rank), key),
        "keys in order, ranks shuffled": (rng.permutation(rank), key),
        "keys shuffled": (rank, rng.permutation(key)),
        "both shuffled": (rng.permutation(rank), rng.permutation(key)),
    }
    for name, (r, k) in cases.items():
        assert np.array_equal(_applied(r, k), _oracle(r, k)), name


def test_already_ordered_needs_no_permutation() -> None:
    rank = np.array([1, 1, 2, 5], np.int64)
    key = np.array([3, 7, 8, 9], np.int64)
    assert total_order(rank, key) is None
    assert total_order(rank[:0], key[:0]) is None


def test_a_rank_tie_keeps_key_order_when_keys_arrive_shuffled() -> None:
    rank = np.array([2, 1, 2, 1], np.int64)
    key = np.array([40, 30, 10, 20], np.int64)
    # rank 1: keys 20 (index 3) then 30 (index 1); rank 2: keys 10 (index 2) then 40 (index 0)
    assert _applied(rank, key).tolist() == [3, 1, 2, 0]


def _swap_some(rng: np.random.Generator, values: np.ndarray) -> np.ndarray:
    out = values.copy()
    for _ in range(max(len(out) // 20, 1)):
        if len(out) > 1:
            i = int(rng.integers(0, len(out) - 1))
            out[i], out[i + 1] = out[i + 1], out[i]
    return out
