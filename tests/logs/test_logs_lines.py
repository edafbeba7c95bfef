"""Reading log lines: prefixes, ranks, glued records, plain and gzip files."""

from __future__ import annotations

import gzip
from datetime import datetime

import zstandard

from forensics.logs.lines import clean, dp_rank, is_primary, open_lines, split_records


def test_sglang_prefix_with_ranks():
    (rec,) = split_records("[2026-08-27 10:00:00 DP0 TP3 EP3] KV Cache is allocated. x")
    assert rec.ts == datetime(2026, 8, 27, 10, 0, 0)
    assert rec.ranks == (("DP", 0), ("TP", 3), ("EP", 3))
    assert rec.body == "KV Cache is allocated. x"
    assert not is_primary(rec.ranks) and dp_rank(rec.ranks) == 0


def test_sglang_prefix_variants():
    (ms,) = split_records("[2026-08-27 10:00:00.250 PP1 ATTN_CP0 MOE_DP2] hello")
    assert ms.ts == datetime(2026, 8, 27, 10, 0, 0, 250000)
    assert ms.ranks == (("PP", 1), ("ATTN_CP", 0), ("MOE_DP", 2))
    (old,) = split_records("[08:00:20 TP0] max_total_num_tokens=1")
    assert old.ts is None and old.ranks == (("TP", 0),) and old.body.startswith("max_total")
    (plain,) = split_records("[2026-08-27 10:00:00] server_args=x")
    assert plain.ranks == () and is_primary(plain.ranks)


def test_glued_records_are_split():
    line = (
        "[2026-08-27 10:00:00 TP0] first part cut[2026-08-27 10:00:01 TP1] second "
        "record[2026-08-27 10:00:02 TP2] third"
    )
    recs = split_records(line)
    assert [r.body for r in recs] == ["first part cut", "second record", "third"]
    assert [r.ranks for r in recs] == [(("TP", 0),), (("TP", 1),), (("TP", 2),)]
    # text before the first prefix (the tail of a line another process cut) is its own record
    recs = split_records("ze: 10.40 GB[2026-08-27 10:00:00 TP1] next")
    assert [r.body for r in recs] == ["ze: 10.40 GB", "next"]


def test_glued_vllm_records_are_split():
    line = (
        "(EngineCore_DP0 pid=2) INFO 08-27 09:41:12 [kv_cache_utils.py:1148] GPU KV cache "
        "size: 250,0(EngineCore_DP1 pid=3) INFO 08-27 09:41:12 [kv_cache_utils.py:1148] GPU "
        "KV cache size: 190,000 tokens"
    )
    recs = split_records(line)
    assert [(r.ranks, r.body) for r in recs] == [
        ((("DP", 0),), "GPU KV cache size: 250,0"),
        ((("DP", 1),), "GPU KV cache size: 190,000 tokens"),
    ]
    assert all(r.prefixed for r in recs)
    (single,) = split_records("INFO 08-27 09:41:12 [x.py:1] one record")
    assert single.prefixed and single.body == "one record"


def test_vllm_prefixes():
    (rec,) = split_records(
        "(EngineCore_DP1 pid=2390) INFO 08-27 09:41:12 "
        "[kv_cache_utils.py:1148] GPU KV cache size: 5 tokens"
    )
    assert rec.body == "GPU KV cache size: 5 tokens"
    assert rec.ranks == (("DP", 1),) and rec.ts is None  # vLLM writes no year
    (worker,) = split_records(
        "(VllmWorker rank=1 pid=513) INFO 03-02 11:20:10 [gpu_model_runner.py:1276] x"
    )
    assert worker.ranks == (("RANK", 1),) and worker.body == "x"
    (v0,) = split_records(
        "INFO 11-05 08:12:52 gpu_executor.py:122] # GPU blocks: 1, # CPU blocks: 2"
    )
    assert v0.body == "# GPU blocks: 1, # CPU blocks: 2"
    (dated,) = split_records("INFO 2026-08-27 09:41:12 [x.py:1] y")
    assert dated.ts == datetime(2026, 8, 27, 9, 41, 12)


def test_docker_json_and_json_logging_lines():
    line = (
        '{"log":"[2026-08-27 09:58:44 TP1] KV Cache is allocated. x\\n","stream":"stderr",'
        '"time":"2026-08-27T00:58:44.123456789Z"}'
    )
    (rec,) = split_records(line)
    assert rec.body == "KV Cache is allocated. x" and rec.ranks == (("TP", 1),)
    assert rec.ts == datetime(2026, 8, 27, 9, 58, 44)  # the engine's own time wins
    (msg,) = split_records(
        '{"message": "max_total_num_tokens=5", "timestamp": "2026-08-27T10:00:00+09:00"}'
    )
    assert msg.body == "max_total_num_tokens=5"
    assert msg.ts == datetime(2026, 8, 27, 1, 0, 0)  # a collector's offset time, in UTC
    (other,) = split_records('{"event": "request.received", "rid": "abc"}')
    assert other.body.startswith('{"event"')


def test_bom_and_syslog_prefix():
    (rec,) = split_records(clean("\ufeff[2026-08-27 10:00:00] hi"))
    assert rec.body == "hi" and rec.prefixed
    recs = split_records("Aug 27 10:14:05 host python3[4121]: [2026-08-27 10:14:05 TP0] msg")
    assert [r.prefixed for r in recs] == [False, True] and recs[1].body == "msg"


def test_collector_timestamp_in_front():
    (rec,) = split_records("2026-08-27T10:00:00.123456789Z [2026-08-27 10:00:00 TP0] hi")
    assert rec.ranks == (("TP", 0),) and rec.body == "hi"
    (bare,) = split_records("2026-08-27T10:00:05Z some message")
    assert bare.ts == datetime(2026, 8, 27, 10, 0, 5) and bare.body == "some message"


def test_plain_gzip_and_cut_gzip(tmp_path):
    text = "line one\r\nline two\nlast without newline"
    plain = tmp_path / "a.log"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "b.log.gz"
    packed.write_bytes(gzip.compress(text.encode(), mtime=0))
    disguised = tmp_path / "c.log"  # gzip content without the .gz name
    disguised.write_bytes(gzip.compress(text.encode(), mtime=0))
    zst = tmp_path / "e.log.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    expected = ["line one", "line two", "last without newline"]
    for path in (plain, packed, disguised, zst):
        assert list(open_lines(path)) == expected
    cut = tmp_path / "d.log.gz"
    big = "".join(
        f"line {i:05d} with some text to compress poorly {i * 7919 % 10007}\n" for i in range(3000)
    )
    data = gzip.compress(big.encode(), mtime=0)
    cut.write_bytes(data[: len(data) // 2])
    lines = list(open_lines(cut))
    assert 0 < len(lines) < 3000
    assert lines[: len(lines) - 1] == big.splitlines()[: len(lines) - 1]


def test_undecodable_bytes_do_not_stop_reading(tmp_path):
    path = tmp_path / "bad.log"
    path.write_bytes(b"ok\n\xff\xfe broken \x80\nok again\n")
    lines = list(open_lines(path))
    assert lines[0] == "ok" and lines[2] == "ok again" and "\ufffd" in lines[1]
