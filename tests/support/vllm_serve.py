"""A real vLLM (CPU build, tiny random-weight Llama) serving a case with the ledger tap on, run by
tests/support/vllm_run.py in the engines environment, and the case ingested, analysed and
replayed with the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from forensics.cli import run as cli
from support.engines import engines_python
from support.paths import REPO, TESTS_DIR


def plugin_visible(python: Path) -> bool:
    code = (
        "from importlib.metadata import entry_points;"
        "print(any(e.value.startswith('forensics.tap') "
        "for e in entry_points(group='vllm.general_plugins')))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() == "True"


def vllm_engine(model: Path) -> dict[str, Any]:
    """The engines environment's python, with the tap's vLLM entry point installed, and the
    folder of the tiny model (written by tests/support/vllm_run.py when missing)."""
    python = engines_python()
    if not plugin_visible(python):  # an environment built from an older checkout
        subprocess.run(
            [str(python.parent / "pip"), "install", "-q", "--no-deps", "-e", str(REPO)],
            capture_output=True,
            timeout=600,
        )
    assert plugin_visible(python), (
        "the tap's vLLM entry point is not installed in the engines environment; run "
        f"{python.parent / 'pip'} install --no-deps -e {REPO}"
    )
    return {"python": python, "model": model}


def serve_case(
    engine: dict[str, Any],
    mode: str,
    base: Path,
    tap: dict[str, str] | None = None,
    keep_log: bool = False,
    http: bool = False,
) -> dict[str, Any]:
    """Serve the case; keep_log: the engine's own log (vLLM logs to stdout) is kept as the
    case's logs/vllm-0.log, as a deployment keeps it. http: through vLLM's OpenAI-compatible
    server and a gateway's HTTP client instead (tests/support/vllm_http_run.py, which keeps
    the server's log)."""
    case = base / "case"
    env = {
        **os.environ,
        "KVFORENSICS_TAP_DIR": str(case),
        "KVFORENSICS_TAP_NODE": "vllm-0",
        "KVFORENSICS_TAP_CONTENTS": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "PYTHONPATH": str(REPO),
        **(tap or {}),
    }
    script = "vllm_http_run.py" if http else "vllm_run.py"
    python = sys.executable if http else str(engine["python"])
    cmd = [python, str(TESTS_DIR / "support" / script), mode, str(engine["model"])]
    done = subprocess.run([*cmd, str(case)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    if keep_log and not http:
        (case / "logs").mkdir(exist_ok=True)
        (case / "logs" / "vllm-0.log").write_text(done.stdout + done.stderr)
    db = base / "case.duckdb"
    assert cli(["ingest", str(case), "--db", str(db), "--ledger-load"]) == 0
    code = cli(["analyze", "--db", str(db)])
    return {"case": case, "db": db, "analyze": code, **json.loads((case / "run.json").read_text())}


def db_rows(db: Path, text: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(text).fetchall()


REPLAY_COLUMNS = (
    "verdict, reason, delivered_sha256, contaminated_sha256, clean_sha256, model_matches"
)


def replay_copy(
    db: Path, model: Path, requests: list[str], tmp: Path, columns: str = REPLAY_COLUMNS
) -> dict[str, Any]:
    """`kvforensics replay` on a copy of the case database; per request, the stored run's
    `columns` of replay_results (by default the verdict and output hashes)."""
    pytest.importorskip("torch", reason="replay needs the extra: pip install 'kvforensics[replay]'")
    pytest.importorskip(
        "transformers", reason="replay needs the extra: pip install 'kvforensics[replay]'"
    )
    copy = tmp / db.name
    shutil.copy(db, copy)
    picked = [arg for r in requests for arg in ("--request", r)]
    code = cli(["replay", "--db", str(copy), "--model", str(model), "--device", "cpu", *picked])
    rows = db_rows(copy, f"SELECT request_id, {columns} FROM replay_results")
    return {"code": code, "results": {r[0]: r[1:] for r in rows}}


def token_sha(tokens: list[int]) -> str:
    return hashlib.sha256(",".join(str(t) for t in tokens).encode("ascii")).hexdigest()


def needed_jitter_us(truth_db: Path) -> int:
    """The delivery jitter the engine's own steps need to fit a case's gateway log, from its
    tapped ledger: a request's first token comes from the step of its first KV write and its
    completion from the step of its last (one write per step it runs), steps being the
    ledger's distinct write times. Two outputs logged more than the jitter apart must come
    from different steps, the earlier first: the jitter needed is the widest logged gap from
    an output to one of the same step or an earlier one."""
    rows = db_rows(
        truth_db,
        "SELECT epoch_us(r.first_token_at), epoch_us(r.completed_at), epoch_us(min(k.ts)), "
        "epoch_us(max(k.ts)) FROM requests r JOIN kv_events k USING (request_id) "
        "WHERE k.op = 'write' GROUP BY ALL",
    )
    steps = sorted({t for *_, a, b in rows for t in (a, b)})
    written = sorted(
        t
        for (t,) in db_rows(
            truth_db, "SELECT DISTINCT epoch_us(ts) FROM kv_events WHERE op = 'write'"
        )
    )
    rank = {t: i for i, t in enumerate(written)}
    assert set(steps) <= set(rank)
    outputs = [(t, rank[s]) for first, done, a, b in rows for t, s in ((first, a), (done, b))]
    return max(tb - ta for ta, sa in outputs for tb, sb in outputs if sa >= sb)
