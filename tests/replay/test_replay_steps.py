"""Replay follows every step on a node that runs prefill and decode (vLLM's layout): hand-built
ledgers whose delivered outputs come from a naive oracle that, at every step, builds the whole
KV cache afresh from what each position's slot held at that step (per-position KV of each
writer, zeros for never-written slots, and the request's own KV as it computed it), and feeds
one token at a time through the model's own attention.

- S: a 1-token stub whose prefill step (its last prompt token, at its own position) attended a
  healthy request W's stale KV, prompt and decode positions;
- V: a request whose first six slots are overwritten by D's prefill while V still decodes:
  its output changes only from that step on;
- T: a stub reading V's slots after V finished: positions V computed over D's KV, and
  never-written slots. Rebuilding V clean would give other KV: V is replayed through its own
  steps."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence

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

from forensics.replay import hfcompat  # noqa: E402
from forensics.replay.ledger import plan_suspect  # noqa: E402
from forensics.replay.replay import replay_plan  # noqa: E402
from forensics.replay.stage import run_case_replay  # noqa: E402
from forensics.replay.testmodel import build_test_model  # noqa: E402

NODE = "u1"
PosKV = tuple[list[torch.Tensor], list[torch.Tensor]]  # per layer [1, heads, 1, dim]


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(3, 384, n).tolist()


class Naive:
    """One request's decode, one token per forward, over a cache rebuilt from `held` each step."""

    def __init__(self, model, held: dict[int, PosKV | None]):
        self.model = model
        self.held = dict(held)  # position -> KV (None: zeros)
        self.own: dict[int, PosKV] = {}  # the KV this request computed, by position

    def step(self, token: int, pos: int) -> int:
        layers = hfcompat.layer_count(self.model)
        cache = hfcompat.new_cache()
        if pos:
            like = next(kv for kv in self.held.values() if kv is not None)
            for layer in range(layers):
                ks, vs = [], []
                for p in range(pos):
                    kv = self.held[p]
                    ks.append(torch.zeros_like(like[0][layer]) if kv is None else kv[0][layer])
                    vs.append(torch.zeros_like(like[1][layer]) if kv is None else kv[1][layer])
                cache.update(torch.cat(ks, dim=2), torch.cat(vs, dim=2), layer)
        with torch.no_grad():
            out = hfcompat.forward(
                self.model, torch.tensor([[token]]), torch.tensor([[pos]]), cache
            )
        mine = [hfcompat.layer_kv(cache, layer) for layer in range(layers)]
        kv = (
            [k[:, :, pos : pos + 1].clone() for k, _ in mine],
            [v[:, :, pos : pos + 1].clone() for _, v in mine],
        )
        self.own[pos] = kv
        self.held[pos] = kv
        return int(torch.argmax(out.logits[0, -1]).item())


def clean_run(model, prompt: Sequence[int], n_out: int) -> tuple[list[int], dict[int, PosKV]]:
    """A request that read only its own KV: its greedy output and its KV per position."""
    naive = Naive(model, {})
    for p, t in enumerate(prompt):
        nxt = naive.step(t, p)
    out = [nxt]
    for i in range(n_out - 1):
        out.append(naive.step(out[-1], len(prompt) + i))
    return out, naive.own


def steps(b: CaseBuilder, tick: int, rid: str, slot0: int, pos0: int, n: int) -> None:
    """n decode steps of rid (slots slot0 + position): write the fed position, read 0..it."""
    for i in range(n):
        b.event(tick + i, NODE, rid, "write", slot0 + pos0 + i, 1, pos0 + i, "decode")
        b.event(tick + i, NODE, rid, "read", slot0, pos0 + i + 1, 0)


@pytest.fixture(scope="module")
def oracle():
    torch.set_num_threads(1)
    model = build_test_model("cpu")
    model.set_attn_implementation("eager")  # transformers' own textbook attention
    return model


@pytest.fixture(scope="module")
def case(oracle, tmp_path_factory):
    b = CaseBuilder()
    # W: healthy, slots 0.., 12-token prompt, 4 output tokens (KV up to position 14)
    w_prompt = ids(1, 12)
    w_out, w_kv = clean_run(oracle, w_prompt, 4)
    b.request("W", "acct-w", 12, 4, NODE)
    b.content("W", w_prompt, w_out)
    b.event(1, NODE, "W", "alloc", 0, 16)
    b.event(2, NODE, "W", "write", 0, 12, 0, "prefill")
    b.event(2, NODE, "W", "read", 0, 12, 0)
    steps(b, 3, "W", 0, 12, 3)
    b.event(6, NODE, "W", "free", 0, 16)

    # S: stub over slots 4..13 (W's positions 4..12 at its positions 0..8), computes position 9
    s_prompt = ids(2, 10)
    naive = Naive(oracle, {p: w_kv[p + 4] for p in range(9)})
    s_out = [naive.step(s_prompt[9], 9)]
    for i in range(4):
        s_out.append(naive.step(s_out[-1], 10 + i))
    b.request("S", "acct-s", 10, 5, NODE)
    b.content("S", s_prompt, s_out, s_prompt[9:])
    b.event(10, NODE, "S", "alloc", 4, 16)
    b.event(11, NODE, "S", "write", 13, 1, 9, "prefill")
    b.event(11, NODE, "S", "read", 4, 10, 0)
    steps(b, 12, "S", 4, 10, 4)
    b.event(16, NODE, "S", "free", 4, 16)

    # V: slots 64.., prompt 8, 10 output tokens; D's prefill (6 positions, in V's first six
    # slots: a block handed out twice) lands in the step where V feeds position 10
    v_prompt, d_prompt = ids(3, 8), ids(4, 6)
    d_out, d_kv = clean_run(oracle, d_prompt, 2)
    naive = Naive(oracle, {})
    for p, t in enumerate(v_prompt):
        nxt = naive.step(t, p)
    v_out = [nxt, naive.step(nxt, 8)]
    v_out.append(naive.step(v_out[-1], 9))
    for p in range(6):
        naive.held[p] = d_kv[p]
    for i in range(7):
        v_out.append(naive.step(v_out[-1], 10 + i))
    v_kv = {**naive.own}
    b.request("V", "acct-v", 8, 10, NODE)
    b.content("V", v_prompt, v_out)
    b.event(20, NODE, "V", "alloc", 64, 32)
    b.event(21, NODE, "V", "write", 64, 8, 0, "prefill")
    b.event(21, NODE, "V", "read", 64, 8, 0)
    steps(b, 22, "V", 64, 8, 2)
    b.request("D", "acct-d", 6, 2, NODE)
    b.content("D", d_prompt, d_out)
    b.event(24, NODE, "D", "alloc", 64, 6)
    b.event(24, NODE, "D", "write", 64, 6, 0, "prefill")
    b.event(24, NODE, "D", "read", 64, 6, 0)
    steps(b, 24, "V", 64, 10, 7)
    b.event(25, NODE, "D", "free", 64, 6)
    b.event(40, NODE, "V", "free", 64, 32)

    # T: stub over slots 74..: V's positions 10..16 (computed over D's KV), then two
    # never-written slots; it computes position 9
    t_prompt = ids(5, 10)
    held: dict[int, PosKV | None] = {p: v_kv[10 + p] for p in range(7)} | {7: None, 8: None}
    naive = Naive(oracle, held)
    t_out = [naive.step(t_prompt[9], 9)]
    for i in range(3):
        t_out.append(naive.step(t_out[-1], 10 + i))
    b.request("T", "acct-t", 10, 4, NODE)
    b.content("T", t_prompt, t_out, t_prompt[9:])
    b.event(41, NODE, "T", "alloc", 74, 16)
    b.event(42, NODE, "T", "write", 83, 1, 9, "prefill")
    b.event(42, NODE, "T", "read", 74, 10, 0)
    steps(b, 43, "T", 74, 10, 3)

    outputs = {"W": w_out, "S": s_out, "V": v_out, "D": d_out, "T": t_out}
    clean = {
        "S": clean_run(oracle, s_prompt, 5)[0],
        "V": clean_run(oracle, v_prompt, 10)[0],
        "T": clean_run(oracle, t_prompt, 4)[0],
    }
    return b.write(tmp_path_factory.mktemp("case") / "case.duckdb"), outputs, clean


def test_the_oracle_outputs_differ_from_clean_ones(case) -> None:
    """The cases are worth checking: each contaminated output differs from its clean one, and
    V's only from the step that read D's KV on (its first three tokens came before)."""
    _, outputs, clean = case
    for rid in ("S", "V", "T"):
        assert outputs[rid] != clean[rid], rid
    assert outputs["V"][:3] == clean["V"][:3]


def test_plans_follow_the_steps(case) -> None:
    db, _, _ = case
    con = duckdb.connect(str(db), read_only=True)
    try:
        s, v, t = (plan_suspect(con, rid) for rid in ("S", "V", "T"))
    finally:
        con.close()
    assert s.computed == [9] and s.slots[:9] == [("W", p + 4) for p in range(9)] and not s.later
    assert v.computed == list(range(8)) and v.later == [(10, [(p, ("D", p)) for p in range(6)])]
    assert t.slots[:9] == [("V", 10 + p) for p in range(7)] + [None, None]
    assert set(t.replayed) == {"V"} and not s.replayed


def test_every_contaminated_request_is_confirmed(case, tmp_path) -> None:
    db, outputs, _ = case
    copy = tmp_path / "case.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    run = run_case_replay(con, "test", "cpu", ["S", "V", "T", "W", "D"])
    con.close()
    verdicts = {r.request_id: (r.verdict, r.reason) for r in run.results}
    assert {r: v for r, (v, _) in verdicts.items()} == {
        "S": "confirmed",
        "V": "confirmed",
        "T": "confirmed",
        "W": "not-reproduced",
        "D": "not-reproduced",
    }, verdicts
    assert "clean replay from its own prompt also reproduces" in verdicts["W"][1]
    rows = query(copy, "SELECT request_id, foreign_slots FROM replay_results ORDER BY 1")
    assert rows == [("D", 0), ("S", 9), ("T", 7), ("V", 6), ("W", 0)]
    hashes = dict(query(copy, "SELECT request_id, contaminated_sha256 FROM replay_results"))
    for rid in ("S", "V", "T"):
        want = ",".join(str(t) for t in outputs[rid]).encode("ascii")
        assert hashes[rid] == hashlib.sha256(want).hexdigest(), rid


def test_t_needs_v_replayed_through_its_steps(case) -> None:
    """Without replaying its writer V (V rebuilt clean from its tokens), T's replay does not
    give what T delivered: the KV V left behind was computed over D's."""
    db, outputs, _ = case
    con = duckdb.connect(str(db), read_only=True)
    try:
        plan = plan_suspect(con, "T", depth=0)
    finally:
        con.close()
    assert not plan.replayed
    assert replay_plan(build_test_model("cpu"), plan).contaminated != outputs["T"]
