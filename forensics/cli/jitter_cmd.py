"""`kvforensics jitter`: how late the gateway logged each node's outputs, on a case with both
its log and the node's KV ledger; the bound `reconstruct --delivery-jitter-ms` needs."""

from __future__ import annotations

from dataclasses import asdict

from forensics.base.textsafe import visible
from forensics.cli.app import app, console, emit_json
from forensics.cli.params import Db, Json
from forensics.cli.progress import run_on_case
from forensics.errors import UsageError
from forensics.reconstruct.delivery import Delivery, measure_delivery


def _ms(us: int) -> str:
    return f"{us / 1000:.1f}"


def _line(d: Delivery) -> str:
    return (
        f"{visible(d.node, keep_newlines=False)}: {d.outputs} outputs of {d.requests} requests "
        f"made in {d.steps} engine steps; one step's outputs were logged up to {_ms(d.needed_us)} "
        f"ms apart (the delivery jitter); each output {_ms(d.delay_min_us)} to "
        f"{_ms(d.delay_max_us)} ms after its step (median {_ms(d.delay_median_us)}, 99th "
        f"percentile {_ms(d.delay_p99_us)}, with any offset between the clocks)"
    )


@app.command()
def jitter(db: Db, json_out: Json = False) -> None:
    """Measure the gateway's delivery jitter on a case with both its request log and the
    nodes' KV ledger (recorded with `kvforensics tap` behind the same gateway): how far apart
    one engine step's outputs were logged. State at least the largest of these, with headroom
    for heavier load than the recording's, as `reconstruct --delivery-jitter-ms` for an
    incident's nodes whose logged times do not mark their steps."""
    found = run_on_case(console, db, "jitter", lambda con, _progress: measure_delivery(con))
    if not found:
        raise UsageError(
            f"{db}: no node has both KV ledger writes and gateway times for its requests; "
            "measure on a case recorded with the tap on (kvforensics tap) behind the same "
            "gateway, ingested with its request log"
        )
    if json_out:
        emit_json({"nodes": [asdict(d) for d in found]})
        return
    for d in found:
        console.print(f"jitter: {_line(d)}", markup=False)
    most = max(d.needed_us for d in found)
    console.print(
        f"jitter: state --delivery-jitter-ms {_ms(most)} or more for logs from this gateway "
        "under this load; more under heavier load",
        markup=False,
    )
