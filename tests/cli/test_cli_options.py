"""Every option of every command reaches its stage (or the manifest).

The options are taken from the typer app itself, so a new option without a way to reach its
stage fails here. For each command the stage's entry point is replaced by a recorder; each
option is given a value that differs from its default, and what the stage receives must differ
from what it receives without the option. `investigate` is also run for real with every option
and its manifest must record each value; bad values fail before any work."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer
from support.paths import DATA

from forensics.cli import app

# (module, attribute) of the function each command hands its work to.
STAGE_ENTRY = {
    "analyze": ("forensics.analysis.stage", "analyze"),
    "audit-logs": ("forensics.cli.audit_cmd", "read_logs"),
    "bench": ("forensics.cli.bench_cmd", "run_chosen"),
    "explain": ("forensics.cli.explain_cmd", "explain_one"),
    "ingest": ("forensics.cli.ingest_cmd", "ingest_case"),
    "investigate": ("forensics.run.investigate", "_run"),
    "jitter": ("forensics.cli.jitter_cmd", "measure_delivery"),
    "probe": ("forensics.probe.stage", "run_probe"),
    "replay": ("forensics.replay.stage", "run_case_replay"),
    "report": ("forensics.cli.report_cmd", "write_all"),
    "reconstruct": ("forensics.reconstruct.stage", "reconstruct"),
    "simulate": ("forensics.simulate.run", "simulate"),
    "tap": ("forensics.tap.launch", "launch"),
    "verify": ("forensics.cli.verify_cmd", "run_verify"),
}
# Options that change only how the result is printed, not what the stage does.
OUTPUT_ONLY = {"--json", "--html"}
LOG = DATA / "logs" / "variants" / "sgl-030.log"


class Recorded(Exception):
    pass


def _flat(cli):
    """The cli fixture with stderr unwrapped (messages are wrapped to the terminal width)."""

    def run(*args):
        code, out, err = cli(*args)
        return code, out, " ".join(err.split())

    return run


def _commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def _fixtures(tmp_path: Path) -> dict[str, Any]:
    case = tmp_path / "case"
    case.mkdir()
    (case / "requests.csv").write_text(
        "request_id,account_id,model,received_at,http_status,prompt_tokens\n"
        "R1,a,m,2026-08-27T10:00:00,200,1\n"
    )
    db = tmp_path / "c.duckdb"
    from forensics.cli import run

    run(["ingest", str(case), "--db", str(db), "--assume-utc"])
    rules = tmp_path / "rules.csv"
    rules.write_text(
        "jurisdiction,notify_within_hours,authority_within_hours,basis\nEU,1,2,probe basis\n"
    )
    node_map = tmp_path / "map.csv"
    node_map.write_text("node,file_glob\nprobe-node,*\n")
    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    (tmp_path / "examiner.pem").write_bytes(
        key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption())
    )
    (tmp_path / "examiner.pub").write_bytes(
        key.public_key().public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH)
    )
    templates = tmp_path / "templates"  # no file of its own: the package's are used
    templates.mkdir()
    return {
        "case": case,
        "db": db,
        "rules": rules,
        "node_map": node_map,
        "tmp": tmp_path,
        "templates": templates,
    }


def _base(name: str, f: dict[str, Any]) -> list[str]:
    """The arguments a command needs to start (required options and arguments)."""
    return {
        "analyze": ["--db", f["db"]],
        "audit-logs": [LOG],
        "bench": [],
        "explain": ["R1", "--db", f["db"]],
        "ingest": [f["case"], "--db", f["tmp"] / "d.duckdb"],
        "investigate": [f["case"], "--out", f["tmp"] / "out"],
        "probe": ["http://127.0.0.1:9", "--out", f["tmp"] / "probe"],
        "replay": ["--db", f["db"]],
        "report": ["--db", f["db"], "--out", f["tmp"] / "r"],
        "reconstruct": ["--db", f["db"]],
        "jitter": ["--db", f["db"]],
        "simulate": [f["tmp"] / "sim"],
        "tap": ["vllm", "--", "true"],
        "verify": [f["tmp"]],
    }[name]


def _value(command: str, option: Any, f: dict[str, Any]) -> list[Any]:
    """Arguments that set the option to a valid value other than its default."""
    special: dict[tuple[str, str], Any] = {
        ("investigate", "--aware-at"): "2026-09-01T00:00:00Z",
        ("report", "--aware-at"): "2026-09-01T00:00:00Z",
        ("investigate", "--rules"): f["rules"],
        ("report", "--rules"): f["rules"],
        ("investigate", "--replay-model"): "test",
        ("replay", "--model"): "test",
        ("investigate", "--replay-device"): "cpu",
        ("replay", "--device"): "cpu",
        ("replay", "--request"): "R1",
        ("audit-logs", "--node-map"): f["node_map"],
        ("bench", "--mix"): "long",
        ("bench", "--memory-limit"): "1GB",
        ("bench", "--workdir"): f["tmp"] / "bench",
        ("bench", "--ledger-external"): "kv_events",
        ("bench", "--model"): "random-tiny",
        ("bench", "--device"): "cpu",
        ("bench", "--contexts"): "64",
        ("bench", "--leakers"): "2",
        ("simulate", "--bug"): "late-transfer",
        ("simulate", "--fixed-at"): "2026-09-01T00:00:00Z",
        ("simulate", "--model"): "test",
        ("verify", "--case"): f["case"],
        ("verify", "--pubkey"): f["tmp"] / "examiner.pub",
        ("investigate", "--examiner"): "A. Examiner",
        ("investigate", "--case-ref"): "TICKET-47",
        ("investigate", "--sign-key"): f["tmp"] / "examiner.pem",
        ("ingest", "--db"): f["tmp"] / "e.duckdb",
        ("analyze", "--db"): f["tmp"] / "copy.duckdb",
        ("investigate", "--out"): f["tmp"] / "out2",
        ("report", "--out"): f["tmp"] / "r2",
        ("replay", "--db"): f["tmp"] / "copy.duckdb",
        ("explain", "--db"): f["tmp"] / "copy.duckdb",
        ("simulate", "--sampling"): "greedy",
        ("report", "--db"): f["tmp"] / "copy.duckdb",
        ("investigate", "--served-model"): "served",
        ("replay", "--served-model"): "served",
        ("replay", "--device-map"): "auto",
        ("simulate", "--allocator"): "sglang",
        ("analyze", "--ray"): "127.0.0.1:6379",
        ("investigate", "--ray"): "127.0.0.1:6379",
        ("ingest", "--ray"): "127.0.0.1:6379",
        ("ingest", "--ledger-external"): f["tmp"] / "ledger",
        ("investigate", "--ledger-external"): f["tmp"] / "ledger",
        ("reconstruct", "--db"): f["tmp"] / "copy.duckdb",
        ("reconstruct", "--allocator"): "lifo",
        ("reconstruct", "--replay-model"): "test",
        ("reconstruct", "--replay-device"): "cpu",
        ("reconstruct", "--delivery-jitter-ms"): "3.5",
        ("investigate", "--delivery-jitter-ms"): "3.5",
        ("reconstruct", "--sglang-free-list"): "front",
        ("investigate", "--sglang-free-list"): "front",
        ("jitter", "--db"): f["tmp"] / "copy.duckdb",
        ("tap", "--dir"): f["tmp"] / "tapdir",
        ("tap", "--node"): "node-x",
        ("investigate", "--templates"): f["templates"],
        ("report", "--templates"): f["templates"],
        ("investigate", "--since"): "2026-08-27T00:00:00Z",
        ("report", "--since"): "2026-08-27T00:00:00Z",
        ("investigate", "--until"): "1788480000000000",
        ("report", "--until"): "1788480000000000",
        ("investigate", "--account"): "a",
        ("report", "--account"): "a",
        ("probe", "--api"): "text",
        ("probe", "--model"): "served",
        ("probe", "--api-key-env"): "PROBE_KEY",
        ("probe", "--out"): f["tmp"] / "probe2",
    }
    name = option.opts[0]
    if option.is_flag:
        if option.secondary_opts and option.default:
            return [option.secondary_opts[0]]
        return [name]
    # options that act only together with another one (given alongside, at its own value)
    companion = {("ingest", "--ray"): ["--ledger-external", f["tmp"] / "ledger"]}
    if (command, name) in special:
        return [name, special[(command, name)], *companion.get((command, name), [])]
    kind = option.type_descriptor.annotation
    if kind is int:
        return [name, int(option.default or 0) + 3]
    if kind is float:
        return [name, float(option.default or 0) + 1.25]
    raise AssertionError(f"{command} {name}: give the test a value for this option")


def _record(monkeypatch: pytest.MonkeyPatch, command: str, cli: Any, args: list[Any]) -> str:
    module, attr = STAGE_ENTRY[command]
    seen: list[str] = []

    def shown(value: Any) -> Any:
        if isinstance(value, duckdb.DuckDBPyConnection):  # a connection: the database it opened
            return value.execute(
                "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
            ).fetchone()
        return value

    def recorder(*a: Any, **k: Any) -> Any:
        seen.append(repr(([shown(v) for v in a], sorted((n, shown(v)) for n, v in k.items()))))
        raise Recorded

    monkeypatch.setattr(importlib.import_module(module), attr, recorder)
    code, _, err = cli(command, *args)
    assert seen, f"{command} {args}: the stage was not reached (exit {code}): {err}"
    return seen[0]


def test_every_command_has_a_stage_entry():
    assert set(_commands()) == set(STAGE_ENTRY)


def test_every_option_reaches_its_stage(cli, tmp_path, monkeypatch):
    import shutil

    f = _fixtures(tmp_path)
    shutil.copy(f["db"], f["tmp"] / "copy.duckdb")
    checked = 0
    for command, cmd in sorted(_commands().items()):
        base = _base(command, f)
        baseline = _record(monkeypatch, command, cli, base)
        for param in cmd.params:
            if param.param_type_name != "option" or param.opts[0] in OUTPUT_ONLY:
                continue
            name = param.opts[0]
            args = _value(command, param, f)
            if name in base:  # a required option: replace its value
                i = base.index(name)
                trial = [*base[:i], *args, *base[i + 2 :]]
            else:
                trial = [*base, *args]
            got = _record(monkeypatch, command, cli, trial)
            assert got != baseline, f"{command} {name} does not reach the stage"
            checked += 1
    assert checked >= 30


def test_investigate_records_and_honours_every_option(cli, tmp_path):
    f = _fixtures(tmp_path)
    (f["case"] / "accounts.csv").write_text("account_id,jurisdiction\na,EU\n")
    out = tmp_path / "o"
    code, stdout, err = cli(
        "investigate",
        f["case"],
        "--out",
        out,
        "--assume-utc",
        "--aware-at",
        "2026-09-01T02:00:00+02:00",
        "--rules",
        f["rules"],
        "--replay-model",
        "test",
        "--replay-device",
        "cpu",
        "--follow-links",
        "--json",
    )
    assert code in (0, 1), err
    assert json.loads(stdout)["out_dir"] == str(out)
    params = json.loads((out / "manifest.json").read_text())["parameters"]
    assert params == {
        "assume_utc": True,
        "aware_at": "2026-09-01T02:00:00+02:00",
        "rules": str(f["rules"]),
        "rules_sha256": __import__("hashlib").sha256(f["rules"].read_bytes()).hexdigest(),
        "replay_model": "test",
        "replay_device": "cpu",
        "follow_links": True,
        "served_model": None,
    }
    summary = json.loads((out / "notifications" / "summary.json").read_text())
    assert summary["aware_at"] == "2026-09-01T00:00:00.000000Z"  # UTC, fixed-width ISO-8601
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert stages["ingest"]["rows_loaded"] >= 1  # the timestamp without offset was taken as UTC
    if stages["replay"].get("status") != "unavailable":
        assert stages["replay"]["model"] in ("test", None) and stages["replay"]["device"] == "cpu"


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--rules", "/no/such/rules.csv", "rules"),
        ("--replay-device", "tpu", "tpu"),
        ("--replay-model", "/no/such/model", "model"),
        ("--aware-at", "yesterday", "aware-at"),
        ("--aware-at", "2026-09-01T00:00:00", "offset"),
    ],
)
def test_bad_values_fail_before_any_work(cli, tmp_path, option, value, says):
    cli = _flat(cli)
    f = _fixtures(tmp_path)
    out = tmp_path / "never"
    code, _, err = cli("investigate", f["case"], "--out", out, option, value)
    assert code == 2 and says in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".kvf-" in p.name]
