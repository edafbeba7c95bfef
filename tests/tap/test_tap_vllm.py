"""The ledger tap inside a real vLLM (CPU build, tiny random-weight Llama, prefix caching on): a
healthy run analyses clean, and a run with two injected engine faults gives exactly the
exposures and violations the faults cause, and replaying the faulty run with the model folder
the engine served confirms exactly the injected victims (the engine's delivered tokens are the
oracle).

Two engine runs serve every test (module-scoped): `healthy` (engine core in its own process,
the tap loaded through the `vllm.general_plugins` entry point) and `faults` (engine core in the
test driver's process, where tests/support/vllm_run.py patched vLLM's KV cache manager). Each
writes the tap folder plus requests.csv and accounts.csv as a gateway would, and is ingested and
analysed with the CLI."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from support import oracle
from support.samples import differences
from support.vllm_serve import db_rows, replay_copy, serve_case, token_sha

from forensics.cli import run as cli
from forensics.ledger.copies import COPY_PARTS

BLOCK = 32


@pytest.fixture(scope="module")
def healthy(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return serve_case(engine, "healthy", tmp_path_factory.mktemp("healthy"))


@pytest.fixture(scope="module")
def faulty(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # The tap closes a part every few events (a queue long enough that nothing is
    # dropped), so that its ledger is one of many small parts, as a quiet node's is after two
    # weeks of parts closed every minute.
    tap = {
        "KVFORENSICS_TAP_BATCH_EVENTS": "4",
        "KVFORENSICS_TAP_ROTATE_EVENTS": "4",
        "KVFORENSICS_TAP_QUEUE_BATCHES": "100000",
    }
    return serve_case(engine, "faults", tmp_path_factory.mktemp("faults"), tap)


@pytest.fixture(scope="module")
def batched(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The stub fault under batched load (tests/support/vllm_run.py `batched`): 24 requests of 4
    accounts, several in flight, shared prefixes; one ordinary request runs as a stub once the
    pool has been reused."""
    return serve_case(
        engine, "batched", tmp_path_factory.mktemp("batched"), {"BATCHED_STUB_AT": "21"}
    )


def _withheld(run: dict[str, Any], base: Path) -> Path:
    """What the engine and the gateway give without a ledger: the gateway log (with the cached
    tokens of each response's usage), the accounts and the node facts; no ledger, no
    contents, no tap reports. Ingested and analysed; the case database."""
    case = base / "case"
    shutil.copytree(
        run["case"], case, ignore=shutil.ignore_patterns("kv_events", "contents", "tap")
    )
    db = base / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db)]) == 0
    cli(["analyze", "--db", str(db)])
    return db


def _listed(db: Path) -> set[tuple[str, str]]:
    return set(db_rows(db, "SELECT side, account_id FROM affected_accounts"))


def test_a_stub_under_batched_load_is_found_without_the_ledger(
    batched: dict[str, Any], tmp_path: Path
) -> None:
    """The engine reports the stub's uncomputed prompt as served from its prefix cache
    (cached_tokens one short of the prompt, not whole blocks), which no cache can serve:
    screening flags exactly the stub, and with the ledger, the contents and the tap withheld
    the lists name every account the tapped ledger names (recall 1.0 on both sides)."""
    truth = _listed(batched["db"])
    receivers = {a for side, a in truth if side == "receiving"}
    assert receivers and {a for side, a in truth if side == "leaking"}
    db = _withheld(batched, tmp_path)
    flagged = db_rows(db, "SELECT request_id, reasons FROM screening WHERE len(reasons) > 0")
    assert flagged == [("stub-21", ["cache-implausible"])]
    listed = _listed(db)
    assert truth <= listed
    leaking = {a for side, a in listed if side == "leaking"}
    assert len({a for side, a in truth if side == "leaking"} & leaking) / len(leaking) >= 0.8


def test_a_healthy_engine_without_its_ledger_lists_nobody(
    healthy: dict[str, Any], tmp_path: Path
) -> None:
    db = _withheld(healthy, tmp_path)
    cached = db_rows(db, "SELECT count(*) FILTER (WHERE cached_tokens > 0) FROM requests")
    assert cached[0][0] > 0  # prefix-cache hits were reported, and none is implausible
    assert db_rows(db, "SELECT count(*) FROM screening WHERE len(reasons) > 0") == [(0,)]
    assert _listed(db) == set()


def _events(db: Path) -> list[dict[str, Any]]:
    cols = "ts, seq, node, request_id, op, slot_start, slot_count, pos_start, source, content_hash"
    with duckdb.connect(str(db), read_only=True) as con:
        cur = con.execute(f"SELECT {cols}, input_order FROM kv_events")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def test_healthy_engine_has_no_exposures_and_no_violations(healthy: dict[str, Any]) -> None:
    db = healthy["db"]
    assert healthy["analyze"] == 0
    assert db_rows(db, "SELECT count(*) FROM exposures") == [(0,)]
    assert db_rows(db, "SELECT count(*) FROM violations") == [(0,)]
    # the run exercised what matters: every request read, prefix-cache hits verified by the
    # tap's hashes, and blocks reused by other requests after a free
    reads = dict(db_rows(db, "SELECT request_id, sum(reads) FROM read_stats GROUP BY 1"))
    assert set(reads) == set(healthy["outputs"]) and len(reads) == 12
    assert db_rows(
        db, "SELECT sum(shared_verified) > 0, sum(shared_unverified) FROM read_stats"
    ) == [(True, 0)]
    owners = db_rows(
        db,
        "SELECT slot_start, count(DISTINCT request_id) FROM kv_events "
        "WHERE op = 'alloc' GROUP BY 1 HAVING count(DISTINCT request_id) > 1",
    )
    assert owners, "no block was handed to a second request: the pool was never reused"


def test_tap_files_are_complete(healthy: dict[str, Any]) -> None:
    case, db = healthy["case"], healthy["db"]
    status = [json.loads(p.read_text()) for p in (case / "tap").glob("status-*.json")]
    assert len(status) == 1 and status[0]["events_dropped"] == 0
    assert status[0]["events_written"] == db_rows(db, "SELECT count(*) FROM kv_events")[0][0]
    assert not list(case.rglob("*.tmp")) and not list((case / "tap").glob("gaps-*"))
    seqs = [s for (s,) in db_rows(db, "SELECT seq FROM kv_events ORDER BY seq")]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no hole: nothing dropped
    node = db_rows(db, "SELECT node, engine, page_size, pool_slots FROM nodes")
    assert node == [("vllm-0", "vllm", BLOCK, 24 * BLOCK)]
    # every block given out is given back, once
    per_op = Counter(
        {
            op: n
            for op, n in db_rows(
                db,
                "SELECT op, sum(slot_count) FROM kv_events "
                "WHERE op IN ('alloc', 'share', 'free') GROUP BY 1",
            )
        }
    )
    assert per_op["alloc"] + per_op["share"] == per_op["free"]
    contents = dict(db_rows(db, "SELECT request_id, output_token_ids FROM contents"))
    assert contents == healthy["outputs"]


def test_injected_faults_are_found_exactly(faulty: dict[str, Any]) -> None:
    db = faulty["db"]
    assert faulty["analyze"] == 1
    got = {
        row
        for row in db_rows(
            db,
            "SELECT receiver_request_id, leaker_request_id, kind, slot_start, "
            "slot_count, leaker_pos_min, leaker_pos_max FROM exposures",
        )
    }
    # the double allocation: dup-1 (40-token prompt, 4 output tokens) got the victim's first
    # block as its second block, so it wrote positions 32..42 into the block's first 11 slots
    # while the victim, still decoding, kept reading them
    block = faulty["faults"]["dup"]["block"]
    dup = ("victim-1", "dup-1", "overwritten", block * BLOCK, 11, 32, 42)
    assert dup in got
    stub = {row for row in got if row[0] == "stub-1"}
    assert got == stub | {dup}
    assert stub and {row[2] for row in stub} == {"stale"}
    assert all(row[1] != "stub-1" for row in stub)
    violations = db_rows(
        db, "SELECT request_id, violation, other_request_id, slot_start, slot_count FROM violations"
    )
    assert violations == [("dup-1", "double-allocation", "victim-1", block * BLOCK, BLOCK)]

    # the stub: it computed only its last prompt token (position 96) and attended over fresh
    # blocks for positions 0..95 that it never wrote: each such slot is stale (another
    # request wrote it last) or uninitialised, never its own
    writes = db_rows(
        db,
        "SELECT pos_start, slot_count FROM kv_events "
        "WHERE request_id = 'stub-1' AND op = 'write' ORDER BY seq LIMIT 1",
    )
    assert writes == [(3 * BLOCK, 1)]
    assert db_rows(
        db, "SELECT count(*) FROM kv_events WHERE request_id = 'stub-1' AND op = 'share'"
    ) == [(0,)]
    own, foreign, blank = db_rows(
        db,
        "SELECT own_slots, foreign_slots, uninitialised_slots "
        "FROM read_stats WHERE request_id = 'stub-1'",
    )[0]
    assert foreign + blank == 3 * BLOCK and foreign == sum(r[4] for r in stub)

    # contents: what each request was asked and answered; for the stub also what it computed
    contents = {
        r: (p, o, x)
        for r, p, o, x in db_rows(
            db,
            "SELECT request_id, prompt_token_ids, "
            "output_token_ids, processed_token_ids FROM contents",
        )
    }
    assert {r: c[1] for r, c in contents.items()} == faulty["outputs"]
    prompt, _out, processed = contents["stub-1"]
    assert len(prompt) == 3 * BLOCK + 1 and processed == prompt[-1:]
    assert all(c[2] is None for r, c in contents.items() if r != "stub-1")

    # and the whole ledger agrees with the naive slot-by-slot reading of the semantics
    facts = oracle.run(_events(db))
    prompts = dict(db_rows(db, "SELECT request_id, prompt_tokens FROM requests"))
    want = {r[:4] + r[4:8] for r in oracle.exposure_runs(facts, prompts)}
    assert {(r, w, "vllm-0", k, s, c, p0, p1) for (r, w, k, s, c, p0, p1) in got} == want
    assert {v[:6] for v in oracle.violation_runs(facts)} == {
        ("dup-1", "vllm-0", "double-allocation", "victim-1", block * BLOCK, BLOCK)
    }


def test_replay_confirms_the_injected_victims(
    faulty: dict[str, Any], engine: dict[str, Any], tmp_path: Path
) -> None:
    """The engine is the oracle: replaying the faulty run with the folder it served reproduces
    exactly the tokens vLLM delivered to the stub (whose prefill step attended stale KV) and to
    the overwritten victim (whose reads after the overwrite saw dup-1's KV), and the clean replay
    of each does not. dup-1, which read only its own KV, is not confirmed."""
    done = replay_copy(faulty["db"], engine["model"], ["stub-1", "victim-1", "dup-1"], tmp_path)
    results = done["results"]
    assert done["code"] == 1
    assert {r: v[0] for r, v in results.items()} == {
        "stub-1": "confirmed",
        "victim-1": "confirmed",
        "dup-1": "not-reproduced",
    }, {r: v[1] for r, v in results.items()}
    for rid in ("stub-1", "victim-1"):
        _, _, delivered, dirty, clean, matches = results[rid]
        assert delivered == dirty == token_sha(faulty["outputs"][rid]) != clean
        assert matches is True


def test_replay_never_confirms_a_healthy_request(
    healthy: dict[str, Any], engine: dict[str, Any], tmp_path: Path
) -> None:
    """Every request of the healthy run (prefix-cache hits, reused blocks) replays to what vLLM
    delivered, clean and from the KV it read alike: none is confirmed."""
    requests = sorted(healthy["outputs"])
    done = replay_copy(healthy["db"], engine["model"], requests, tmp_path)
    results = done["results"]
    assert done["code"] == 0
    assert set(results) == set(requests)
    for rid, (verdict, reason, delivered, dirty, clean, _) in results.items():
        assert verdict == "not-reproduced", (rid, reason)
        assert delivered == dirty == clean == token_sha(healthy["outputs"][rid]), (rid, reason)


def test_the_tap_folder_read_in_place_gives_the_loaded_tables(
    faulty: dict[str, Any], tmp_path: Path
) -> None:
    """The tap writes its parts in kv_events/node=NODE/, so `ingest --ledger-external` reads
    its folder as it is; its many small parts are copied by the analysis task into one local
    file, and the tables are those of the loaded ledger."""
    db = tmp_path / "external.duckdb"
    assert cli(["ingest", str(faulty["case"]), "--db", str(db), "--ledger-external"]) == 0
    parts = db_rows(db, "SELECT count(*) FROM ledger_files WHERE node = 'vllm-0'")[0][0]
    assert parts >= COPY_PARTS  # enough to be copied
    assert cli(["analyze", "--db", str(db)]) == faulty["analyze"]
    assert differences(faulty["db"], db) == {}
    assert db_rows(db, "SELECT count(*) FROM exposures")[0][0] > 0
