"""Case-folder writers in the docs/DESIGN.md §3 contract: requests.csv, accounts.csv, nodes.csv,
kv_events/<node>-part-*.parquet (streamed), contents.jsonl and ground_truth/.

Formats are mixed on purpose so ingest is exercised: CSV with ISO-8601 `Z` times, Parquet with a
UTC TIMESTAMP column on decode nodes and ISO strings with `+00:00` on prefill nodes, JSON Lines."""

from __future__ import annotations

import csv
import hashlib
import json
import queue
import threading
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.simulate import ledger as L
from forensics.simulate.config import Scenario
from forensics.simulate.outcome import Outcome
from forensics.simulate.reads import TokenStore
from forensics.simulate.traffic import JURISDICTIONS, SamplingPlan, Traffic


def iso(us: int) -> str:
    """ISO-8601 UTC with microseconds and a Z."""
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _iso_strings(ts: pa.Array) -> pa.Array:
    """ISO-8601 strings with +00:00 from a UTC timestamp array (Arrow kernels, no Python)."""
    text = ts.cast(pa.timestamp("us")).cast(pa.string())
    return pc.binary_join_element_wise(pc.utf8_replace_slice(text, 10, 11, "T"), "+00:00", "")


def _dictionary(codes: np.ndarray, values: list[str], null_code: int | None = None) -> pa.Array:
    """Strings as a dictionary array (written to Parquet as plain strings, dictionary-encoded)."""
    mask = codes == null_code if null_code is not None else None
    return pa.DictionaryArray.from_arrays(
        pa.array(codes.astype(np.int32), mask=mask), pa.array(values, pa.string())
    )


def _compact(codes: np.ndarray, values: pa.Array) -> pa.Array:
    """A dictionary array over just the values used."""
    used, inverse = np.unique(codes, return_inverse=True)
    return pa.DictionaryArray.from_arrays(pa.array(inverse.astype(np.int32)), values.take(used))


def _hashes(codes: np.ndarray, known: list[str]) -> pa.Array:
    """Content hashes as plain strings (codes < 0: null); most rows have none."""
    values = pa.array([*known, ""], pa.string())
    return values.take(pa.array(np.where(codes < 0, len(known), codes), mask=codes < 0))


class KvEventWriter:
    """Streams final ledger chunks into Parquet parts, one or more per node."""

    def __init__(
        self,
        root: Path,
        nodes: list[str],
        roles: list[str],
        request_ids: list[str],
        hashes: list[str],
        part_rows: int = 8_000_000,
    ):
        self.root, self.nodes, self.roles, self.part_rows = root, nodes, roles, part_rows
        self.ids = pa.array(request_ids, pa.string())
        self.hashes = hashes
        self.writers: dict[int, pq.ParquetWriter] = {}
        self.rows: dict[int, int] = {}
        self.parts: dict[int, int] = {}
        self.total = 0
        self._queue: queue.Queue[L.Chunk | None] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def __call__(self, chunk: L.Chunk) -> None:
        """Queue a chunk; a background thread converts and writes it (Arrow and Parquet release
        the interpreter lock, so writing overlaps the engine)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._drain, daemon=True)
            self._thread.start()
        self.total += len(chunk)
        self._queue.put(chunk)

    def _drain(self) -> None:
        while (chunk := self._queue.get()) is not None:
            try:
                self._write(chunk)
            except BaseException as exc:  # re-raised by close()
                self._error = exc

    def _write(self, chunk: L.Chunk) -> None:
        for node, sl in chunk.node_slices():
            table = self.table(node, {k: v[sl] for k, v in chunk.cols.items()})
            self.writer(node, table.schema).write_table(table)
            self.rows[node] = self.rows.get(node, 0) + len(table)

    def writer(self, node: int, schema: pa.Schema) -> pq.ParquetWriter:
        if node in self.writers and self.rows[node] >= self.part_rows:
            self.writers.pop(node).close()
            self.rows[node] = 0
        if node not in self.writers:
            part = self.parts.get(node, 0) + 1
            self.parts[node] = part
            path = self.root / f"{self.nodes[node]}-part-{part:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writers[node] = pq.ParquetWriter(
                path,
                schema,
                compression="snappy",
                store_schema=False,
                use_dictionary=["node", "request_id", "op", "source"],
                write_statistics=["ts", "seq", "slot_start"],
            )
        return self.writers[node]

    def table(self, node: int, c: dict[str, np.ndarray]) -> pa.Table:
        ts = pa.array(c["ts"], pa.timestamp("us", tz="UTC"))
        n = len(c["ts"])
        return pa.table(
            {
                "ts": ts if self.roles[node] == "decode" else _iso_strings(ts),
                "seq": pa.array(c["seq"], pa.int64()),
                "node": _dictionary(np.zeros(n, np.int64), [self.nodes[node]]),
                "request_id": _compact(c["rid"], self.ids),
                "op": _dictionary(c["op"], list(L.OPS)),
                "slot_start": pa.array(c["start"], pa.int64()),
                "slot_count": pa.array(c["count"], pa.int64()),
                "pos_start": pa.array(c["pos"], pa.int64(), mask=c["pos"] < 0),
                "source": _dictionary(c["src"], list(L.SOURCES), null_code=L.SRC_NONE),
                "content_hash": _hashes(c["hash"], list(self.hashes)),
            }
        )

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        for w in self.writers.values():
            w.close()
        self.writers.clear()


def write_requests(
    path: Path,
    sc: Scenario,
    tr: Traffic,
    out: Outcome,
    outputs: dict[int, list[int]] | None,
    sampling: SamplingPlan | None = None,
) -> None:
    """The gateway log; with `sampling`, each request's settings in the optional columns
    temperature, top_p, top_k (0: none) and seed."""
    names = [n for n, _ in sc.node_names()]
    cols = [
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
    ]
    if sampling is not None:
        cols += ["temperature", "top_p", "top_k", "seed"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(cols)
        for i in range(len(tr)):
            status = int(out.status[i])
            ft = int(out.first_token_us[i])
            toks = outputs.get(i) if outputs is not None else None
            sha = (
                hashlib.sha256(",".join(map(str, toks)).encode()).hexdigest()
                if toks is not None and status == 200
                else ""
            )
            extra: list[object] = []
            if sampling is not None:
                temperature, top_p, top_k, seed = sampling.settings(i)
                extra = [f"{temperature:g}", f"{top_p:g}", top_k, seed]
            w.writerow(
                [
                    tr.request_ids[i],
                    tr.account_ids[int(tr.account[i])],
                    sc.model,
                    iso(int(tr.arrival_us[i])),
                    iso(ft) if ft >= 0 else "",
                    iso(int(out.completed_us[i])),
                    status,
                    int(tr.prompt_len[i]),
                    int(out.n_out[i]) if status == 200 else 0,
                    names[int(tr.prefill_node[i])],
                    names[sc.prefill_nodes + int(tr.decode_node[i])] if status != 400 else "",
                    sha,
                    *extra,
                ]
            )


def write_accounts(path: Path, tr: Traffic, seed: int) -> None:
    rng = np.random.default_rng([seed, 5])
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["account_id", "name", "contact_email", "jurisdiction"])
        for k, acc in enumerate(tr.account_ids):
            j = JURISDICTIONS[int(rng.integers(len(JURISDICTIONS)))]
            w.writerow(
                [acc, f"Customer {k + 1:04d} Ltd", f"security@customer{k + 1:04d}.example", j]
            )


def write_nodes(path: Path, sc: Scenario) -> None:
    started = iso(int(sc.start.timestamp() * 1e6) - 600_000_000)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(
            [
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
        )
        for name, role in sc.node_names():
            w.writerow(
                [
                    name,
                    role,
                    sc.model,
                    "sglang",
                    sc.release,
                    sc.page_size,
                    sc.buffer_slots(role),
                    sc.context_len,
                    started,
                ]
            )


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
    df = df.with_columns(
        [
            pl.from_epoch(pl.col(c), time_unit="us").dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").alias(c)
            for c in us
        ]
    ).rename({c: c[:-3] + "_at" for c in us})
    df.write_csv(path)
