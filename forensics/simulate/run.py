"""`simulate()`: traffic -> engine -> streamed ledger -> (sweep: ground truth and outputs) ->
case folder. The one entry point the CLI calls."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

from forensics.base.progress import ProgressFn, no_progress
from forensics.errors import UsageError
from forensics.options import SimOptions
from forensics.simulate import truth_tables as T
from forensics.simulate import writers as W
from forensics.simulate.config import Scenario
from forensics.simulate.engine import Engine
from forensics.simulate.ledger import Chunk
from forensics.simulate.logs import write_logs
from forensics.simulate.outputs import ReplayModel, load_model
from forensics.simulate.reads import Sweep, TokenStore
from forensics.simulate.traffic import make_sampling, make_traffic


def scenario(opts: SimOptions) -> Scenario:
    base = Scenario(
        bugs=opts.bugs, fixed_at=opts.fixed_at, days=opts.days, allocator=opts.allocator
    )
    if opts.model == "test":  # the request log names the model that made the outputs
        from forensics.replay.testmodel import TEST_MODEL_NAME

        base = dataclasses.replace(base, model=TEST_MODEL_NAME)
    base = dataclasses.replace(base, **dict(opts.overrides))
    return base.scaled(opts.scale) if opts.scale != 1.0 else base


# What simulate writes at the top of OUT_DIR; a second run replaces these and nothing else.
WRITTEN = ("requests.csv", "accounts.csv", "nodes.csv", "contents.jsonl", "kv_events", "logs")
TRUTH = "ground_truth"
# Marks OUT_DIR as simulate's from the start of a run until its summary is written: a run
# killed half way leaves a folder the next run still recognises and replaces.
UNDER_WAY = f"{TRUTH}/.simulating"


def prepare(out_dir: Path) -> None:
    """OUT_DIR new, empty, or a folder simulate wrote (it holds ground_truth/summary.json, or
    the UNDER_WAY mark of a run that was stopped): a real case folder, which has kv_events/ too,
    is never replaced. Of a simulated folder only what simulate writes is removed, so a note
    kept beside it stays."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is a file; give a folder for the simulated case")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        ours = (out_dir / TRUTH / "summary.json", out_dir / UNDER_WAY)
        if not any(mark.is_file() for mark in ours):
            raise UsageError(
                f"{out_dir} holds files and is not a case folder simulate wrote with its "
                f"ground truth ({TRUTH}/summary.json); simulate replaces only such a folder, "
                "so give an empty or new OUT_DIR"
            )
        for name in (*WRITTEN, TRUTH):
            path = out_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    (out_dir / TRUTH).mkdir(parents=True, exist_ok=True)
    (out_dir / UNDER_WAY).touch()


def simulate(out_dir: Path, opts: SimOptions, progress: ProgressFn = no_progress) -> dict[str, Any]:
    """Write a case folder and ground_truth/ (only its summary.json when opts.truth is False);
    return a summary.
    `progress` hears each phase as it starts."""
    if opts.requests < 1:
        raise UsageError("--requests must be at least 1")
    prepare(out_dir)
    progress("traffic", 0, None)
    sc = scenario(opts)
    model = load_model(opts.model, sc.vocab_size) if opts.truth else None
    if model is not None and model.vocab_size != sc.vocab_size:
        sc = dataclasses.replace(sc, vocab_size=model.vocab_size)
    tr = make_traffic(opts.requests, opts.seed, sc)
    sampling = make_sampling(len(tr), opts.seed, opts.sampling)
    if isinstance(model, ReplayModel):
        model.sampling = sampling
    started = time.perf_counter()
    names = [n for n, _ in sc.node_names()]
    sinks: list[Any] = []
    engine = Engine(sc, tr, opts.seed, lambda chunk: _fan(sinks, chunk), opts.flush_rows)
    kv = W.KvEventWriter(
        out_dir / "kv_events", names, [r for _, r in sc.node_names()], tr.request_ids, engine.hashes
    )
    sinks.append(kv)
    tokens = TokenStore(tr, engine.out, opts.seed, sc.vocab_size)
    sweep = None
    if opts.truth:
        slots = [p.n_pages * p.page_size for p in engine.pools]
        sweep = Sweep(slots, [r for _, r in sc.node_names()], tr, engine.out, tokens, model)
        sinks.append(sweep)
    progress(f"engine ({len(tr):,} requests)", 0, None)
    out = engine.run()
    kv.close()
    elapsed = time.perf_counter() - started
    outputs = tokens.outputs if sweep is not None else None
    progress("writing files", 0, None)
    W.write_requests(out_dir / "requests.csv", sc, tr, out, outputs, sampling)
    W.write_accounts(out_dir / "accounts.csv", tr, opts.seed)
    W.write_nodes(out_dir / "nodes.csv", sc)
    write_logs(out_dir / "logs", sc, engine.logs)
    if opts.contents and sweep is not None:
        W.write_contents(out_dir / "contents.jsonl", tr, out, tokens)
    summary: dict[str, Any] = {
        "requests": len(tr),
        "events": kv.total,
        "engine_seconds": round(elapsed, 3),
        "events_per_second": round(kv.total / elapsed) if elapsed > 0 else None,
        "stubs": int(out.stub.sum()),
        "http_400": int((out.status == 400).sum()),
        "aborted": int((out.status == 499).sum()),
        "bugs": sorted(sc.bugs),
        "allocator": sc.allocator,
        "prefill_pool": sc.prefill_pool,
        "context_len": sc.context_len,
    }
    if sweep is not None:
        progress("ground truth", 0, None)
        summary.update(write_truth(out_dir / TRUTH, sweep, tr, names))
    else:  # the summary alone: it marks the folder as simulate's, to be replaced by a rerun
        (out_dir / TRUTH).mkdir(parents=True, exist_ok=True)
        timing = ("engine_seconds", "events_per_second")  # the file stays byte-identical
        _write_summary(
            out_dir / TRUTH / "summary.json", {k: v for k, v in summary.items() if k not in timing}
        )
    (out_dir / UNDER_WAY).unlink()
    return summary


def _fan(sinks: list[Any], chunk: Chunk) -> None:
    for sink in sinks:
        sink(chunk)


def write_truth(folder: Path, sweep: Sweep, tr: Any, names: list[str]) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    accs = [tr.account_ids[int(a)] for a in tr.account]
    slots = T.exposure_slots(sweep.pieces)
    exp = T.exposures(slots, tr.request_ids, names, accs)
    W.write_frame(folder / "exposures.csv", exp)
    vio = T.violations(sweep.pieces, tr.request_ids, names)
    W.write_frame(folder / "violations.csv", vio)
    pairs = T.token_pairs(slots, tr.account)
    W.write_frame(folder / "accounts.csv", T.accounts(pairs, tr.account_ids))
    for side, df in T.request_lists(pairs, tr.request_ids, tr.account_ids, tr.account).items():
        W.write_frame(folder / f"{side}_requests.csv", df)
    counters: dict[str, int] = {}
    for (_, what), n in sorted(sweep.pieces.counters.items()):
        counters[what] = counters.get(what, 0) + n
    stats = {
        "exposure_runs": len(exp),
        "violation_runs": len(vio),
        "cross_account_tokens": int(
            pairs.filter(pairs["reader_acc"] != pairs["writer_acc"]).height
        ),
        "tokens": pairs.height,
        **{f"{k}_slot_reads": v for k, v in counters.items()},
        "holder_overflow": sum(s.overflow for s in sweep.states),
    }
    _write_summary(folder / "summary.json", stats)
    return stats


def _write_summary(path: Path, stats: dict[str, Any]) -> None:
    path.write_text(json.dumps(stats, indent=2, sort_keys=True) + "\n")
