"""The input contract (docs/DESIGN.md §3): which tables a case folder may hold and their columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from forensics.errors import InputError

Kind = Literal["str", "int", "num", "ts", "ids"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    required: bool = False


@dataclass(frozen=True)
class TableContract:
    name: str
    columns: tuple[Column, ...]
    key: str | None = None  # unique key: later duplicates are quarantined

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def required(self) -> list[str]:
        return [c.name for c in self.columns if c.required]


def _cols(spec: str) -> tuple[Column, ...]:
    """'name:kind!' per whitespace-separated item; '!' marks a required column."""
    columns = []
    for item in spec.split():
        name, kind = item.rstrip("!").split(":")
        columns.append(Column(name, kind, item.endswith("!")))  # type: ignore[arg-type]
    return tuple(columns)


NODES = TableContract(
    "nodes",
    _cols(
        "node:str! role:str model:str engine:str engine_version:str page_size:int "
        "pool_slots:int context_len:int started_at:ts"
    ),
    key="node",
)
ACCOUNTS = TableContract(
    "accounts",
    _cols("account_id:str! name:str contact_email:str jurisdiction:str"),
    key="account_id",
)
REQUESTS = TableContract(
    "requests",
    _cols(
        "request_id:str! account_id:str! model:str! received_at:ts! first_token_at:ts "
        "completed_at:ts http_status:int! prompt_tokens:int! completion_tokens:int "
        "prefill_node:str decode_node:str node:str response_sha256:str cached_tokens:int "
        "temperature:num top_p:num top_k:int seed:int"
    ),
    key="request_id",
)
CONTENTS = TableContract(
    "contents",
    _cols("request_id:str! prompt_token_ids:ids output_token_ids:ids processed_token_ids:ids"),
    key="request_id",
)
KV_EVENTS = TableContract(
    "kv_events",
    _cols(
        "ts:ts! seq:int node:str! request_id:str! op:str! slot_start:int! slot_count:int! "
        "pos_start:int source:str content_hash:str"
    ),
)

# Load order matters: kv_events are checked against nodes (pool size) and requests.
TABLES: tuple[TableContract, ...] = (NODES, ACCOUNTS, REQUESTS, CONTENTS, KV_EVENTS)
BY_NAME = {t.name: t for t in TABLES}
OPS = ("free", "alloc", "share", "write", "read")  # in op-rank order (the analysis' op codes)


# Columns the Parquet reader gives every row it reads from several files: the file's place in
# the scan and the row's place in its file. A file's own column of one of these names stands in
# for the reader's (DuckDB binds the name to the file's column), so a scan that numbers rows by
# them would number, order and name them after the column's values.
READER_COLUMNS = ("file_index", "file_row_number")


def reader_column(found: list[str], names: tuple[str, ...] = READER_COLUMNS) -> str | None:
    """A column among found named as one of `names`, columns the Parquet reader adds (names
    match without regard to case, as DuckDB binds them), or None."""
    return next((c for c in found if c.lower() in names), None)


def refuse_reader_column(rel: str, found: list[str], names: tuple[str, ...], why: str) -> None:
    """InputError naming the file `rel` when one of its columns `found` has the name of one of
    `names`, columns the Parquet reader adds to each row (`why`: what the reader's column is
    used for, which the file's own would stand in for)."""
    reserved = reader_column(found, names)
    if reserved is not None:
        raise InputError(
            f"column '{reserved}' has the name of a column the Parquet reader adds to each row "
            f"({why})",
            path=rel,
            fix=f"rename or drop the column '{reserved}' (it is not a column of the contract)",
        )


def refuse_case_twins(rel: str, found: list[str]) -> None:
    """InputError naming the file `rel` when two of its columns `found` have names that differ
    only in case: DuckDB binds a name without regard to case, to the first of them, so a read
    of the contract's column could read the other one's values."""
    seen: dict[str, str] = {}
    for name in found:
        first = seen.setdefault(name.casefold(), name)
        if first != name:
            raise InputError(
                f"the columns '{first}' and '{name}' differ only in case, and the reader takes "
                "them for one column",
                path=rel,
                fix="rename or remove one of the two columns",
            )
