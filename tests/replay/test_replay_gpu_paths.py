"""The CUDA replay path's first-run failure classes, caught on the CPU: the random model made in
the device's dtype, the speed row in bfloat16, chunked fast attention at an offset against
eager attention, the memory plan of the 1M-token row on a 139 GiB GPU and on a smaller one,
and the check script's own syntax."""

from __future__ import annotations

import io
import json
import shutil
import subprocess

import pytest
from support.paths import REPO

torch = pytest.importorskip("torch", reason="replay needs torch (pip install -e '.[replay]')")
pytest.importorskip("transformers", reason="replay needs transformers")

from forensics.replay import attention, memory, speed  # noqa: E402

GIB = 1 << 30


@pytest.fixture(scope="module")
def tiny_bf16():
    torch.set_num_threads(1)
    return speed.random_llama("random-tiny", "cpu", torch.bfloat16, 1024)


@pytest.fixture(scope="module")
def big_on_meta():
    """random-1b's real shape, with no memory behind it (only the plan reads it)."""
    return speed.random_llama("random-1b", "meta", torch.bfloat16, (1 << 20) + 64)


def test_the_random_model_is_made_in_its_dtype_on_its_device(tiny_bf16):
    assert {p.dtype for p in tiny_bf16.parameters()} == {torch.bfloat16}
    assert {p.device.type for p in tiny_bf16.parameters()} == {"cpu"}
    # Rotary frequencies stay float32 (bf16 angles would be wrong at long positions).
    assert tiny_bf16.model.rotary_emb.inv_freq.dtype == torch.float32
    assert tiny_bf16.config._attn_implementation == attention.FAST
    assert torch.get_default_dtype() == torch.float32  # restored after the build


def test_a_bfloat16_speed_row_reaches_a_verdict(tiny_bf16):
    phases: list[str] = []
    row = speed.measure(tiny_bf16, 128, 2, 4, note=phases.append)
    assert row.verdict == "confirmed", row.reason
    assert row.prefill_tokens_per_s and row.replay_tokens_per_s
    assert [p.split(": ")[1].split(" ")[0] for p in phases] == ["stub", "plain"]
    # clean prefill (128) + its 3 decode steps + stub prefill (1) + stub KV (1) + two leakers
    # of 64 positions + the contaminated decode's 3 steps
    assert row.replay_tokens == 128 + 3 + 1 + 1 + 2 * 64 + 3


def test_rows_are_printed_as_they_are_measured(tiny_bf16):
    out, notes = io.StringIO(), io.StringIO()
    rows = speed.run_rows(tiny_bf16, [64, 96], [1, 2], 3, 1, out, notes)
    lines = out.getvalue().splitlines()
    assert lines[0] == speed.HEAD
    assert [line.split()[0] for line in lines[1:]] == ["64", "96"]
    assert all(line.split()[-1] == "confirmed" for line in lines[1:])
    assert [r.context for r in rows] == [64, 96]
    assert "96 tokens: plain prefill" in notes.getvalue()


def _eager_rows(q, k, v, scale):
    """Oracle: the full causal attention of the keys' own positions, computed by hand; a chunk
    of queries at the end is the last rows of it."""
    groups = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(groups, dim=1)
    v = v.float().repeat_interleave(groups, dim=1)
    n_q, n_k = q.shape[2], k.shape[2]
    scores = q.float() @ k.transpose(2, 3) * scale
    for i in range(n_q):
        scores[:, :, i, n_k - n_q + i + 1 :] = float("-inf")
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("n_q", [1, 5, 24])
def test_fast_attention_of_a_chunk_at_an_offset(dtype, tol, n_q):
    gen = torch.Generator().manual_seed(n_q)
    q = torch.randn(1, 8, n_q, 16, generator=gen).to(dtype)
    k = torch.randn(1, 2, 24, 16, generator=gen).to(dtype)
    v = torch.randn(1, 2, 24, 16, generator=gen).to(dtype)
    want = _eager_rows(q, k, v, 0.25)
    fast, _ = attention.fast_attention(None, q, k, v, None, scaling=0.25)
    eager, _ = attention.eager_attention(None, q, k, v, None, scaling=0.25)
    assert fast.dtype == dtype and fast.shape == (1, n_q, 8, 16)
    assert torch.allclose(fast.float(), want, atol=tol, rtol=tol)
    assert torch.allclose(eager.float(), want, atol=tol, rtol=tol)


def _as_h200(monkeypatch):
    monkeypatch.setattr(memory, "_device_name", lambda _model: "cuda:0")
    monkeypatch.setattr(memory, "total_bytes", lambda _model: 139 * GIB)


def test_the_1m_row_fits_a_139_gib_gpu_at_the_largest_chunk(big_on_meta, monkeypatch):
    _as_h200(monkeypatch)
    shape = memory.model_shape(big_on_meta)
    # 1.24 B parameters in bfloat16; 16 layers x K,V x 8 KV heads x 64 dims x 2 bytes
    assert shape.weights_bytes == 1_235_814_400 * 2
    assert shape.kv_per_token == 32768
    free = int((139 * GIB - shape.weights_bytes) * (1 - memory.RESERVE))
    budget = memory.plan(big_on_meta, shape, 1 << 20, 1 << 20, 16, free=free)
    assert budget.fits and budget.chunk == memory.CHUNK_CAP["cuda"]
    # By hand: KV (1M + 16 keys, twice: the rebuilt KV and the decode cache's copy, + one
    # layer) 66.00 GiB; one 65,536-token chunk's activations 15.38 GiB.
    assert round(budget.kv_bytes / GIB, 2) == 66.00
    assert round(budget.activation_bytes / GIB, 2) == 15.38


def test_a_gpu_too_small_for_1m_gets_cannot_replay_with_the_numbers(big_on_meta, monkeypatch):
    _as_h200(monkeypatch)
    shape = memory.model_shape(big_on_meta)
    budget = memory.plan(big_on_meta, shape, 1 << 20, 1 << 20, 16, free=40 * GIB)
    assert not budget.fits and budget.chunk == 1
    reason = budget.reason()
    # weights 2.30 + KV 66.00 + a 1-token pass (mostly the GQA-expanded keys) 8.38 GiB
    assert reason.startswith(
        "needs 76.68 GiB (weights 2.30 GiB + KV 66.00 GiB + activations of one 1-token "
        "chunk 8.38 GiB) but cuda:0 has 40.00 GiB free beside the weights"
    )
    assert "a GPU with at least 76.68 GiB of memory, or this GPU with nothing else on it" in (
        reason
    )
    two = memory.plan(big_on_meta, shape, 1 << 21, 1 << 21, 16, free=40 * GIB).reason()
    assert "or 2 GPUs like this one with --device-map auto" in two  # 2M tokens: 150 GiB


def test_a_suspect_beyond_free_memory_never_runs(big_on_meta, monkeypatch):
    """On a GPU with too little free memory the suspect is cannot-replay before any forward
    pass (a meta-device model would fail on one)."""
    from forensics.replay.decode import WriterStore
    from forensics.replay.ledger import SuspectPlan
    from forensics.replay.replay import run_planned

    _as_h200(monkeypatch)
    monkeypatch.setattr(memory, "free_bytes", lambda _model: 1 * GIB)
    n = 65536
    slots = [("R", 0)] + [("L", p) for p in range(1, n)]
    plan = SuspectPlan(
        "R", "bench", [1] * n, [1], 4, [1, 2, 3, 4], "", slots, {"R": [1] * n, "L": [2] * n}
    )
    result = run_planned(big_on_meta, plan, WriterStore())
    assert result.verdict == "cannot-replay"
    assert result.reason.startswith("does not fit in memory: needs ")
    assert "but cuda:0 has 1.00 GiB free beside the weights" in result.reason
    assert "or this GPU with nothing else on it" in result.reason


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script", ["replay_gpu_check.sh", "fetch_wheels.sh"])
def test_the_shell_scripts_parse(script):
    done = subprocess.run(["bash", "-n", str(REPO / "scripts" / script)], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()


def test_bench_replay_prints_the_speed_table(cli):
    code, out, err = cli(
        "bench", "--replay", "--device", "cpu", "--model", "random-tiny",
        "--contexts", "64,96", "--leakers", "1,2", "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["title"].startswith("replay speed: random-tiny")
    assert [(r["context"], r["leakers"], r["verdict"]) for r in data["rows"]] == [
        (64, 1, "confirmed"),
        (96, 2, "confirmed"),
    ]
    assert all(r["ratio"] > 0 for r in data["rows"])
    assert "96 tokens: plain prefill" in err


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--contexts", "64,x"], "--contexts '64,x': give positive whole numbers"),
        (["--contexts", "64", "--leakers", "65"], "--leakers 65 is more than the 64-token"),
    ],
)
def test_bench_replay_usage_errors_exit_2(cli, flags, message):
    code, _, err = cli("bench", "--replay", "--device", "cpu", "--model", "random-tiny", *flags)
    assert code == 2 and message in err


@pytest.mark.slow
def test_the_gpu_check_dry_runs_on_a_cpu(tmp_path):
    """The whole check script, on the CPU at a tiny size (about a minute and a half)."""
    import os
    import sys

    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "DEVICE": "cpu",
        "MODEL": "random-tiny",
        "CONTEXTS": "128,512",
        "LEAKERS": "1,2",
        "KEEP": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "replay_gpu_check.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = done.stdout.split("== summary")[1]
    assert summary.count("cpu: 7 of 7 confirmed") == 2
    assert "cpu and cpu verdicts and output hashes identical" in summary
    rows = [line.split() for line in summary.splitlines() if line[:10].strip().isdigit()]
    assert [(row[0], row[-1]) for row in rows] == [("128", "confirmed"), ("512", "confirmed")]
    assert summary.rstrip().endswith("check passed")


@pytest.mark.slow
def test_the_fetched_wheels_are_all_the_cli_needs_beside_the_gpu_image(tmp_path):
    """fetch_wheels.sh --dry-run: a fresh environment with only the GPU image's packages and the
    fetched wheels runs ingest, analyze, replay and report (about two minutes; needs the index)."""
    import os
    import sys

    env = {**os.environ, "PYTHON": sys.executable, "SCRATCH": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "fetch_wheels.sh"), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "replay verdicts: [('confirmed', 7)]" in done.stdout
    assert "dry run passed" in done.stdout
    venv = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    assert not (venv / "polars").exists() and not (venv / "cryptography").exists()


@pytest.mark.parametrize(
    "error,falls_back",
    [
        (RuntimeError("CUDA error: out of memory (cuBLAS workspace)"), True),
        (RuntimeError("expected all tensors to be on the same device"), False),
    ],
)
def test_plain_prefill_falls_back_only_when_memory_runs_out(
    tiny_bf16, monkeypatch, error, falls_back
):
    real = type(tiny_bf16).forward

    def forward(self, *args, **kwargs):
        if self.config._attn_implementation == "sdpa":
            raise error
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(tiny_bf16), "forward", forward)
    if falls_back:
        rate, how = speed.plain_prefill(tiny_bf16, 64, 1024)
        assert rate and how == attention.FAST
    else:
        with pytest.raises(RuntimeError, match="same device"):
            speed.plain_prefill(tiny_bf16, 64, 1024)
    assert tiny_bf16.config._attn_implementation == attention.FAST
