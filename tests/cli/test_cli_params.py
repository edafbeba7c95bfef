"""Every option is declared once: each command parameter is an alias of forensics.cli.params,
and an option name means one thing (type, default, help) in every command that takes it. Fixed
choices are enums that the option parser checks; the typed options are checked when built."""

from __future__ import annotations

import inspect
from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import pytest
import typer

from forensics.base.isotime import option_time, parse_iso
from forensics.cli import app, params
from forensics.cli.app import command
from forensics.errors import UsageError
from forensics.options import (
    AnalysisOptions,
    InvestigateOptions,
    ReconstructOptions,
    ReplayOptions,
    ScreeningParams,
)


def _callbacks() -> dict[str, Any]:
    out = {}
    for info in app.registered_commands:
        assert info.callback is not None
        out[info.name or info.callback.__name__.replace("_", "-")] = info.callback
    return out


def test_every_parameter_is_an_alias_from_params():
    declared = {
        id(get_args(alias)[1]): name
        for name, alias in vars(params).items()
        if get_origin(alias) is Annotated
    }
    used: set[str] = set()
    for name, callback in _callbacks().items():
        hints = get_type_hints(callback, include_extras=True)
        for pname in inspect.signature(callback).parameters:
            hint = hints[pname]
            if hint is typer.Context:
                continue
            assert get_origin(hint) is Annotated, f"{name} {pname}: not an alias of cli/params.py"
            info = get_args(hint)[1]
            assert id(info) in declared, f"{name} {pname}: declared outside cli/params.py"
            used.add(declared[id(info)])
    assert set(declared.values()) - used == set(), "aliases that no command uses"


def _options() -> dict[str, list[tuple[str, Any]]]:
    """For each option name, (command, what the parser knows of it) for every command."""
    seen: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for name, cmd in command().commands.items():  # type: ignore[attr-defined]
        for p in cmd.params:
            if p.param_type_name != "option" or p.name == "help":
                continue
            kind = repr(p.type_descriptor.annotation)  # type: ignore[attr-defined]
            seen[p.opts[0]].append((name, (kind, p.default, p.help, p.multiple, p.is_flag)))
    return seen


def test_an_option_name_means_one_thing_in_every_command():
    seen = _options()
    for flag, uses in seen.items():
        if flag in params.PER_COMMAND:
            continue
        kinds = {repr(what) for _, what in uses}
        assert len(kinds) == 1, f"{flag} differs between {[c for c, _ in uses]}: {kinds}"
    for flag in params.PER_COMMAND:  # an exception is listed only while it is needed
        assert len(seen[flag]) >= 2, f"{flag} is listed in PER_COMMAND but one command takes it"
    shared = [f for f, uses in seen.items() if len(uses) > 1 and f not in params.PER_COMMAND]
    assert {"--db", "--out", "--rules", "--ray", "--ledger-external", "--json"} <= set(shared)


def test_the_command_line_takes_the_library_defaults():
    seen = {(c, f): what[1] for f, uses in _options().items() for c, what in uses}
    screening = ScreeningParams()
    assert seen[("analyze", "--window-s")] == screening.window_s == 600.0
    assert seen[("analyze", "--ttft-factor")] == screening.ttft_factor == 10.0
    assert seen[("analyze", "--workers")] == AnalysisOptions().workers
    rc = ReconstructOptions()
    assert seen[("reconstruct", "--orders")] == rc.orders
    assert seen[("reconstruct", "--skew-ms")] == rc.skew_ms
    assert seen[("reconstruct", "--replay-budget")] == rc.replay_budget
    for cmd, flag in (("investigate", "--replay-device"), ("replay", "--device")):
        assert seen[(cmd, flag)] == "auto"
    assert InvestigateOptions().replay_device == ReplayOptions().device == "auto"


@pytest.mark.parametrize(
    ("args", "bad"),
    [
        (["replay", "--db", "x.duckdb", "--device", "tpu"], "tpu"),
        (["investigate", "case", "--out", "o", "--replay-device", "gpu"], "gpu"),
        (["reconstruct", "--db", "x.duckdb", "--allocator", "fifo"], "fifo"),
        (["simulate", "sim", "--allocator", "auto"], "auto"),
        (["simulate", "sim", "--bug", "oversize"], "oversize"),
        (["simulate", "sim", "--model", "gpt"], "gpt"),
        (["bench", "--mix", "medium"], "medium"),
        (["tap", "tgi", "--", "true"], "tgi"),
    ],
)
def test_a_value_outside_a_fixed_choice_exits_2_naming_it(cli, tmp_path, monkeypatch, args, bad):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(*args)
    assert code == 2 and bad in err
    assert list(tmp_path.iterdir()) == []  # refused before any work


def test_help_lists_the_choices(cli):
    code, out, err = cli("replay", "--help")
    assert code == 0 and "auto|cpu|cuda" in out + err


def test_typed_options_are_checked_when_built():
    with pytest.raises(UsageError, match="--replay-device 'tpu' is not one of auto, cpu, cuda"):
        InvestigateOptions(replay_device="tpu")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="--orders"):
        ReconstructOptions(orders=0)
    with pytest.raises(UsageError, match="--replay-budget"):
        ReconstructOptions(replay_budget=-1)
    with pytest.raises(UsageError, match="--workers"):
        AnalysisOptions(workers=0)
    assert ReconstructOptions(allocator="vllm").allocator == "vllm"  # type: ignore[arg-type]


def test_the_manifest_parameters_keep_their_keys(tmp_path):
    rules = tmp_path / "rules.csv"
    rules.write_bytes(b"jurisdiction,notify_within_hours\n*,72\n")
    got = InvestigateOptions(rules=rules, replay_device="cpu", ray="local").parameters()  # type: ignore[arg-type]
    import hashlib

    assert got == {
        "assume_utc": False,
        "aware_at": None,
        "replay_model": None,
        "replay_device": "cpu",
        "served_model": None,
        "rules": str(rules),
        "follow_links": False,
        "rules_sha256": hashlib.sha256(rules.read_bytes()).hexdigest(),
        "ray": "local",
    }
    assert type(got["replay_device"]) is str


def test_one_iso_time_reader():
    assert parse_iso("2026-09-01T02:00:00Z") == datetime(2026, 9, 1, 2, tzinfo=UTC)
    assert parse_iso(" 2026-09-01T02:00:00z ") == datetime(2026, 9, 1, 2, tzinfo=UTC)
    plus2 = timezone(timedelta(hours=2))
    assert parse_iso("2026-09-01T02:00:00+02:00") == datetime(2026, 9, 1, 2, tzinfo=plus2)
    assert parse_iso("2026-09-01T02:00:00").tzinfo is None
    with pytest.raises(ValueError):
        parse_iso("yesterday")
    assert option_time("2026-09-01T00:00:00Z", "--x", "E") == datetime(2026, 9, 1, tzinfo=UTC)
    with pytest.raises(UsageError, match="--fixed-at '2026-09-01' has no UTC offset"):
        option_time("2026-09-01", "--fixed-at", "2026-09-05T00:00:00Z")
    with pytest.raises(UsageError, match="not an ISO-8601 time; write e.g. 2026-09-05T00:00:00Z"):
        option_time("soon", "--fixed-at", "2026-09-05T00:00:00Z")
    with pytest.raises(UsageError, match="not an ISO-8601"):
        option_time("0001-01-01T00:00:00+05:00", "--aware-at", "E")  # before year 1 in UTC
