"""`kvforensics replay` on a hand-built case, and investigate's replay stage without the extra."""

from __future__ import annotations

import json

import pytest
from support.replay_helpers import CaseBuilder, query

from forensics.replay import INSTALL_HINT
from forensics.replay import stage as replay_stage_module

W_PROMPT = [5, 6, 7, 8, 9, 10]


def leaked_output() -> list[int]:
    """R's output decoded from what it held: its stub at 0, W's KV at 1..5 (written by hand)."""
    from forensics.replay.decode import greedy_decode, prefill_first_token
    from forensics.replay.testmodel import build_test_model

    model = build_test_model("cpu")
    slots = [("R", 0)] + [("W", i) for i in range(1, 6)]
    return greedy_decode(
        model, {"R": [1], "W": W_PROMPT}, slots, prefill_first_token(model, [1]), 3
    )


def tiny_case(
    tmp_path, model_name: str = "kvforensics/test-llama-tiny", delivered: list[int] | None = None
):
    """R (a 1-token stub of a 6-token prompt) read W's KV in positions 1..5 on d1."""
    b = CaseBuilder()
    b.request("W", "acct-w", 6, 2, "d1", model=model_name)
    b.content("W", W_PROMPT, [11, 12])
    b.request("R", "acct-r", 6, 3, "d1", model=model_name)
    b.content("R", [1, 2, 3, 4, 5, 6], delivered or [0, 0, 0], [1])
    b.event(1, "d1", "W", "write", 0, 6, 0, "transfer")
    b.event(2, "d1", "W", "free", 0, 6)
    b.event(3, "d1", "R", "write", 0, 1, 0, "transfer")
    b.event(4, "d1", "R", "read", 0, 6, 0)
    b.exposure("R", "W", "d1", 1, 5)
    return b.write(tmp_path / "case.duckdb")


def test_replay_stage_without_the_extra_says_how_to_enable_it(monkeypatch):
    monkeypatch.setattr(replay_stage_module, "replay_available", lambda: False)

    class Ctx:
        con = None
        params: dict = {}

    result = replay_stage_module.replay_stage(Ctx())
    assert result.summary["status"] == "unavailable" and INSTALL_HINT in result.headline
    assert result.summary["headline"] == result.headline and not result.findings


def test_replay_command_without_the_extra_exits_2(cli, monkeypatch, tmp_path):
    monkeypatch.setattr(replay_stage_module, "replay_available", lambda: False)
    code, _, err = cli("replay", "--db", tiny_case(tmp_path))
    assert code == 2 and "kvforensics[replay]" in err


def test_replay_command_json(cli, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    db = tiny_case(tmp_path, delivered=leaked_output())
    code, out, _ = cli("replay", "--db", db, "--device", "cpu", "--json")
    summary = json.loads(out)
    assert code == 1  # a confirmed suspect is a finding
    assert summary["model"] == "test" and summary["device"] == "cpu"
    assert [(r["request_id"], r["verdict"]) for r in summary["results"]] == [("R", "confirmed")]
    assert summary["results"][0]["attention"].keys() == {"W"}
    assert "exposures" in summary["updated_tables"]
    assert query(db, "SELECT DISTINCT confidence FROM exposures") == [("confirmed",)]


def test_replay_command_not_reproduced_exits_0(cli, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    code, out, _ = cli("replay", "--db", tiny_case(tmp_path), "--model", "test", "--json")
    assert code == 0 and json.loads(out)["verdicts"]["not-reproduced"] == 1


def test_replay_command_other_model_needs_a_directory(cli, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    db = tiny_case(tmp_path, model_name="acme/llm-70b")
    code, out, _ = cli("replay", "--db", db, "--device", "cpu", "--json")
    result = json.loads(out)["results"][0]
    assert code == 1 and result["verdict"] == "cannot-replay"
    assert "--model PATH" in result["reason"]


def test_replay_command_unknown_request_exits_2(cli, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    db = tiny_case(tmp_path)
    code, _, err = cli(
        "replay",
        "--db",
        db,
        "--device",
        "cpu",
        "--model",
        "test",
        "--request",
        "nope",
        "--request",
        "R",
    )
    assert code == 2 and "not in the request log: nope" in " ".join(err.split())
    assert query(
        db, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'replay_results'"
    ) == [(0,)]


def test_token_ids_beyond_the_vocabulary_cannot_be_replayed(cli, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    b = CaseBuilder()
    b.request("W", "acct-w", 3, 1, "d1")
    b.content("W", [5, 384, 7], [1])  # the test model has ids 0..383
    b.request("R", "acct-r", 3, 2, "d1")
    b.content("R", [1, 2, 3], [4, 5], [1])
    b.event(1, "d1", "W", "write", 0, 3, 0, "transfer")
    b.event(2, "d1", "R", "read", 0, 3, 0)
    b.exposure("R", "W", "d1", 0, 3)
    code, out, _ = cli(
        "replay",
        "--db",
        b.write(tmp_path / "case.duckdb"),
        "--model",
        "test",
        "--device",
        "cpu",
        "--json",
    )
    result = json.loads(out)["results"][0]
    assert code == 1 and result["verdict"] == "cannot-replay"
    assert "token id 384 is beyond the model's vocabulary (384 ids)" in result["reason"]


def _fake_hub_cache(root, repo: str):
    """The folder layout the Hugging Face cache uses for one downloaded snapshot."""
    from forensics.replay.testmodel import save_test_model

    org, name = repo.split("/")
    base = root / f"models--{org}--{name}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text("0123abcd")
    save_test_model(base / "snapshots" / "0123abcd")
    return root


def test_hub_id_resolves_from_the_local_cache(cli, tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    monkeypatch.setenv("HF_HUB_CACHE", str(_fake_hub_cache(tmp_path / "hub", "acme/tiny")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    db = tiny_case(tmp_path, model_name="acme/tiny", delivered=leaked_output())
    code, out, _ = cli("replay", "--db", db, "--model", "acme/tiny", "--device", "cpu", "--json")
    summary = json.loads(out)
    assert code == 1 and summary["served_model"] == "acme/tiny"
    assert [(r["verdict"], r["model_matches"]) for r in summary["results"]] == [("confirmed", True)]
    assert query(db, "SELECT DISTINCT confidence FROM exposures") == [("confirmed",)]


def test_hub_id_not_in_the_cache_exits_2(cli, tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = cli(
        "replay", "--db", tiny_case(tmp_path), "--model", "acme/llm-70b", "--device", "cpu"
    )
    err = " ".join(err.split())  # the console may wrap long lines
    assert code == 2
    assert "not in the local Hugging Face cache" in err and "--model /path/to/model-folder" in err


def test_out_of_memory_is_cannot_replay(cli, monkeypatch, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    from forensics.replay import replay as replay_module

    def exhausted(*_args):
        raise RuntimeError("CUDA out of memory. Tried to allocate 80.00 GiB")

    monkeypatch.setattr(replay_module, "replay_plan", exhausted)
    code, out, _ = cli("replay", "--db", tiny_case(tmp_path), "--model", "test", "--json")
    result = json.loads(out)["results"][0]
    assert code == 1 and result["verdict"] == "cannot-replay"
    assert result["reason"].startswith("out of memory: CUDA out of memory")


def test_a_log_without_model_names_needs_served_model(cli, tmp_path):
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    db = tiny_case(tmp_path, model_name="", delivered=leaked_output())
    code, out, _ = cli("replay", "--db", db, "--model", "test", "--device", "cpu", "--json")
    summary = json.loads(out)
    assert summary["results"][0]["verdict"] == "confirmed"
    assert summary["other_model"] == ["R"] and "not counted" in summary["headline"]
    assert query(db, "SELECT DISTINCT confidence FROM exposures") == [("ledger",)]
    code, out, _ = cli(
        "replay",
        "--db",
        db,
        "--model",
        "test",
        "--device",
        "cpu",
        "--served-model",
        "prod-llm",
        "--json",
    )
    summary = json.loads(out)
    assert code == 1 and summary["run_id"] == "run-0002" and summary["other_model"] == []
    assert query(db, "SELECT DISTINCT confidence FROM exposures") == [("confirmed",)]
    assert query(db, "SELECT served_model FROM replay_runs ORDER BY run_id") == [
        ("kvforensics/test-llama-tiny",),
        ("prod-llm",),
    ]
