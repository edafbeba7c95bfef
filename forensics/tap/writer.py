"""The tap's background writer: rotating zstd Parquet files in the input contract.

Files are written as `NAME.parquet.tmp` and renamed when closed, so a reader only ever sees
complete files; the ledger's go to `kv_events/node=NODE/` (see ledger_folder). A file is closed
after `rotate_events` rows or `rotate_s` seconds, and as soon as nothing was written to it for
`idle_close_s` seconds: an engine stopped with a kill (vLLM's server stops its engine core
that way unless given --shutdown-timeout) then loses at most what it recorded in its last
busy `rotate_s` seconds, and nothing when it had been idle. Besides `kv_events/` and
`contents/`, the writer keeps `tap/status-<stem>.json` (events recorded, written and
dropped, files) and `tap/gaps-<stem>.jsonl` (one line per dropped batch)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from forensics.tap.settings import Row, Settings

EVENTS = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("seq", pa.int64()),
        ("node", pa.string()),
        ("request_id", pa.string()),
        ("op", pa.string()),
        ("slot_start", pa.int64()),
        ("slot_count", pa.int64()),
        ("pos_start", pa.int64()),
        ("source", pa.string()),
        ("content_hash", pa.string()),
    ]
)
CONTENTS = pa.schema(
    [
        ("request_id", pa.string()),
        ("prompt_token_ids", pa.list_(pa.int64())),
        ("output_token_ids", pa.list_(pa.int64())),
        ("processed_token_ids", pa.list_(pa.int64())),
    ]
)


class Rotating:
    """One table's current Parquet file, closed and renamed after enough rows or time."""

    def __init__(  # noqa: PLR0913
        self, folder: Path, stem: str, schema: pa.Schema, rows: int, seconds: float, idle_s: float
    ):
        self.folder, self.stem, self.schema = folder, stem, schema
        self.max_rows, self.max_s, self.idle_s = rows, seconds, idle_s
        self.n_files = 0
        self.bytes = 0
        self._writer: pq.ParquetWriter | None = None
        self._path: Path | None = None
        self._rows = 0
        self._opened = self._written = 0.0

    def write(self, table: pa.Table) -> None:
        if self._writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.n_files += 1
            self._path = self.folder / f"{self.stem}-{self.n_files:05d}.parquet"
            tmp = self._path.with_suffix(".parquet.tmp")
            self._writer = pq.ParquetWriter(tmp, self.schema, compression="zstd")
            self._rows, self._opened = 0, time.monotonic()
        self._writer.write_table(table)
        self._rows += table.num_rows
        self._written = time.monotonic()
        if self._rows >= self.max_rows:
            self.close()

    def tick(self) -> None:
        now = time.monotonic()
        if self._writer is not None and (
            now - self._opened >= self.max_s or now - self._written >= self.idle_s
        ):
            self.close()

    def close(self) -> None:
        if self._writer is None or self._path is None:
            return
        self._writer.close()
        tmp = self._path.with_suffix(".parquet.tmp")
        os.replace(tmp, self._path)
        self.bytes += self._path.stat().st_size
        self._writer = None


def events_table(node: str, rows: list[Row]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    return pa.Table.from_arrays(
        [
            pa.array(cols[0], pa.int64()).cast(EVENTS.field("ts").type),
            pa.array(cols[1], pa.int64()),
            pa.array([node] * n, pa.string()),
            pa.array(cols[2], pa.string()),
            pa.array(cols[3], pa.string()),
            pa.array(cols[4], pa.int64()),
            pa.array(cols[5], pa.int64()),
            pa.array(cols[6], pa.int64()),
            pa.array(cols[7], pa.string()),
            pa.array(cols[8], pa.string()),
        ],
        schema=EVENTS,
    )


def contents_table(rows: list[tuple[str, list[int], list[int], list[int] | None]]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(cols, CONTENTS, strict=True)], schema=CONTENTS
    )


def ledger_folder(out: Path, node: str) -> Path:
    """Where the node's ledger parts go: kv_events/node=NODE/, the layout `ingest
    --ledger-external` reads a ledger in place from (and the loaded ingest reads too), so that
    a tap folder is a case either way. A node name no folder can be named after (a slash, a
    control character, a dot name) or that the folder would spell otherwise than ingest reads
    the rows' node (blanks around it, which ingest trims) keeps its parts in kv_events/."""
    if _FOLDER_SAFE.fullmatch(node) and node not in (".", "..") and node == node.strip():
        return out / "kv_events" / f"node={node}"
    return out / "kv_events"


_FOLDER_SAFE = re.compile(r"[^/\\\x00-\x1f\x7f]+")


class BatchSource(Protocol):
    """What the writer thread takes from the recorder (forensics.tap.recorder.Recorder)."""

    node: str
    stem: str
    settings: Settings
    recorded: int
    dropped: int

    def next_batch(self, timeout: float) -> tuple[str, list[Any]] | None: ...

    def take_gaps(self) -> list[dict[str, Any]]: ...


class Writer(threading.Thread):
    """Takes batches from the recorder's queue and writes them until `finish`."""

    def __init__(self, recorder: BatchSource, settings: Settings):
        super().__init__(name="kvforensics-tap-writer", daemon=True)
        self.rec = recorder
        self.out = settings.out_dir
        stem = recorder.stem
        self.events = Rotating(
            ledger_folder(self.out, recorder.node),
            stem,
            EVENTS,
            settings.rotate_events,
            settings.rotate_s,
            settings.idle_close_s,
        )
        self.contents = Rotating(
            self.out / "contents",
            stem,
            CONTENTS,
            settings.rotate_events,
            settings.rotate_s,
            settings.idle_close_s,
        )
        self.written = 0
        self._done = threading.Event()
        self._final: tuple[list[Any], list[Any]] | None = None
        self._status = self.out / "tap" / f"status-{stem}.json"
        self._gaps = self.out / "tap" / f"gaps-{stem}.jsonl"
        self._status_at = 0.0

    def run(self) -> None:
        while not self._done.is_set():
            item = self.rec.next_batch(timeout=0.2)
            if item is not None:
                self._write(*item)
            self._tick()
        while (item := self.rec.next_batch(timeout=0)) is not None:
            self._write(*item)
        if self._final is not None:
            self._write("events", self._final[0])
            self._write("contents", self._final[1])
        self.events.close()
        self.contents.close()
        self._tick(final=True)

    def _write(self, kind: str, items: list[Any]) -> None:
        if not items:
            return
        if kind == "events":
            self.events.write(events_table(self.rec.node, items))
            self.written += len(items)
        else:
            self.contents.write(contents_table(items))

    def _tick(self, final: bool = False) -> None:
        self.events.tick()
        self.contents.tick()
        gaps = self.rec.take_gaps()
        (self.out / "tap").mkdir(parents=True, exist_ok=True)
        if gaps:
            with open(self._gaps, "a") as fh:
                fh.writelines(json.dumps(g, sort_keys=True) + "\n" for g in gaps)
        now = time.monotonic()
        if not final and now - self._status_at < 2.0:
            return
        self._status_at = now
        status = {
            "node": self.rec.node,
            "pid": os.getpid(),
            "events_recorded": self.rec.recorded,
            "events_written": self.written,
            "events_dropped": self.rec.dropped,
            "event_files": self.events.n_files,
            "event_bytes": self.events.bytes,
            "contents_files": self.contents.n_files,
            **self.rec.settings.extra,
        }
        tmp = self._status.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self._status)

    def finish(self, batch: list[Any], contents: list[Any]) -> None:
        """Write what is still buffered, close the files and stop (waits up to 60 s)."""
        self._final = (batch, contents)
        self._done.set()
        self.join(timeout=60)
