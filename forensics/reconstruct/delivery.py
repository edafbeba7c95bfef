"""How late a gateway logs a node's outputs, measured where both its log and the node's KV
ledger exist (`kvforensics jitter`): the bound `reconstruct --delivery-jitter-ms` needs for
nodes whose logged times do not mark their steps.

A gateway in front of an engine's server logs each output (a request's first token, its
completion) when its chunk arrives, some milliseconds after the step that made it, each with a
delay of its own. The ledger has the steps: a request writes its KV once in every step it runs,
so its first token comes from the step of its last prefill write and its completion from the
step of its last write (requests served on one node only: a disaggregated request's outputs
come from two nodes' clocks). The delivery jitter is the widest gap from an output to the latest
output logged of its own step or an earlier one: two outputs logged further apart than it come
from different steps, the earlier first (forensics/reconstruct/jitter.py). A constant offset
between the gateway's clock and the node's moves every delay alike and leaves it unchanged.

A disaggregated decode node is rebuilt from its requests' logged arrivals and completions
instead (trace.py), taken as its allocations and frees, in both orders where closer than
`--skew-ms`: `measure_skew` finds how far out of the node's own order the gateway's times put
them, the --skew-ms such a node needs."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from forensics.casedb.sql import sql


@dataclass(frozen=True)
class Delivery:
    """One node's outputs as the gateway logged them against the ledger's steps."""

    node: str
    requests: int
    outputs: int
    steps: int
    needed_us: int  # the least delivery jitter with which the ledger's steps fit the log
    delay_min_us: int  # gateway time less step time; includes any offset between the clocks
    delay_median_us: int
    delay_p99_us: int
    delay_max_us: int


@dataclass(frozen=True)
class Skew:
    """One decode node's allocations and frees as the gateway's times order them against the
    node's own order (queries/reconstruct/skew.sql)."""

    node: str
    requests: int
    operations: int
    needed_us: int  # the widest logged gap of a pair the gateway's times put out of order
    out_of_order: int  # operations logged before one the node did earlier


def measure_delivery(con: duckdb.DuckDBPyConnection) -> list[Delivery]:
    """Per node with both ledger writes and gateway times for its requests, in node order."""
    return [Delivery(*row) for row in con.execute(sql("reconstruct/delivery")).fetchall()]


def measure_skew(con: duckdb.DuckDBPyConnection) -> list[Skew]:
    """Per decode node (the request log's decode_node) with ledger allocations, in node
    order."""
    return [Skew(*row) for row in con.execute(sql("reconstruct/skew")).fetchall()]
