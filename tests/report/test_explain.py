"""`kvforensics explain` and the report's OUT/explain/ pages: on the sample incident every
receiver's story names the ground truth's leakers (the simulator's own engine state, not the
analysis) and replay's verdict; an unknown id exits 2 with close ids; hostile ids are shown
escaped; an older case database lacking a table or a column is explained, saying what is
missing."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest
from support.paths import SAMPLE
from support.report_case import add_rows, build_case, every_schema, seq_tables

from forensics.cli import run

TRUTH = SAMPLE / "ground_truth"
HOSTILE = "B\u202e<script>alert(1)</script>\nforged line"


def _truth_pairs() -> dict[str, set[str]]:
    """{receiver: its leakers} from the ground truth's exposures."""
    pairs: dict[str, set[str]] = defaultdict(set)
    with (TRUTH / "exposures.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            pairs[row["receiver_request_id"]].add(row["leaker_request_id"])
    return pairs


def _truth_ids(name: str) -> list[str]:
    with (TRUTH / name).open(newline="") as handle:
        return [row["request_id"] for row in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """investigate on the sample incident, once for the module: its OUT folder."""
    out = tmp_path_factory.mktemp("explain") / "out"
    assert run(["investigate", str(SAMPLE), "--out", str(out)]) == 1  # findings exist
    return out


def _replayed() -> bool:
    from forensics.replay import replay_available

    return replay_available()


def _explain_json(cli, db: Path, request_id: str) -> dict:
    code, out, err = cli("explain", request_id, "--db", db, "--json")
    assert code == 0, err
    return json.loads(out)


def test_every_receiver_names_the_ground_truths_leakers(sample, cli) -> None:
    truth = _truth_pairs()
    receivers = _truth_ids("receiving_requests.csv")
    assert receivers
    for receiver in receivers:
        found = _explain_json(cli, sample / "case.duckdb", receiver)
        assert found["request_id"] == receiver
        assert {r["other_request_id"] for r in found["read"]} == truth[receiver], receiver
        events = [e["event"] for e in found["story"]]
        assert events[0] == "arrival" and "first-token" in events and "completion" in events
        reads = [e for e in found["story"] if e["event"] == "read"]
        assert {e["text"].split()[3] for e in reads} == truth[receiver]
        assert "receiving" in {a["side"] for a in found["affected"]}
        assert found["nodes"] and all(n["evidence"] == "ledger" for n in found["nodes"])
        if _replayed():
            assert [(r["verdict"], r["run_id"]) for r in found["replay"]] == [
                ("confirmed", "run-0001")
            ]


def _runs(slots: set[int]) -> list[dict[str, int]]:
    """Maximal runs of consecutive slots, in order."""
    runs: list[dict[str, int]] = []
    for slot in sorted(slots):
        if runs and slot == runs[-1]["last"] + 1:
            runs[-1]["last"] = slot
        else:
            runs.append({"first": slot, "last": slot})
    return runs


def test_ledger_events_summarised_with_ranges_merged(sample, cli) -> None:
    """Per node and op: the events, and the slots they cover as maximal runs, against a naive
    count of the ledger's rows."""
    receiver = _truth_ids("receiving_requests.csv")[0]
    found = _explain_json(cli, sample / "case.duckdb", receiver)
    con = duckdb.connect(str(sample / "case.duckdb"), read_only=True)
    raw = con.execute(
        "SELECT node, op, slot_start, slot_count FROM kv_events WHERE request_id = ?", [receiver]
    ).fetchall()
    con.close()
    naive: dict[tuple[str, str], tuple[int, set[int]]] = {}
    for node, op, start, count in raw:
        events, slots = naive.get((node, op), (0, set()))
        naive[(node, op)] = (events + 1, slots | set(range(start, start + count)))
    got = {(k["node"], k["op"]): (k["events"], k["slots"], k["ranges"]) for k in found["kv_events"]}
    assert got == {
        key: (events, len(slots), _runs(slots)) for key, (events, slots) in naive.items()
    }
    assert len(raw) > 100 and len(got) < 12  # summarised, not row by row


def test_a_request_the_log_repeats_is_explained_from_its_first_row(tmp_path, cli) -> None:
    tables = seq_tables()
    first = next(r for r in tables["requests"] if r["request_id"] == "B")
    tables["requests"].append({**first, "account_id": "acct-other", "src_row": 99})
    db = build_case(tmp_path / "case.duckdb", tables)
    found = _explain_json(cli, db, "B")
    assert (found["request"]["account_id"], found["request"]["log_rows"]) == ("acct-2", 2)


def test_a_leaker_lists_the_receivers_that_read_its_data(sample, cli) -> None:
    truth = _truth_pairs()
    read_by: dict[str, set[str]] = defaultdict(set)
    for receiver, leakers in truth.items():
        for leaker in leakers:
            read_by[leaker].add(receiver)
    with (TRUTH / "leaking_requests.csv").open(newline="") as handle:
        leakers = {r["request_id"]: int(r["cross_account_tokens"]) for r in csv.DictReader(handle)}
    assert 0 in leakers.values()  # a same-account leaker is among them: on no list
    for leaker, cross_tokens in sorted(leakers.items()):
        found = _explain_json(cli, sample / "case.duckdb", leaker)
        assert {r["other_request_id"] for r in found["read_by"]} == read_by[leaker]
        on_list = "leaking" in {a["side"] for a in found["affected"]}
        assert on_list == (cross_tokens > 0), leaker


def test_text_and_html(sample, cli, tmp_path) -> None:
    receiver = _truth_ids("receiving_requests.csv")[0]
    page = tmp_path / "page.html"
    code, out, err = cli("explain", receiver, "--db", sample / "case.duckdb", "--html", page)
    assert code == 0 and out == ""
    for leaker in _truth_pairs()[receiver]:
        assert leaker in err and f'data-other="{leaker}"' in page.read_text()
    assert "story" in err and "arrival" in err
    if _replayed():
        assert "replay run-0001: confirmed" in err
        assert 'data-verdict="confirmed"' in page.read_text()


def test_unknown_id_exits_2_with_a_suggestion(sample, cli) -> None:
    receiver = _truth_ids("receiving_requests.csv")[0]
    code, out, err = cli("explain", receiver[:-1], "--db", sample / "case.duckdb")
    assert code == 2 and out == ""
    assert "not in the case's request log" in err and f"did you mean {receiver}" in err
    code, _, err = cli("explain", "no-such-request", "--db", sample / "case.duckdb", "--json")
    assert code == 2 and "no request id is close" in err


def test_report_writes_and_links_a_page_per_receiver(sample, cli) -> None:
    receivers = _truth_ids("receiving_requests.csv")
    pages = sorted(p.name for p in (sample / "explain").iterdir())
    assert pages == sorted(f"{r}.html" for r in receivers)  # plain ids name their page
    report = (sample / "report.html").read_text()
    for receiver in receivers:
        assert f'<a href="explain/{receiver}.html">{receiver}</a>' in report
    manifest = json.loads((sample / "manifest.json").read_text())
    listed = json.dumps(manifest)
    assert all(f"explain/{r}.html" in listed for r in receivers)
    code, _, err = cli("verify", sample)
    assert code == 0, err
    again = sample.parent / "report-again"
    code, out, err = cli("report", "--db", sample / "case.duckdb", "--out", again, "--json")
    assert code == 1, err
    written = {Path(p).relative_to(again).as_posix() for p in json.loads(out)["written"]}
    assert {f"explain/{r}.html" for r in receivers} <= written
    for receiver in receivers:  # the same pages as investigate wrote: no time of their own
        name = f"explain/{receiver}.html"
        assert (again / name).read_bytes() == (sample / name).read_bytes()


def _hostile_case(tmp_path: Path, schemas: tuple[str, ...]) -> Path:
    """The worked example with request B renamed to a hostile id everywhere."""
    tables = seq_tables()
    for rows in tables.values():
        for row in rows:
            for key in ("request_id", "receiver_request_id", "leaker_request_id"):
                if row.get(key) == "B":
                    row[key] = HOSTILE
    return build_case(tmp_path / "case.duckdb", tables, schemas=schemas)


def test_hostile_ids_are_escaped(tmp_path, cli) -> None:
    db = _hostile_case(tmp_path, every_schema())
    page = tmp_path / "page.html"
    code, out, err = cli("explain", HOSTILE, "--db", db, "--html", page)
    assert code == 0, err
    assert "\u202e" not in err and "\\u202e" in err
    assert "forged line" in err and not any(
        line.startswith("forged line") for line in err.splitlines()
    )
    html = page.read_text()
    assert "\u202e" not in html and "\\u202e" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "\\nforged line" in html
    code, out, _ = cli("explain", "H", "--db", db, "--json")
    assert code == 0 and [r["other_request_id"] for r in json.loads(out)["read"]] == [HOSTILE]
    code, _, err = cli("explain", HOSTILE[:-1], "--db", db)
    assert code == 2 and "\u202e" not in err and "\\u202e" in err


def test_hostile_ids_name_pages_safely() -> None:
    from forensics.report.explain import page_names

    names = page_names([HOSTILE, "A", "con", "../x"])
    assert names["A"] == "A.html"
    for rid in (HOSTILE, "con", "../x"):
        assert names[rid] != f"{rid}.html" and "/" not in names[rid] and "\n" not in names[rid]
    assert len(set(names.values())) == 4


def test_older_case_missing_a_table_and_a_column(tmp_path, cli) -> None:
    """No replay tables at all, and screening without its later columns: explained, saying
    what is missing."""
    db = build_case(tmp_path / "case.duckdb", seq_tables())  # no schema/replay
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE screening DROP COLUMN signals")
    con.execute("ALTER TABLE possible_exposures DROP COLUMN basis")
    con.close()
    found = _explain_json(cli, db, "B")
    assert "replay_results" in found["missing_tables"] and found["replay"] == []
    assert found["missing_columns"] == {"possible_exposures": ["basis"], "screening": ["signals"]}
    assert [r["other_request_id"] for r in found["read"]] == ["A"]
    code, _, err = cli("explain", "B", "--db", db)
    assert code == 0 and "possible_exposures.basis" in err and "replay_results" in err
    # nothing was written to the case database
    con = duckdb.connect(str(db), read_only=True)
    names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    con.close()
    assert "replay_results" not in names and not any(n.startswith("kvf_shape") for n in names)


def test_a_pair_kept_apart_is_shown_as_not_listed(tmp_path, cli) -> None:
    """A receiver whose rebuilt read names one leaker on the way its node's release builds and
    another only on a way it does not: both are in its explanation, the second marked kept
    apart, in the table and in the story."""
    pair = {
        "receiver_request_id": "B",
        "receiver_account_id": "acct-b",
        "node": "n1",
        "tokens": 16,
        "support": 1.0,
        "read_at": "2026-08-27T10:00:05Z",
        "cross_account": True,
    }
    tables = add_rows(
        seq_tables(),
        "reconstructed_exposures",
        [
            {
                **pair,
                "leaker_request_id": "A",
                "leaker_account_id": "acct-a",
                "free_lists": ["staged"],
            }
        ],
    )
    add_rows(
        tables,
        "reconstructed_other_ways",
        [
            {
                **pair,
                "leaker_request_id": "Z",
                "leaker_account_id": "acct-z",
                "free_lists": ["front"],
            }
        ],
    )
    db = build_case(tmp_path / "case.duckdb", tables)
    found = _explain_json(cli, db, "B")
    got = {(r["other_request_id"], r["kept_apart"]) for r in found["reconstructed"]}
    assert got == {("A", False), ("Z", True)}
    story = [e["text"] for e in found["story"] if e["event"] == "reconstructed"]
    assert any("Z" in t and "kept apart, not listed" in t for t in story)
    assert not any("A in" in t and "kept apart" in t for t in story)
    code, out, err = cli("explain", "B", "--db", db)
    shown = " ".join((out + err).split())
    assert code == 0 and "receiving Z on n1: support 1.00, kept apart, not listed" in shown
    code, _, _ = cli("explain", "B", "--db", db, "--html", tmp_path / "b.html")
    assert code == 0
    assert "kept apart, not listed" in (tmp_path / "b.html").read_text(encoding="utf-8")
