"""Tiny case databases for the replay tests, built by hand: requests, a KV ledger, contents."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from forensics.casedb.sql import run_script, sql

T0 = datetime(2026, 8, 27, 12, 0, 0)


@dataclass
class CaseBuilder:
    """Collects rows; `write(path)` creates the case database (ingest + analysis schemas)."""

    requests: list[tuple] = field(default_factory=list)
    events: list[tuple] = field(default_factory=list)
    contents: list[tuple] = field(default_factory=list)
    exposures: list[tuple] = field(default_factory=list)
    screening: list[tuple] = field(default_factory=list)
    affected: list[tuple] = field(default_factory=list)
    affected_accounts: list[tuple] = field(default_factory=list)
    sampling: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def request(
        self,
        rid: str,
        account: str,
        prompt_tokens: int,
        completion: int | None,
        decode_node: str | None,
        sha: str | None = None,
        model: str = "kvforensics/test-llama-tiny",
        prefill_node: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
    ) -> None:
        self.sampling[rid] = {"temperature": temperature, "top_p": top_p}
        self.requests.append(
            (
                rid,
                account,
                model,
                T0,
                None,
                None,
                200,
                prompt_tokens,
                completion,
                prefill_node,
                decode_node,
                None,
                sha,
                "requests.csv",
                len(self.requests) + 1,
            )
        )

    def event(
        self,
        tick: int,
        node: str,
        rid: str,
        op: str,
        slot: int,
        count: int,
        pos: int | None = None,
        source: str | None = None,
        seq: bool = True,
    ) -> None:
        order = len(self.events)
        self.events.append(
            (
                T0 + timedelta(milliseconds=tick),
                order if seq else None,
                node,
                rid,
                op,
                slot,
                count,
                pos,
                source,
                None,
                order,
                True,
                "kv_events.csv",
                order + 1,
            )
        )

    def content(
        self,
        rid: str,
        prompt: list[int] | None,
        output: list[int] | None,
        processed: list[int] | None = None,
    ) -> None:
        self.contents.append(
            (rid, prompt, output, processed, "contents.jsonl", len(self.contents) + 1)
        )

    def exposure(self, receiver: str, leaker: str, node: str, slot: int, count: int) -> None:
        self.exposures.append(
            (
                receiver,
                "acct-r",
                leaker,
                "acct-l",
                node,
                slot,
                count,
                0,
                count - 1,
                "prompt",
                T0,
                T0,
                T0,
                T0,
                "stale",
                True,
                "ledger",
            )
        )

    def screened(self, rid: str, reasons: list[str]) -> None:
        self.screening.append((rid, "acct", None, None, reasons, None, None, True, "ledger"))

    def affected_request(self, side: str, rid: str, account: str) -> None:
        self.affected.append((side, rid, account, "ledger", 5, 1, T0, T0, None))  # no support

    def affected_account(self, side: str, account: str) -> None:
        self.affected_accounts.append(
            (side, account, None, None, None, "ledger", 1, 5, T0, T0, 1, None)
        )

    def write(self, path: Path) -> Path:
        con = duckdb.connect(str(path))
        con.execute(sql("schema/case"))
        con.execute(sql("schema/analysis"))
        for table, rows in (
            ("requests", self.requests),
            ("kv_events", self.events),
            ("contents", self.contents),
            ("exposures", self.exposures),
            ("screening", self.screening),
            ("affected_requests", self.affected),
            ("affected_accounts", self.affected_accounts),
        ):
            relation = con.table(table)
            for row in rows:
                # columns the contract gained later (cached_tokens, sampling settings) by name
                extra = self.sampling.get(row[0], {}) if table == "requests" else {}
                values = list(row)
                values += [extra.get(c) for c in relation.columns[len(values) :]]
                relation.insert(values)
        mark_ingested(con, path.parent)
        con.close()
        return path


def mark_ingested(con: duckdb.DuckDBPyConnection, case_dir: Path) -> None:
    """Record the case folder as ingest does last: the commands then take it for a case."""
    run_script(con, sql("ingest/case_meta_set"), {"key": "case_dir", "value": str(case_dir)})


def query(path: Path, text: str) -> list[tuple]:
    con = duckdb.connect(str(path))
    try:
        return con.execute(text).fetchall()
    finally:
        con.close()
