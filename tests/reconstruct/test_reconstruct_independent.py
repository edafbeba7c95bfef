"""Reconstruction judged against cases it did not make: tests/support/sglang_cases.py drives
SGLang's real paged allocator under a scheduler of its own (decode pages taken step by step, a
strict prealloc line, jittered gateway times) and records, apart from the project, whose data
each stub read. With no ledger, the lists must name every true party (recall 1.0, both sides),
and what reconstruction takes off the leaking list must hold no true leaker."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.engines import engines_dir, engines_python
from support.paths import REPO

from forensics.analysis.stage import analyze
from forensics.db import connect
from forensics.errors import UsageError
from forensics.ingest.load import ingest_case
from forensics.options import FreeList, ReconstructOptions
from forensics.reconstruct.stage import reconstruct


def _made(out: Path, *args: str) -> tuple[Path, dict]:
    """A case made by the independent generator, and its truth (taken out of the folder)."""
    cmd = [str(engines_python()), str(REPO / "tests" / "support" / "sglang_cases.py"), str(out)]
    subprocess.run([*cmd, *args], check=True)
    truth = json.loads((out / "truth.json").read_text())["stubs"]
    (out / "truth.json").unlink()
    return out, truth


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("independent") / "case"
    return _made(out, "--requests", "400", "--accounts", "200", "--seed", "5")


@pytest.fixture(scope="module")
def burst_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Heavy bursts and 10 ms of noise on every gateway time: on this seed the timestamps'
    order leaves one stub waiting for pages at its first token, and other orders read it."""
    out = tmp_path_factory.mktemp("independent-burst") / "case"
    args = ["--requests", "200", "--accounts", "100", "--seed", "5", "--bursts", "0.8"]
    return _made(out, *args, "--jitter-us", "10000")


@pytest.fixture(scope="module")
def front_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """SGLang's paged allocator built without need_sort: freed pages back at the front of the
    free list, the most recently freed handed out first."""
    out = tmp_path_factory.mktemp("independent-front") / "case"
    return _made(out, "--requests", "400", "--accounts", "200", "--seed", "5", "--need-sort", "0")


@pytest.fixture(scope="module")
def headroom_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A decode node that keeps 512 tokens of headroom for every request holding pages before
    it admits a pre-allocation, as SGLang's prealloc queue does."""
    out = tmp_path_factory.mktemp("independent-headroom") / "case"
    args = ["--requests", "400", "--accounts", "200", "--seed", "5"]
    return _made(out, *args, "--reserved-decode-tokens", "512")


@pytest.fixture(scope="module")
def front_rebuilt(
    front_case: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory
) -> dict[FreeList, tuple[Path, set[str], set[tuple[str, str]]]]:
    """The front case rebuilt on the staged free list alone, on every way, and on the front
    alone: per way, its database, the leaking accounts listed and the pairs cleared."""
    folder, _ = front_case
    base = tmp_path_factory.mktemp("front-rebuilt")
    rebuilt = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
        for way in (FreeList.STAGED, FreeList.ANY, FreeList.FRONT):
            db = base / f"{way.value}.duckdb"
            rebuilt[way] = (db, *_rebuilt(folder, db, way))
    return rebuilt


def _parties(truth: dict) -> tuple[set[str], set[str]]:
    receiving, leaking = set(), set()
    for s in truth.values():
        cross = {a for _, a in s["leakers"] if a != s["account"]}
        if cross:
            receiving.add(s["account"])
        leaking |= cross
    return receiving, leaking


def test_lists_name_every_true_party_and_clear_none(case, tmp_path, monkeypatch):
    folder, truth = case
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    ingest_case(folder, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    analyze(con)
    screened = {a for (a,) in con.execute(_LEAKING).fetchall()}
    reconstruct(con, ReconstructOptions(replay_budget=0))
    analyze(con)
    receiving, leaking = _parties(truth)
    assert leaking and receiving
    listed = {a for (a,) in con.execute(_LEAKING).fetchall()}
    got_receiving = {a for (a,) in con.execute(_LISTED, ["receiving"]).fetchall()}
    assert receiving <= got_receiving
    assert leaking <= listed  # recall 1.0 on the leaking side
    cleared = con.execute(
        "SELECT receiver_request_id, leaker_request_id FROM cleared_findings "
        "WHERE evidence = 'reconstruction'"
    ).fetchall()
    true_pairs = {(s, r) for s, v in truth.items() for r, _ in v["leakers"]}
    assert cleared and not (set(cleared) & true_pairs)
    # the log chose the generator's own scheduler and pool among the variants
    kept = con.execute("SELECT variants FROM reconstructed_nodes WHERE role = 'decode'").fetchall()
    assert kept and all(
        "paged decode pages, fifo line, tried, sglang pool of 1440, frees staged and sorted"
        in v.split("; ")
        and "bulk decode pages, fit line, lifo pool of 1440" not in v.split("; ")
        for (v,) in kept
    )
    # reconstruction narrows the leaking list: far fewer accounts than screening named
    assert len(listed) < len(screened) / 2
    print(
        f"leaking accounts: {len(leaking)} true, {len(listed)} listed, {len(screened)} by screening"
    )


def test_a_stub_the_logged_order_left_waiting_is_cleared_over_the_runs_that_read_it(
    burst_case, tmp_path, monkeypatch
):
    """Before, such a stub kept every candidate of its window (on 1,500-request cases of these
    settings, 62 false accounts of 220 listed); the runs that left it waiting contradict the
    log and read nothing, the others read it. Judged by the generator's truth: its true leakers
    stay listed, nothing cleared is a true pair, and what stays possible is what those runs
    read."""
    folder, truth = burst_case
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    ingest_case(folder, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    analyze(con)
    reconstruct(con, ReconstructOptions(replay_budget=0))
    analyze(con)
    notes = [v for (v,) in con.execute("SELECT variants FROM reconstructed_nodes").fetchall()]
    found = [m for v in notes for m in _WAITED.findall(v)]
    assert found, notes
    true_pairs = {(s, r) for s, v in truth.items() for r, _ in v["leakers"]}
    for stub in found:
        assert stub in truth
        (unread,) = con.execute(_UNREAD, [stub]).fetchall()[0]
        assert unread is False
        modelled = {r for (r,) in con.execute(_MODELLED, [stub]).fetchall()}
        possible = {r for (r,) in con.execute(_POSSIBLE, [stub]).fetchall()}
        assert {r for r, _ in truth[stub]["leakers"]} <= possible == modelled
        cleared = {r for (r,) in con.execute(_CLEARED, [stub]).fetchall()}
        assert cleared and not {(stub, r) for r in cleared} & true_pairs
    receiving, leaking = _parties(truth)
    assert leaking <= {a for (a,) in con.execute(_LEAKING).fetchall()}
    assert receiving <= {a for (a,) in con.execute(_LISTED, ["receiving"]).fetchall()}


def test_without_pool_sizes_every_true_stub_is_flagged_or_said_unseen(burst_case, tmp_path):
    """nodes.csv withheld: no pool size, so over-pool cannot fire, and under 10 ms of noise on
    every gateway time only some stubs' times stand out. Judged by the generator's truth: each
    true stub is either flagged or counted among the requests stubs could not be looked for
    in, so the case never reads as looked at and clean where a stub went unseen (before, 3 of
    this case's 5 true stubs went unflagged yet counted as looked at)."""
    folder, truth = burst_case
    bare = tmp_path / "case"
    shutil.copytree(folder, bare)
    (bare / "nodes.csv").unlink()
    ingest_case(bare, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    summary = analyze(con)
    rows = con.execute(
        "SELECT request_id, reasons, signals FROM screening WHERE request_id IN ?", [list(truth)]
    ).fetchall()
    assert len(rows) == len(truth)
    unflagged = [rid for rid, reasons, _ in rows if not reasons]
    assert unflagged  # the noise hides some: the case tests what is said of them
    assert all(not signals for rid, _, signals in rows if rid in unflagged)
    assert summary["unscreened_requests"] >= len(unflagged) and summary["unexamined"]


def _rebuilt(folder: Path, db: Path, free_list: FreeList) -> tuple[set[str], set[tuple[str, str]]]:
    """The leaking accounts listed, and the (receiver, leaker) pairs reconstruction cleared."""
    ingest_case(folder, db)
    con = connect(db)
    analyze(con)
    reconstruct(con, ReconstructOptions(replay_budget=0, free_list=free_list))
    analyze(con)
    listed = {a for (a,) in con.execute(_LEAKING).fetchall()}
    cleared = con.execute(
        "SELECT receiver_request_id, leaker_request_id FROM cleared_findings "
        "WHERE evidence = 'reconstruction'"
    ).fetchall()
    con.close()
    return listed, set(cleared)


def test_every_way_sglang_puts_freed_pages_back_is_followed(front_case, front_rebuilt):
    """Where SGLang's allocator puts freed pages back is not in the request log. On a case
    whose allocator put them at the front, a rebuild on the staged free list alone (all it
    followed before) lists leakers that are not the stubs' and clears true ones; under
    --sglang-free-list any every way is followed and every true leaking account stays listed,
    and stating the way the engine ran narrows the lists without losing one."""
    _, truth = front_case
    _, leaking = _parties(truth)
    true_pairs = {(s, r) for s, v in truth.items() for r, _ in v["leakers"]}
    _, staged, _ = front_rebuilt[FreeList.STAGED]
    assert not leaking <= staged  # the wrong way loses true leakers
    for way in (FreeList.ANY, FreeList.FRONT):
        _, listed, cleared = front_rebuilt[way]
        assert leaking <= listed, way
        assert cleared and not cleared & true_pairs, way
    assert front_rebuilt[FreeList.FRONT][1] < front_rebuilt[FreeList.ANY][1]
    # What each way names alone, as the default run tags its pairs, is what a run on that way
    # alone finds: the reconstruct line's per-way counts are what stating the way would give.
    every = front_rebuilt[FreeList.ANY][0]
    for way in (FreeList.STAGED, FreeList.FRONT):
        assert _pairs(every, way.value) == _pairs(front_rebuilt[way][0]), way
    assert _pairs(every) == _pairs(every, "staged") | _pairs(every, "front")


@pytest.mark.parametrize(("release", "way"), [("0.4.9", "front"), ("0.5.9", "staged")])
def test_the_free_list_taken_from_the_release_is_the_one_it_builds(
    front_case, front_rebuilt, tmp_path, monkeypatch, release, way
):
    """--sglang-free-list version (the default) lists the reads of the way the release in
    nodes.csv builds for a decode node: at the front before 0.4.9.post4, staged since
    (disaggregated nodes). The case's allocator freed to the front, so 0.5.9 misnames it: the
    true leaking accounts the lists then miss are every one kept apart, never dropped."""
    folder, truth = front_case
    _, leaking = _parties(truth)
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    named = tmp_path / "case"
    shutil.copytree(folder, named)
    nodes = (named / "nodes.csv").read_text()
    assert ",sglang,0.4.9," in nodes  # the generator names a release that frees to the front
    (named / "nodes.csv").write_text(nodes.replace(",sglang,0.4.9,", f",sglang,{release},"))
    db = tmp_path / "version.duckdb"
    listed, _ = _rebuilt(named, db, FreeList.VERSION)
    stated = front_rebuilt[FreeList(way)][0]
    assert _pairs(db) == _pairs(stated)
    assert _pairs(db, way) == _pairs(db)
    con = connect(db)
    notes = " ".join(v for (v,) in con.execute(_DECODE_VARIANTS).fetchall())
    apart = {a for (a,) in con.execute(_APART).fetchall()}
    taken = con.execute("SELECT DISTINCT listed_free_list FROM reconstructed_nodes").fetchall()
    con.close()
    assert f"SGLang {release} builds a decode node's allocator" in notes
    assert taken == [(way,)]  # every node, prefill ones too, lists its release's way
    # the other way's pairs are kept apart: together the ways name what every way names
    assert _pairs(db) | _apart_pairs(db) == _pairs(front_rebuilt[FreeList.ANY][0])
    if way == "front":
        assert leaking <= listed
    else:
        assert not leaking <= listed  # the misnamed release clears true leakers...
        assert leaking - listed <= apart  # ...and every one of them is kept apart


def _apart_pairs(db: Path) -> set[tuple[str, str]]:
    """The cross-account pairs kept apart (only the ways the named release does not build)."""
    con = connect(db)
    rows = con.execute(
        "SELECT receiver_request_id, leaker_request_id FROM reconstructed_other_ways "
        "WHERE cross_account"
    ).fetchall()
    con.close()
    return set(rows)


def _pairs(db: Path, way: str | None = None) -> set[tuple[str, str]]:
    """The cross-account pairs the rebuilt reads name, under one free list or any."""
    con = connect(db)
    rows = con.execute(
        "SELECT receiver_request_id, leaker_request_id FROM reconstructed_exposures "
        "WHERE cross_account AND (? IS NULL OR list_contains(free_lists, ?))",
        [way, way],
    ).fetchall()
    con.close()
    return set(rows)


def test_a_line_that_keeps_decode_headroom_is_among_the_variants(
    headroom_case, tmp_path, monkeypatch
):
    """A decode node that keeps headroom pre-allocates later than one that does not, after
    more frees, and so hands a stub other pages; a rebuild whose lines keep none admitted the
    stubs early and cleared a true leaking account of this case. With the lines that keep
    SGLang's headroom among the variants, every true leaking account stays listed, nothing
    cleared is a true pair, and the log keeps a line that keeps headroom."""
    folder, truth = headroom_case
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    _, leaking = _parties(truth)
    listed, cleared = _rebuilt(folder, tmp_path / "case.duckdb", FreeList.ANY)
    assert leaking <= listed
    true_pairs = {(s, r) for s, v in truth.items() for r, _ in v["leakers"]}
    assert cleared and not cleared & true_pairs
    con = connect(tmp_path / "case.duckdb")
    notes = [v for (v,) in con.execute(_DECODE_VARIANTS).fetchall()]
    con.close()
    assert any("tokens free per request" in v for v in notes), notes
    # The decode nodes' server_args lines name the headroom kept (512, among the lines run):
    # the same lines are followed, and the lists are the same.
    logged = tmp_path / "logged"
    shutil.copytree(folder, logged)
    (logged / "logs").mkdir()
    for k in range(2):
        (logged / "logs" / f"decode-{k}.log").write_text(_SGLANG_DECODE_LOG)
    assert _rebuilt(logged, tmp_path / "logged.duckdb", FreeList.ANY)[0] == listed
    con = connect(tmp_path / "logged.duckdb")
    notes = [v for (v,) in con.execute(_DECODE_VARIANTS).fetchall()]
    con.close()
    assert all("names --num-reserved-decode-tokens 512" in v for v in notes), notes


def test_a_logged_headroom_the_node_did_not_keep_loses_nothing(case, tmp_path, monkeypatch):
    """A server_args line naming 512 tokens of headroom on a case whose decode nodes kept
    none (as the simulator's logs name SGLang's default; or an admission the lines model only
    in part): the logged headroom narrows nothing, and no true leaking account is lost
    (followed as the only lines, the lines keeping 512 cleared true ones here)."""
    folder, truth = case
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    _, leaking = _parties(truth)
    logged = tmp_path / "logged"
    shutil.copytree(folder, logged)
    (logged / "logs").mkdir()
    for k in range(2):
        (logged / "logs" / f"decode-{k}.log").write_text(_SGLANG_DECODE_LOG)
    listed, _ = _rebuilt(logged, tmp_path / "logged.duckdb", FreeList.ANY)
    assert leaking <= listed
    con = connect(tmp_path / "logged.duckdb")
    notes = [v for (v,) in con.execute(_DECODE_VARIANTS).fetchall()]
    con.close()
    assert all("are among the variants, beside the others" in v for v in notes), notes


_SGLANG_DECODE_LOG = (
    "[2026-08-31 23:00:00] server_args=ServerArgs(model_path='/m/tiny', page_size=16, "
    "context_length=1049, disaggregation_mode='decode', num_reserved_decode_tokens=512)\n"
    "[2026-08-31 23:00:01] max_total_num_tokens=1440, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=64, context_len=1049\n"
)


def test_back_is_refused_for_pages_of_more_than_one_token(case, tmp_path, monkeypatch):
    folder, _ = case
    monkeypatch.setenv("KVFORENSICS_ENGINES_VENV", str(engines_dir()))
    ingest_case(folder, tmp_path / "case.duckdb")
    con = connect(tmp_path / "case.duckdb")
    analyze(con)
    with pytest.raises(UsageError, match="--sglang-free-list back .* pages hold 16 tokens"):
        reconstruct(con, ReconstructOptions(replay_budget=0, free_list=FreeList.BACK))


_DECODE_VARIANTS = "SELECT variants FROM reconstructed_nodes WHERE role = 'decode'"
_APART = "SELECT DISTINCT leaker_account_id FROM reconstructed_other_ways WHERE cross_account"
_WAITED = re.compile(r"stub read\(s\) the logged order left waiting for pages \(the first: (\S+)\)")
_UNREAD = "SELECT bool_or(unread) FROM reconstructed_requests WHERE request_id = ? AND stub"
_MODELLED = "SELECT leaker_request_id FROM reconstructed_exposures WHERE receiver_request_id = ?"
_POSSIBLE = "SELECT leaker_request_id FROM possible_exposures WHERE receiver_request_id = ?"
_CLEARED = (
    "SELECT leaker_request_id FROM cleared_findings "
    "WHERE receiver_request_id = ? AND evidence = 'reconstruction'"
)
_LEAKING = "SELECT DISTINCT account_id FROM affected_requests WHERE side = 'leaking'"
_LISTED = "SELECT DISTINCT account_id FROM affected_requests WHERE side = ?"
