"""Case-folder writers in the DESIGN §3 contract: requests.csv, accounts.csv, nodes.csv,
kv_events/<node>/part-*.parquet (streamed), contents.jsonl and ground_truth/.

Formats are mixed on purpose so ingest is exercised: CSV with ISO-8601 `Z` times, Parquet with a
UTC TIMESTAMP column on decode nodes and ISO strings with `+00:00` on prefill nodes, JSON Lines."""

from __future__ import annotations

import csv
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.simulate import ledger as L
from forensics.simulate.config import Scenario
from forensics.simulate.engine import Outcome
from forensics.simulate.reads import TokenStore
from forensics.simulate.traffic import JURISDICTIONS, Traffic


def iso(us: int) -> str:
    """ISO-8601 UTC with microseconds and a Z."""
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _iso_strings(ts: pa.Array) -> pa.Array:
    """ISO-8601 strings with +00:00 from a UTC timestamp array (Arrow kernels, no Python)."""
    text = ts.cast(pa.timestamp("us")).cast(pa.string())
    return pc.binary_join_element_wise(pc.utf8_replace_slice(text, 10, 11, "T"), "+00:00", "")


class KvEventWriter:
    """Streams final ledger chunks into Parquet parts, one folder per node."""

    def __init__(self, root: Path, nodes: list[str], roles: list[str], request_ids: list[str],
                 hashes: list[str], part_rows: int = 8_000_000):
        self.root, self.nodes, self.roles, self.part_rows = root, nodes, roles, part_rows
        self.ids = pa.array(request_ids, pa.string())
        self.hashes = hashes
        self.writers: dict[int, pq.ParquetWriter] = {}
        self.rows: dict[int, int] = {}
        self.parts: dict[int, int] = {}
        self.total = 0

    def __call__(self, chunk: L.Chunk) -> None:
        for node, sl in chunk.node_slices():
            table = self.table(node, {k: v[sl] for k, v in chunk.cols.items()})
            self.writer(node, table.schema).write_table(table)
            self.rows[node] = self.rows.get(node, 0) + len(table)
            self.total += len(table)

    def writer(self, node: int, schema: pa.Schema) -> pq.ParquetWriter:
        if node in self.writers and self.rows[node] >= self.part_rows:
            self.writers.pop(node).close()
            self.rows[node] = 0
        if node not in self.writers:
            part = self.parts.get(node, 0) + 1
            self.parts[node] = part
            path = self.root / self.nodes[node] / f"part-{part:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writers[node] = pq.ParquetWriter(path, schema, compression="zstd",
                                                  store_schema=False)
        return self.writers[node]

    def table(self, node: int, c: dict[str, np.ndarray]) -> pa.Table:
        ts = pa.array(c["ts"], pa.timestamp("us", tz="UTC"))
        ts_col = ts if self.roles[node] == "decode" else _iso_strings(ts)
        n = len(c["ts"])
        hashes = pa.array(self.hashes + [None], pa.string())
        h = np.where(c["hash"] < 0, len(self.hashes), c["hash"])
        src = pa.array([None, *L.SOURCES[1:]], pa.string())
        return pa.table({
            "ts": ts_col,
            "seq": pa.array(c["seq"], pa.int64()),
            "node": pa.array(np.full(n, self.nodes[node], object), pa.string()),
            "request_id": self.ids.take(pa.array(c["rid"])),
            "op": pa.array(list(L.OPS), pa.string()).take(pa.array(c["op"])),
            "slot_start": pa.array(c["start"], pa.int64()),
            "slot_count": pa.array(c["count"], pa.int64()),
            "pos_start": pa.array(c["pos"], pa.int64(), mask=c["pos"] < 0),
            "source": src.take(pa.array(c["src"])),
            "content_hash": hashes.take(pa.array(h)),
        })

    def close(self) -> None:
        for w in self.writers.values():
            w.close()
        self.writers.clear()


def write_requests(path: Path, sc: Scenario, tr: Traffic, out: Outcome,
                   outputs: dict[int, list[int]] | None) -> None:
    names = [n for n, _ in sc.node_names()]
    cols = ["request_id", "account_id", "model", "received_at", "first_token_at", "completed_at",
            "http_status", "prompt_tokens", "completion_tokens", "prefill_node", "decode_node",
            "response_sha256"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(cols)
        for i in range(len(tr)):
            status = int(out.status[i])
            ft = int(out.first_token_us[i])
            toks = outputs.get(i) if outputs is not None else None
            sha = (hashlib.sha256(",".join(map(str, toks)).encode()).hexdigest()
                   if toks is not None and status == 200 else "")
            w.writerow([
                tr.request_ids[i], tr.account_ids[int(tr.account[i])], sc.model,
                iso(int(tr.arrival_us[i])), iso(ft) if ft >= 0 else "",
                iso(int(out.completed_us[i])), status, int(tr.prompt_len[i]),
                int(out.n_out[i]) if status == 200 else 0,
                names[int(tr.prefill_node[i])],
                names[sc.prefill_nodes + int(tr.decode_node[i])] if status != 400 else "", sha,
            ])


def write_accounts(path: Path, tr: Traffic, seed: int) -> None:
    rng = np.random.default_rng([seed, 5])
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["account_id", "name", "contact_email", "jurisdiction"])
        for k, acc in enumerate(tr.account_ids):
            j = JURISDICTIONS[int(rng.integers(len(JURISDICTIONS)))]
            w.writerow([acc, f"Customer {k + 1:04d} Ltd", f"security@customer{k + 1:04d}.example",
                        j])


def write_nodes(path: Path, sc: Scenario) -> None:
    started = iso(int(sc.start.timestamp() * 1e6) - 600_000_000)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["node", "role", "model", "engine", "engine_version", "page_size",
                    "pool_slots", "context_len", "started_at"])
        for name, role in sc.node_names():
            w.writerow([name, role, sc.model, "sglang", sc.engine_version, sc.page_size,
                        sc.buffer_slots(role),
                        sc.context_len, started])


def write_contents(path: Path, tr: Traffic, out: Outcome, tokens: TokenStore) -> None:
    with path.open("w") as fh:
        for i in range(len(tr)):
            row = {
                "request_id": tr.request_ids[i],
                "prompt_token_ids": tokens.prompt(i).tolist(),
                "output_token_ids": tokens.outputs.get(i, []),
                "processed_token_ids": tokens.processed(i).tolist() if out.stub[i] else None,
            }
            fh.write(json.dumps(row, separators=(",", ":")) + "\n")


def write_frame(path: Path, df: pl.DataFrame) -> None:
    """CSV with every *_us column turned into an ISO-8601 UTC string (column renamed *_at)."""
    us = [c for c in df.columns if c.endswith("_us")]
    df = df.with_columns([
        pl.from_epoch(pl.col(c), time_unit="us").dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").alias(c)
        for c in us
    ]).rename({c: c[:-3] + "_at" for c in us})
    df.write_csv(path)
