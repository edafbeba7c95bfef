"""Two paths by which foreign KV reaches a decode that the slot walk alone does not show:
a transfer that carried a mismatched prefix-cache hit from the prefill node, and a 1-token stub
whose generated tokens sit after its billed prompt length."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)
pytest.importorskip(
    "transformers", reason="replay needs the extra: pip install 'kvforensics[replay]'"
)

from support.replay_helpers import CaseBuilder, query  # noqa: E402

from forensics.replay.decode import greedy_decode, prefill_first_token  # noqa: E402
from forensics.replay.ledger import Contents  # noqa: E402
from forensics.replay.stage import run_case_replay  # noqa: E402
from forensics.replay.testmodel import build_test_model  # noqa: E402


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 384, n).tolist()


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return build_test_model("cpu")


def replay(db, rid: str) -> tuple[str, str, list[tuple]]:
    con = duckdb.connect(str(db))
    run = run_case_replay(con, "test", "cpu", [rid])
    con.close()
    result = run.results[0]
    shares = query(db, "SELECT leaker_request_id, slots FROM replay_attention ORDER BY 1")
    return result.verdict, result.reason, shares


def test_stub_generated_tokens_follow_its_billed_prompt():
    stub = Contents(prompt=list(range(100, 110)), output=[7, 8, 9], processed=[5], billed=10)
    assert stub.computed == [5] + [0] * 9 + [7, 8, 9]
    plain = Contents(prompt=[1, 2, 3], output=[4], processed=None, billed=3)
    assert plain.computed == [1, 2, 3, 4]


def test_transfer_of_a_mismatched_prefix_is_traced_to_its_author(model, tmp_path):
    """C's prefill on p1 reused W's cached prefix (hash mismatch); the transfer carried W's KV
    into C's slots on d2, which the decode ledger records as C's own transfer write."""
    w_prompt, c_prompt = ids(10, 8), ids(11, 12)
    b = CaseBuilder()
    b.request("W", "acct-w", 8, 2, "d2", prefill_node="p1")
    b.content("W", w_prompt, [3, 4])
    b.event(1, "p1", "W", "alloc", 0, 8)
    b.event(2, "p1", "W", "write", 0, 8, 0, "prefill")
    b.event(3, "p1", "W", "read", 0, 8, 0)
    b.event(4, "p1", "W", "free", 0, 8)
    b.event(5, "p1", "C", "share", 0, 8, 0)
    b.event(6, "p1", "C", "alloc", 8, 4)
    b.event(7, "p1", "C", "write", 8, 4, 8, "prefill")
    b.event(8, "p1", "C", "read", 0, 12, 0)
    b.event(9, "d2", "C", "alloc", 100, 16)
    b.event(10, "d2", "C", "write", 100, 12, 0, "transfer")
    b.event(11, "d2", "C", "read", 100, 12, 0)
    slots = [("W", i) for i in range(8)] + [("C", i) for i in range(8, 12)]
    out = greedy_decode(
        model, {"W": w_prompt, "C": c_prompt}, slots, prefill_first_token(model, c_prompt), 6
    )
    b.request("C", "acct-c", 12, 6, "d2", prefill_node="p1")
    b.content("C", c_prompt, out)
    db = b.write(tmp_path / "case.duckdb")
    verdict, reason, shares = replay(db, "C")
    assert verdict == "confirmed", reason
    assert shares == [("W", 8)]


def test_leak_of_a_stubs_generated_tokens(model, tmp_path):
    """S (a stub of a 10-token prompt) decoded positions 10..12 into slots 10..12; T, another
    stub, was handed the same slots: it read S's generated-token KV, and zeros elsewhere."""
    s_out, t_stub = [41, 42, 43, 44], [9]
    b = CaseBuilder()
    b.request("S", "acct-s", 10, 4, "d3")
    b.content("S", ids(12, 10), s_out, [5])
    b.event(1, "d3", "S", "alloc", 0, 16)
    b.event(2, "d3", "S", "write", 0, 1, 0, "transfer")
    b.event(3, "d3", "S", "read", 0, 10, 0)
    b.event(4, "d3", "S", "write", 10, 3, 10, "decode")
    b.event(5, "d3", "S", "free", 0, 16)
    s_tokens = {10: s_out[0], 11: s_out[1], 12: s_out[2]}  # position -> token whose KV it is
    writer_s = [s_tokens.get(p, 0) for p in range(13)]
    slots = [("T", 0)] + [None] * 9 + [("S", p) for p in (10, 11, 12)] + [None] * 3
    out = greedy_decode(
        model, {"T": t_stub, "S": writer_s}, slots, prefill_first_token(model, t_stub), 5
    )
    b.request("T", "acct-t", 16, 5, "d3")
    b.content("T", ids(13, 16), out, t_stub)
    b.event(6, "d3", "T", "alloc", 0, 16)
    b.event(7, "d3", "T", "write", 0, 1, 0, "transfer")
    b.event(8, "d3", "T", "read", 0, 16, 0)
    db = b.write(tmp_path / "case.duckdb")
    verdict, reason, shares = replay(db, "T")
    assert verdict == "confirmed", reason
    assert shares == [("S", 3)]
    assert query(db, "SELECT uninitialised_slots FROM replay_results") == [(12,)]


def test_verified_prefix_hit_is_not_traced(model, tmp_path):
    """H's prompt starts with W's 8 tokens: the cached prefix holds exactly H's own KV, so the
    transfer is H's own data and H's ordinary output is not a leak."""
    w_prompt = ids(10, 8)
    h_prompt = w_prompt + ids(14, 4)
    b = CaseBuilder()
    b.request("W", "acct-w", 8, 2, "d2", prefill_node="p1")
    b.content("W", w_prompt, [3, 4])
    b.event(1, "p1", "W", "alloc", 0, 8)
    b.event(2, "p1", "W", "write", 0, 8, 0, "prefill")
    b.event(3, "p1", "W", "free", 0, 8)
    b.event(4, "p1", "H", "share", 0, 8, 0)
    b.event(5, "p1", "H", "alloc", 8, 4)
    b.event(6, "p1", "H", "write", 8, 4, 8, "prefill")
    b.event(7, "p1", "H", "read", 0, 12, 0)
    b.event(8, "d2", "H", "write", 100, 12, 0, "transfer")
    b.event(9, "d2", "H", "read", 100, 12, 0)
    out = greedy_decode(
        model,
        {"H": h_prompt},
        [("H", i) for i in range(12)],
        prefill_first_token(model, h_prompt),
        6,
    )
    b.request("H", "acct-h", 12, 6, "d2", prefill_node="p1")
    b.content("H", h_prompt, out)
    db = b.write(tmp_path / "case.duckdb")
    verdict, reason, shares = replay(db, "H")
    assert verdict == "not-reproduced" and "clean replay" in reason
    assert shares == []


def test_gap_in_the_prefill_ledger_is_not_traced(model, tmp_path):
    """N's prefill writes on p1 are missing from the ledger (e.g. quarantined rows): its prefill
    read there shows nothing written, but N held no share, so its transfer is its own KV."""
    n_prompt = ids(15, 10)
    b = CaseBuilder()
    b.event(1, "p1", "N", "alloc", 0, 10)
    b.event(2, "p1", "N", "read", 0, 10, 0)
    b.event(3, "d2", "N", "write", 50, 10, 0, "transfer")
    b.event(4, "d2", "N", "read", 50, 10, 0)
    out = greedy_decode(
        model,
        {"N": n_prompt},
        [("N", i) for i in range(10)],
        prefill_first_token(model, n_prompt),
        6,
    )
    b.request("N", "acct-n", 10, 6, "d2", prefill_node="p1")
    b.content("N", n_prompt, out)
    verdict, reason, shares = replay(b.write(tmp_path / "case.duckdb"), "N")
    assert verdict == "not-reproduced" and "clean replay" in reason
    assert shares == []
