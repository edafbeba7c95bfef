"""engine_counters: the engines' own token counter lines, read from logs written in the formats
the engines' own sources print (the SGLang and vLLM functions are named at each line)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from forensics.casedb.sql import sql
from forensics.logs.load import load_logs

# sglang/srt/managers/scheduler_components/metrics_reporter.py, report_prefill_stats (0.5.23)
SGLANG = [
    "[2026-08-27 10:00:01 DP0 TP0] Prefill batch, #new-seq: 2, #new-token: 8192, "
    "#cached-token: 1024, token usage: 0.05, #running-req: 3, #queue-req: 1, "
    "#pending-token: 0, cuda graph: False, input throughput (token/s): 9120.55",
    "[2026-08-27 10:00:01 DP0 TP1] Prefill batch, #new-seq: 2, #new-token: 8192, "
    "#cached-token: 1024, token usage: 0.05, #running-req: 3, #queue-req: 1, "
    "#pending-token: 0, cuda graph: False, input throughput (token/s): 9120.55",
    "[2026-08-27 10:00:02.250 DP1 TP0] Prefill batch, #new-seq: 1, #new-token: 17, "
    "#cached-token: 0, token usage: 0.05, #running-req: 3, #queue-req: 0, #pending-token: 0, "
    "cuda graph: False, input throughput (token/s): 17.00",
    # before 0.5 (scheduler.py, log_prefill_stats): "Prefill batch." and no pending tokens
    "[2026-08-27 10:00:03 TP0] Prefill batch. #new-seq: 1, #new-token: 5, #cached-token: 64, "
    "cache hit rate: 92.75%, token usage: 0.00, #running-req: 0, #queue-req: 0",
    # SGLANG_LOG_FORWARD_ITERS: the forward iteration in brackets
    "[2026-08-27 10:00:04 TP0] Prefill batch [42], #new-seq: 1, #new-token: 9, "
    "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, "
    "cuda graph: False, input throughput (token/s): 3.00",
    "[2026-08-27 10:00:05 TP0] Decode batch, #running-req: 1, #token: 1408, token usage: 0.00, "
    "cuda graph: True, gen throughput (token/s): 35.71, #queue-req: 0",
]
# vllm/v1/metrics/loggers.py, LoggingStatLogger.log (0.32): "%sAvg prompt throughput: %.1f
# tokens/s, ..." with the "Engine 000: " prefix, vLLM's logging format (vllm/logger.py _FORMAT)
VLLM = [
    "(APIServer pid=4242) INFO 08-27 10:00:10 [loggers.py:282] Engine 000: Avg prompt "
    "throughput: 102.4 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, "
    "Waiting: 1 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 41.7%",
    "(APIServer pid=4242) INFO 08-27 10:00:20 [loggers.py:282] Engine 001: Avg prompt "
    "throughput: 0.0 tokens/s, Avg generation throughput: 4.5 tokens/s, Running: 1 reqs, "
    "Waiting: 0 reqs, CPU KV cache usage: 0.4%",
]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(sql("schema/case"))
    return con


def _load(con: duckdb.DuckDBPyConnection, tmp_path: Path, name: str, lines: list[str]) -> list:
    case = tmp_path / "case"
    (case / "logs").mkdir(parents=True, exist_ok=True)
    (case / "logs" / name).write_text("\n".join(lines) + "\n")
    load_logs(con, case, [case / "logs" / name])
    return con.execute(
        "SELECT * EXCLUDE (src_file) FROM engine_counters ORDER BY src_line"
    ).fetchall()


def test_sglang_prefill_batches(con, tmp_path):
    """One row per prefill batch of the logging rank (the TP1 copy dropped, each DP rank kept),
    in every form; decode batches are not counters."""
    rows = _load(con, tmp_path, "prefill-0.log", SGLANG)
    assert [(r[0], r[1], str(r[2]), r[5], r[6], r[7], r[-1]) for r in rows] == [
        ("prefill-0", 0, "2026-08-27 10:00:01+00:00", 2, 8192, 1024, 1),
        ("prefill-0", 1, "2026-08-27 10:00:02.250000+00:00", 1, 17, 0, 3),
        ("prefill-0", 0, "2026-08-27 10:00:03+00:00", 1, 5, 64, 4),
        ("prefill-0", 0, "2026-08-27 10:00:04+00:00", 1, 9, 0, 5),
    ]
    assert {r[4] for r in rows} == {"sglang.prefill-batch"}


def test_vllm_stats_lines(con, tmp_path):
    """The throughputs, request counts and hit rate as printed; vLLM writes no year, so the
    time is kept as written only."""
    rows = _load(con, tmp_path, "vllm-0.log", VLLM)
    cols = [
        d[0] for d in con.execute("SELECT * EXCLUDE (src_file) FROM engine_counters").description
    ]
    got = [dict(zip(cols, r, strict=True)) for r in rows]
    assert [(g["dp_rank"], g["ts"], g["stamp"], g["kind"]) for g in got] == [
        (0, None, "08-27 10:00:10", "vllm.stats"),
        (1, None, "08-27 10:00:20", "vllm.stats"),
    ]
    assert [
        (g["prompt_throughput"], g["generation_throughput"], g["running"], g["waiting"])
        for g in got
    ] == [(102.4, 12.0, 2, 1), (0.0, 4.5, 1, 0)]
    assert [g["prefix_hit_rate"] for g in got] == [41.7, None]
    assert con.execute("SELECT engine FROM log_files").fetchall() == [("vllm",)]


def test_a_count_beyond_a_bigint_is_null(con, tmp_path):
    """A damaged line's count too large for a BIGINT is NULL, its other counts and the other
    lines kept."""
    huge = SGLANG[0].replace("#new-token: 8192", "#new-token: " + "9" * 25)
    rows = _load(con, tmp_path, "prefill-0.log", [huge, SGLANG[2]])
    assert [(r[5], r[6], r[7]) for r in rows] == [(2, None, 1024), (1, 17, 0)]


def test_damaged_ranks_and_engine_numbers_do_not_stop_the_load(con, tmp_path):
    """A DP rank no BIGINT holds (its counts are not kept) and an engine number of many digits
    (read as engine 0): the other lines load."""
    damaged = SGLANG[2].replace("DP1", "DP" + "9" * 25)
    assert len(_load(con, tmp_path, "prefill-0.log", [damaged, SGLANG[0]])) == 1
    many = VLLM[0].replace("Engine 000", "Engine " + "9" * 25)
    rows = _load(con, tmp_path, "vllm-0.log", [many])
    assert [(r[1], r[8]) for r in rows if r[4] == "vllm.stats"] == [(0, 102.4)]


def test_dp_attention_keeps_each_dp_groups_logging_rank(con, tmp_path):
    """Under DP attention SGLang logs a DP group's batches from its attention TP rank 0, whose
    global TP rank is not 0 (`DP1 TP4 EP4` with 4 TP ranks a group,
    sglang/srt/managers/scheduler.py configure_scheduler_process and
    metrics_collector.py is_stats_logging_rank): both groups' lines are kept, a copy from
    another rank of a group is not."""
    line = SGLANG[2].replace("DP1 TP0", "{}")
    ranks = ["DP0 TP0 EP0", "DP1 TP4 EP4", "DP1 TP5 EP5", "DP0 TP1 EP1"]
    rows = _load(con, tmp_path, "prefill-0.log", [line.format(r) for r in ranks])
    assert [(r[1], r[-1]) for r in rows] == [(0, 1), (1, 2)]
