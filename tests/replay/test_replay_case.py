"""Replay of hand-built cases: delivered outputs made by decoding from the KV each suspect
really held (written out by hand below, not by the ledger walk), then judged from the ledger."""

from __future__ import annotations

import hashlib
import shutil

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

from forensics.errors import UsageError  # noqa: E402
from forensics.replay.decode import greedy_decode, prefill_first_token  # noqa: E402
from forensics.replay.judge import response_sha256  # noqa: E402
from forensics.replay.ledger import first_read_slots  # noqa: E402
from forensics.replay.stage import run_case_replay  # noqa: E402
from forensics.replay.testmodel import build_test_model, save_test_model  # noqa: E402

STUB = [17]


def ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, 384, n).tolist()


def generate(model, prompt: list[int], n: int) -> list[int]:
    out = model.generate(
        torch.tensor([prompt]),
        max_new_tokens=n,
        do_sample=False,
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
    )
    return out[0, len(prompt) :].tolist()


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return build_test_model("cpu")


@pytest.fixture(scope="module")
def case(model, tmp_path_factory):
    """L leaks into stub request V (node d1, seq order); Z's slots were never written; F is a
    screening false positive (node u1, time order with ties); M kept no contents; Q read slots
    written by X, whose contents were not kept."""
    b = CaseBuilder()
    l_prompt = ids(1, 24)
    l_out = generate(model, l_prompt, 6)
    b.request("L", "acct-l", 24, 6, "d1")
    b.content("L", l_prompt, l_out)
    b.event(1, "d1", "L", "alloc", 0, 32)
    b.event(2, "d1", "L", "write", 0, 24, 0, "transfer")
    b.event(3, "d1", "L", "read", 0, 24, 0)
    b.event(4, "d1", "L", "write", 24, 6, 24, "decode")
    b.event(5, "d1", "L", "free", 0, 32)

    # V: prompt of 28 replaced by a 1-token stub; its first decode read L's KV in 1..27.
    v_prompt = ids(2, 28)
    v_slots = [("V", 0)] + [("L", i) for i in range(1, 28)]
    v_out = greedy_decode(
        model, {"V": STUB, "L": l_prompt + l_out}, v_slots, prefill_first_token(model, STUB), 5
    )
    b.request("V", "acct-v", 28, 5, "d1")
    b.content("V", v_prompt, v_out, STUB)
    b.event(10, "d1", "V", "alloc", 0, 32)
    b.event(11, "d1", "V", "write", 0, 1, 0, "transfer")
    b.event(12, "d1", "V", "read", 0, 28, 0)
    b.event(14, "d1", "V", "write", 28, 1, 28, "decode")
    b.event(15, "d1", "V", "read", 0, 29, 0)
    b.event(16, "d1", "X", "write", 5, 2, 0, "transfer")  # after V's last read: not replayed
    b.exposure("V", "L", "d1", 1, 27)
    b.affected_request("receiving", "V", "acct-v")
    b.affected_request("leaking", "L", "acct-l")
    b.affected_account("receiving", "acct-v")
    b.affected_account("leaking", "acct-l")

    # Q: stub whose first read covers slots 5..6, last written by X (no contents kept).
    b.request("Q", "acct-q", 4, 3, "d1")
    b.content("Q", ids(3, 4), [1, 2, 3], STUB)
    b.event(16, "d1", "Q", "alloc", 4, 4)
    b.event(17, "d1", "Q", "write", 4, 1, 0, "transfer")
    b.event(18, "d1", "Q", "read", 4, 4, 0)
    b.exposure("Q", "X", "d1", 5, 2)

    # Z: stub over slots never written by anyone: only zeros besides its own token.
    z_out = greedy_decode(
        model, {"Z": STUB}, [("Z", 0)] + [None] * 9, prefill_first_token(model, STUB), 5
    )
    b.request("Z", "acct-z", 10, 5, "d1", sha=response_sha256(z_out))
    b.content("Z", ids(4, 10), None, STUB)  # output kept only as response_sha256
    b.event(20, "d1", "Z", "alloc", 40, 10)
    b.event(21, "d1", "Z", "write", 40, 1, 0, "transfer")
    b.event(22, "d1", "Z", "read", 40, 10, 0)
    b.screened("Z", ["over-pool"])

    # F: an ordinary request, flagged by screening; on u1 (no seq) its read is logged before
    # its write with the same timestamp: the write comes first (op rank).
    f_prompt = ids(5, 12)
    b.request("F", "acct-f", 12, 6, "u1")
    b.content("F", f_prompt, generate(model, f_prompt, 6))
    b.event(30, "u1", "F", "alloc", 0, 16, seq=False)
    b.event(31, "u1", "F", "read", 0, 12, 0, seq=False)
    b.event(31, "u1", "F", "write", 0, 12, 0, "prefill", seq=False)
    b.screened("F", ["fast-ttft"])
    b.screened("L", ["deferred-release-timeout"])  # alone: not a possible receiver

    # M: in the exposures table, but its contents were not kept.
    b.request("M", "acct-m", 4, 2, "d1")
    b.event(40, "d1", "M", "read", 0, 4, 0)
    b.exposure("M", "L", "d1", 0, 4)
    b.affected_request("receiving", "M", "acct-m")
    b.affected_account("receiving", "acct-m")
    return b.write(tmp_path_factory.mktemp("case") / "case.duckdb")


@pytest.fixture(scope="module")
def replayed(case, tmp_path_factory):
    db = tmp_path_factory.mktemp("run") / "case.duckdb"
    shutil.copy(case, db)
    con = duckdb.connect(str(db))
    run = run_case_replay(con, "test", "cpu")
    con.close()
    return db, run


def verdicts(db) -> dict[str, tuple[str, str]]:
    rows = query(db, "SELECT request_id, verdict, reason FROM replay_results")
    return {r: (v, why) for r, v, why in rows}


def test_every_suspect_gets_a_verdict(replayed):
    db, run = replayed
    assert sorted(verdicts(db)) == ["F", "M", "Q", "V", "Z"]  # not L: no receiver reason
    assert run.counts() == {"confirmed": 1, "not-reproduced": 2, "cannot-replay": 2}


def test_contaminated_suspect_is_confirmed(replayed):
    db, _ = replayed
    verdict, reason = verdicts(db)["V"]
    assert verdict == "confirmed", reason
    row = query(
        db,
        "SELECT delivered_sha256, contaminated_sha256, clean_sha256, foreign_slots,"
        " uninitialised_slots, output_tokens FROM replay_results WHERE request_id='V'",
    )
    delivered, dirty, clean, foreign, uninitialised, n_out = row[0]
    assert delivered == dirty != clean
    assert (foreign, uninitialised, n_out) == (27, 0, 5)
    attention = query(
        db, "SELECT leaker_request_id, share, slots FROM replay_attention WHERE request_id='V'"
    )
    assert [(a[0], a[2]) for a in attention] == [("L", 27)] and 0 < attention[0][1] < 1


def test_confirmation_raises_confidence(replayed):
    db, _ = replayed
    assert query(db, "SELECT receiver_request_id, confidence FROM exposures ORDER BY 1") == [
        ("M", "ledger"),
        ("Q", "ledger"),
        ("V", "confirmed"),
    ]
    assert query(
        db, "SELECT side, request_id, confidence FROM affected_requests ORDER BY 1, 2"
    ) == [
        ("leaking", "L", "confirmed"),
        ("receiving", "M", "ledger"),
        ("receiving", "V", "confirmed"),
    ]
    assert query(
        db, "SELECT side, account_id, confidence FROM affected_accounts ORDER BY 1, 2"
    ) == [
        ("leaking", "acct-l", "confirmed"),
        ("receiving", "acct-m", "ledger"),
        ("receiving", "acct-v", "confirmed"),
    ]


def test_never_written_slots_are_not_a_confirmed_leak(replayed):
    db, _ = replayed
    verdict, reason = verdicts(db)["Z"]
    assert verdict == "not-reproduced"
    assert "read no other request's data" in reason  # the replay did reproduce it
    assert query(
        db, "SELECT foreign_slots, uninitialised_slots FROM replay_results WHERE request_id='Z'"
    ) == [(0, 9)]


def test_screening_false_positive_is_not_reproduced(replayed):
    db, _ = replayed
    verdict, reason = verdicts(db)["F"]
    assert verdict == "not-reproduced" and "clean replay" in reason
    assert query(
        db,
        "SELECT contaminated_sha256 = clean_sha256, uninitialised_slots "
        "FROM replay_results WHERE request_id='F'",
    ) == [(True, 0)]


def test_missing_contents_cannot_be_replayed(replayed):
    db, _ = replayed
    assert verdicts(db)["M"][0] == "cannot-replay"
    assert "no contents for the request" in verdicts(db)["M"][1]
    verdict, reason = verdicts(db)["Q"]
    assert verdict == "cannot-replay" and "writer(s)" in reason and "X" in reason


def test_first_read_is_rebuilt_before_later_writes(case):
    con = duckdb.connect(str(case), read_only=True)
    slots = first_read_slots(con, "d1", "V", 28)
    con.close()
    assert slots == [("V", 0)] + [("L", i) for i in range(1, 28)]


def test_replay_is_deterministic(case, replayed, tmp_path):
    db, _ = replayed
    again = tmp_path / "again.duckdb"
    shutil.copy(case, again)
    con = duckdb.connect(str(again))
    run_case_replay(con, "test", "cpu")
    con.close()
    columns = (
        "SELECT request_id, verdict, reason, delivered_sha256, contaminated_sha256, "
        "clean_sha256, tokens FROM replay_results ORDER BY request_id"
    )
    assert query(db, columns) == query(again, columns)
    shares = "SELECT * FROM replay_attention ORDER BY ALL"
    assert query(db, shares) == query(again, shares)


def test_missing_model_folder_is_a_usage_error(replayed, tmp_path):
    db = tmp_path / "case.duckdb"
    shutil.copy(replayed[0], db)
    con = duckdb.connect(str(db))
    with pytest.raises(UsageError, match="no model folder there"):
        run_case_replay(con, str(tmp_path / "no-such-model"), "cpu", ["V"])
    con.close()


def _replay_again(db, model: str, served: str | None = None):
    con = duckdb.connect(str(db))
    run = run_case_replay(con, model, "cpu", ["V"], served_model=served)
    con.close()
    return run


def test_a_run_with_another_model_leaves_the_confirmation(replayed, tmp_path):
    """Run 1 (the served test model) confirmed V. Run 2 uses other weights from a folder: its
    verdict is recorded and reported as another model's; nothing is lowered. Run 3 maps those
    weights to the served name: they do not reproduce V, and V stays confirmed, said so."""
    db = tmp_path / "case.duckdb"
    shutil.copy(replayed[0], db)
    other = save_test_model(tmp_path / "other-weights", seed=99)
    second = _replay_again(db, str(other))
    assert second.served_model == "other-weights" and second.model_matches == {"V": False}
    assert second.results[0].verdict == "not-reproduced"
    third = _replay_again(db, str(other), served="kvforensics/test-llama-tiny")
    assert third.model_matches == {"V": True} and third.kept_confirmed == ["V"]
    assert query(
        db,
        "SELECT run_id, request_id, verdict, model_matches FROM replay_results "
        "WHERE request_id = 'V' ORDER BY run_id",
    ) == [
        ("run-0001", "V", "confirmed", True),
        ("run-0002", "V", "not-reproduced", False),
        ("run-0003", "V", "not-reproduced", True),
    ]
    assert query(db, "SELECT receiver_request_id, confidence FROM exposures ORDER BY 1") == [
        ("M", "ledger"),
        ("Q", "ledger"),
        ("V", "confirmed"),
    ]
    assert ("receiving", "acct-v", "confirmed") in query(
        db, "SELECT side, account_id, confidence FROM affected_accounts"
    )
    runs = query(
        db,
        "SELECT run_id, model, served_model, config_sha256, weight_files, "
        "weight_sha256, device, dtype FROM replay_runs ORDER BY run_id",
    )
    assert [r[:3] for r in runs] == [
        ("run-0001", "test", "kvforensics/test-llama-tiny"),
        ("run-0002", str(other), "other-weights"),
        ("run-0003", str(other), "kvforensics/test-llama-tiny"),
    ]
    folder_hash = hashlib.sha256((other / "model.safetensors").read_bytes()).hexdigest()
    config_hash = hashlib.sha256((other / "config.json").read_bytes()).hexdigest()
    assert runs[1][3:6] == (config_hash, ["model.safetensors"], [folder_hash])
    assert runs[0][5] != runs[1][5] and runs[0][6:] == ("cpu", "float32")


def test_confirmation_needs_the_logged_model(case, tmp_path):
    """A first run with another model confirms V's output but is not counted."""
    db = tmp_path / "case.duckdb"
    shutil.copy(case, db)
    folder = save_test_model(tmp_path / "same-weights-other-name")
    run = _replay_again(db, str(folder))
    assert run.results[0].verdict == "confirmed" and run.model_matches == {"V": False}
    assert query(db, "SELECT DISTINCT confidence FROM exposures") == [("ledger",)]
