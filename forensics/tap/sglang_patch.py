"""Patches SGLang's KV memory classes so that a node records its ledger (see `sglang_ledger`).

`install()` runs in every Python process the launcher starts (through the `sitecustomize`
module in `forensics/tap/sglang_site/`) and does nothing unless KVFORENSICS_TAP_DIR is set.
What it wraps, each where the class can be imported:

- `TokenToKVPoolAllocator` and `PagedTokenToKVPoolAllocator` (`sglang.srt.mem_cache.allocator`):
  `__init__` starts the node's ledger (one per process that builds an allocator), `alloc`,
  `alloc_extend` and `alloc_decode` report the slots they hand out, `free` the slots taken back;
- `ReqToTokenPool` (`sglang.srt.mem_cache.memory_pool`): `alloc` binds rows to request ids,
  `write` reports the slots written into a row, `free` releases the row;
- `Scheduler.run_batch` (`sglang.srt.managers.scheduler`): each batch's requests, as extend
  (prefill) or decode steps, before the batch runs.

The allocator hooks are tested against SGLang's own classes; the pool and scheduler hooks need
a full SGLang server (a CUDA build) to run."""

from __future__ import annotations

import atexit
import sys
from typing import Any

from forensics.tap.recorder import Recorder
from forensics.tap.settings import from_env
from forensics.tap.sglang_ledger import Entry, SGLangLedger

_LEDGER: SGLangLedger | None = None


def _port() -> str | None:
    for i, arg in enumerate(sys.argv):
        if arg == "--port" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--port="):
            return arg.split("=", 1)[1]
    return None


def ledger_for(page_size: int) -> SGLangLedger | None:
    """This process's ledger, started on first use; None when the tap is off."""
    global _LEDGER
    if _LEDGER is None:
        settings = from_env(_port())
        if settings is None:
            return None
        settings.extra.update(engine="sglang", page_size=page_size)
        rec = Recorder(settings)
        atexit.register(rec.close)
        _LEDGER = SGLangLedger(rec, page_size)
    return _LEDGER


def _slots(tensor: Any) -> list[int]:
    return [] if tensor is None else [int(x) for x in tensor.reshape(-1).tolist()]


def patch_allocator(cls: Any) -> None:
    """Wrap an allocator class's constructor, allocation and free methods."""
    if getattr(cls, "_kvforensics_tap", False):
        return
    init = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._kvforensics_ledger = ledger_for(int(getattr(self, "page_size", 1)))

    cls.__init__ = __init__
    for name in ("alloc", "alloc_extend", "alloc_decode"):
        if hasattr(cls, name):
            setattr(cls, name, _allocating(getattr(cls, name)))
    free = cls.free

    def free_wrapped(self: Any, free_index: Any) -> Any:
        ledger = _ledger_of(self)
        if ledger is not None:
            ledger.freed(_slots(free_index))
        return free(self, free_index)

    cls.free = free_wrapped
    cls._kvforensics_tap = True


def _allocating(method: Any) -> Any:
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        ledger = _ledger_of(self)
        if ledger is not None and out is not None:
            ledger.allocated(_slots(out))
        return out

    return wrapped


def patch_req_to_token_pool(cls: Any) -> None:
    """Rows bound to request ids, slots written into rows, rows released."""
    alloc, write, free = cls.alloc, cls.write, cls.free

    def alloc_wrapped(self: Any, reqs: list[Any]) -> Any:
        rows = alloc(self, reqs)
        ledger = _ledger_of(self)
        if ledger is not None and rows is not None:
            for req, row in zip(reqs, rows, strict=True):
                ledger.row(int(row), str(req.rid))
        return rows

    def write_wrapped(self: Any, indices: Any, values: Any) -> Any:
        ledger = _ledger_of(self)
        if ledger is not None and isinstance(indices, tuple) and len(indices) == 2:
            row, cols = indices
            start = (cols.start or 0) if isinstance(cols, slice) else 0
            if isinstance(row, int) or getattr(row, "ndim", 1) == 0:
                ledger.bound(int(row), int(start), _slots(values))
        return write(self, indices, values)

    def free_wrapped(self: Any, req: Any) -> Any:
        ledger = _ledger_of(self)
        if ledger is not None:
            ledger.rows.pop(int(req.kv.req_pool_idx), None)
        return free(self, req)

    cls.alloc, cls.write, cls.free = alloc_wrapped, write_wrapped, free_wrapped


def batch_entries(batch: Any) -> list[Entry]:
    """(request id, first position computed, end, token ids, prompt length) per request of a
    ScheduleBatch-like object (`reqs`, `forward_mode`; per request `rid`, `origin_input_ids`,
    `output_ids`, and for extend `prefix_indices` and `fill_ids`)."""
    decode = batch.forward_mode.is_decode()
    entries: list[Entry] = []
    for req in batch.reqs:
        tokens = list(req.origin_input_ids) + list(req.output_ids)
        prompt = len(req.origin_input_ids)
        if decode:  # the step computes the KV of the last token generated
            entries.append((str(req.rid), len(tokens) - 1, len(tokens), tokens, prompt))
        else:
            start = len(req.prefix_indices)
            end = len(req.fill_ids)
            entries.append((str(req.rid), start, end, tokens, prompt))
    return entries


def _ledger_of(owner: Any) -> SGLangLedger | None:
    """The ledger an object was given (one per node), else this process's."""
    return getattr(owner, "_kvforensics_ledger", None) or _LEDGER


def record_batch(batch: Any, ledger: SGLangLedger | None = None) -> None:
    """Record a batch's writes and reads before it runs."""
    ledger = ledger or _LEDGER
    if ledger is None or not getattr(batch, "reqs", None):
        return
    mode = batch.forward_mode
    if mode.is_decode():
        ledger.decode(batch_entries(batch))
    elif mode.is_extend():
        ledger.extend(batch_entries(batch))


def patch_scheduler(cls: Any) -> None:
    run_batch = cls.run_batch

    def wrapped(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        record_batch(batch, _ledger_of(getattr(self, "token_to_kv_pool_allocator", None)))
        return run_batch(self, batch, *args, **kwargs)

    cls.run_batch = wrapped


def install() -> None:
    """Patch what this process can import; silent where a class is missing."""
    if from_env() is None:
        return
    try:
        from sglang.srt.mem_cache.allocator import (
            PagedTokenToKVPoolAllocator,
            TokenToKVPoolAllocator,
        )
    except ImportError:
        return
    patch_allocator(TokenToKVPoolAllocator)
    patch_allocator(PagedTokenToKVPoolAllocator)
    try:
        from sglang.srt.mem_cache.memory_pool import ReqToTokenPool

        patch_req_to_token_pool(ReqToTokenPool)
        from sglang.srt.managers.scheduler import Scheduler

        patch_scheduler(Scheduler)
    except ImportError:
        pass
