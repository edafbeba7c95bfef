"""The simulated case folder against the docs/DESIGN.md §3 contract: every file's columns and types,
the same request ids everywhere, a clean ingest with nothing quarantined, SGLang-format logs,
and the CLI."""

from __future__ import annotations

import json
import re

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics.simulate.run import SimOptions, simulate

REQUEST_COLS = [
    "request_id",
    "account_id",
    "model",
    "received_at",
    "first_token_at",
    "completed_at",
    "http_status",
    "prompt_tokens",
    "completion_tokens",
    "prefill_node",
    "decode_node",
    "response_sha256",
    # the optional sampling settings (simulate --sampling mixed, the default)
    "temperature",
    "top_p",
    "top_k",
    "seed",
]
KV_COLS = [
    "ts",
    "seq",
    "node",
    "request_id",
    "op",
    "slot_start",
    "slot_count",
    "pos_start",
    "source",
    "content_hash",
]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|\+00:00)$")


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    out = tmp_path_factory.mktemp("files") / "case"
    simulate(
        out,
        SimOptions(
            requests=120, seed=4, scale=0.0005, days=0.01, overrides=(("long_share", 0.12),)
        ),
    )
    return out


def test_requests_accounts_nodes_follow_the_contract(case):
    req = pl.read_csv(case / "requests.csv", infer_schema_length=0)
    assert req.columns == REQUEST_COLS and req["request_id"].n_unique() == req.height
    for col in ("received_at", "completed_at"):
        assert req[col].str.contains(ISO.pattern).all()
    assert req["http_status"].cast(pl.Int64).is_in([200, 400, 499]).all()
    ok = req.filter(pl.col("http_status") == "200")
    assert ok["response_sha256"].str.contains(r"^[0-9a-f]{64}$").all()
    acc = pl.read_csv(case / "accounts.csv")
    assert acc.columns == ["account_id", "name", "contact_email", "jurisdiction"]
    assert set(req["account_id"]) <= set(acc["account_id"])
    nodes = pl.read_csv(case / "nodes.csv")
    assert nodes.columns == [
        "node",
        "role",
        "model",
        "engine",
        "engine_version",
        "page_size",
        "pool_slots",
        "context_len",
        "started_at",
    ]
    assert set(nodes["role"]) == {"prefill", "decode"}


def test_kv_events_parts_follow_the_contract(case):
    parts = sorted((case / "kv_events").rglob("*.parquet"))
    assert {p.name.rsplit("-part-", 1)[0] for p in parts} == set(
        pl.read_csv(case / "nodes.csv")["node"]
    )
    assert all(p.parent == case / "kv_events" for p in parts)
    ts_types = set()
    ids = set(pl.read_csv(case / "requests.csv")["request_id"])
    pools = dict(pl.read_csv(case / "nodes.csv").select("node", "pool_slots").rows())
    for path in parts:
        t = pq.read_table(path)
        assert t.column_names == KV_COLS
        ts_types.add(str(t.schema.field("ts").type))
        if pa.types.is_string(t.schema.field("ts").type):
            assert all(ISO.match(v) for v in t["ts"].to_pylist()[:200])
        df = pl.from_arrow(t.drop(["ts"]))
        assert df["op"].is_in(["alloc", "share", "write", "read", "free"]).all()
        assert (df["slot_count"] > 0).all() and (df["slot_start"] >= 0).all()
        node = df["node"][0]
        assert ((df["slot_start"] + df["slot_count"]) <= pools[node]).all()
        needs_pos = df.filter(pl.col("op").is_in(["write", "read", "share"]))
        assert needs_pos["pos_start"].null_count() == 0
        writes = df.filter(pl.col("op") == "write")
        assert writes["source"].is_in(["prefill", "decode", "transfer"]).all()
        assert df["seq"].is_sorted() and df["seq"].n_unique() == df.height
        assert set(df["request_id"]) <= ids
    assert ts_types == {"timestamp[us, tz=UTC]", "string"}


def test_contents_hold_the_prompts_as_billed(case):
    req = pl.read_csv(case / "requests.csv")
    rows = [json.loads(line) for line in (case / "contents.jsonl").read_text().splitlines()]
    assert [r["request_id"] for r in rows] == req["request_id"].to_list()
    for r, billed, n_out in zip(rows, req["prompt_tokens"], req["completion_tokens"], strict=True):
        assert len(r["prompt_token_ids"]) == billed and len(r["output_token_ids"]) == n_out


def test_ingest_loads_everything_without_quarantine(case, tmp_path):
    from forensics.ingest.load import ingest_case

    db = tmp_path / "case.duckdb"
    result = ingest_case(case, db)
    assert result.rows_quarantined == 0
    con = duckdb.connect(str(db), read_only=True)
    n_events = sum(pq.read_metadata(p).num_rows for p in (case / "kv_events").rglob("*.parquet"))
    assert con.execute("select count(*) from kv_events").fetchone()[0] == n_events
    assert con.execute("select count(*) from kv_events where not request_known").fetchone()[0] == 0


def test_logs_have_sglang_start_up_and_request_lines(case):
    req = pl.read_csv(case / "requests.csv")
    prefix = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( DP\d)?( TP\d)?\] "
    text = {p.stem: p.read_text() for p in (case / "logs").glob("*.log")}
    nodes = pl.read_csv(case / "nodes.csv")
    for node, role, ctx in nodes.select("node", "role", "context_len").rows():
        lines = text[node].splitlines()
        assert all(re.match(prefix, line) for line in lines)
        kv = re.search(
            r"KV Cache is allocated\. dtype: \S+, #tokens: (\d+), K size: [\d.]+ GB, "
            r"V size: [\d.]+ GB",
            text[node],
        )
        cap = re.search(
            r"max_total_num_tokens=(\d+), chunked_prefill_size=\d+, "
            r"max_prefill_tokens=\d+, max_running_requests=\d+, context_len=(\d+), "
            r"available_gpu_mem=[\d.]+ GB",
            text[node],
        )
        args = re.search(
            r"server_args=ServerArgs\(.*page_size=(\d+).*"
            r"disaggregation_mode='(\w+)'",
            text[node],
        )
        assert kv and cap and args and int(cap.group(2)) == ctx and args.group(2) == role
        warned = f"KV pool holds {kv.group(1)} tokens, fewer than --context-length {ctx}."
        assert (warned in text[node]) == (int(kv.group(1)) < ctx)
        pool_slots = nodes.filter(pl.col("node") == node)["pool_slots"][0]
        assert int(kv.group(1)) == int(cap.group(1)) == pool_slots
    pool = int(re.search(r"max_total_num_tokens=(\d+)", text["prefill-0"]).group(1))
    stubs = req.filter((pl.col("prompt_tokens") > pool) & (pl.col("http_status") == 200))
    assert stubs.height
    for rid, n, node in stubs.select("request_id", "prompt_tokens", "prefill_node").rows():
        assert f"Request {rid} exceeds the maximum number of tokens: {n} > {pool}" in text[node]


def test_cli_writes_a_case_and_rejects_unknown_bugs(cli, tmp_path):
    code, out, _ = cli(
        "simulate", tmp_path / "c", "--requests", "20", "--seed", "1", "--scale", "0.0005", "--json"
    )
    assert code == 0 and json.loads(out)["requests"] == 20
    assert (tmp_path / "c" / "ground_truth" / "exposures.csv").exists()
    code, _, err = cli("simulate", tmp_path / "d", "--requests", "5", "--bug", "late-transfr")
    assert code == 2 and "late-transfer" in err
    code, _, _ = cli(
        "simulate",
        tmp_path / "e",
        "--requests",
        "5",
        "--scale",
        "0.0005",
        "--no-truth",
        "--bug",
        "none",
    )
    truth = tmp_path / "e" / "ground_truth"
    assert code == 0 and [p.name for p in truth.iterdir()] == ["summary.json"]
    assert json.loads((truth / "summary.json").read_text())["requests"] == 5
