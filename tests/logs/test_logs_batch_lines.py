"""The parser's short way for a line that is one whole SGLang batch line and nothing else
(forensics.logs.parse.only_a_batch): every line must come out exactly as the general way reads
it (records cut, every spec tried), on the project's log files, on hostile variants of a batch
line and on random ones. The general way is the oracle: the short way is switched off for it."""

from __future__ import annotations

from dataclasses import astuple
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import DATA, REPO

import forensics.logs.parse as parse
from forensics.logs.naming import classify

LOGS = sorted(
    p
    for folder in (DATA / "logs", REPO / "data_samples")
    for p in folder.rglob("*")
    if p.is_file() and ".log" in p.name
)
DECODE = (
    "[2026-08-27 00:02:30 DP0 TP0] Decode batch, #running-req: 1, #token: 1408, token usage: "
    "0.00, cuda graph: True, gen throughput (token/s): 35.71, #queue-req: 0"
)
PREFILL = (
    "[2026-08-27 00:02:30] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, "
    "token usage: 0.01, #running-req: 0, #queue-req: 3"
)


def _results(paths: list[Path], short_way: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    with monkeypatch.context() as m:
        if not short_way:
            m.setattr(parse, "only_a_batch", lambda _raw: None)
        files = classify([(p, p.name, p.name) for p in paths], [])
        return [astuple(parse.parse_file(f)) for f in files]


def _both_ways(tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "decode-0.log"
    path.write_bytes("\n".join(lines).encode("utf-8", errors="surrogatepass") + b"\n")
    assert _results([path], True, monkeypatch) == _results([path], False, monkeypatch)


def test_the_project_logs_read_the_same_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(LOGS) >= 20
    assert _results(LOGS, True, monkeypatch) == _results(LOGS, False, monkeypatch)
    short = sum(parse.only_a_batch(raw) is not None for f in LOGS for raw in parse.open_lines(f))
    assert short >= 500  # the short way is taken, by most of their lines


@pytest.mark.parametrize(
    ("line", "short"),
    [
        (DECODE, True),
        (PREFILL, True),
        (PREFILL.replace("batch,", "batch."), True),  # the older form
        (DECODE + "   \t", True),
        (DECODE.replace("00:02:30", "00:02:30.123"), True),  # SGLANG_LOG_MS
        (DECODE.replace("2026-08-27 ", ""), True),  # before 0.4: no date
        (DECODE.replace("DP0 TP0", "DP12 TP3 EP3"), True),
        (DECODE.replace("] ", "]"), True),
        (DECODE + "\u3000", True),
        (DECODE.replace("#token", "#tok\x1ben"), True),  # a lone escape is text
        (DECODE.replace("#token", "#tok\x00en"), False),  # a crash's NUL bytes
        ("\x1b[32m" + DECODE + "\x1b[0m", False),  # colour codes
        ("\ufeff" + DECODE, False),
        (DECODE.replace("cuda graph", "bootstrap_room=7 cuda graph"), False),
        (DECODE.replace("cuda graph: True", "max_total_num_tokens=1441792"), False),
        (DECODE.replace("cuda graph: True", "KV cache size: 12 tokens"), False),
        (DECODE.replace("cuda graph: True", "exceeds the maximum number of tokens"), False),
        (DECODE.replace("cuda graph: True", "server_args=ServerArgs(context_length=8)"), False),
        (DECODE + DECODE, False),  # two processes' records glued together
        (DECODE + " [note]", False),
        (DECODE[: DECODE.index("#queue")], False),  # cut short: truncated
        (DECODE[:-1] + "7" * 200, False),  # a tail longer than the short way looks at
        (DECODE.replace(", #queue-req: 0", ""), True),  # the throughput alone ends it
        ("2026-08-27T00:02:30.5Z " + DECODE, False),  # a collector's time in front
        ('{"log": "' + DECODE + '", "time": "2026-08-27T00:02:30Z"}', False),
        ("INFO 08-27 00:02:30 [x.py:1] Decode batch, #running-req: 1, #queue-req: 0", False),
        (DECODE.replace("Decode batch", "Decode  batch"), False),
        (DECODE.replace("[2026", "[202"), False),
        ("", False),
    ],
)
def test_a_variant_of_a_batch_line_reads_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, short: bool
) -> None:
    assert (parse.only_a_batch(line) is not None) is short
    _both_ways(tmp_path, [line, DECODE, line], monkeypatch)


PIECES = [
    "[2026-08-27 00:02:30 DP0 TP0] ",
    "[2026-08-27 00:02:30] ",
    "[00:02:30 TP1]",
    "Decode batch, ",
    "Prefill batch. ",
    "#running-req: 1, ",
    "#token: 448, ",
    "gen throughput (token/s): 35.71",
    ", #queue-req: 0",
    "#queue-req: ",
    "room",
    "bootstrap_room=5 ",
    "max_total_num_tokens=99, ",
    "KV Cache is allocated. #tokens: 12, ",
    "Input length (",
    "Deferred KV release",
    " blocks: 7",
    "[",
    "]",
    "\x00",
    "\x1b[0m",
    "\x1b",
    "\ufeff",
    " ",
    "\t",
    "\u3000",
    "{",
    "}",
    '"log": ',
    "é節",
    "9",
    ".",
]


LINES = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(LINES, min_size=1, max_size=6))
def test_random_lines_read_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]
) -> None:
    _both_ways(tmp_path, [*lines, DECODE, PREFILL], monkeypatch)


@pytest.mark.parametrize("needle", parse._NOT_ONLY_A_BATCH)
def test_a_batch_line_holding_any_other_message_takes_the_general_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, needle: str
) -> None:
    """Every other spec's needle (looked for behind one-character gates) sends a batch line
    holding it the general way, in a prefill and a decode line alike."""
    for line in (DECODE, PREFILL):
        held = line.replace("token usage", f"{needle} token usage")
        assert parse.only_a_batch(held) is None
        _both_ways(tmp_path, [held, line], monkeypatch)
