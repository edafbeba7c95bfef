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
        "free_lists": {},
        "release_free_list": None,
        "other_ways": 0,
        "parameters": {
            "allocator": "auto",
            "orders": 8,
            "skew_ms": 25.0,
            "delivery_jitter_ms": None,
            "sglang_free_list": "any",
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


def test_every_free_list_followed_says_what_each_names_alone_and_how_to_narrow() -> None:
    summary = _summary(0)
    summary["free_lists"] = {"any": 41, "front": 27, "staged": 32}
    line = reconstruct_headline(summary)
    assert "every way was followed: the rebuilt reads name 41 leaking accounts" in line
    assert "front alone 27, staged alone 32" in line
    assert "--sglang-free-list version" not in line  # no release named
    summary["release_free_list"] = "staged"
    assert "the nodes' SGLang release builds: staged" in reconstruct_headline(summary)
    summary["release_free_list"] = "mixed"  # nodes of two releases: no one way to name
    assert "release builds:" not in reconstruct_headline(summary)
    summary["free_lists"] = {"any": 27, "front": 27}  # one way followed: nothing to narrow
    assert "every way" not in reconstruct_headline(summary)


def test_the_default_names_the_releases_way_and_the_accounts_kept_apart() -> None:
    """--sglang-free-list version (the default): with a release named, the line names its way
    and how many leaking accounts only the other ways name; with none named, every way's
    reads are listed and the line says so, as under any."""
    summary = _summary(0)
    summary["parameters"]["sglang_free_list"] = "version"
    summary["free_lists"] = {"any": 41, "front": 27, "staged": 32}
    line = reconstruct_headline(summary)
    assert "every way was followed: the rebuilt reads name 41 leaking accounts" in line
    assert "release builds them" not in line
    summary["release_free_list"] = "staged"
    line = reconstruct_headline(summary)
    assert line.endswith("as the nodes' release builds them: staged")
    assert "every way was followed" not in line
    summary["other_ways"] = 9
    line = reconstruct_headline(summary)
    assert "9 leaking account(s) only the other ways' reads name are kept apart" in line
    assert "--sglang-free-list any lists them" in line
    summary["release_free_list"] = "mixed"
    assert "release builds them: not one way for every node" in reconstruct_headline(summary)
