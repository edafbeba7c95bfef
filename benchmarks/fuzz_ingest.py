"""Fuzz ingest with damaged and hostile case folders.

    python benchmarks/fuzz_ingest.py --cases 1000 --seed 1 [--investigate-every 50] [--keep DIR]

Each case starts from a small valid case folder (requests, kv_events in CSV and JSON Lines parts,
nodes, accounts, contents) and applies one to three mutations: truncate a file, flip bytes,
insert a hostile value (formula text, CR/LF, quotes, NUL, bidi overrides, huge integers, nested
JSON, timestamps outside 0001-9999, offsets beyond 14:00), drop or duplicate a column, change the
compression, convert a part to another format, empty a file, add a hidden file, switch to CRLF.
Then ingest runs on it (in process, on one reused in-memory case database, as `kvforensics
ingest` runs it), and every `--investigate-every`-th case also runs `kvforensics investigate`.
Checked for every case: exit code 0, 1 or 2 (a message, never a traceback); on 0 or 1, per
file rows_read = rows_loaded + rows_quarantined, and the case database holds exactly
rows_loaded rows and rows_quarantined quarantine rows of the file; every output of investigate
parses (CSV with one width and no formula-looking text cell, JSON, Parquet) and `verify`
confirms the manifest's checksums. Prints the cases run, failures, and cases per second; exit
code 1 when any case failed."""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import json
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from forensics.casedb.sql import ident, sql, template

HOSTILE = [
    "=cmd|' /C calc'!A0",
    " +1",
    "-2",
    "@SUM(1)",
    "\t=1",
    "a\rb",
    "a\nb",
    'a"b',
    '"',
    "'",
    "a\x00b",
    "\u202eevil",
    "\u2066x\u2069",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1e309",
    "NaN",
    "",
    " ",
    "\ufeffx",
    "x" * 5000,
    "\U0001f4a5",
    '{"a": 1}',
    "[1, 2]",
    "10000-01-01T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "2026-08-27T10:00:00+15:00",
    "2026-08-27T10:00:00",
    "999999999999999999",
    "CON",
    "../x",
]
NESTED = [{"a": 1}, [1, 2], {"a": [1]}, [], {}]


def base_case(rng: random.Random, root: Path) -> None:
    """A small valid case: 3 accounts, 12 requests, two kv_events parts, nodes, contents."""
    root.mkdir(parents=True)
    accounts = [f"acct-{i}" for i in range(3)]
    lines = ["request_id,account_id,model,received_at,http_status,prompt_tokens,completed_at"]
    for i in range(12):
        lines.append(
            f"R{i},{rng.choice(accounts)},m,2026-08-27T10:00:{i:02d}Z,200,{4 + i},"
            f"2026-08-27T10:01:{i:02d}Z"
        )
    (root / "requests.csv").write_text("\n".join(lines) + "\n")
    (root / "accounts.csv").write_text(
        "account_id,name,contact_email,jurisdiction\n"
        + "".join(
            f"{a},Name {a},{a}@example.com,{rng.choice(['EU', 'UK', 'US-CA', 'JP'])}\n"
            for a in accounts
        )
    )
    (root / "nodes.csv").write_text("node,role,pool_slots,context_len\nn1,unified,64,128\n")
    events = []
    for i in range(12):
        start = (i * 8) % 64
        t = f"2026-08-27T10:00:{i:02d}Z"
        events += [
            (t, "n1", f"R{i}", "alloc", start, 8, None),
            (t, "n1", f"R{i}", rng.choice(["write", "read"]), start, 8, 0),
            (t, "n1", f"R{i}", "free", start, 8, None),
        ]
    half = len(events) // 2
    (root / "kv_events").mkdir()
    header = "ts,node,request_id,op,slot_start,slot_count,pos_start\n"
    (root / "kv_events" / "part-1.csv").write_text(
        header
        + "".join(",".join("" if v is None else str(v) for v in e) + "\n" for e in events[:half])
    )
    keys = ("ts", "node", "request_id", "op", "slot_start", "slot_count", "pos_start")
    (root / "kv_events" / "part-2.jsonl").write_text(
        "".join(
            json.dumps({k: v for k, v in zip(keys, e, strict=True) if v is not None}) + "\n"
            for e in events[half:]
        )
    )
    (root / "contents.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "request_id": f"R{i}",
                    "prompt_token_ids": list(range(4 + i)),
                    "output_token_ids": [1, 2],
                }
            )
            + "\n"
            for i in range(12)
        )
    )


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _text_files(root: Path) -> list[Path]:
    return [p for p in _files(root) if p.suffix in (".csv", ".jsonl")]


def truncate(rng: random.Random, root: Path) -> str:
    path = rng.choice(_files(root))
    data = path.read_bytes()
    path.write_bytes(data[: rng.randrange(0, max(1, len(data)))])
    return f"truncate {path.name}"


def flip(rng: random.Random, root: Path) -> str:
    path = rng.choice(_files(root))
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 5)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return f"flip {path.name}"


def hostile(rng: random.Random, root: Path) -> str:
    files = _text_files(root)
    if not files:
        return "hostile: none"
    path = rng.choice(files)
    value = rng.choice(HOSTILE)
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8", errors="replace"))))
        if len(rows) > 1:
            r = rng.randrange(1, len(rows))
            if rows[r]:
                rows[r][rng.randrange(len(rows[r]))] = value
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        path.write_text(buf.getvalue(), encoding="utf-8")
    else:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if lines:
            i = rng.randrange(len(lines))
            try:
                obj = json.loads(lines[i])
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict) and obj:
                key = rng.choice(sorted(obj))
                obj[key] = rng.choice([value, *NESTED, 2**70, -1, 1.5, None, True])
                lines[i] = json.dumps(obj)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"hostile {path.name} {value[:20]!r}"


def columns(rng: random.Random, root: Path) -> str:
    files = [p for p in _text_files(root) if p.suffix == ".csv"]
    if not files:
        return "columns: none"
    path = rng.choice(files)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8", errors="replace"))))
    if not rows or not rows[0]:
        return "columns: empty"
    i = rng.randrange(len(rows[0]))
    drop = rng.random() < 0.5
    for row in rows:
        if i < len(row):
            if drop:
                del row[i]
            else:
                row.append(row[i])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return f"{'drop' if drop else 'duplicate'} column {i} of {path.name}"


def recompress(rng: random.Random, root: Path) -> str:
    path = rng.choice(_files(root))
    data = path.read_bytes()
    name = path.name
    for ext in (".gz", ".zst"):
        if name.endswith(ext):
            try:
                data = (
                    gzip.decompress(data)
                    if ext == ".gz"
                    else zstandard.ZstdDecompressor().decompress(data)
                )
            except Exception:  # noqa: BLE001 (damaged already: keep the bytes)
                pass
            name = name[: -len(ext)]
    kind = rng.choice(["", ".gz", ".zst"])
    if kind == ".gz":
        data = gzip.compress(data, mtime=0)
    elif kind == ".zst":
        data = zstandard.ZstdCompressor().compress(data)
    path.unlink()
    (path.parent / (name + kind)).write_bytes(data)
    return f"compress {name}{kind}"


def convert(rng: random.Random, root: Path) -> str:
    """A CSV part becomes JSON Lines or Parquet (all values as text), or JSON Lines becomes CSV."""
    files = [p for p in _text_files(root) if p.parent != root or p.stem != "contents"]
    if not files:
        return "convert: none"
    path = rng.choice(files)
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".csv":
        records = list(csv.DictReader(io.StringIO(text)))
        path.unlink()
        if rng.random() < 0.5:
            path.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            return f"convert {path.name} to jsonl"
        table = pa.Table.from_pylist([{str(k): v for k, v in r.items()} for r in records])
        pq.write_table(table, path.with_suffix(".parquet"))
        return f"convert {path.name} to parquet"
    objs = []
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(line)
            if isinstance(value, dict):
                objs.append(value)
    keys = sorted({k for o in objs for k in o})
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(keys)
    writer.writerows([[o.get(k, "") for k in keys] for o in objs])
    path.unlink()
    path.with_suffix(".csv").write_text(buf.getvalue())
    return f"convert {path.name} to csv"


def misc(rng: random.Random, root: Path) -> str:
    choice = rng.randrange(5)
    path = rng.choice(_files(root))
    if choice == 0:
        path.write_bytes(b"")
        return f"empty {path.name}"
    if choice == 1:
        (path.parent / f"._{path.name}").write_bytes(b"\x00\x05\x16\x07junk")
        return f"hidden beside {path.name}"
    if choice == 2 and path.suffix in (".csv", ".jsonl"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
        return f"crlf {path.name}"
    if choice == 3 and path.suffix in (".csv", ".jsonl"):
        lines = path.read_bytes().splitlines(keepends=True)
        if len(lines) > 1:
            lines.insert(rng.randrange(1, len(lines)), rng.choice(lines[1:]))
            lines.insert(rng.randrange(1, len(lines)), b"\n")
        path.write_bytes(b"".join(lines))
        return f"duplicate line in {path.name}"
    path.write_bytes(path.read_bytes() + b'R99,"unclosed\n')
    return f"stray quote at the end of {path.name}"


MUTATIONS: list[Callable[[random.Random, Path], str]] = [
    truncate,
    flip,
    hostile,
    hostile,
    columns,
    recompress,
    convert,
    misc,
]


def damaged_case(seed: int, n: int, root: Path) -> list[str]:
    """Case n of a seed: the small valid case with one to three mutations; returns the steps."""
    rng = random.Random(seed * 1_000_003 + n)
    base_case(rng, root)
    return [rng.choice(MUTATIONS)(rng, root) for _ in range(rng.randint(1, 3))]


def _cli(args: list[str]) -> tuple[int, str, str]:
    from forensics.cli import run

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(args)
    return code, out.getvalue(), err.getvalue()


def check_ingest(case: Path, con: duckdb.DuckDBPyConnection) -> list[str]:
    """Ingest in process on a reused in-memory case database (what `kvforensics ingest` runs;
    a KvfError is its exit code 2, any other exception a traceback)."""
    from forensics.case.discover import discover
    from forensics.errors import KvfError
    from forensics.ingest.load import ingest_into

    con.execute(sql("bench/fuzz_forget_inputs"))  # never the unchanged shortcut: always load
    try:
        result = ingest_into(con, case, discover(case))
    except KvfError as exc:
        return [] if str(exc).strip() else ["exit 2 without a message"]
    except Exception:  # noqa: BLE001 (the finding: a traceback instead of a message)
        return ["traceback: " + traceback.format_exc()[-800:]]
    return _check_counts(result.to_json(), con)


def _check_counts(result: dict[str, Any], con: duckdb.DuckDBPyConnection) -> list[str]:
    problems = []
    for f in result["files"]:
        if f["rows_read"] != f["rows_loaded"] + f["rows_quarantined"]:
            problems.append(f"{f['path']}: read != loaded + quarantined")
        if f["table"] == "logs":
            continue
        loaded = con.execute(
            template(sql("bench/fuzz_loaded_rows"), table=ident(f["table"])), {"p": f["path"]}
        ).fetchone()
        quarantined = con.execute(sql("bench/fuzz_quarantined_rows"), {"p": f["path"]}).fetchone()
        if (loaded and loaded[0]) != f["rows_loaded"]:
            problems.append(
                f"{f['path']}: {loaded} rows in the table, {f['rows_loaded']} reported loaded"
            )
        if (quarantined and quarantined[0]) != f["rows_quarantined"]:
            problems.append(f"{f['path']}: quarantine rows differ from the count")
    return problems


def check_investigate(case: Path, out: Path) -> list[str]:
    code, _, err = _cli(["investigate", str(case), "--out", str(out)])
    problems = []
    if code not in (0, 1, 2) or "Traceback" in err or "internal error" in err:
        problems.append(f"investigate exit {code}: {err[-600:]}")
    if code in (0, 1):
        for path in out.rglob("*"):
            problems += _parse_output(path)
        verify = _cli(["verify", str(out)])
        if verify[0] != 0:
            problems.append("verify: " + verify[2][-300:])
    return problems


def _parse_output(path: Path) -> list[str]:
    try:
        if path.suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as handle:
                rows = list(csv.reader(handle))
            width = len(rows[0])
            if any(len(r) != width for r in rows):
                return [f"{path.name}: rows of different widths"]
            for row in rows[1:]:
                for cell in row:
                    if cell.lstrip(" ")[:1] in ("=", "+", "-", "@", "\t", "\r") and not (
                        _number(cell)
                    ):
                        return [f"{path.name}: formula-looking cell {cell[:30]!r}"]
        elif path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".parquet":
            pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 (any failure to parse is the finding)
        return [f"{path.name}: does not parse ({exc})"]
    return []


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def run_fuzz(cases: int, seed: int, investigate_every: int, keep: Path | None) -> int:
    from forensics.db import connect

    failures = 0
    started = time.perf_counter()
    con = connect(":memory:")
    con.execute("SET threads = 1")  # tiny files: one thread is fastest
    with tempfile.TemporaryDirectory(prefix="kvf-fuzz-") as tmp:
        for n in range(cases):
            root = Path(tmp) / f"case-{n}"
            steps = damaged_case(seed, n, root)
            problems = check_ingest(root, con)
            if investigate_every and n % investigate_every == 0:
                problems += check_investigate(root, Path(tmp) / f"out-{n}")
            if problems:
                failures += 1
                print(f"case {n} (seed {seed}): {'; '.join(steps)}\n  " + "\n  ".join(problems))
                if keep:
                    shutil.copytree(root, keep / f"case-{seed}-{n}", dirs_exist_ok=True)
            if (n + 1) % 250 == 0:
                rate = (n + 1) / (time.perf_counter() - started)
                print(f"... {n + 1} cases, {failures} failed, {rate:.1f} cases/s", flush=True)
            shutil.rmtree(root, ignore_errors=True)
            for leftover in Path(tmp).glob(f"*-{n}*"):
                if leftover.is_dir():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink()
    con.close()
    seconds = time.perf_counter() - started
    print(
        f"fuzz_ingest: {cases} cases, seed {seed}, {failures} failed, {seconds:.1f} s, "
        f"{cases / seconds:.1f} cases/s"
    )
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--investigate-every",
        type=int,
        default=50,
        help="also run investigate on every n-th case (0: never)",
    )
    parser.add_argument("--keep", type=Path, default=None, help="copy failing case folders here")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    failures = run_fuzz(args.cases, args.seed, args.investigate_every, args.keep)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
