"""vLLM step tracking without vLLM: SchedulerOutput-shaped steps give the events a hand-checked
reading of the step says they must."""

from __future__ import annotations

from types import SimpleNamespace as NS

from forensics.tap.hashing import PrefixHashes
from forensics.tap.vllm_steps import StepTracker, external_id

BS = 4


def _out(new=(), cached=(), scheduled=None):
    ids = [c[0] for c in cached]
    return NS(
        scheduled_new_reqs=[NS(req_id=r, block_ids=(b,), num_computed_tokens=n) for r, b, n in new],
        scheduled_cached_reqs=NS(
            req_ids=ids,
            resumed_req_ids=set(),
            new_block_ids=[(c[1],) if c[1] else None for c in cached],
            num_computed_tokens=[c[2] for c in cached],
        ),
        num_scheduled_tokens=scheduled or {},
        scheduled_spec_decode_tokens={},
    )


def test_prefill_hit_decode_and_free() -> None:
    a = list(range(10, 20))  # 10 prompt tokens: blocks of 4, 4, 2
    b = a[:8] + [50, 51, 52]  # shares a's two full blocks
    toks = {"a-0123abcd": (a, 10), "b-89abcdef": (b, 11)}
    t = StepTracker(BS)
    ev = t.step(_out(new=[("a-0123abcd", [5, 6, 9], 0)], scheduled={"a-0123abcd": 10}), toks.get)
    ha = PrefixHashes(BS)
    assert ev == [
        ("a", "alloc", 20, 8, 0, None, None),  # blocks 5 and 6 are one slot run
        ("a", "alloc", 36, 4, 8, None, None),
        ("a", "write", 20, 4, 0, "prefill", ha.of_block(a, 0, 4)),
        ("a", "write", 24, 4, 4, "prefill", ha.of_block(a, 1, 8)),
        ("a", "write", 36, 2, 8, "prefill", ha.of_block(a, 2, 10)),
        ("a", "read", 20, 8, 0, None, None),
        ("a", "read", 36, 2, 8, None, None),
    ]
    t.hit("b-89abcdef", [5, 6])
    a.append(77)  # a's first output token, fed at position 10
    ev = t.step(
        _out(
            new=[("b-89abcdef", [5, 6, 7], 8)],
            cached=[("a-0123abcd", [], 10)],
            scheduled={"a-0123abcd": 1, "b-89abcdef": 3},
        ),
        toks.get,
    )
    hb = PrefixHashes(BS)
    assert ev == [
        ("b", "alloc", 28, 4, 8, None, None),
        ("a", "write", 38, 1, 10, "decode", ha.of_block(a, 2, 11)),
        ("b", "write", 28, 3, 8, "prefill", hb.of_block(b, 2, 11)),
        ("b", "share", 20, 4, 0, None, hb.of_block(b, 0, 4)),  # after the step's writes
        ("b", "share", 24, 4, 4, None, hb.of_block(b, 1, 8)),
        ("a", "read", 20, 8, 0, None, None),
        ("a", "read", 36, 3, 8, None, None),
        ("b", "read", 20, 11, 0, None, None),  # positions 0..10
    ]
    assert ha.of_block(a, 1, 8) == hb.of_block(b, 1, 8)  # the hit verifies
    a.append(78)  # position 11 closes a's third block: the write restates the whole block
    ev = t.step(_out(cached=[("a-0123abcd", [], 11)], scheduled={"a-0123abcd": 1}), toks.get)
    assert ev[0] == ("a", "write", 36, 4, 8, "decode", ha.of_block(a, 2, 12))
    assert t.free("a-0123abcd") == [
        ("a", "free", 20, 8, None, None, None),
        ("a", "free", 36, 4, None, None, None),
    ]
    # a step of a's still in flight when it finished is discarded work: nothing recorded
    assert (
        t.step(_out(cached=[("a-0123abcd", [], 12)], scheduled={"a-0123abcd": 1}), toks.get) == []
    )


def test_engine_suffix_is_removed_from_request_ids() -> None:
    assert external_id("cmpl-7f3a-0a1b2c3d") == "cmpl-7f3a"
    assert external_id("cmpl-7f3a-0a1b2c3d", randomised=False) == "cmpl-7f3a-0a1b2c3d"
    assert external_id("plain") == "plain"
