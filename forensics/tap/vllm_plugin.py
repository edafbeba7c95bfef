"""The vLLM plugin (entry point `vllm.general_plugins`: `kvforensics_tap`).

vLLM loads general plugins in every process it starts. `register()` injects the known stub
fault of forensics.tap.vllm_faults where KVFORENSICS_FAULT_STUB asks for it (tests only), and
otherwise does nothing unless KVFORENSICS_TAP_DIR is set; then it wraps four methods of vLLM's
V1 core, and the process that builds a scheduler (the engine core) records its ledger:

- `Scheduler.__init__`: starts the recorder and writes the node's facts (`nodes/`);
- `KVCacheManager.get_computed_blocks`: remembers each request's prefix-cache hit blocks;
- `Scheduler.update_from_output`: before vLLM handles a step's output (the step has run), the
  step's new blocks, writes and reads are recorded from its SchedulerOutput;
- `KVCacheManager.free`: the request's blocks are given back (and, once it has finished, not
  when preempted, its contents recorded).

Recording a step when its output comes back, not when it is scheduled, keeps the ledger right
under asynchronous scheduling: the tokens a step computed are known by then, and a request that
finished while a step of it was still in flight is freed before that (discarded) step would be
recorded, so the discarded step is not recorded."""

from __future__ import annotations

import atexit
import csv
import datetime as dt
import os
import sys
from collections.abc import Sequence
from typing import Any

from forensics.tap.recorder import Recorder
from forensics.tap.settings import Settings, from_env
from forensics.tap.vllm_steps import StepTracker

_PATCHED = False


def register() -> None:
    """Entry point: patch vLLM's scheduler when the tap is switched on."""
    global _PATCHED
    from forensics.tap import vllm_faults

    vllm_faults.install()  # only where KVFORENSICS_FAULT_STUB asks for the known fault
    if _PATCHED or not os.environ.get("KVFORENSICS_TAP_DIR", "").strip():
        return
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler

    _wrap_init(Scheduler)
    _wrap_update(Scheduler)
    _wrap_lookup(KVCacheManager)
    _wrap_free(KVCacheManager)
    _wrap_engine_shutdown()
    _PATCHED = True


def _port() -> str | None:
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg == "--port" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--port="):
            return arg.split("=", 1)[1]
    return os.environ.get("VLLM_PORT") or None


class Tap:
    """The recorder and step tracker of one scheduler."""

    def __init__(self, scheduler: Any, settings: Settings):
        self.settings = settings
        self.rec = Recorder(settings)
        import vllm.envs as envs

        randomised = not getattr(envs, "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION", False)
        self.tracker = StepTracker(scheduler.block_size, randomised)
        self.scheduler = scheduler
        _write_node(scheduler, settings, self.rec.stem)
        atexit.register(self.rec.close)

    def lookup(self, req_id: str) -> tuple[Sequence[int], int] | None:
        request = self.scheduler.requests.get(req_id)
        if request is None:
            return None
        return request.all_token_ids, request.num_prompt_tokens

    def step(self, out: Any) -> None:
        self.rec.rows(self.tracker.step(out, self.lookup))

    def free(self, request: Any) -> None:
        held = self.tracker.held.get(request.request_id)
        self.rec.rows(self.tracker.free(request.request_id))
        # vLLM frees a preempted request's blocks too (its status still running): its
        # contents are recorded once, when it has finished, with every output token
        if held is not None and self.settings.contents and _finished(request):
            prompt = list(request.prompt_token_ids or [])
            output = list(request.output_token_ids)
            processed = prompt[held.own_from :] if _stub(held) else None
            self.rec.content(held.rid, prompt, output, processed)


def _finished(request: Any) -> bool:
    """Whether the request is done (vLLM's Request.is_finished; a request without it, as the
    tap's tests make, counts as done)."""
    done = getattr(request, "is_finished", None)
    return bool(done()) if callable(done) else True


def _stub(held: Any) -> bool:
    """The engine skipped prompt positions that no prefix-cache hit covered."""
    return bool(held.own_from > held.hit_end)


def _wrap_init(cls: Any) -> None:
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        settings = from_env(_port())
        if settings is not None:
            self._kvforensics_tap = Tap(self, settings)
            self.kv_cache_manager._kvforensics_tap = self._kvforensics_tap

    cls.__init__ = __init__


def _wrap_update(cls: Any) -> None:
    original = cls.update_from_output

    def update_from_output(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        tap = getattr(self, "_kvforensics_tap", None)
        if tap is not None:
            tap.step(scheduler_output)
        return original(self, scheduler_output, *args, **kwargs)

    cls.update_from_output = update_from_output
    original_shutdown = cls.shutdown

    def shutdown(self: Any) -> None:
        try:
            original_shutdown(self)
        finally:
            tap = getattr(self, "_kvforensics_tap", None)
            if tap is not None:
                tap.rec.close()

    cls.shutdown = shutdown


def _wrap_engine_shutdown() -> None:
    """Close the ledger first when the engine core shuts down: vLLM stops its workers before
    its scheduler and may kill the process while waiting for them."""
    from vllm.v1.engine.core import EngineCore

    original = EngineCore.shutdown

    def shutdown(self: Any) -> None:
        _close(self)
        original(self)

    EngineCore.shutdown = shutdown
    from vllm.v1.engine import core

    for name in ("EngineCoreProc", "DPEngineCoreProc"):
        cls = getattr(core, name, None)
        if cls is not None and "run_busy_loop" in vars(cls):
            _wrap_busy_loop(cls)


def _close(engine_core: Any) -> None:
    tap = getattr(getattr(engine_core, "scheduler", None), "_kvforensics_tap", None)
    if tap is not None:
        tap.rec.close()


def _wrap_busy_loop(cls: Any) -> None:
    """Close the ledger as soon as the engine core's busy loop ends (a shutdown a signal asked
    for, or an error). vLLM's own signal handlers still guard the process then; right after,
    vLLM 0.32 restores the default ones before it shuts the engine core down, and the server's
    process manager sends SIGTERM at the same moment, which ended the process before its
    shutdown reached the ledger (measured: `vllm serve` stopped with Ctrl-C, even with
    --shutdown-timeout 30, left its only ledger part unfinished)."""
    original = cls.run_busy_loop

    def run_busy_loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        finally:
            _close(self)

    cls.run_busy_loop = run_busy_loop


def _wrap_lookup(cls: Any) -> None:
    original = cls.get_computed_blocks

    def get_computed_blocks(self: Any, request: Any) -> Any:
        result = original(self, request)
        tap = getattr(self, "_kvforensics_tap", None)
        if tap is not None:
            ids = result[0].get_block_ids()
            tap.tracker.hit(request.request_id, ids[0] if ids else [])
        return result

    cls.get_computed_blocks = get_computed_blocks


def _wrap_free(cls: Any) -> None:
    original = cls.free

    def free(self: Any, request: Any) -> None:
        tap = getattr(self, "_kvforensics_tap", None)
        if tap is not None:
            tap.free(request)
        original(self, request)

    cls.free = free


def _write_node(scheduler: Any, settings: Settings, stem: str) -> None:
    """nodes/<stem>.csv: the node's role, engine, block size, pool and context length (stem:
    the recorder's, forensics.tap.recorder.file_stem)."""
    import vllm

    config = scheduler.vllm_config
    row = {
        "node": settings.node,
        "role": "unified",
        "model": str(config.model_config.model),
        "engine": "vllm",
        "engine_version": getattr(vllm, "__version__", ""),
        "page_size": scheduler.block_size,
        "pool_slots": scheduler.kv_cache_config.num_blocks * scheduler.block_size,
        "context_len": scheduler.max_model_len,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
    }
    folder = settings.out_dir / "nodes"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    settings.extra.update(engine="vllm", page_size=row["page_size"], pool_slots=row["pool_slots"])
