"""Logs written from the engines' format strings (docs/engines.md) with random values, ranks,
variants and noise, read back: the parser must recover exactly what the writer put in."""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.logs.read import read_logs
from forensics.logs.summary import node_json

NOISE = [
    "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=33.41 GB",
    "Memory pool end. avail mem=12.12 GB",
    "Capture cuda graph begin. This can take up to several minutes.",
    'INFO:     10.0.3.17:51522 - "POST /generate HTTP/1.1" 200 OK',
    "The server is fired up and ready to roll!",
    "Using default HuggingFace chat template with detected content format: string",
    "KV cache transfer backend: mooncake",
    "max_total tokens are fine",
]


@dataclass
class Written:
    lines: list[str] = field(default_factory=list)
    parsed: int = 0
    ignored: int = 0

    def add(self, line: str, recognised: bool) -> None:
        self.lines.append(line)
        self.parsed += recognised
        self.ignored += not recognised


def _prefix(day: int, second: int, ranks: str) -> str:
    return f"[2026-08-{day:02d} 10:{second // 60 % 60:02d}:{second % 60:02d}{ranks}] "


@st.composite
def sglang_logs(draw: st.DrawFn) -> tuple[Written, dict]:
    pool = draw(st.integers(5_000, 5_000_000))
    ctx = draw(st.integers(1, 5_000_000))
    tp = draw(st.integers(1, 4))
    dp = draw(st.sampled_from([1, 2]))
    shrink = draw(st.integers(0, 4096)) if dp == 2 else 0
    page = draw(st.sampled_from([1, 16, 64]))
    mla = draw(st.booleans())
    dtype = draw(st.booleans())
    old_max = draw(st.booleans())
    noise = draw(st.lists(st.sampled_from(NOISE), max_size=12))
    rejects = draw(st.lists(st.tuples(st.integers(1, 10**7), st.integers(1, 10**7)), max_size=4))
    out = Written()
    sec = 0
    args = (
        f"server_args={{'model_path': 'm/x', 'context_length': {ctx}, 'page_size': {page}, "
        f"'tp_size': {tp * dp}, 'disaggregation_mode': 'prefill'}}"
    )
    out.add(_prefix(27, sec, "") + args, True)
    pools = {}
    for d in range(dp):
        pools[d] = pool - shrink * d
        for t in range(tp):
            ranks = (f" DP{d}" if dp > 1 else "") + (f" TP{d * tp + t}" if tp * dp > 1 else "")
            size = "KV size: 7.00 GB" if mla else "K size: 3.50 GB, V size: 3.50 GB"
            kind = "dtype: torch.bfloat16, " if dtype else ""
            out.add(
                _prefix(27, sec := sec + 1, ranks)
                + f"KV Cache is allocated. {kind}#tokens: {pools[d]}, {size}",
                True,
            )
            if noise:
                out.add(_prefix(27, sec, ranks) + noise.pop(), False)
        first = (f" DP{d}" if dp > 1 else "") + (f" TP{d * tp}" if tp * dp > 1 else "")
        tail = "" if old_max else ", available_gpu_mem=12.10 GB"
        chunk = "" if old_max else "chunked_prefill_size=8192, "
        out.add(
            _prefix(27, sec := sec + 1, first)
            + f"max_total_num_tokens={pools[d]}, {chunk}max_prefill_tokens=16384, "
            f"max_running_requests=64, context_len={ctx}{tail}",
            True,
        )
    for line in noise:
        out.add(_prefix(27, sec := sec + 1, "") + line, False)
    for i, (n, limit) in enumerate(rejects):
        out.add(
            _prefix(28, sec := sec + 1, " TP0" if tp * dp > 1 else "")
            + f"Request rid{i:04d} exceeds the maximum number of tokens: {n} > {limit}",
            True,
        )
    expected = {
        "pool": min(pools.values()),
        "ctx": ctx,
        "page": page,
        "evidence": [(f"rid{i:04d}", n, limit) for i, (n, limit) in enumerate(rejects)],
    }
    return out, expected


def _thousands(n: int, sep: bool) -> str:
    return f"{n:,}" if sep else str(n)


@st.composite
def vllm_logs(draw: st.DrawFn) -> tuple[Written, dict]:
    form = draw(st.sampled_from(["one-line", "two-line", "v0"]))
    ctx = draw(st.integers(16, 2_000_000))
    block = draw(st.sampled_from([None, 16, 32]))
    blocks = draw(st.integers(1, 200_000))
    pool = blocks * (block or 16) if form == "v0" else draw(st.integers(1, 9_000_000))
    sep = form != "v0" and draw(st.booleans())
    proc = draw(st.sampled_from(["", "(EngineCore_DP0 pid=77) ", "(APIServer pid=3) "]))
    noise = draw(st.lists(st.sampled_from(NOISE), max_size=6))
    out = Written()
    head = f"{proc}INFO 08-27 09:40:01 [core.py:140] "
    config = f", block_size={block}" if block else ""
    out.add(
        head + f"Initializing a V1 LLM engine (v0.33.0) with config: model='m/y', "
        f"dtype=torch.bfloat16, max_seq_len={ctx}{config}, seed=0",
        True,
    )
    for line in noise:
        out.add(head + line, False)
    conc = f"Maximum concurrency for {_thousands(ctx, sep)} tokens per request: {pool / ctx:.2f}x"
    if form == "one-line":
        out.add(head + f"GPU KV cache size: {_thousands(pool, sep)} tokens, {conc}", True)
    elif form == "two-line":
        out.add(head + f"GPU KV cache size: {_thousands(pool, sep)} tokens", True)
        out.add(head + conc, True)
    else:
        out.add(head + f"# GPU blocks: {blocks}, # CPU blocks: 512", True)
    return out, {"pool": pool, "ctx": ctx, "page": block or 16, "evidence": []}


def _write(tmp: Path, name: str, written: Written, packed: bool, crlf: bool) -> Path:
    text = ("\r\n" if crlf else "\n").join(written.lines) + "\n"
    path = tmp / (name + (".log.gz" if packed else ".log"))
    data = text.encode()
    path.write_bytes(gzip.compress(data, mtime=0) if packed else data)
    return path


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=st.one_of(sglang_logs(), vllm_logs()), packed=st.booleans(), crlf=st.booleans())
def test_generated_logs_read_back(tmp_path_factory, case, packed, crlf):
    written, expected = case
    tmp = tmp_path_factory.mktemp("gen")
    path = _write(tmp, "node-x", written, packed, crlf)
    summary = read_logs([(path, path.name, path.name)])
    (node,) = [node_json(n) for n in summary.nodes]
    assert node["node"] == "node-x"
    assert (node["pool_slots"], node["context_len"], node["page_size"]) == (
        expected["pool"],
        expected["ctx"],
        expected["page"],
    )
    assert node["fits"] is (expected["pool"] >= expected["ctx"])
    (f,) = summary.files
    assert (f.lines, f.parsed, f.ignored, f.truncated) == (
        len(written.lines),
        written.parsed,
        written.ignored,
        0,
    )
    got = [(e.request_id, e.value, e.max_value) for e in summary.evidence]
    assert got == expected["evidence"]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=sglang_logs(), data=st.data())
def test_a_cut_line_never_gives_a_wrong_value(tmp_path_factory, case, data):
    """Cut one line anywhere except inside a number (a number cut at the very end of a line
    cannot be told from a whole one): every value read is still the true one, or absent."""
    written, expected = case
    index = data.draw(st.integers(0, len(written.lines) - 1))
    line = written.lines[index]
    cuts = [i for i in range(1, len(line)) if not (line[i - 1].isdigit() and line[i].isdigit())]
    cut = data.draw(st.sampled_from(cuts))
    written.lines[index] = line[:cut]
    path = _write(tmp_path_factory.mktemp("cut"), "node-y", written, False, False)
    summary = read_logs([(path, path.name, path.name)])
    (node,) = [node_json(n) for n in summary.nodes]
    assert node["pool_slots"] in (expected["pool"], None)
    assert node["context_len"] in (expected["ctx"], None)
    assert node["page_size"] in (expected["page"], None)
    (f,) = summary.files
    assert f.lines == len(written.lines) and f.truncated <= 1
    assert f.parsed + f.truncated + f.ignored == f.lines
    written_events = {rid: (n, limit) for rid, n, limit in expected["evidence"]}
    for ev in summary.evidence:  # a cut rejection line keeps only the values it still holds
        n, limit = written_events[ev.request_id]
        assert ev.value in (n, None) and ev.max_value in (limit, None)
