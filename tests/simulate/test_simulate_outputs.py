"""The output-model seam: called once per decoding request in decode-start order, with the slot
sources its first decode read really held (checked against the naive oracle's last writers), and
the replay model failing with a clear message when the replay package is absent."""

from __future__ import annotations

import hashlib
import shlex
import sys

import numpy as np
import polars as pl
import pytest
from support.paths import SAMPLE
from support.simhelp import naive_truth, read_ledger

from forensics.errors import StageUnavailable
from forensics.simulate import outputs as O
from forensics.simulate.run import SimOptions, simulate


class Recorder(O.SyntheticModel):
    def __init__(self, vocab_size: int):
        super().__init__(vocab_size)
        self.calls: list[tuple[int, np.ndarray, np.ndarray]] = []

    def decode(self, view, tokens_of, first_token, n_out):  # type: ignore[no-untyped-def]
        self.calls.append((view.request, view.writer.copy(), view.position.copy()))
        for w in view.writers():  # every writer's tokens cover the positions read from it
            assert len(tokens_of(w)) > view.position[view.writer == w].max()
        return super().decode(view, tokens_of, first_token, n_out)


def test_output_model_sees_what_each_first_decode_read_held(tmp_path, monkeypatch):
    recorder = Recorder(32_000)
    monkeypatch.setattr(O, "SyntheticModel", lambda _vocab: recorder)
    import forensics.simulate.run as run_mod

    monkeypatch.setattr(run_mod, "load_model", lambda _name, _vocab: recorder)
    out = tmp_path / "case"
    simulate(
        out,
        SimOptions(
            requests=120, seed=9, scale=0.0005, days=0.01, overrides=(("long_share", 0.15),)
        ),
    )
    req = pl.read_csv(out / "requests.csv")
    ids = req["request_id"].to_list()
    decoded = req.filter(pl.col("first_token_at").is_not_null())
    assert sorted(ids[r] for r, _, _ in recorder.calls) == sorted(decoded["request_id"])
    first_at = dict(decoded.select("request_id", "first_token_at").rows())
    times = [first_at[ids[r]] for r, _, _ in recorder.calls]
    assert times == sorted(times)  # decode-start order
    foreign, _ = naive_truth(read_ledger(out))
    by_reader: dict = {}
    for r, w, node, _, _slot in foreign:
        if node.startswith("decode"):
            by_reader.setdefault(r, set()).add(w)
    for r, writer, _ in recorder.calls:
        seen = {ids[w] for w in np.unique(writer) if w >= 0 and w != r}
        assert seen == by_reader.get(ids[r], set())
    assert any(by_reader.values())


def test_replay_model_needs_the_replay_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "forensics.replay.testmodel", None)
    monkeypatch.setitem(sys.modules, "forensics.replay.loader", None)
    with pytest.raises(StageUnavailable, match="--model test"):
        O.load_model("test", 100)


def _rerun_readme_command(tmp_path, model: str | None = None):
    sample = SAMPLE
    readme = (sample / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("kvforensics simulate"))
    args = shlex.split(line)[2:]
    args[0] = str(tmp_path / "again")
    if model is not None:
        args[args.index("--model") + 1] = model
    from forensics.cli import run

    assert run(["simulate", *args]) == 0
    return sample, tmp_path / "again"


def _same_files(sample, again, rels):
    for rel in rels:
        assert (
            hashlib.sha256((again / rel).read_bytes()).hexdigest()
            == hashlib.sha256((sample / rel).read_bytes()).hexdigest()
        ), rel


# What the engine does never depends on the output model: the ledger (but for the prefix hashes
# of token ids drawn from the model's vocabulary), the customers and the ground truth of who read
# whose KV come out the same with the fast synthetic output model.
MODEL_INDEPENDENT = (
    "accounts.csv",
    "ground_truth/exposures.csv",
    "ground_truth/violations.csv",
    "ground_truth/accounts.csv",
    "ground_truth/receiving_requests.csv",
    "ground_truth/leaking_requests.csv",
)


def test_sample_incident_ledger_is_what_its_readme_command_makes(tmp_path):
    sample, again = _rerun_readme_command(tmp_path, model="synthetic")
    _same_files(sample, again, MODEL_INDEPENDENT)
    parts = sorted(p.relative_to(sample) for p in (sample / "kv_events").iterdir())
    assert parts == sorted(p.relative_to(again) for p in (again / "kv_events").iterdir())
    for rel in parts:
        a, b = (pl.read_parquet(root / rel).drop("content_hash") for root in (sample, again))
        assert a.equals(b), rel


@pytest.mark.slow
def test_sample_incident_is_what_its_readme_command_makes(tmp_path):
    """The whole sample, test-model outputs included (minutes on a CPU: pytest -m slow)."""
    pytest.importorskip("torch")
    sample, again = _rerun_readme_command(tmp_path)
    files = sorted(
        p.relative_to(sample) for p in sample.rglob("*") if p.is_file() and p.name != "README.md"
    )
    _same_files(sample, again, files)


def test_model_test_calls_the_replay_functions_with_the_seam_contract(tmp_path, monkeypatch):
    """--model test through stand-in replay modules: every slot names a writer position inside
    that writer's tokens, the view is as long as the billed prompt, outputs come back as given."""
    import types

    calls: list[tuple[int, int]] = []

    def prefill_first_token(model, token_ids):  # type: ignore[no-untyped-def]
        assert model is tiny and len(token_ids) >= 1 and max(token_ids) < 64
        return 1 + sum(token_ids) % 50

    def greedy_decode(_model, writers, slots, first_token, n_out):  # type: ignore[no-untyped-def]
        for slot in slots:
            if slot is not None:
                assert 0 <= slot[1] < len(writers[slot[0]])
        calls.append((len(slots), n_out))
        return [first_token] + [7] * (n_out - 1)

    decode = types.ModuleType("forensics.replay.decode")
    decode.prefill_first_token = prefill_first_token  # type: ignore[attr-defined]
    decode.greedy_decode = greedy_decode  # type: ignore[attr-defined]
    testmodel = types.ModuleType("forensics.replay.testmodel")
    loader = types.ModuleType("forensics.replay.loader")
    tiny = types.SimpleNamespace(config=types.SimpleNamespace(vocab_size=64))
    loader.load_test_model = lambda: tiny  # type: ignore[attr-defined]
    testmodel.TEST_MODEL_NAME = "stand-in/test-model"  # type: ignore[attr-defined]
    package = types.ModuleType("forensics.replay")
    package.decode = decode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "forensics.replay", package)
    monkeypatch.setitem(sys.modules, "forensics.replay.decode", decode)
    monkeypatch.setitem(sys.modules, "forensics.replay.testmodel", testmodel)
    monkeypatch.setitem(sys.modules, "forensics.replay.loader", loader)
    out = tmp_path / "case"
    simulate(
        out,
        SimOptions(
            requests=80,
            seed=9,
            scale=0.0005,
            days=0.01,
            model="test",
            sampling="greedy",
            overrides=(("long_share", 0.15),),
        ),
    )
    req = pl.read_csv(out / "requests.csv").filter(pl.col("first_token_at").is_not_null())
    assert sorted(calls) == sorted(zip(req["prompt_tokens"], req["completion_tokens"], strict=True))
    contents = pl.read_ndjson(out / "contents.jsonl")
    outputs = [t for t in contents["output_token_ids"].to_list() if t]
    assert outputs and all(t[1:] == [7] * (len(t) - 1) for t in outputs)
    assert max(max(t) for t in contents["prompt_token_ids"].to_list()) < 64
    # the request log names the model whose outputs it holds, so replay can pick it by itself
    assert set(pl.read_csv(out / "requests.csv")["model"].to_list()) == {"stand-in/test-model"}
