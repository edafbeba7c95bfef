"""Node verdicts, counts and evidence from the fixture logs in tests/data/logs, against values
worked out by hand from the files (see tests/data/logs/README.md)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from support.paths import DATA

from forensics.logs.discover import discover
from forensics.logs.read import read_logs
from forensics.logs.summary import LogsSummary, node_json

LOGS = DATA / "logs"


def _read(*folders: str, parallel_bytes: int | None = None) -> LogsSummary:
    return read_logs(discover([LOGS / f for f in folders]), parallel_bytes=parallel_bytes)


def _nodes(summary: LogsSummary) -> dict[str, dict]:
    return {n.node: node_json(n) for n in summary.nodes}


def _where(j: dict, fact: str) -> str:
    """'file:line' with the file reduced to its name."""
    path, line = j["provenance"][fact].rsplit(":", 1)
    return f"{Path(path).name}:{line}"


# node: (engine, role, pool_slots, context_len, page_size, fits, pool at, context at)
EXPECTED = {
    "prefill-0": (
        "sglang",
        "prefill",
        681280,
        1048576,
        64,
        False,
        "prefill-0.log:10",
        "prefill-0.log:10",
    ),
    "decode-0": (
        "sglang",
        "decode",
        1409024,
        1048576,
        64,
        True,
        "decode-0.log.gz:4",
        "decode-0.log.gz:4",
    ),
    "chat-a": ("vllm", None, 2345216, 131072, 16, True, "chat-a.log:7", "chat-a.log:7"),
    "summarise": (
        "vllm",
        None,
        1234560,
        32768,
        16,
        True,
        "summarise-tp0.log:6",
        "summarise-tp0.log:7",
    ),
    "old-v0": ("vllm", None, 27000 * 16, 4096, 16, True, "old-v0.log:4", "old-v0.log:5"),
    "pair": ("vllm", None, 210000, 200000, 16, True, "pair.log:4", "pair.log:5"),
    "tiny-ctx": ("vllm", None, 1900 * 32, 65536, 32, False, "tiny-ctx.log:4", "tiny-ctx.log:3"),
    "sgl-old": ("sglang", None, 402519, 32768, None, True, "sgl-old.log:3", "sgl-old.log:3"),
    "sgl-030": ("sglang", None, 120000, 131072, None, False, "sgl-030.log:2", "sgl-030.log:2"),
    "mla-dp": ("sglang", "unified", 2113280, 163840, 1, True, "mla-dp.log:7", "mla-dp.log:6"),
    "interleaved": (
        "sglang",
        None,
        681280,
        1048576,
        None,
        False,
        "interleaved.log:3",
        "interleaved.log:3",
    ),
    "truncated": ("sglang", None, 681280, 1048576, 64, False, "truncated.log:4", "truncated.log:4"),
    "restart": ("sglang", "prefill", 681280, 1048576, 64, False, "restart.log:8", "restart.log:8"),
    "sgl-split": (
        "sglang",
        "unified",
        98304,
        65536,
        16,
        True,
        "sgl-split-tp0.log.1:3",
        "sgl-split-tp0.log.1:3",
    ),
    "dock-decode-2": (
        "sglang",
        "decode",
        1409024,
        1048576,
        64,
        True,
        "dock-decode-2.log:3",
        "dock-decode-2.log:3",
    ),
    "kube-prefill-1": (
        "sglang",
        "prefill",
        681280,
        1048576,
        64,
        False,
        "kube-prefill-1.log:2",
        "kube-prefill-1.log:2",
    ),
}


@pytest.fixture(scope="module", params=["one process", "worker processes"])
def everything(request) -> LogsSummary:
    """Every fixture log, parsed in this process and (as large logs are) in worker processes."""
    workers = request.param == "worker processes"
    return _read("incident", "vllm", "variants", parallel_bytes=0 if workers else None)


def test_every_node_as_worked_by_hand(everything):
    nodes = _nodes(everything)
    assert sorted(nodes) == sorted(EXPECTED)
    for name, (engine, role, pool, ctx, page, fits, pool_at, ctx_at) in EXPECTED.items():
        j = nodes[name]
        got = (
            j["engine"],
            j["role"],
            j["pool_slots"],
            j["context_len"],
            j["page_size"],
            j["fits"],
            _where(j, "pool_slots"),
            _where(j, "context_len"),
        )
        assert got == (engine, role, pool, ctx, page, fits, pool_at, ctx_at), name
        assert j["ratio"] == pytest.approx(pool / ctx, abs=5.1e-5)


def test_incident_prefill_does_not_fit(everything):
    j = _nodes(everything)["prefill-0"]
    assert j["fits"] is False and j["ratio"] == pytest.approx(0.6497, abs=1e-4)
    assert j["model"] == "acme/longctx-70b" and j["started_at"] == "2026-08-27T09:58:01"
    assert _where(j, "page_size") == "prefill-0.log:1"


def test_vllm_details(everything):
    nodes = _nodes(everything)
    assert nodes["chat-a"]["engine_version"] == "0.33.0"
    assert nodes["chat-a"]["model"] == "acme/chat-8b"
    assert nodes["chat-a"]["provenance"]["page_size"] == "default"
    assert nodes["old-v0"]["engine_version"] == "0.6.3.post1"
    assert any("block size 16 (default)" in n for n in nodes["old-v0"]["notes"])
    assert _where(nodes["tiny-ctx"], "page_size") == "tiny-ctx.log:3"


def test_dp_ranks_take_the_smallest_pool(everything):
    j = _nodes(everything)["mla-dp"]
    assert j["notes"] == [
        "pool_slots differs between DP ranks (2113280, 2113536); the smallest is used"
    ]


def test_restart_gives_two_starts(everything):
    j = _nodes(everything)["restart"]
    runs = [(r["started_at"], r["pool_slots"], r["fits"]) for r in j["runs"]]
    assert runs == [("2026-08-20T07:00:00", 1114112, True), ("2026-08-26T23:12:00", 681280, False)]
    assert j["started_at"] == "2026-08-26T23:12:00"  # the start that does not fit decides


def test_old_time_only_prefix_has_no_start_time(everything):
    assert _nodes(everything)["sgl-030"]["started_at"] is None


# file name: (lines, parsed, truncated, ignored, spliced)
COUNTS = {
    "prefill-0.log": (21, 11, 0, 10, 0),
    "decode-0.log.gz": (16, 9, 0, 7, 0),
    "chat-a.log": (10, 4, 0, 6, 0),
    "summarise-tp0.log": (8, 4, 0, 4, 0),
    "old-v0.log": (6, 4, 0, 2, 0),
    "tiny-ctx.log": (5, 3, 0, 2, 0),
    "pair.log": (6, 4, 1, 1, 1),
    "sgl-old.log": (5, 5, 0, 0, 0),
    "sgl-030.log": (3, 3, 0, 0, 0),
    "mla-dp.log": (8, 8, 0, 0, 0),
    "interleaved.log": (4, 2, 1, 1, 2),
    "truncated.log": (9, 0, 8, 1, 0),
    "restart.log": (9, 7, 0, 2, 0),
    "sgl-split-tp0.log.1": (3, 3, 0, 0, 0),
    "sgl-split-tp0.log": (2, 2, 0, 0, 0),
    "sgl-split-tp1.log": (2, 2, 0, 0, 0),
    "dock-decode-2.log": (5, 4, 0, 1, 0),
    "kube-prefill-1.log": (4, 3, 0, 1, 0),
}


def test_line_counts_per_file(everything):
    got = {
        Path(f.file).name: (f.lines, f.parsed, f.truncated, f.ignored, f.spliced)
        for f in everything.files
    }
    assert got == COUNTS
    for f in everything.files:
        assert f.lines == f.parsed + f.truncated + f.ignored
    assert everything.lines_read == sum(c[0] for c in COUNTS.values())
    assert everything.lines_ignored == sum(c[3] for c in COUNTS.values())
    assert everything.lines_truncated == sum(c[2] for c in COUNTS.values())


def test_parsed_kinds_incident():
    summary = _read("incident")
    assert summary.parsed_by_kind == {
        "evidence.deferred-release-timeout": 1,
        "evidence.exceeds-max-tokens": 3,
        "evidence.input-too-long": 1,
        "evidence.kv-canary-violation": 1,
        "evidence.kv-checksum-mismatch": 2,
        "sglang.batch": 3,
        "sglang.kv-allocated": 4,
        "sglang.max-total": 2,
        "sglang.pool-warning": 1,
        "sglang.server-args": 2,
    }


def test_truncated_kinds():
    summary = _read("variants")
    (trunc,) = [f for f in summary.files if f.file.endswith("truncated.log")]
    assert trunc.truncated_kinds == {
        "evidence.deferred-release-timeout": 1,
        "evidence.exceeds-max-tokens": 1,
        "evidence.kv-checksum-mismatch": 1,
        "sglang.batch": 1,
        "sglang.kv-allocated": 1,
        "sglang.max-total": 1,
        "sglang.server-args": 1,
    }


def _ev(summary: LogsSummary) -> list[tuple]:
    return [
        (e.node, e.kind, e.request_id, e.value, e.max_value, Path(e.src_file).name, e.src_line)
        for e in summary.evidence
    ]


def test_incident_evidence_rows():
    summary = _read("incident")
    assert _ev(summary) == [
        (
            "decode-0",
            "kv-checksum-mismatch",
            "4a5b6c7d8e9f40a1b2c3d4e5f6a7b8c9",
            0x1D02A9F4,
            0x5BC31A7E,
            "decode-0.log.gz",
            8,
        ),
        ("decode-0", "kv-canary-violation", None, 11873, 2004, "decode-0.log.gz", 11),
        (
            "decode-0",
            "deferred-release-timeout",
            "c3d4e5f6a7b8493a9b0c1d2e3f4a5b6c",
            30,
            None,
            "decode-0.log.gz",
            16,
        ),
        (
            "prefill-0",
            "exceeds-max-tokens",
            "9f1c2e7a4b6d4e0f8a1b2c3d4e5f6a7b",
            712455,
            681216,
            "prefill-0.log",
            16,
        ),
        (
            "prefill-0",
            "input-too-long",
            "b7e0d1c25a3f4c6e9d8f7a6b5c4d3e2f",
            1002311,
            681215,
            "prefill-0.log",
            19,
        ),
        (
            "prefill-0",
            "exceeds-max-tokens",
            "0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
            990001,
            681216,
            "prefill-0.log",
            21,
        ),
    ]
    # TP1 repeated one rejection and the checksum line (as the peer-rank form)
    assert summary.duplicate_evidence == 2
    canary = summary.evidence[1]
    assert (canary.slot_idx, canary.position) == (183424, 57)
    assert summary.evidence[0].bootstrap_room == 5812390466512894371
    assert summary.evidence[0].ts == datetime(2026, 9, 2, 11, 40, 10)


def test_variant_evidence_rows():
    summary = _read("variants")
    assert _ev(summary) == [
        ("dock-decode-2", "kv-checksum-mismatch", "77c0ffee", 0xABD, 0xABC, "dock-decode-2.log", 5),
        ("interleaved", "exceeds-max-tokens", "5e6f7a8b", 712455, 681216, "interleaved.log", 4),
        (
            "kube-prefill-1",
            "exceeds-max-tokens",
            "aa11bb22",
            712455,
            681216,
            "kube-prefill-1.log",
            4,
        ),
        ("sgl-split", "exceeds-max-tokens", "1234abcd", 70000, 65535, "sgl-split-tp0.log", 2),
        ("truncated", "exceeds-max-tokens", "77aa", None, None, "truncated.log", 6),
        ("truncated", "kv-checksum-mismatch", "88bb", None, None, "truncated.log", 7),
        ("truncated", "deferred-release-timeout", None, None, None, "truncated.log", 9),
    ]
    rooms = [e.bootstrap_room for e in summary.evidence if e.node == "truncated"]
    assert rooms == [None, 42, 99]


def test_dedupe_keeps_different_events_of_the_same_second(tmp_path):
    log = tmp_path / "p.log"
    log.write_text(
        "[2026-08-27 10:00:00 TP0] Input length (900 tokens) exceeds the maximum allowed length "
        "(800 tokens). Use a shorter input or enable --allow-auto-truncate.\n"
        "[2026-08-27 10:00:00 TP0] Input length (950 tokens) exceeds the maximum allowed length "
        "(800 tokens). Use a shorter input or enable --allow-auto-truncate.\n"
        "[2026-08-27 10:00:00 TP1] Input length (950 tokens) exceeds the maximum allowed length "
        "(800 tokens). Use a shorter input or enable --allow-auto-truncate.\n"
    )
    summary = read_logs([(log, log.name, log.name)])
    assert [(e.value, e.src_line) for e in summary.evidence] == [(900, 1), (950, 2)]
    assert summary.duplicate_evidence == 1
