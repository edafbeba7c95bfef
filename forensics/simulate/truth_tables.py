"""Ground-truth tables from the sweep's slot pieces: exposures and violations coalesced into
maximal contiguous slot runs, and the cross-account receiving and leaking lists (DESIGN.md §6)."""

from __future__ import annotations

import numpy as np
import polars as pl

from forensics.analysis.codes import VIOLATIONS
from forensics.simulate import ledger as L
from forensics.simulate.truth import KINDS, Pieces

EXP_COLS = ("reader", "writer", "node", "slot", "kind", "wpos", "rts", "wts", "wsrc")
VIO_COLS = ("reader", "node", "slot", "violation", "other")


def _frame(parts: list[tuple[np.ndarray, ...]], cols: tuple[str, ...]) -> pl.DataFrame:
    if not parts:
        return pl.DataFrame({c: pl.Series(c, [], pl.Int64) for c in cols})
    arrays = [np.concatenate([p[k] for p in parts]).astype(np.int64) for k in range(len(cols))]
    return pl.DataFrame(dict(zip(cols, arrays, strict=True)))


def _runs(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Number maximal contiguous slot runs within each key group (df sorted by keys, slot)."""
    new = pl.col("slot") != pl.col("slot").shift(1) + 1
    for k in keys:
        new = new | (pl.col(k) != pl.col(k).shift(1))
    return df.with_columns(run=new.fill_null(True).cum_sum())


def exposure_slots(pieces: Pieces) -> pl.DataFrame:
    """One row per distinct (reader, writer, node, slot, kind) with times and positions."""
    df = _frame(pieces.exp, EXP_COLS)
    return df.group_by(["reader", "writer", "node", "slot", "kind"]).agg(
        pos_min=pl.col("wpos").min(),
        pos_max=pl.col("wpos").max(),
        first_read=pl.col("rts").min(),
        last_read=pl.col("rts").max(),
        first_write=pl.col("wts").min(),
        last_write=pl.col("wts").max(),
        generated=(pl.col("wsrc") == L.SRC_DECODE).any(),
        prompt=(pl.col("wsrc") != L.SRC_DECODE).any(),
    )


def exposures(
    slots: pl.DataFrame, ids: list[str], nodes: list[str], accounts: list[str]
) -> pl.DataFrame:
    keys = ["reader", "writer", "node", "kind"]
    df = _runs(slots.sort([*keys, "slot"]), keys)
    runs = df.group_by(["run", *keys]).agg(
        slot_start=pl.col("slot").min(),
        slot_count=pl.len(),
        leaker_pos_min=pl.col("pos_min").min(),
        leaker_pos_max=pl.col("pos_max").max(),
        gen=pl.col("generated").any(),
        prm=pl.col("prompt").any(),
        first_read_us=pl.col("first_read").min(),
        last_read_us=pl.col("last_read").max(),
        first_write_us=pl.col("first_write").min(),
        last_write_us=pl.col("last_write").max(),
    )
    part = (
        pl.when(pl.col("gen") & pl.col("prm"))
        .then(pl.lit("mixed"))
        .when(pl.col("gen"))
        .then(pl.lit("generated"))
        .otherwise(pl.lit("prompt"))
    )
    out = runs.with_columns(
        receiver_request_id=_name(ids, "reader"),
        leaker_request_id=_name(ids, "writer"),
        node_name=_name(nodes, "node"),
        kind_name=_name(list(KINDS), "kind"),
        leaker_part=part,
        tokens=pl.col("slot_count"),
        receiver_account_id=_name(accounts, "reader"),
        leaker_account_id=_name(accounts, "writer"),
    ).with_columns(cross_account=pl.col("receiver_account_id") != pl.col("leaker_account_id"))
    cols = [
        "receiver_request_id",
        "leaker_request_id",
        "node_name",
        "slot_start",
        "slot_count",
        "kind_name",
        "tokens",
        "leaker_pos_min",
        "leaker_pos_max",
        "leaker_part",
        "first_read_us",
        "last_read_us",
        "first_write_us",
        "last_write_us",
        "receiver_account_id",
        "leaker_account_id",
        "cross_account",
    ]
    out = out.select(cols).rename({"node_name": "node", "kind_name": "kind"})
    return out.sort(["receiver_request_id", "leaker_request_id", "node", "slot_start", "kind"])


def _name(values: list[str], col: str) -> pl.Expr:
    return pl.col(col).map_elements(lambda i: values[i], return_dtype=pl.String)


def violations(pieces: Pieces, ids: list[str], nodes: list[str]) -> pl.DataFrame:
    df = _frame(pieces.vio, VIO_COLS).unique()
    keys = ["reader", "node", "violation", "other"]
    df = _runs(df.sort([*keys, "slot"]), keys)
    runs = df.group_by(["run", *keys]).agg(slot_start=pl.col("slot").min(), slot_count=pl.len())
    out = (
        runs.with_columns(
            request_id=_name(ids, "reader"),
            node_name=_name(nodes, "node"),
            violation_name=_name(list(VIOLATIONS), "violation"),
            other_request_id=pl.when(pl.col("other") >= 0).then(
                pl.col("other").map_elements(lambda i: ids[i], return_dtype=pl.String)
            ),
        )
        .select(
            [
                "request_id",
                "node_name",
                "slot_start",
                "slot_count",
                "violation_name",
                "other_request_id",
            ]
        )
        .rename({"node_name": "node", "violation_name": "violation"})
    )
    return out.sort(
        ["request_id", "node", "slot_start", "violation", "other_request_id"], nulls_last=True
    )


def token_pairs(slots: pl.DataFrame, account: np.ndarray) -> pl.DataFrame:
    """Distinct (reader, node, slot, writer) token exposures with both accounts."""
    df = slots.select(["reader", "node", "slot", "writer"]).unique()
    acc = pl.Series(account.astype(np.int64))
    return df.with_columns(
        reader_acc=pl.col("reader").map_elements(lambda i: int(acc[i]), return_dtype=pl.Int64),
        writer_acc=pl.col("writer").map_elements(lambda i: int(acc[i]), return_dtype=pl.Int64),
    )


def accounts(pairs: pl.DataFrame, account_ids: list[str]) -> pl.DataFrame:
    """side, account_id, requests, tokens: cross-account exposures only (DESIGN.md §6)."""
    cross = pairs.filter(pl.col("reader_acc") != pl.col("writer_acc"))
    frames = []
    for side, req, acc in (
        ("receiving", "reader", "reader_acc"),
        ("leaking", "writer", "writer_acc"),
    ):
        g = cross.group_by(acc).agg(requests=pl.col(req).n_unique(), tokens=pl.len())
        frames.append(
            g.select(
                side=pl.lit(side),
                account_id=_name(account_ids, acc),
                requests=pl.col("requests").cast(pl.Int64),
                tokens=pl.col("tokens").cast(pl.Int64),
            )
        )
    out = pl.concat(frames)
    order = pl.col("side").replace_strict({"receiving": 0, "leaking": 1}, return_dtype=pl.Int8)
    return out.sort([order, "account_id"])


def request_lists(
    pairs: pl.DataFrame, ids: list[str], account_ids: list[str], account: np.ndarray
) -> dict[str, pl.DataFrame]:
    """Per side, one row per request with exposures: tokens and cross-account tokens."""
    out = {}
    for side, req, other in (("receiving", "reader", "writer"), ("leaking", "writer", "reader")):
        g = pairs.group_by(req).agg(
            tokens=pl.len(),
            cross_account_tokens=(pl.col("reader_acc") != pl.col("writer_acc")).sum(),
            counterpart_requests=pl.col(other).n_unique(),
        )
        g = g.with_columns(
            request_id=_name(ids, req),
            account_id=pl.col(req).map_elements(
                lambda i: account_ids[int(account[i])], return_dtype=pl.String
            ),
        )
        out[side] = g.select(
            ["request_id", "account_id", "tokens", "cross_account_tokens", "counterpart_requests"]
        ).sort("request_id")
    return out
