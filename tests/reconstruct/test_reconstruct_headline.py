"""The reconstruct headline never reads as an all-clear where a stub's first read was not
modelled (forensics/reconstruct/headline.py)."""

from __future__ import annotations

from forensics.reconstruct.headline import ReconstructSummary, reconstruct_headline


def _summary(unread: int) -> ReconstructSummary:
    return {
        "nodes": [{"node": "vllm-0", "allocator": "vllm", "orders": 0, "unread": unread}],
        "skipped": [],
        "engines_missing": False,
        "events": 0,
        "pairs": 0,
        "cross_account_pairs": 0,
        "confirmed": 0,
        "cleared": 0,
        "layouts_replayed": 0,
        "findings": False,
        "parameters": {
            "allocator": "auto",
            "orders": 8,
            "skew_ms": 25.0,
            "delivery_jitter_ms": None,
            "replay_budget": 4,
        },
    }


def test_zero_pairs_with_an_unmodelled_read_says_its_candidates_stay_possible() -> None:
    line = reconstruct_headline(_summary(1))
    assert "0 cross-account" in line
    assert "1 first reads not modelled: their candidates stay possible" in line
    assert "not modelled" not in reconstruct_headline(_summary(0))


def test_reads_over_a_sample_of_orders_are_counted() -> None:
    summary = _summary(0)
    summary["nodes"][0]["sampled"] = 3
    assert "3 stub reads over a sample of orders, not every one" in reconstruct_headline(summary)
    assert "sample" not in reconstruct_headline(_summary(0))
