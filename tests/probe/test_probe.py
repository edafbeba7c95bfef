"""kvforensics probe against a tiny OpenAI-compatible server in this process: the plan, the
marker check, the result folder and the exit codes (0 clean, 1 findings, 2 could not run).

The fake server answers /v1/models, /metrics (vLLM's cache_config_info) and streamed
/v1/completions. It echoes each prompt's first tokens, and in `leak` mode answers the requests
whose X-Request-Id contains a chosen text with the start of the prompt it served last (another
probe's), reporting all but one prompt token as cached, as a 1-token stub over another
request's pages would."""

from __future__ import annotations

import csv
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from forensics.case.contract import REQUESTS
from forensics.probe import check
from forensics.probe.client import Outcome
from forensics.probe.plan import (
    MARKER_LEN,
    Api,
    Endpoint,
    make_plan,
    marker_word,
    text_words,
    token_prompt,
)


class Fake:
    def __init__(self) -> None:
        self.context = 1024
        self.blocks, self.block = 40, 32
        self.leak_ids: tuple[str, ...] = ()
        self.sglang: dict[str, int] | None = None  # /get_server_info instead of /metrics
        self.last_prompt: list[Any] | None = None
        self.posts: list[dict[str, Any]] = []
        self.lock = threading.Lock()


def _handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, body: bytes, kind: str = "application/json") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                models = {"data": [{"id": "fake", "max_model_len": fake.context}]}
                self._send(json.dumps(models).encode())
            elif self.path == "/get_server_info" and fake.sglang is not None:
                self._send(json.dumps(fake.sglang).encode())
            elif self.path == "/metrics" and fake.sglang is None:
                line = (
                    f'vllm:cache_config_info{{block_size="{fake.block}",'
                    f'num_gpu_blocks="{fake.blocks}",engine="0"}} 1.0\n'
                )
                self._send(line.encode(), "text/plain")
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            rid = self.headers.get("X-Request-Id", "")
            chat = "messages" in body
            prompt = body["messages"][0]["content"].split() if chat else body["prompt"]
            with fake.lock:
                fake.posts.append({"headers": dict(self.headers), "body": body})
                leak = any(m in rid for m in fake.leak_ids) and fake.last_prompt is not None
                source = fake.last_prompt if leak else prompt
                if not leak:
                    fake.last_prompt = prompt
            assert source is not None
            out = source[: body["max_tokens"]]
            cached = len(prompt) - 1 if leak else 0
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if chat:
                pieces = [{"index": 0, "delta": {"content": f"{w} "}} for w in out]
            else:
                pieces = [{"index": 0, "text": "", "token_ids": [t]} for t in out]
            chunks: list[dict[str, Any]] = [{"id": f"cmpl-{rid}", "choices": [c]} for c in pieces]
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(out),
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            chunks.append({"id": f"cmpl-{rid}", "choices": [], "usage": usage})
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@pytest.fixture
def fake() -> Iterator[tuple[Fake, str]]:
    state = Fake()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _endpoint(pool: int | None = 1280, context: int = 1024) -> Endpoint:
    return Endpoint("http://x", "m", context, pool, 32, "vllm", "test")


def _ngrams(seq: list[int]) -> set[tuple[int, ...]]:
    return {tuple(seq[i : i + MARKER_LEN]) for i in range(len(seq) - MARKER_LEN + 1)}


def test_the_plan_fills_the_pool_and_no_two_prompts_share_a_run() -> None:
    plan = make_plan(_endpoint(), "0badcafe", Api.TOKENS, 24, 16, None)
    assert len(plan.probes) == 24
    assert plan.longest == 1024 - 16
    assert all(p.length <= 1008 for p in plan.probes)
    shorts = [p.index for p in plan.probes if p.kind == "short"]
    assert shorts == list(range(2, 24, 3))
    # ceil(1280 / (0.7 * 1008)) + 1 = 3 at once: more than the pool holds
    assert plan.concurrency == 3 and plan.tokens_in_flight > 1280
    prompts = [token_prompt(plan.tag, p) for p in plan.probes]
    assert all(3 <= t < 512 for prompt in prompts for t in prompt)
    grams = [_ngrams(p) for p in prompts]
    for i in range(len(grams)):
        for j in range(i + 1, len(grams)):
            assert not grams[i] & grams[j], (i, j)
    unknown = make_plan(_endpoint(pool=None), "0badcafe", Api.TOKENS, 5, 16, None)
    assert unknown.concurrency == 4
    assert len({p.request_id for p in plan.probes}) == 24


def test_a_response_with_another_probes_run_names_the_pair_and_markers() -> None:
    plan = make_plan(_endpoint(), "0badcafe", Api.TOKENS, 6, 16, None)
    prompts = {p.index: token_prompt(plan.tag, p) for p in plan.probes}
    own = Outcome(0, status=200, token_ids=prompts[0][40:56])  # its own prompt: not foreign
    leaked = Outcome(1, status=200, token_ids=[7, 7, *prompts[3][16:26], 9])
    short = Outcome(4, status=200, token_ids=prompts[5][0 : MARKER_LEN - 1])  # 7: too short
    found = check.foreign_markers(plan, prompts, [own, leaked, short])
    assert [(f.receiver, f.source) for f in found] == [
        (plan.probes[1].request_id, plan.probes[3].request_id)
    ]
    assert found[0].markers == ("p003.m002",) and found[0].longest_run == 10


def test_text_prompts_carry_marker_words_found_exactly() -> None:
    plan = make_plan(_endpoint(), "0badcafe", Api.TEXT, 3, 16, None)
    words = {p.index: text_words(plan.tag, p) for p in plan.probes}
    assert marker_word("0badcafe", 2, 1) in words[2]
    text = f"nothing here {marker_word('0badcafe', 2, 1)} and more"
    found = check.foreign_markers(plan, words, [Outcome(0, status=200, text=text)])
    assert [(f.source, f.markers) for f in found] == [(plan.probes[2].request_id, ("p002.m001",))]


def _files_match_manifest(out: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {o["path"]: o["sha256"] for o in manifest["outputs"]}
    on_disk = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in out.iterdir()
        if p.name not in ("manifest.json", "manifest.json.sha256")
    }
    assert listed == on_disk
    digest = hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()
    assert (out / "manifest.json.sha256").read_text().split()[0] == digest


def test_a_clean_endpoint_exits_0_with_a_gateway_log(cli, fake, tmp_path: Path) -> None:
    state, url = fake
    out = tmp_path / "out"
    code, _, err = cli("probe", url, "--out", out, "--max-requests", 9, "--max-tokens", 12)
    assert code == 0, err
    _files_match_manifest(out)
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "clean" and result["findings"] == []
    assert len(state.posts) == 9
    with open(out / "requests.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert set(rows[0]) <= set(REQUESTS.names) and set(REQUESTS.required) <= set(rows[0])
    sent = {p["headers"]["X-Request-Id"] for p in state.posts}
    assert {r["request_id"] for r in rows} == {f"cmpl-{s}-0" for s in sent}
    assert len({r["account_id"] for r in rows}) == 9
    assert all(
        int(r["prompt_tokens"]) == len(p["body"]["prompt"])
        for r, p in zip(
            sorted(rows, key=lambda r: r["request_id"]),
            sorted(state.posts, key=lambda p: p["headers"]["X-Request-Id"]),
            strict=True,
        )
    )


def test_a_leak_exits_1_naming_the_pair_without_content(cli, fake, tmp_path: Path) -> None:
    state, url = fake
    state.leak_ids = ("-n004",)
    out = tmp_path / "out"
    code, _, err = cli(
        "probe", url, "--out", out, "--max-requests", 6, "--concurrency", 1, "--max-tokens", 12
    )
    assert code == 1, err
    result = json.loads((out / "result.json").read_text())
    kinds = {(f["kind"], f["receiver"].rsplit("-", 1)[1]) for f in result["findings"]}
    assert kinds == {("foreign-marker", "n004"), ("cache-implausible", "n004")}
    assert [p["source"].rsplit("-", 1)[1] for p in result["pairs"]] == ["n003"]
    leaked = state.posts[3]["body"]["prompt"]
    for name in ("result.json", "probe.html"):
        text = (out / name).read_text()
        assert ", ".join(map(str, leaked[:4])) not in text and "token_ids" not in text
    assert "n004" in err and "foreign-marker" in err


def test_a_pool_smaller_than_the_context_is_a_finding(cli, fake, tmp_path: Path) -> None:
    state, url = fake
    state.blocks = 20  # 640 tokens < 1024
    code, _, err = cli("probe", url, "--out", tmp_path / "o", "--max-requests", 3)
    assert code == 1
    result = json.loads((tmp_path / "o" / "result.json").read_text())
    assert [f["kind"] for f in result["findings"]] == ["pool-shortfall"]
    assert result["pool_audit"]["fits"] is False and result["pool_audit"]["ratio"] == 0.625
    assert "640" in err and "1,024" in err


def test_a_closed_port_exits_2_naming_the_url(cli, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = cli("probe", f"http://127.0.0.1:{port}/v1", "--out", tmp_path / "o")
    assert code == 2
    line = " ".join(err.split())
    assert f"cannot reach http://127.0.0.1:{port}" in line and "fix: start the server" in line
    assert not (tmp_path / "o").exists()


def test_a_dry_run_on_a_closed_port_still_explains_its_plan(cli, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    code, _, err = cli("probe", url, "--out", tmp_path / "o", "--dry-run", "--context-len", 2048)
    assert code == 0 and not (tmp_path / "o").exists()
    text = " ".join(err.split())
    assert "context length 2048, KV pool not published" in text and "24 requests" in text
    assert f"could not ask the endpoint what it is (cannot reach {url}" in text
    assert "a context of 2048 tokens (--context-len)" in text and "exits 2" in text


def test_dry_run_prints_the_plan_and_sends_nothing(cli, fake, tmp_path: Path) -> None:
    state, url = fake
    code, _, err = cli("probe", url, "--out", tmp_path / "o", "--dry-run", "--max-requests", 7)
    assert code == 0
    assert state.posts == [] and not (tmp_path / "o").exists()
    text = " ".join(err.split())
    assert "7 requests (tokens API): 5 long" in text and "concurrency 3" in text
    assert "context length 1024, KV pool 1,280 tokens" in text


def test_the_api_key_is_sent_and_never_written(cli, fake, tmp_path: Path, monkeypatch) -> None:
    state, url = fake
    monkeypatch.setenv("PROBE_TEST_KEY", "sk-secret-123")
    out = tmp_path / "o"
    code, stdout, err = cli(
        "probe", url, "--out", out, "--max-requests", 2, "--api-key-env", "PROBE_TEST_KEY"
    )
    assert code == 0, err
    assert {p["headers"]["Authorization"] for p in state.posts} == {"Bearer sk-secret-123"}
    assert all("sk-secret" not in p.read_text() for p in out.iterdir())
    assert "sk-secret" not in stdout + err
    monkeypatch.delenv("PROBE_TEST_KEY")
    code, _, err = cli("probe", url, "--out", out, "--api-key-env", "PROBE_TEST_KEY")
    assert code == 2 and "PROBE_TEST_KEY is not set" in " ".join(err.split())


def test_a_first_token_far_too_fast_for_its_prompt_is_a_stub_sign() -> None:
    plan = make_plan(_endpoint(), "0badcafe", Api.TOKENS, 5, 16, None)

    def timed(index: int, ttft: float) -> Outcome:
        return Outcome(
            index, status=200, received_at=100.0, first_token_at=100.0 + ttft, prompt_tokens=1000
        )

    slow = [timed(0, 1.0), timed(1, 1.2), timed(3, 0.9)]
    found = check.stub_signs(plan, [*slow, timed(4, 0.05)], 10.0, 32)
    assert [(f.kind, f.receiver) for f in found] == [
        ("fast-first-token", plan.probes[4].request_id)
    ]
    assert check.stub_signs(plan, [*slow, timed(4, 0.2)], 10.0, 32) == []  # 5x: not enough
    # below 0.1 s of expected prefill, timing noise decides: nothing is judged
    tiny = [timed(0, 1e-3), timed(1, 1.2e-3), timed(3, 0.9e-3), timed(4, 1e-5)]
    assert check.stub_signs(plan, tiny, 10.0, 32) == []


def test_where_the_pool_is_short_long_probes_fit_it_and_the_last_crosses_it() -> None:
    plan = make_plan(_endpoint(pool=512), "0badcafe", Api.TOKENS, 7, 16, None)
    kinds = [p.kind for p in plan.probes]
    assert kinds == ["long", "long", "short", "long", "long", "short", "cross"]
    assert plan.probes[-1].length == 1024 - 16
    assert max(p.length for p in plan.probes[:-1]) <= 512 - 16 - 32


def test_chat_probes_find_another_probes_marker_words(cli, fake, tmp_path: Path) -> None:
    state, url = fake
    state.leak_ids = ("-n003",)
    out = tmp_path / "out"
    code, _, err = cli(
        "probe", url, "--out", out, "--api", "chat", "--max-requests", 4, "--concurrency", 1
    )
    assert code == 1, err
    assert all("messages" in p["body"] for p in state.posts)
    result = json.loads((out / "result.json").read_text())
    foreign = [f for f in result["findings"] if f["kind"] == "foreign-marker"]
    assert [(f["receiver"][-4:], f["source"][-4:]) for f in foreign] == [("n003", "n002")]
    # the first 16 words of probe 2's prompt: its first two marker words and their filler
    assert foreign[0]["markers"] == ["p002.m000", "p002.m001"]
    assert foreign[0]["longest_run"] == 16


def test_sglang_publishes_its_pool_in_get_server_info(cli, fake, tmp_path: Path) -> None:
    state, url = fake
    state.sglang = {"max_total_num_tokens": 700, "page_size": 1, "context_length": 1024}
    code, _, err = cli("probe", url, "--out", tmp_path / "o", "--dry-run")
    assert code == 0, err
    text = " ".join(err.split())
    assert "engine sglang" in text and "KV pool 700 tokens (/get_server_info" in text
    code, _, err = cli("probe", url, "--out", tmp_path / "o", "--max-requests", 3)
    assert code == 1
    audit = json.loads((tmp_path / "o" / "result.json").read_text())["pool_audit"]
    assert (audit["pool_tokens"], audit["fits"], audit["ratio"]) == (700, False, 0.6836)
