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


def test_a_node_that_clears_nothing_says_why() -> None:
    summary = _summary(1)
    summary["nodes"][0]["why"] = "the logged times do not mark the engine's steps"
    line = reconstruct_headline(summary)
    assert "nothing cleared: the logged times do not mark the engine's steps" in line
    assert "nothing cleared" not in reconstruct_headline(_summary(1))


def test_nodes_not_rebuilt_are_named_with_their_reasons_grouped() -> None:
    summary = _summary(0)
    summary["skipped"] = [{"node": f"d-{k}", "why": "no page size"} for k in range(7)] + [
        {"node": "u-0", "why": "no limits"}
    ]
    line = reconstruct_headline(summary)
    assert "8 node(s) not rebuilt (d-0, d-1, d-2, d-3, d-4 and 2 more: no page size)" in line
    assert line.endswith(" (u-0: no limits)")
    summary["engines_missing"] = True  # one reason for all, with the fix
    assert "no page size" not in reconstruct_headline(summary)
