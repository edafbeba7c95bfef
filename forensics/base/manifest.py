"""OUT/manifest.json: the evidence manifest of a run.

Everything in it is a function of the inputs and parameters, except `started_at`, `finished_at`,
`generated_at` and `run_id` (which identify the run), so the same inputs give the same manifest
apart from those four fields."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from forensics import __version__
from forensics.base.hashing import sha256_file

SCHEMA_VERSION = 3
MANIFEST = "manifest.json"
# Beside the manifest: its SHA-256, and its signature where the examiner gave a key.
SIDECARS = ("manifest.json.sha256", "manifest.json.sig")


# The libraries whose versions shape a result, recorded where installed.
LIBRARIES = ("duckdb", "polars", "pyarrow", "numba", "numpy", "torch", "transformers")


class Environment(TypedDict):
    python: str
    libraries: dict[str, str]  # name -> version, for the LIBRARIES installed


class OutputFile(TypedDict):
    path: str  # relative to OUT, POSIX
    sha256: str
    bytes: int


class Manifest(TypedDict):
    """manifest.json (written with sorted keys). `stages`: each stage's summary, in the order
    the stages ran; `ledger_storage`: investigate's only."""

    schema_version: int
    tool: dict[str, str]
    run_id: str
    started_at: str
    finished_at: str
    generated_at: str
    command: list[str]
    case_dir: str
    parameters: dict[str, Any]
    inputs: list[dict[str, Any]]
    skipped_inputs: list[dict[str, str]]
    queries: dict[str, str]
    stages: Mapping[str, Mapping[str, Any]]
    outputs: list[OutputFile]
    environment: Environment
    custody: dict[str, str | None]
    ledger_storage: NotRequired[dict[str, Any]]


def library_versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def custody(
    examiner: str | None = None, case_ref: str | None = None, signing_key: str | None = None
) -> dict[str, str | None]:
    """Who ran the analysis, for which case, on which machine, and the fingerprint of the key
    that signs the manifest (None: unsigned). examiner and case_ref: as given (--examiner,
    --case-ref), else KVFORENSICS_EXAMINER and KVFORENSICS_CASE_REF (None when unset)."""
    return {
        "examiner": examiner or os.environ.get("KVFORENSICS_EXAMINER") or None,
        "case_ref": case_ref or os.environ.get("KVFORENSICS_CASE_REF") or None,
        "host": platform.node(),
        "signing_key": signing_key,
    }


def environment() -> Environment:
    """The Python version and the libraries' versions the run used."""
    return {"python": platform.python_version(), "libraries": library_versions()}


def anchor(path: Path) -> str:
    """Write the manifest's own SHA-256 beside it (SIDECARS[0], as sha256sum writes it) and
    return it: printed at the end of the run, it lets the examiner show later that the
    manifest, and so every checksum in it, is the one the run wrote."""
    digest = sha256_file(path)
    (path.parent / SIDECARS[0]).write_text(f"{digest}  {path.name}\n", encoding="utf-8")
    return digest


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def output_files(out_dir: Path) -> list[OutputFile]:
    """Every file under out_dir but manifest.json: path (relative, POSIX), SHA-256 and size."""
    found: list[OutputFile] = []
    for path in sorted(out_dir.rglob("*")):
        rel = path.relative_to(out_dir).as_posix()
        if path.is_file() and rel != MANIFEST:
            found.append(OutputFile(path=rel, sha256=sha256_file(path), bytes=path.stat().st_size))
    return found


def build_manifest(
    *,
    case_dir: str,
    inputs: list[dict[str, Any]],
    skipped: list[dict[str, str]],
    params: dict[str, Any],
    stages: Mapping[str, Mapping[str, Any]],
    outputs: list[OutputFile],
    queries: dict[str, str],
    started_at: str,
    finished_at: str,
    command: list[str],
    custody: dict[str, str | None],
    ledger_storage: dict[str, Any] | None = None,
) -> Manifest:
    """The manifest; `ledger_storage` (investigate): where the case's KV ledger lives."""
    manifest: Manifest = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "kvforensics", "version": __version__},
        "run_id": f"{started_at}",
        "started_at": started_at,
        "finished_at": finished_at,
        "generated_at": finished_at,
        "command": command,
        "case_dir": case_dir,
        "parameters": params,
        "inputs": inputs,
        "skipped_inputs": skipped,
        "queries": queries,
        "stages": stages,
        "outputs": sorted(outputs, key=lambda o: o["path"]),
        "environment": environment(),
        "custody": custody,
    }
    if ledger_storage is not None:
        manifest["ledger_storage"] = ledger_storage
    return manifest


def write_manifest(path: Path, manifest: Manifest) -> Path:
    path.write_text(
        json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    return path
