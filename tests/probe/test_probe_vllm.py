"""kvforensics probe against a real `vllm serve` (vLLM's CPU build, the echo test model, a small
KV pool, 127.0.0.1 only), one server per configuration, reused by the tests of its class:

- healthy: the echo model copies its own prompt and no other; the probe passes with no finding;
- the stub fault (KVFORENSICS_FAULT_STUB, injected through the tap's vLLM plugin entry point):
  the probe names the stubs and, for each, a probe whose pages it read, by marker ids;
- a pool smaller than the advertised context (KVFORENSICS_FAULT_SMALL_POOL: vLLM's start-up
  check skipped): the live audit flags it.

The oracle for the stub is the fault itself: which requests ran as stubs is known, and a
foreign run in any other response, or in a response of a stub from a probe sent after it, would
be wrong."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.engines import engines_python
from support.paths import REPO
from support.vllm_serve import plugin_visible

from forensics.probe.check import longest_run
from forensics.replay.echomodel import save_echo_model

CONTEXT, BLOCK = 1024, 32
# Every third probe from the eighth on runs as a stub: a stub's response on the echo model
# carries a run of another probe's prompt in about two of three stubs (the others repeat one
# token: their first token's attention found nothing to copy), so one in six leaves the test
# a chance of about one in a thousand to see none.
STUBS = ("n007", "n010", "n013", "n016", "n019", "n022")


def _plugin_ready(python: Path) -> None:
    if not plugin_visible(python):  # an environment built from an older checkout
        pip = [str(python.parent / "pip"), "install", "-q", "--no-deps", "-e", str(REPO)]
        subprocess.run(pip, capture_output=True, timeout=600)


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("safetensors", reason="the echo model is written with the replay extra")
    return save_echo_model(tmp_path_factory.mktemp("echo") / "echo")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(model: Path, blocks: int, log: Path, env: dict[str, str]) -> Iterator[str]:
    python = engines_python()
    _plugin_ready(python)
    port = _free_port()
    cmd = [
        str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", "echo", "--host", "127.0.0.1", "--port", str(port),
        "--skip-tokenizer-init", "--dtype", "float32", "--block-size", str(BLOCK),
        "--num-gpu-blocks-override", str(blocks), "--max-model-len", str(CONTEXT),
        "--enforce-eager", "--max-num-seqs", "8", "--enable-prompt-tokens-details",
        "--seed", "0",
    ]  # fmt: skip
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KVFORENSICS_")}
    full = {**clean, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(REPO), **env}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=full, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "vllm serve did not start in 600 s"
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def _complete(url: str, prompt: list[int], rid: str, n: int = 16) -> list[int]:
    body = {"model": "echo", "prompt": prompt, "max_tokens": n, "temperature": 0}
    body["return_token_ids"] = True
    req = urllib.request.Request(
        f"{url}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "X-Request-Id": rid},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return list(json.loads(r.read())["choices"][0]["token_ids"])


def _probe(cli: Any, url: str, out: Path, *extra: Any) -> tuple[int, dict[str, Any], str]:
    code, _, err = cli("probe", url, "--out", out, *extra)
    return code, json.loads((out / "result.json").read_text()), err


def _times(out: Path, result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Probe request id -> (received_at, completed_at) as requests.csv logs them (UTC ISO
    times of one width, so they compare as strings)."""
    with (out / "requests.csv").open(newline="") as f:
        logged = {r["request_id"]: (r["received_at"], r["completed_at"]) for r in csv.DictReader(f)}
    return {p["request_id"]: logged[p["engine_request_id"]] for p in result["probes"]}


class TestHealthy:
    @pytest.fixture(scope="class")
    @classmethod
    def url(cls, echo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        yield from _serve(echo, 40, tmp_path_factory.mktemp("healthy") / "vllm.log", {})

    def test_the_echo_model_copies_its_own_prompt_and_no_other(self, url: str) -> None:
        rng = random.Random(11)
        prompts = [[rng.randrange(3, 512) for _ in range(n)] for n in (64, 200, 500, 900)]
        outputs = [_complete(url, p, f"echo-{k}") for k, p in enumerate(prompts)]
        for k, out in enumerate(outputs):
            assert longest_run(out, prompts[k]) >= 8, (k, out)
            others = [longest_run(out, p) for j, p in enumerate(prompts) if j != k]
            assert max(others) < 8, (k, others)

    def test_a_healthy_engine_passes_with_no_finding(self, cli: Any, url: str, tmp_path) -> None:
        code, result, err = _probe(cli, url, tmp_path / "out")
        assert code == 0, err
        assert result["findings"] == [] and result["verdict"] == "clean"
        assert all(p["http_status"] == 200 for p in result["probes"])
        assert result["pool_audit"]["fits"] is True
        assert result["pool_audit"]["pool_tokens"] == 40 * BLOCK
        assert result["endpoint"]["context_len"] == CONTEXT


class TestStub:
    @pytest.fixture(scope="class")
    @classmethod
    def url(cls, echo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        env = {"KVFORENSICS_FAULT_STUB": ",".join(f"-{s}" for s in STUBS)}
        yield from _serve(echo, 40, tmp_path_factory.mktemp("stub") / "vllm.log", env)

    def test_the_probe_names_the_stubs_and_whose_pages_they_read(
        self, cli: Any, url: str, tmp_path: Path
    ) -> None:
        code, result, err = _probe(cli, url, tmp_path / "out")
        assert code == 1, err
        stubs = {p["request_id"] for p in result["probes"] if p["request_id"][-4:] in STUBS}
        times = _times(tmp_path / "out", result)
        foreign = [f for f in result["findings"] if f["kind"] == "foreign-marker"]
        assert foreign, result["findings"]
        for f in foreign:
            assert f["receiver"] in stubs  # only a stub reads another probe's pages
            # the source was sent before the stub finished: its pages could hold its prompt
            # (probes run concurrently, so plan order says nothing about engine order)
            assert times[f["source"]][0] < times[f["receiver"]][1]
            assert f["longest_run"] >= 8 and f["markers"]
        cached = {f["receiver"] for f in result["findings"] if f["kind"] == "cache-implausible"}
        assert cached == stubs  # the engine counts a stub's skipped prompt as cached
        assert result["pairs"] == sorted(
            ({"receiver": f["receiver"], "source": f["source"]} for f in foreign),
            key=lambda p: (p["receiver"], p["source"]),
        )
        assert all(f["kind"] != "pool-shortfall" for f in result["findings"])


class TestSmallPool:
    @pytest.fixture(scope="class")
    @classmethod
    def url(cls, echo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        env = {"KVFORENSICS_FAULT_SMALL_POOL": "1"}
        yield from _serve(echo, 16, tmp_path_factory.mktemp("small") / "vllm.log", env)

    def test_the_live_audit_flags_a_pool_smaller_than_the_context(
        self, cli: Any, url: str, tmp_path: Path
    ) -> None:
        # the last probe crosses the pool: vLLM never schedules it, so it waits out its own
        # limit (a quarter of --timeout, at least 30 s) and is recorded as timed out
        code, result, err = _probe(
            cli, url, tmp_path / "out", "--max-requests", 6, "--timeout", 120
        )
        assert code == 1, err
        audit = result["pool_audit"]
        assert audit["pool_tokens"] == 16 * BLOCK and audit["context_len"] == CONTEXT
        assert audit["fits"] is False and audit["ratio"] == 0.5
        shortfall = [f for f in result["findings"] if f["kind"] == "pool-shortfall"]
        assert [f["detail"] for f in shortfall] == [
            "KV pool holds 512 tokens, fewer than the context length 1,024"
        ]
        probes = result["probes"]
        answered = [p["kind"] for p in probes if p["error"] is None]
        # the crossing probe is never answered; the others fit and are served, as many within
        # their own limits as a shared CPU allows (all five on a quiet machine)
        assert probes[-1]["kind"] == "cross" and probes[-1]["error"] is not None
        assert "cross" not in answered and answered.count("long") >= 2, answered
