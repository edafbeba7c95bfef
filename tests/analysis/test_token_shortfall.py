"""token-shortfall: an SGLang prefill node's own prompt-token counters (its `Prefill batch` lines)
against what the gateway billed for the requests prefilled in the same window.

The batch lines are written as SGLang 0.5 writes them (SchedulerMetricsReporter.
report_prefill_stats in sglang/srt/managers/scheduler_components/metrics_reporter.py; the
`[%Y-%m-%d %H:%M:%S TP0]` prefix from configure_logger in sglang/srt/utils/common.py), read
through the log loader; the expected receivers are worked out here by hand from the case's
timeline (which requests overlap the stub's prefill), not taken from the code."""

from __future__ import annotations

import csv
import datetime as dt
import re
import shutil
from pathlib import Path

import duckdb
from support.analysis_case import EPOCH, insert, new_case, timed_request
from support.paths import SAMPLE

from forensics.analysis.stage import analyze
from forensics.cli import run as cli
from forensics.logs.load import load_logs
from forensics.report.explain import explain_requests, render_page


def batch_line(t_s: float, seqs: int, new: int, cached: int, rank: str = "TP0") -> str:
    """A prefill batch line at EPOCH + t_s, as report_prefill_stats formats it (no hybrid pool,
    no disaggregation)."""
    when = (EPOCH + dt.timedelta(seconds=t_s)).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"[{when} {rank}] Prefill batch, #new-seq: {seqs}, #new-token: {new}, "
        f"#cached-token: {cached}, token usage: 0.01, #running-req: 0, #queue-req: 0, "
        f"#pending-token: 0, cuda graph: False, input throughput (token/s): 1234.56"
    )


request = timed_request


# Requests: one alone every 20 s, and at 200 s three that overlap (A, S, B; S is the stub).
# Prompts under 256 tokens: too short for a time-to-first-token model (fast-ttft cannot look).
ALONE = [(f"N{i}", f"acct-{i % 2}", 100 + 20 * i, 100 + 10 * i) for i in range(5)]
TOGETHER = [("A", "acct-0", 200.0, 200), ("S", "acct-1", 200.4, 240), ("B", "acct-0", 200.8, 180)]


def _requests() -> list[dict]:
    rows = [request(rid, acct, t, p, 0.5) for rid, acct, t, p in ALONE]
    rows += [request(rid, acct, t, p, 0.9) for rid, acct, t, p in TOGETHER]
    return rows


def _log(stub_tokens: int | None) -> list[str]:
    """The node's batch lines: a warm-up before and after the requests (the engine's own, not
    in the gateway log), one line per lone request, and the three together in two batches
    (A alone, then S and B), where the stub computes `stub_tokens` of its 240 (None: all)."""
    lines = [batch_line(50, 1, 16, 0)]
    lines += [batch_line(t + 0.2, 1, p, 0) for _, _, t, p in ALONE]
    s_new = 240 if stub_tokens is None else stub_tokens
    lines += [batch_line(200.1, 1, 200, 0), batch_line(200.9, 2, s_new + 180, 0)]
    lines += [batch_line(200.9, 2, s_new + 180, 0, rank="TP1")]  # a peer rank repeats it
    lines += [batch_line(400, 1, 16, 0)]
    return lines


def _analyzed(tmp_path: Path, lines: list[str], rows: list[dict], nodes: list[dict] | None = None):
    case = tmp_path / "case"
    (case / "logs").mkdir(parents=True)
    log = case / "logs" / "p1.log"
    log.write_text("\n".join(lines) + "\n")
    con = new_case()
    insert(con, "nodes", nodes or [{"node": "p1", "role": "prefill"}])
    load_logs(con, case, [log])
    insert(con, "requests", rows)
    summary = analyze(con)
    reasons = dict(con.execute("SELECT request_id, reasons FROM screening").fetchall())
    return con, summary, reasons


def _listed(reasons: dict[str, list[str]]) -> set[str]:
    return {rid for rid, why in reasons.items() if "token-shortfall" in why}


def test_the_stubs_window_is_listed(tmp_path: Path) -> None:
    """The stub computed 1 of its 240 tokens: its window (A, S, B, whose prefills overlap) is
    240 - 1 tokens short, so all three are possible receivers; the lone requests are not, and
    every compared request counts as screened by the counters."""
    con, summary, reasons = _analyzed(tmp_path, _log(1), _requests())
    assert _listed(reasons) == {"A", "S", "B"}
    windows = con.execute(
        "SELECT requests, basis, engine_tokens, billed_tokens, shortfall FROM counter_windows "
        "WHERE shortfall <> 0"
    ).fetchall()
    assert windows == [(3, "total", 200 + 181, 620, 239)]
    assert con.execute("SELECT count(*) FROM counter_windows").fetchone() == (6,)
    signals = con.execute(
        "SELECT count(*) FROM screening WHERE list_contains(signals, 'token-counters')"
    ).fetchone()
    assert signals == (8,)
    assert summary["unscreened_fitting_requests"] == 0
    assert "prefill batch lines" in summary["evidence_notes"]["d1"]
    pairs = con.execute(
        "SELECT DISTINCT receiver_request_id FROM possible_exposures ORDER BY 1"
    ).fetchall()
    assert pairs == [("A",), ("B",), ("S",)]


def test_a_healthy_run_lists_nobody(tmp_path: Path) -> None:
    _, summary, reasons = _analyzed(tmp_path, _log(None), _requests())
    assert _listed(reasons) == set()
    assert all(why == [] for why in reasons.values())
    assert summary["unscreened_fitting_requests"] == 0


def test_counters_that_add_up_exactly_list_nobody(tmp_path: Path) -> None:
    """Prefix-cache hits, a chunked prompt and a batch of two: the responses report their
    cached tokens, the engine its new and cached tokens per batch; they add up, nobody listed.
    Without the responses' cached tokens the new and cached tokens together add up too."""
    rows = [
        request("C1", "acct-0", 100, 1000, 0.9, cached_tokens=0),  # chunked: 512 + 488
        request("C2", "acct-1", 120, 700, 0.5, cached_tokens=256),  # a hit of 256
        request("C3", "acct-0", 140, 300, 0.5, cached_tokens=0),  # C3 and C4 in one batch
        request("C4", "acct-1", 140.1, 200, 0.5, cached_tokens=128),
    ]
    lines = [
        batch_line(50, 1, 16, 0),
        batch_line(100.1, 1, 512, 0),
        batch_line(100.5, 1, 488, 0),
        batch_line(120.1, 1, 444, 256),
        batch_line(140.2, 2, 372, 128),
        batch_line(300, 1, 16, 0),
    ]
    con, _, reasons = _analyzed(tmp_path, lines, rows)
    assert _listed(reasons) == set()
    assert con.execute("SELECT DISTINCT basis, shortfall FROM counter_windows").fetchall() == [
        ("computed", 0)
    ]
    no_cached = [{k: v for k, v in r.items() if k != "cached_tokens"} for r in rows]
    con, _, reasons = _analyzed(tmp_path / "total", lines, no_cached)
    assert _listed(reasons) == set()
    assert con.execute("SELECT DISTINCT basis, shortfall FROM counter_windows").fetchall() == [
        ("total", 0)
    ]


def test_a_stub_flagged_by_another_reason_explains_the_shortfall(tmp_path: Path) -> None:
    """The stub reports 239 of its 240 tokens cached, more than any earlier request of its
    account was served (cache-implausible): counted as computing 1 token, the window adds up
    and A and B stay off the list; the stub keeps its own reason only."""
    rows = [r | {"cached_tokens": 239} if r["request_id"] == "S" else r for r in _requests()]
    con, _, reasons = _analyzed(tmp_path, _log(1), rows)
    assert reasons["S"] == ["cache-implausible"]
    assert _listed(reasons) == set()
    window = con.execute(
        "SELECT basis, engine_tokens, billed_tokens FROM counter_windows WHERE flagged_stubs > 0"
    ).fetchall()
    assert window == [("total", 200 + 181, 200 + 1 + 180)]  # A and B report no cached tokens


def test_without_counter_lines_nothing_changes(tmp_path: Path) -> None:
    """A log with only a start-up line: nothing compared, the requests stay unscreened."""
    lines = ["[2026-08-27 09:58:01] server_args={'model_path': 'm', 'page_size': 1}"]
    con, summary, reasons = _analyzed(tmp_path, lines, _requests())
    assert _listed(reasons) == set()
    assert con.execute("SELECT count(*) FROM counter_windows").fetchone() == (0,)
    assert summary["unscreened_fitting_requests"] == 8


def test_requests_at_the_edges_of_the_log_are_not_compared(tmp_path: Path) -> None:
    """The log starts after the first lone request arrived and ends before the stub's first
    token: neither can be placed in a window, so neither is compared (no verdict either way)."""
    lines = _log(1)[2:-3]  # from N1's line to A's
    _, summary, reasons = _analyzed(tmp_path, lines, _requests())
    assert _listed(reasons) == set()
    assert summary["unscreened_fitting_requests"] == 8 - 3  # N2, N3, N4 compared


def test_the_sample_incidents_stubs_from_the_counters_alone(tmp_path: Path) -> None:
    """The sample incident (data_samples/incident) without its ledger, its pool sizes (nodes.csv
    pool_slots, the start-up lines) and the engine's rejection lines: over-pool and
    engine-rejected cannot look, and the prefill nodes' batch lines, where each stub computed 1
    token of its prompt, are all that is left. token-shortfall lists exactly the receivers the
    sample's ground truth names (its simulator's own record of who read whose pages)."""
    case = tmp_path / "case"
    shutil.copytree(SAMPLE, case, ignore=shutil.ignore_patterns("kv_events", "ground_truth"))
    with (case / "nodes.csv").open() as fh:
        nodes = list(csv.DictReader(fh))
    with (case / "nodes.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(
            fh, [k for k in nodes[0] if k != "pool_slots"], extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(nodes)
    pool_or_rejection = re.compile(
        r"exceeds the maximum|Input length|KV Cache is allocated|max_total_num_tokens|KV pool"
    )
    for log in (case / "logs").glob("*.log"):
        lines = log.read_text().splitlines()
        log.write_text("".join(f"{x}\n" for x in lines if not pool_or_rejection.search(x)))
    db = tmp_path / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    cli(["analyze", "--db", str(db)])
    with duckdb.connect(str(db), read_only=True) as con:
        listed = dict(
            con.execute(
                "SELECT request_id, reasons FROM screening WHERE len(reasons) > 0"
            ).fetchall()
        )
        compared = con.execute(
            "SELECT count(*) FROM screening WHERE list_contains(signals, 'token-counters')"
        ).fetchone()
    with (SAMPLE / "ground_truth" / "receiving_requests.csv").open() as fh:
        truth = {row["request_id"] for row in csv.DictReader(fh)}
    assert len(truth) == 7
    assert set(listed) == truth
    assert set(map(tuple, listed.values())) == {("token-shortfall",)}
    assert compared == (396,)  # all but 4 requests at the edges of the prefill logs


def test_explain_shows_the_window(tmp_path: Path) -> None:
    """kvforensics explain names the window a listed request was compared in, with its figures."""
    con, _, _ = _analyzed(tmp_path, _log(1), _requests())
    got = explain_requests(con, ["B", "N0"])
    s = got["B"].screening
    assert s is not None
    assert (s["counter_basis"], s["counter_engine_tokens"], s["counter_billed_tokens"]) == (
        "total",
        381,
        620,
    )
    assert (s["counter_requests"], s["counter_shortfall"]) == (3, 239)
    n0 = got["N0"].screening
    assert n0 is not None and (n0["counter_requests"], n0["counter_shortfall"]) == (1, 0)
    assert "short by 239" in render_page(got["B"])
    assert "no shortfall" in render_page(got["N0"])
