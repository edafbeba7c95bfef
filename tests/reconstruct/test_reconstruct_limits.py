"""A vLLM unified node's limit that its log does not name is rebuilt as not applied only where
it could not have bound: the operator's arguments were logged without it (so the engine ran on
vLLM's default) and the gateway never had more in flight at once than the smallest default vLLM
0.32 picks (128 seats; a 2048-token budget on a CPU or CUDA device with one data-parallel rank,
256 elsewhere). Here: the peaks against a naive count at every logged time, and each decision
on a case ingested from its log: the reason it is not rebuilt, or what the node's variants say
of the limit left out."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cases import write_case

from forensics.analysis import aggregate
from forensics.casedb.dbopen import open_database
from forensics.cli import run as cli
from forensics.reconstruct.limits import (
    NO_LIMITS,
    engine_facts,
    engine_limits,
    peaks,
    unlogged_limits_bound,
)
from forensics.reconstruct.trace import Req

HEAD = "(EngineCore_DP0 pid=77) INFO 12-05 17:29:56 [core.py:90] "
BANNER = (
    "Initializing a V1 LLM engine (v0.32.0) with config: model='/m/tiny', max_seq_len=512, "
    "data_parallel_size=1, device_config=cpu, enable_prefix_caching=True, "
    "enable_chunked_prefill=True, seed=0"
)
CAPACITY = "CPU KV cache size: 1,280 tokens, Maximum concurrency for 512 tokens per request: 2.50x"
BUDGET = "Chunked prefill is enabled with max_num_batched_tokens=2048."
START = datetime(2026, 12, 5, 17, 30, tzinfo=UTC)


def _naive_peaks(reqs: list[Req]) -> tuple[int, int]:
    """At every logged time, the requests received by then whose completion is logged after."""
    most_n = most_t = 0
    for t in sorted({r.received_us for r in reqs}):
        held = [
            r for r in reqs if r.received_us <= t and (r.completed_us is None or r.completed_us > t)
        ]
        tokens = sum(1 if r.stub else max(1, r.prompt - (r.cached_tokens or 0)) for r in held)
        most_n, most_t = max(most_n, len(held)), max(most_t, tokens)
    return most_n, most_t


@pytest.mark.parametrize("seed", range(40))
def test_the_peaks_are_the_naive_count(seed: int) -> None:
    rng = random.Random(seed)
    reqs = []
    for k in range(rng.randint(1, 30)):
        recv = rng.randint(0, 50) * 10
        done = None if rng.random() < 0.1 else recv + rng.randint(0, 20) * 10
        prompt = rng.randint(1, 300)
        cached = rng.choice([None, 0, prompt // 2, prompt])
        reqs.append(Req(f"r{k}", "a", recv, done, done, prompt, 4, rng.random() < 0.1, cached))
    assert peaks(reqs) == _naive_peaks(reqs)


def _requests(n: int, apart_ms: int, prompt: int = 160) -> str:
    """n requests received apart_ms apart, each in flight 100 ms, no hits."""
    rows = [
        "request_id,account_id,model,received_at,first_token_at,completed_at,http_status,"
        "prompt_tokens,completion_tokens,node,cached_tokens"
    ]
    for k in range(n):
        recv = START + timedelta(milliseconds=k * apart_ms)
        first, done = recv + timedelta(milliseconds=20), recv + timedelta(milliseconds=100)
        rows.append(
            f"req-{k},acct-{k % 3},tiny,{recv.isoformat()},{first.isoformat()},"
            f"{done.isoformat()},200,{prompt},4,vllm-0,0"
        )
    return "\n".join(rows) + "\n"


def _decided(tmp_path: Path, lines: list[str], requests: str) -> str:
    case = write_case(
        tmp_path / "case",
        {
            "requests.csv": requests,
            "logs/vllm-0.log": "".join(HEAD + line + "\n" for line in lines),
        },
    )
    db = tmp_path / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) in (0, 1)  # 1: a cut line quarantined
    con = open_database(db)
    try:
        aggregate.prepare(con)  # as reconstruct does first
        reqs = [
            Req(rid, "a", int(recv), int(done), int(done), int(prompt), 4, False, int(cached))
            for rid, recv, done, prompt, cached in con.execute(
                "SELECT request_id, epoch_us(received_at), epoch_us(completed_at), "
                "prompt_tokens, cached_tokens FROM requests"
            ).fetchall()
        ]
        facts = engine_facts(con, "vllm-0")
        why, left_out = unlogged_limits_bound(facts, engine_limits(facts), reqs)
        assert not (why and left_out)
        return why or left_out
    finally:
        con.close()


ARGS = "non-default args: {'model': '/m/tiny', 'block_size': 32}"
SEATS = "non-default args: {'model': '/m/tiny', 'block_size': 32, 'max_num_seqs': 4}"


@pytest.mark.parametrize(
    ("lines", "n", "apart_ms", "why"),
    [
        # both logged: nothing left to the defaults
        ([SEATS, BANNER, CAPACITY, BUDGET], 200, 1, ""),
        # neither: not rebuilt whatever the load
        ([BANNER, CAPACITY], 1, 1000, NO_LIMITS),
        # seats at the default, 4 in flight at most: far below 128
        ([ARGS, BANNER, CAPACITY, BUDGET], 40, 30, "at least 128 here, was never reached"),
        # seats at the default, 150 in flight at once: the default (128 or more) may have bound
        ([ARGS, BANNER, CAPACITY, BUDGET], 150, 0, "at the least here"),
        # seats not named and the operator's arguments not logged: 4 seats set would have bound
        ([BANNER, CAPACITY, BUDGET], 40, 30, "`non-default args`"),
        # an arguments line cut short may have lost the limit: not taken as the arguments
        ([ARGS[:40], BANNER, CAPACITY, BUDGET], 40, 30, "`non-default args`"),
        # ... unless never more than one request was in flight
        ([BANNER, CAPACITY, BUDGET], 5, 200, "one request in flight at a time"),
        # budget at the default on a CPU with one data-parallel rank: 4 x 160 tokens < 2048
        ([SEATS, BANNER, CAPACITY], 40, 30, "at least 2048 here, was never reached"),
        # the same load, the device not logged: the floor is 256
        ([SEATS, BANNER.replace("device_config=cpu, ", ""), CAPACITY], 40, 30, "at the least here"),
        # ... or two data-parallel ranks (a MoE deployment's default is 256)
        ([SEATS, BANNER.replace("size=1", "size=2"), CAPACITY], 40, 30, "at the least here"),
        # budget at the default, 20 x 160 tokens in flight: more than 2048
        ([SEATS, BANNER, CAPACITY], 20, 0, "at the least here"),
    ],
    ids=[
        "both-logged",
        "neither",
        "seats-default-low",
        "seats-default-high",
        "seats-unknown",
        "seats-arguments-cut",
        "seats-unknown-one-at-a-time",
        "budget-default-cpu",
        "budget-default-device-unknown",
        "budget-default-two-ranks",
        "budget-default-high",
    ],
)
def test_a_limit_not_logged_is_left_out_only_where_it_could_not_bind(
    tmp_path: Path, lines: list[str], n: int, apart_ms: int, why: str
) -> None:
    got = _decided(tmp_path, lines, _requests(n, apart_ms))
    assert why in got if why else got == "", got
