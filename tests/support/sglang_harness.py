"""A small scheduler-like driver of SGLang's real paged KV allocator, with the ledger tap, in
SGLang's call order: request-to-token row, prefix-cache lookup, `alloc_extend` and the row
write, the extend batch; the disaggregated transfer into slots the decode node pre-allocated
for the whole request (`alloc_extend` of len(origin_input_ids) slots); decode steps with
`alloc_decode`; `free` of the pages. Runs in the engines environment:

    python tests/support/sglang_harness.py OUT_DIR

Two nodes (prefill-0, decode-0), page size 4. r1 and r2 are served normally, r3 hits r1's
prefix in the prefill node's radix cache, and s is the incident: too long, it runs on prefill
as a 1-token stub, only that token is transferred, and decode attends over all 40 pre-allocated
slots. Writes the case folder (the tap's files, requests.csv, nodes.csv, accounts.csv) and
OUT_DIR/truth.json: for every decode-node slot s read, the request that last wrote it, kept by
this driver independently of the tap."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator

from forensics.tap.recorder import Recorder, Settings
from forensics.tap.sglang_ledger import SGLangLedger
from forensics.tap.sglang_patch import patch_allocator, patch_req_to_token_pool, record_batch

PAGE = 4
PREFILL_SLOTS, DECODE_SLOTS = 256, 256


class RowPool:
    """The request-to-token pool's interface (alloc(reqs), write((row, slice), values),
    free(req)); SGLang's own class cannot be imported without its GPU dependencies."""

    def __init__(self, rows: int, width: int):
        self.req_to_token = torch.zeros((rows + 1, width), dtype=torch.int64)
        self.free_slots = list(range(1, rows + 1))

    def alloc(self, reqs: list[Any]) -> list[int]:
        rows = [self.free_slots.pop() for _ in reqs]
        for req, row in zip(reqs, rows, strict=True):
            req.kv.req_pool_idx = row
        return rows

    def write(self, indices: Any, values: Any) -> None:
        self.req_to_token[indices] = values

    def free(self, req: Any) -> None:
        self.free_slots.append(req.kv.req_pool_idx)


class Mode:
    def __init__(self, decode: bool):
        self.decode = decode

    def is_decode(self) -> bool:
        return self.decode

    def is_extend(self) -> bool:
        return not self.decode


class Node:
    def __init__(self, name: str, slots: int, out: Path):
        self.name = name
        self.alloc = PagedTokenToKVPoolAllocator(slots, PAGE, torch.float32, "cpu", None, False)
        self.pool = RowPool(16, 128)
        settings = Settings(out_dir=out, node=name, batch_events=64)
        self.ledger = SGLangLedger(Recorder(settings), PAGE)
        self.alloc._kvforensics_ledger = self.ledger
        self.pool._kvforensics_ledger = self.ledger
        self.last_writer: dict[int, str] = {}  # the driver's own ground truth

    def row_slots(self, req: Any, n: int) -> list[int]:
        return self.pool.req_to_token[req.kv.req_pool_idx, :n].tolist()

    def extend(self, req: Any, prefix: list[int], n: int) -> list[int]:
        """Row, prefix slots, alloc_extend for positions [len(prefix), n), row write."""
        self.pool.alloc([req])
        row, p = req.kv.req_pool_idx, len(prefix)
        if p:
            self.pool.write((row, slice(0, p)), torch.tensor(prefix))
        last = torch.tensor([prefix[-1] if p else -1])
        new = self.alloc.alloc_extend(
            torch.tensor([p]), torch.tensor([p]), torch.tensor([n]), torch.tensor([n]), last, n - p
        )
        assert new is not None, "pool exhausted"
        self.pool.write((row, slice(p, n)), new)
        return self.row_slots(req, n)

    def decode_step(self, req: Any, seq_len: int) -> None:
        """alloc_decode for position seq_len - 1, row write, the decode batch."""
        row = req.kv.req_pool_idx
        last = torch.tensor([int(self.pool.req_to_token[row, seq_len - 2])])
        slot = self.alloc.alloc_decode(torch.tensor([seq_len]), torch.tensor([seq_len]), last)
        self.pool.write((row, slice(seq_len - 1, seq_len)), slot)
        record_batch(SimpleNamespace(forward_mode=Mode(True), reqs=[req]), self.ledger)
        self.last_writer[int(slot[0])] = req.rid

    def release(self, req: Any, n: int, keep: int = 0) -> None:
        """Free the request's pages from position `keep` on (the radix cache keeps the rest)."""
        slots = self.row_slots(req, n)[keep:]
        if slots:
            self.alloc.free(torch.tensor(slots))
        self.pool.free(req)


def request(rid: str, prompt: list[int]) -> Any:
    return SimpleNamespace(
        rid=rid,
        origin_input_ids=prompt,
        output_ids=[],
        prefix_indices=[],
        fill_ids=prompt,
        kv=SimpleNamespace(req_pool_idx=None),
    )


def next_token(tokens: list[int]) -> int:
    return (sum(tokens) * 31 + len(tokens)) % 509 + 3


def serve(
    p: Node, d: Node, rid: str, prompt: list[int], n_out: int, radix: dict, stub: bool = False
) -> dict[str, Any]:
    """One request through prefill, transfer and decode, as SGLang's disaggregated mode runs
    it; `stub`: prefill runs the first token only and transfers just that."""
    t0 = time.time()
    req = request(rid, prompt)
    processed = prompt[:1] if stub else prompt
    key = tuple(prompt[: 4 * PAGE])
    prefix = list(radix[key][0]) if key in radix and not stub else []
    req.prefix_indices, req.fill_ids = prefix, processed
    p_slots = p.extend(req, prefix, len(processed))
    record_batch(SimpleNamespace(forward_mode=Mode(False), reqs=[req]), p.ledger)
    req.output_ids = [next_token(processed)]
    # decode pre-allocates len(origin_input_ids) + max(len(output_ids) - 1, 0) slots
    dreq = request(rid, prompt)
    dreq.output_ids = list(req.output_ids)
    d_slots = d.extend(dreq, [], len(prompt))
    d.ledger.transfer(rid, 0, len(processed), prompt)
    for s in d_slots[: len(processed)]:
        d.last_writer[s] = rid
    keep = 4 * PAGE if key not in radix and not stub and len(prompt) >= 4 * PAGE else 0
    if keep:
        radix[key] = (p_slots[:keep], rid)
    p.release(req, len(processed), keep=len(prefix) or keep)
    reads: list[list[Any]] = []
    for _ in range(n_out - 1):
        seq_len = len(prompt) + len(dreq.output_ids)
        d.decode_step(dreq, seq_len)
        reads.append([d.last_writer.get(s) for s in d.row_slots(dreq, seq_len)])
        dreq.output_ids.append(next_token(prompt + dreq.output_ids))
    total = len(prompt) + len(dreq.output_ids) - 1
    slots = d.row_slots(dreq, total)
    d.release(dreq, total)
    return {
        "rid": rid,
        "prompt_tokens": len(prompt),
        "completion_tokens": len(dreq.output_ids),
        "received_at": t0,
        "completed_at": time.time(),
        "decode_slots": slots,
        "first_read": reads[0] if reads else [],
    }


def main() -> None:
    out = Path(sys.argv[1])
    case = out / "case"
    patch_allocator(PagedTokenToKVPoolAllocator)
    patch_req_to_token_pool(RowPool)
    p, d = Node("prefill-0", PREFILL_SLOTS, case), Node("decode-0", DECODE_SLOTS, case)
    radix: dict = {}
    shared = list(range(100, 116))
    runs = [
        ("r1", "acct-a", shared + list(range(200, 208)), 6, False),
        ("r2", "acct-b", list(range(300, 330)), 5, False),
        ("r3", "acct-a", shared + list(range(400, 410)), 4, False),
        ("s1", "acct-c", list(range(40, 80)), 4, True),
    ]
    served = [serve(p, d, rid, prompt, n, radix, stub) for rid, _a, prompt, n, stub in runs]
    for key, (slots, _rid) in list(radix.items()):  # the radix cache evicts r1's prefix
        p.alloc.free(torch.tensor(slots))
        del radix[key]
    p.ledger.rec.close()
    d.ledger.rec.close()
    accounts = {rid: a for rid, a, *_ in runs}
    with open(case / "requests.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "request_id",
                "account_id",
                "model",
                "received_at",
                "completed_at",
                "http_status",
                "prompt_tokens",
                "completion_tokens",
                "prefill_node",
                "decode_node",
            ]
        )
        for r in served:
            w.writerow(
                [
                    r["rid"],
                    accounts[r["rid"]],
                    "m",
                    int(r["received_at"] * 1e6),
                    int(r["completed_at"] * 1e6),
                    200,
                    r["prompt_tokens"],
                    r["completion_tokens"],
                    "prefill-0",
                    "decode-0",
                ]
            )
    with open(case / "nodes.csv", "w", newline="") as fh:
        fh.write(
            "node,role,engine,page_size,pool_slots\n"
            f"prefill-0,prefill,sglang,{PAGE},{PREFILL_SLOTS + PAGE}\n"
            f"decode-0,decode,sglang,{PAGE},{DECODE_SLOTS + PAGE}\n"
        )
    (case / "accounts.csv").write_text(
        "account_id\n" + "".join(f"{a}\n" for a in sorted(set(accounts.values())))
    )
    (out / "truth.json").write_text(json.dumps({r["rid"]: r for r in served}, indent=1))


if __name__ == "__main__":
    main()
