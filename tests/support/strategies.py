"""Hypothesis strategies for cases: KV ledgers (kv_events rows), the request log's rows, and
both as the tables of a case folder under the input contract (forensics.case.contract).

Ledger events come as the naive oracle reads them (support/oracle.py): ts in integer
microseconds after support.analysis_case.EPOCH and input_order their place in the input.
kv_event_rows() and request_rows() give the same as contract rows (timestamps as text), which
case_tables() draws together and case_files() writes as requests.csv and kv_events.jsonl;
tests/case/test_case_strategies.py checks that such a case ingests with nothing quarantined."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from forensics.case.contract import KV_EVENTS
from support.analysis_case import EPOCH

REQUESTS = ("A", "B", "C", "D", "E")
ACCOUNTS = ("acct-1", "acct-2", "acct-3")
OPS = ("alloc", "share", "write", "read", "free")
HASHES = (None, "h1", "h2")
SOURCES = (None, "prefill", "decode", "transfer")


@st.composite
def event(draw: st.DrawFn, node: str, slots: int) -> dict[str, Any]:
    op = draw(st.sampled_from(OPS))
    start = draw(st.integers(0, slots - 1))
    count = draw(st.integers(1, slots - start))
    return {
        "ts": draw(st.integers(0, 12)),
        "node": node,
        "request_id": draw(st.sampled_from(REQUESTS)),
        "op": op,
        "slot_start": start,
        "slot_count": count,
        "pos_start": draw(st.integers(0, 6)) if op != "free" else None,
        "source": draw(st.sampled_from(SOURCES)) if op == "write" else None,
        "content_hash": draw(st.sampled_from(HASHES)) if op in ("write", "share") else None,
    }


@st.composite
def ledger(draw: st.DrawFn, max_events: int = 40, slots: int = 12) -> list[dict[str, Any]]:
    """Events on one or two nodes; seq on every event of a node, on some, or none; ties on ts;
    input order a random permutation (files read out of time order)."""
    events: list[dict[str, Any]] = []
    for node in draw(st.sampled_from((("n1",), ("n1", "n2")))):
        evs = draw(st.lists(event(node, slots), min_size=1, max_size=max_events))
        seq_mode = draw(st.sampled_from(("all", "some", "none")))
        seqs = draw(st.permutations(range(len(evs))))
        for ev, seq in zip(evs, seqs, strict=True):
            dup = draw(st.booleans()) if seq_mode == "all" else False
            keep = seq_mode == "all" or (seq_mode == "some" and draw(st.booleans()))
            ev["seq"] = (seq // 2 if dup else seq) if keep else None
        events.extend(evs)
    order = draw(st.permutations(range(len(events))))
    for input_order, idx in enumerate(order):
        events[idx]["input_order"] = input_order
    return sorted(events, key=lambda e: e["input_order"])


@st.composite
def lifecycle(draw: st.DrawFn, node: str, request: str, slots: int) -> list[dict[str, Any]]:
    """One request's plausible life on a node: acquire, write part, read, maybe free."""
    start = draw(st.integers(0, slots - 1))
    count = draw(st.integers(1, slots - start))
    t = draw(st.integers(0, 10))
    base = {
        "node": node,
        "request_id": request,
        "slot_start": start,
        "slot_count": count,
        "source": None,
        "content_hash": None,
        "pos_start": 0,
    }
    acquire = draw(st.sampled_from(("alloc", "alloc", "share")))
    out = [dict(base, ts=t, op=acquire, content_hash=draw(st.sampled_from(HASHES)))]
    w_start = draw(st.integers(start, start + count - 1))
    w_count = draw(st.integers(1, start + count - w_start))
    out.append(
        dict(
            base,
            ts=t + draw(st.integers(0, 2)),
            op="write",
            slot_start=w_start,
            slot_count=w_count,
            pos_start=w_start - start,
            source=draw(st.sampled_from(SOURCES)),
            content_hash=draw(st.sampled_from(HASHES)),
        )
    )
    out.append(dict(base, ts=t + draw(st.integers(0, 3)), op="read"))
    if draw(st.booleans()):
        out.append(dict(base, ts=t + draw(st.integers(1, 4)), op="free", pos_start=None))
    return out


@st.composite
def busy_ledger(draw: st.DrawFn, slots: int = 16) -> list[dict[str, Any]]:
    """Many request lifecycles on shared slots plus random events, seq on all or none."""
    events: list[dict[str, Any]] = []
    for node in draw(st.sampled_from((("n1",), ("n1", "n2")))):
        evs: list[dict[str, Any]] = []
        for i in range(draw(st.integers(1, 8))):
            evs.extend(draw(lifecycle(node, f"R{i}", slots)))
        evs.extend(draw(st.lists(event(node, slots), max_size=8)))
        use_seq = draw(st.booleans())
        ranks = sorted(range(len(evs)), key=lambda i: (evs[i]["ts"], draw(st.integers(0, 3))))
        for seq, i in enumerate(ranks):
            evs[i]["seq"] = seq if use_seq else None
        events.extend(evs)
    order = draw(st.permutations(range(len(events))))
    for input_order, idx in enumerate(order):
        events[idx]["input_order"] = input_order
    return sorted(events, key=lambda e: e["input_order"])


def request_accounts(
    names: list[str], accounts: tuple[str, ...] = ACCOUNTS
) -> st.SearchStrategy[dict[str, tuple[str, int]]]:
    """Each named request's account and prompt length (1 to 8 tokens)."""
    return st.fixed_dictionaries(
        {n: st.tuples(st.sampled_from(accounts), st.integers(1, 8)) for n in names}
    )


def utc_text(us: int) -> str:
    """EPOCH plus us microseconds, as ISO 8601 text in UTC."""
    return (EPOCH + timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")


def request_rows(requests: dict[str, tuple[str, int]], node: str = "n1") -> list[dict[str, Any]]:
    """The request log's rows (the contract's required columns, decode_node `node`) of
    requests: request id -> (account, prompt tokens), all received at EPOCH and answered 200."""
    return [
        {
            "request_id": rid,
            "account_id": account,
            "model": "m",
            "received_at": utc_text(0),
            "http_status": 200,
            "prompt_tokens": prompt,
            "decode_node": node,
        }
        for rid, (account, prompt) in requests.items()
    ]


KV_COLUMNS = tuple(KV_EVENTS.names)  # the contract's columns of kv_events, in its order


def kv_event_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Oracle events as kv_events rows of the contract, in input order (ts as text)."""
    ordered = sorted(events, key=lambda e: e["input_order"])
    return [{c: utc_text(e["ts"]) if c == "ts" else e.get(c) for c in KV_COLUMNS} for e in ordered]


@st.composite
def case_tables(draw: st.DrawFn) -> dict[str, list[dict[str, Any]]]:
    """A random or busy ledger and a request log row for every request it names."""
    events = draw(st.one_of(ledger(), busy_ledger()))
    requests = draw(request_accounts(sorted({e["request_id"] for e in events})))
    return {"requests": request_rows(requests), "kv_events": kv_event_rows(events)}


def case_files(tables: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """The tables as a case folder's files: requests.csv and kv_events/part-0.jsonl."""
    sink = io.StringIO()
    writer = csv.DictWriter(sink, fieldnames=list(tables["requests"][0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(tables["requests"])
    lines = "".join(json.dumps(row) + "\n" for row in tables["kv_events"])
    return {"requests.csv": sink.getvalue(), "kv_events/part-0.jsonl": lines}
