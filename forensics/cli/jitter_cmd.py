"""`kvforensics jitter`: the gateway's times against the nodes' KV ledger, on a case with both:
the bounds `reconstruct --delivery-jitter-ms` and `--skew-ms` need."""

from __future__ import annotations

from dataclasses import asdict

from forensics.base.textsafe import visible
from forensics.cli.app import app, console, emit_json
from forensics.cli.params import Db, Json
from forensics.cli.progress import run_on_case
from forensics.errors import UsageError
from forensics.options import ReconstructOptions
from forensics.reconstruct.delivery import Delivery, Skew, measure_delivery, measure_skew


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


def _skew_line(s: Skew) -> str:
    return (
        f"{visible(s.node, keep_newlines=False)} (decode): {s.operations} allocations and frees "
        f"of {s.requests} requests; the gateway's times put {s.out_of_order} of them before one "
        f"the node made earlier, by up to {_ms(s.needed_us)} ms (--skew-ms must be above that; "
        f"reconstruct's default is {ReconstructOptions().skew_ms:g})"
    )


@app.command()
def jitter(db: Db, json_out: Json = False) -> None:
    """Measure the gateway's timing against the nodes' KV ledger, on a case with both
    (recorded with `kvforensics tap` behind the same gateway): per node serving whole
    requests, how far apart one engine step's outputs were logged (state at least the largest,
    with headroom for heavier load, as `reconstruct --delivery-jitter-ms` for an incident's
    nodes whose logged times do not mark their steps); per disaggregated decode node, how far
    out of the node's order the logged arrivals and completions put its allocations and frees
    (`reconstruct --skew-ms` must be above it)."""
    found, skews = run_on_case(
        console,
        db,
        "jitter",
        lambda con, _progress: (measure_delivery(con), measure_skew(con)),
    )
    if not found and not skews:
        raise UsageError(
            f"{db}: no node has both KV ledger writes and gateway times for its requests; "
            "measure on a case recorded with the tap on (kvforensics tap) behind the same "
            "gateway, ingested with its request log"
        )
    if json_out:
        emit_json({"nodes": [asdict(d) for d in found], "decode_nodes": [asdict(k) for k in skews]})
        return
    for d in found:
        console.print(f"jitter: {_line(d)}", markup=False)
    for k in skews:
        console.print(f"jitter: {_skew_line(k)}", markup=False)
    if found:
        most = max(d.needed_us for d in found)
        console.print(
            f"jitter: state --delivery-jitter-ms {_ms(most)} or more for logs from this gateway "
            "under this load; more under heavier load",
            markup=False,
        )
