"""Serve the batched load through vLLM's own OpenAI-compatible server (CPU build) with the ledger
tap on, logged as a gateway in front of it logs: the independent counterpart of
tests/support/vllm_run.py, which steps the engine in its own process and so knows when each
step ran. Here nothing of the engine's steps is known to the gateway:

- the server is `python -m vllm.entrypoints.openai.api_server` (its engine core in a process of
  its own, as deployed; stopped with Ctrl-C and --shutdown-timeout 30, so that the tap closes
  its ledger), prefix caching on, blocks of 32 tokens, a pool of 40 blocks,
  `--enable-prompt-tokens-details` so that every response's usage carries `cached_tokens`; the
  tap loads through its plugin entry point, and the stub fault (KVFORENSICS_FAULT_STUB) too;
- each request is sent at its own wall-clock time (gaps drawn between HTTP_RUN_GAP_MS, default
  "4 20" milliseconds), from a thread of its own, streamed, with `X-Request-Id`; the gateway
  logs when it sent it, when the first streamed token and the last chunk came back, the usage
  (prompt, completion and cached tokens) and the sampling settings it sent;
- the load: 24 requests of 4 accounts, each prompt its account's 128-token prefix and a suffix
  of 8 to 72 tokens, 4 to 16 output tokens (EOS ignored), sampled (temperature 0.8, top-p 0.95,
  a seed per request) unless VLLM_RUN_SAMPLING=greedy; VLLM_RUN_MAX_SEQS (default 8) and
  VLLM_RUN_MAX_BATCHED (default vLLM's) are the server's limits; in MODE `batched` request
  BATCHED_STUB_AT (default 21) runs as a 1-token stub, in `healthy-batched` none does.

    python tests/support/vllm_http_run.py MODE MODEL_DIR OUT_DIR

Runs with the project's python; the server runs with the engines environment's
(forensics.engines.client.engines_python). Writes OUT_DIR/requests.csv and accounts.csv (the
gateway's view; request ids as the engine's, `cmpl-<X-Request-Id>-0`), OUT_DIR/logs/vllm-0.log
(the server's own output), OUT_DIR/run.json (the stub, the most requests in flight, seconds) and,
through the tap, the ledger. MODEL_DIR is written by tests/support/vllm_run.py's model writer
when it holds no config.json."""

from __future__ import annotations

import csv
import datetime as dt
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from forensics.engines.client import engines_python
from forensics.probe.client import Outcome, _read_stream

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BLOCK, BLOCKS, NODE, MODEL = 32, 40, "vllm-0", "tiny-llama"


def iso(t: float | None) -> str:
    if t is None:
        return ""
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="microseconds")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_model(model: Path) -> None:
    if (model / "config.json").is_file():
        return
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import vllm_run; "
    code += f"vllm_run.write_model(__import__('pathlib').Path({str(model)!r}))"
    subprocess.run([str(engines_python()), "-c", code], check=True, timeout=600)


def start_server(model: Path, out: Path, stub: str | None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [
        str(engines_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port),
        "--skip-tokenizer-init", "--dtype", "float32", "--block-size", str(BLOCK),
        "--num-gpu-blocks-override", str(BLOCKS), "--max-model-len", "512", "--enforce-eager",
        "--max-num-seqs", os.environ.get("VLLM_RUN_MAX_SEQS", "8"), "--enable-prefix-caching",
        "--enable-prompt-tokens-details", "--seed", "0", "--shutdown-timeout", "30",
    ]  # fmt: skip
    if os.environ.get("VLLM_RUN_MAX_BATCHED"):  # a token budget: longer prompts are chunked
        cmd += ["--max-num-batched-tokens", os.environ["VLLM_RUN_MAX_BATCHED"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVFORENSICS_")}
    env.update(
        VLLM_CPU_KVCACHE_SPACE="1",
        PYTHONPATH=str(REPO),
        KVFORENSICS_TAP_DIR=str(out.resolve()),
        KVFORENSICS_TAP_NODE=NODE,
        KVFORENSICS_TAP_CONTENTS="1",
    )
    if stub:
        env["KVFORENSICS_FAULT_STUB"] = stub
    (out / "logs").mkdir(parents=True, exist_ok=True)
    with open(out / "logs" / "vllm-0.log", "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    url = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None:
            raise SystemExit((out / "logs" / "vllm-0.log").read_text()[-3000:])
        if time.monotonic() > deadline:
            raise SystemExit("vllm serve did not start in 600 s")
        try:
            conn = http.client.HTTPConnection(url, timeout=5)
            conn.request("GET", "/v1/models")
            if conn.getresponse().status == 200:
                return proc, url
        except OSError:
            time.sleep(1)


def stop_server(proc: subprocess.Popen) -> None:
    """Ctrl-C, as an operator stops it: the server shuts its engine core down and the tap
    writes what it holds."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def load(rng: random.Random, stub_at: int | None) -> list[dict[str, Any]]:
    """The 24 requests: id, account, prompt, max_tokens, send offset in seconds, sampling."""
    low, high = (float(x) for x in os.environ.get("HTTP_RUN_GAP_MS", "4 20").split())
    sampled = os.environ.get("VLLM_RUN_SAMPLING", "sampled") == "sampled"
    prefixes = [[rng.randrange(3, 512) for _ in range(4 * BLOCK)] for _ in range(4)]
    at, out = 0.0, []
    for k in range(24):
        suffix = [rng.randrange(3, 512) for _ in range(rng.randrange(8, 72))]
        out.append(
            {
                "rid": f"stub-{k}" if k == stub_at else f"req-{k}",
                "account": f"acct-{k % 4}",
                "prompt": prefixes[k % 4] + suffix,
                "max_tokens": rng.randrange(4, 16),
                "at": at,
                "temperature": 0.8 if sampled else 0.0,
                "top_p": 0.95 if sampled else 1.0,
                "seed": rng.randrange(1 << 30) if sampled else None,
            }
        )
        at += rng.uniform(low, high) / 1000
    return out


def send(url: str, req: dict[str, Any], t0: float) -> Outcome:
    body: dict[str, Any] = {
        "model": MODEL,
        "prompt": req["prompt"],
        "max_tokens": req["max_tokens"],
        "temperature": req["temperature"],
        "top_p": req["top_p"],
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }
    if req["seed"] is not None:
        body["seed"] = req["seed"]
    time.sleep(max(0.0, t0 + req["at"] - time.time()))
    out = Outcome(0, sent_tokens=len(req["prompt"]))
    conn = http.client.HTTPConnection(url, timeout=300)
    headers = {"Content-Type": "application/json", "X-Request-Id": req["rid"]}
    try:
        out.received_at = time.time()
        conn.request("POST", "/v1/completions", json.dumps(body).encode(), headers)
        response = conn.getresponse()
        out.status = response.status
        _read_stream(response, out) if response.status == 200 else response.read()
    finally:
        out.completed_at = time.time()
        conn.close()
    return out


def serve_load(url: str, reqs: list[dict[str, Any]]) -> list[Outcome]:
    outcomes: list[Outcome | None] = [None] * len(reqs)
    t0 = time.time() + 0.5

    def one(k: int) -> None:
        outcomes[k] = send(url, reqs[k], t0)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def most_in_flight(outcomes: list[Outcome]) -> int:
    edges = sorted(
        [(o.received_at or 0, 1) for o in outcomes] + [(o.completed_at or 0, -1) for o in outcomes]
    )
    now = most = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    return most


def write(out: Path, reqs: list[dict[str, Any]], outcomes: list[Outcome]) -> None:
    fields = [
        "request_id", "account_id", "model", "received_at", "first_token_at", "completed_at",
        "http_status", "prompt_tokens", "completion_tokens", "node", "cached_tokens",
        "temperature", "top_p", "top_k", "seed",
    ]  # fmt: skip
    with open(out / "requests.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for req, o in zip(reqs, outcomes, strict=True):
            writer.writerow(
                {
                    "request_id": f"{o.response_id or 'cmpl-' + req['rid']}-0",
                    "account_id": req["account"],
                    "model": MODEL,
                    "received_at": iso(o.received_at),
                    "first_token_at": iso(o.first_token_at),
                    "completed_at": iso(o.completed_at),
                    "http_status": o.status,
                    "prompt_tokens": o.prompt_tokens,
                    "completion_tokens": o.completion_tokens,
                    "node": NODE,
                    "cached_tokens": o.cached_tokens,
                    "temperature": req["temperature"],
                    "top_p": req["top_p"],
                    "top_k": 0,
                    "seed": req["seed"],
                }
            )
    accounts = sorted({r["account"] for r in reqs})
    (out / "accounts.csv").write_text("account_id,name\n" + "".join(f"{a},{a}\n" for a in accounts))


def main() -> None:
    mode, model, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if mode not in ("batched", "healthy-batched"):
        raise SystemExit(f"unknown mode {mode!r}: batched | healthy-batched")
    out.mkdir(parents=True, exist_ok=True)
    stub_at = int(os.environ.get("BATCHED_STUB_AT", "21")) if mode == "batched" else None
    reqs = load(random.Random(int(os.environ.get("VLLM_RUN_SEED", "7"))), stub_at)
    ensure_model(model)
    stub = f"stub-{stub_at}" if stub_at is not None else None
    proc, url = start_server(model, out, stub)
    try:
        t0 = time.time()
        outcomes = serve_load(url, reqs)
        seconds = time.time() - t0
    finally:
        stop_server(proc)
    bad = [(r["rid"], o.status) for r, o in zip(reqs, outcomes, strict=True) if o.status != 200]
    if bad:
        raise SystemExit(f"requests not served: {bad}")
    write(out, reqs, outcomes)
    run = {
        "stub": stub,
        "seconds": seconds,
        "most_in_flight": most_in_flight(outcomes),
        "sampling": os.environ.get("VLLM_RUN_SAMPLING", "sampled"),
    }
    (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")


if __name__ == "__main__":
    main()
