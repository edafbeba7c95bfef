"""`kvforensics replay`: confirm suspects by re-running them through a model from the KV they
really read (needs the `replay` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from forensics.cli.app import app, console, emit_json, finish
from forensics.cli.params import Db, DeviceMap, Json, Model, ReplayOn, Request, ServedModel
from forensics.cli.progress import run_on_case
from forensics.options import ReplayOptions

if TYPE_CHECKING:
    from forensics.replay.stage import ReplaySummary


@app.command()
def replay(
    db: Db,
    model: Model = ReplayOptions.model,
    served_model: ServedModel = ReplayOptions.served_model,
    device: ReplayOn = ReplayOptions.device,
    device_map: DeviceMap = ReplayOptions.device_map,
    request: Request = None,
    json_out: Json = False,
) -> None:
    """Replay suspect receivers from the KV their decode read, and clean; store the verdicts
    (confirmed, not-reproduced, cannot-replay) and raise confirmed exposures to `confirmed`."""
    from forensics.replay.stage import require_replay, run_case_replay, summarise
    from forensics.replay.verdicts import Verdict
    from forensics.run.investigate import check_replay_options

    options = ReplayOptions(model, served_model, device, device_map, tuple(request or ()))
    check_replay_options(options.model, options.device, ("--model", "--device"))
    require_replay()
    run = run_on_case(
        console,
        db,
        "replay",
        lambda con, progress: run_case_replay(
            con,
            options.model,
            options.device.value,
            list(options.requests) or None,
            progress,
            device_map=options.device_map,
            served_model=options.served_model,
        ),
    )
    summary = summarise(run)
    if json_out:
        emit_json(summary)
    else:
        _print(summary)
    counts = summary["verdicts"]
    finish(
        counts[Verdict.CONFIRMED] + counts[Verdict.CANNOT_REPLAY] > 0
        or bool(summary["kept_confirmed"])
    )


def _print(summary: ReplaySummary) -> None:
    table = Table(
        title=f"replay {summary['run_id']} with {summary['model'] or '(no model)'} "
        f"on {summary['device']}"
    )
    for column in ("request", "verdict", "logged model", "seconds", "tokens/s", "reason"):
        table.add_column(column)
    for r in summary["results"]:
        table.add_row(
            escape(r["request_id"]),
            r["verdict"],
            "yes" if r["model_matches"] else "no (not counted)",
            f"{r.get('seconds', 0.0):.2f}",
            str(r.get("tokens_per_s") or ""),
            escape(r["reason"]),
        )
    console.print(table)
    console.print(escape(summary["headline"]))
