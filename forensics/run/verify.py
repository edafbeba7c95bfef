"""`kvforensics verify OUT`: re-hash the inputs and outputs a manifest names.

Every output file under OUT must be listed with the same SHA-256 and size, and nothing else may
be there (a file added later is reported too); an output is checked as what is in OUT, never
through a symbolic link (a link, to a file or a folder, is a difference). Every input must still
be in the case folder with the same SHA-256 and size, and a file the case folder holds now that
the run neither read nor skipped is reported as added. A manifest that is not a plain file, is
too large, cannot be parsed (nesting too deep included) or does not have the manifest's shape
is an error (exit 2), never read further.

A manifest that names a signing key must have its signature beside it; with the examiner's
public key (--pubkey) the signature must be there and be that key's signature over the
manifest's bytes (forensics.base.signing)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypedDict

from forensics.base.hashing import sha256_file
from forensics.base.manifest import MANIFEST, SIDECARS
from forensics.base.signing import fingerprint, load_public_key, signature_matches
from forensics.base.textsafe import json_value
from forensics.case.discover import discover
from forensics.errors import CaseError
from forensics.ingest.logfiles import log_files
from forensics.run.outdir import MANIFEST_MOST


@dataclass
class Difference:
    side: str  # input | output
    path: str
    why: str


class VerifyJson(TypedDict):
    """`verify --json`."""

    out: str
    case_dir: str  # "" when no case folder was checked
    checked: int
    ok: bool
    signature: str
    differences: list[dict[str, str]]  # Difference's side, path and why


@dataclass
class Verification:
    out_dir: Path
    case_dir: Path | None
    checked: int = 0
    differences: list[Difference] = field(default_factory=list)
    signature: str = ""  # what the signature check found ("" where there was none to check)

    def to_json(self) -> VerifyJson:
        return {
            "out": str(self.out_dir),
            "case_dir": str(self.case_dir or ""),
            "checked": self.checked,
            "ok": not self.differences,
            "signature": self.signature,
            "differences": [d.__dict__ for d in self.differences],
        }


def read_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / MANIFEST
    if path.is_symlink():
        raise CaseError(f"{path} is a symbolic link; verify reads only the manifest in OUT itself")
    if not path.is_file():
        raise CaseError(f"{path}: no manifest here; give the folder investigate wrote")
    size = path.stat().st_size
    if size > MANIFEST_MOST:
        raise CaseError(
            f"{path} holds {size:,} bytes, more than any manifest investigate writes "
            f"({MANIFEST_MOST:,} at most); it is not read"
        )
    try:
        value = json_value(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CaseError(f"{path} is not readable JSON ({exc})") from exc
    if not _shaped(value):
        raise CaseError(
            f"{path} does not list output checksums; re-run investigate with this "
            "version to get one that does"
        )
    return value


def _listing(value: Any) -> bool:
    """A list of {path: text, sha256: text, bytes: whole number} (other keys allowed)."""
    return isinstance(value, list) and all(
        isinstance(o, dict)
        and isinstance(o.get("path"), str)
        and isinstance(o.get("sha256"), str)
        and type(o.get("bytes")) is int
        for o in value
    )


def _shaped(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and _listing(value.get("outputs"))
        and _listing(value.get("inputs") or [])
        and isinstance(value.get("case_dir") or "", str)
        and isinstance(value.get("skipped_inputs") or [], list)
        and all(isinstance(s, dict) for s in value.get("skipped_inputs") or [])
        and isinstance(value.get("parameters") or {}, dict)
    )


def present(out_dir: Path) -> tuple[set[str], set[str]]:
    """What OUT holds, never through a link: its plain files, and its links and other
    non-files (relative POSIX paths). A link to a folder is not walked into."""
    files: set[str] = set()
    others: set[str] = set()
    for base, dirs, names in os.walk(out_dir):
        for name in dirs:
            if (Path(base) / name).is_symlink():
                others.add((Path(base) / name).relative_to(out_dir).as_posix())
        for name in names:
            path = Path(base) / name
            rel = path.relative_to(out_dir).as_posix()
            (others if path.is_symlink() or not path.is_file() else files).add(rel)
    return files, others


def _inside(base: Path, rel: str) -> Path | None:
    """base/rel when rel is a plain relative path that stays inside base."""
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or ".." in pure.parts:
        return None
    return base / pure


def _check(base: Path, side: str, item: dict[str, Any], result: Verification) -> None:
    rel = str(item.get("path", ""))
    path = _inside(base, rel)
    if path is None and side == "input" and PurePosixPath(rel).is_absolute():
        path = Path(rel)  # a log read through a link outside the case (--follow-links)
    result.checked += 1
    if path is None:
        result.differences.append(Difference(side, rel, "path leaves its folder; not checked"))
    elif not path.is_file():
        result.differences.append(Difference(side, rel, "missing"))
    elif path.stat().st_size != item.get("bytes"):
        result.differences.append(
            Difference(
                side, rel, f"size {path.stat().st_size} bytes, manifest says {item.get('bytes')}"
            )
        )
    elif sha256_file(path) != item.get("sha256"):
        result.differences.append(Difference(side, rel, "SHA-256 differs from the manifest"))


def verify(out_dir: Path, case_dir: Path | None = None, pubkey: Path | None = None) -> Verification:
    """Compare OUT (and the case folder: given, else the manifest's) with OUT/manifest.json;
    with pubkey, check the manifest's signature by that key too."""
    public = load_public_key(pubkey) if pubkey is not None else None
    if not out_dir.is_dir():
        raise CaseError(f"{out_dir}: no such folder; give the folder investigate wrote")
    manifest = read_manifest(out_dir)
    case = case_dir or (Path(manifest["case_dir"]) if manifest.get("case_dir") else None)
    result = Verification(out_dir, case)
    listed = {str(o["path"]) for o in manifest["outputs"]}
    files, others = present(out_dir)
    for item in manifest["outputs"]:
        link = _link_on_the_way(str(item["path"]), others)
        if link is not None:
            result.checked += 1
            result.differences.append(Difference("output", item["path"], link))
        else:
            _check(out_dir, "output", item, result)
    for rel in sorted((files | others) - listed - {MANIFEST, *SIDECARS}):
        why = "not in the manifest" + ("; a symbolic link or not a file" if rel in others else "")
        if not any(rel.startswith(o + "/") for o in others):
            result.differences.append(Difference("output", rel, why))
    _anchored(out_dir, manifest, result)
    _signed(out_dir, manifest, public, result)
    inputs = manifest.get("inputs") or []
    if inputs and (case is None or not case.is_dir()):
        result.differences.append(
            Difference("input", str(case or ""), "case folder not found; give it with --case")
        )
        return result
    for item in inputs:
        _check(case, "input", item, result)  # type: ignore[arg-type]
    if case is not None and case.is_dir():
        _added(case, manifest, result)
    return result


def _anchored(out_dir: Path, manifest: dict[str, Any], result: Verification) -> None:
    """The manifest is the one the run anchored: its SHA-256 is the one in the sidecar the run
    wrote beside it (a manifest of schema 3 or later must have one)."""
    sidecar = out_dir / SIDECARS[0]
    result.checked += 1
    if sidecar.is_symlink() or not sidecar.is_file():
        if int(manifest.get("schema_version") or 0) >= 3:
            result.differences.append(Difference("output", SIDECARS[0], "missing"))
        return
    words = sidecar.read_text(encoding="utf-8", errors="replace").split()
    if not words or words[0] != sha256_file(out_dir / MANIFEST):
        result.differences.append(
            Difference("output", MANIFEST, f"SHA-256 differs from the one in {SIDECARS[0]}")
        )


def _signed(out_dir: Path, manifest: dict[str, Any], public: Any, result: Verification) -> None:
    """The signature beside the manifest: there when the manifest names a signing key, and,
    with the examiner's public key, that key's signature over the manifest's bytes."""
    custody = manifest.get("custody")
    key = custody.get("signing_key") if isinstance(custody, dict) else None
    named = key if isinstance(key, str) else None
    sig = out_dir / SIDECARS[1]
    why = _signature_absent(sig, named)
    if public is None:
        if why and named:
            result.checked += 1
            result.differences.append(Difference("output", SIDECARS[1], why))
        elif not why:
            result.signature = f"present, not checked (give --pubkey); the manifest names {named}"
        return
    given = fingerprint(public)
    result.checked += 1
    if why:
        result.signature = f"missing ({why}); --pubkey is {given}"
        result.differences.append(Difference("output", SIDECARS[1], result.signature))
    elif not signature_matches(public, out_dir / MANIFEST, sig):
        result.signature = f"not a signature of this manifest by --pubkey {given}" + (
            f"; the manifest names the key {named}" if named and named != given else ""
        )
        result.differences.append(Difference("output", SIDECARS[1], result.signature))
    else:
        result.signature = f"good: manifest.json is signed by the key {given}"


def _signature_absent(sig: Path, named: str | None) -> str:
    """Why there is no signature to check ("" when there is one)."""
    if sig.is_symlink():
        return "a symbolic link; verify reads only the signature in OUT itself"
    if not sig.is_file():
        return "missing" + (
            f"; the manifest names the signing key {named}" if named else "; the run was not signed"
        )
    return ""


def _link_on_the_way(rel: str, others: set[str]) -> str | None:
    """Why an output is not checked: it, or a folder on its way, is a link (or not a file)."""
    parts = PurePosixPath(rel).parts
    for i in range(len(parts), 0, -1):
        if "/".join(parts[:i]) in others:
            return (
                "a symbolic link (or not a plain file) where the run wrote a file; verify "
                "checks what is in OUT, never what a link leads to"
            )
    return None


def _added(case: Path, manifest: dict[str, Any], result: Verification) -> None:
    """Files the case folder holds now that the run neither read nor listed as skipped."""
    follow = bool((manifest.get("parameters") or {}).get("follow_links"))
    found = discover(case, follow)
    now = {f.rel for f in found.files} | {rel for rel, _ in found.skipped}
    now |= set(log_files(case, follow))
    known = {str(i["path"]) for i in manifest.get("inputs") or []}
    known |= {str(s.get("path")) for s in manifest.get("skipped_inputs") or []}
    for rel in sorted(now - known):
        result.checked += 1
        result.differences.append(
            Difference("input", rel, "in the case folder but not in the manifest (added since)")
        )
