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
from conftest import REPO
from simhelp import naive_truth, read_ledger

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
    monkeypatch.setattr(O, "SyntheticModel", lambda vocab: recorder)
    import forensics.simulate.run as run_mod

    monkeypatch.setattr(run_mod, "load_model", lambda name, vocab: recorder)
    out = tmp_path / "case"
    simulate(out, SimOptions(requests=120, seed=9, scale=0.0005, days=0.01,
                             overrides=(("long_share", 0.15),)))
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
    with pytest.raises(StageUnavailable, match="--model test"):
        O.load_model("test", 100)


def test_sample_incident_is_what_its_readme_command_makes(tmp_path):
    sample = REPO / "data_samples" / "incident"
    readme = (sample / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("kvforensics simulate"))
    args = shlex.split(line)[2:]
    args[0] = str(tmp_path / "again")
    from forensics.cli import run

    assert run(["simulate", *args]) == 0
    for path in sorted(p for p in sample.rglob("*") if p.is_file() and p.name != "README.md"):
        rel = path.relative_to(sample)
        again = tmp_path / "again" / rel
        assert hashlib.sha256(again.read_bytes()).hexdigest() == hashlib.sha256(
            path.read_bytes()).hexdigest(), rel
