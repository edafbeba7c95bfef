"""`kvforensics verify OUT`: re-hash the inputs and outputs a manifest names.

Every output file under OUT must be listed with the same SHA-256 and size, and nothing else may
be there (a file added later is reported too); every input must still be in the case folder with
the same SHA-256 and size."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from forensics.errors import CaseError
from forensics.hashing import sha256_file
from forensics.manifest import MANIFEST


@dataclass
class Difference:
    side: str  # input | output
    path: str
    why: str


@dataclass
class Verification:
    out_dir: Path
    case_dir: Path | None
    checked: int = 0
    differences: list[Difference] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "out": str(self.out_dir),
            "case_dir": str(self.case_dir or ""),
            "checked": self.checked,
            "ok": not self.differences,
            "differences": [d.__dict__ for d in self.differences],
        }


def read_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / MANIFEST
    if not path.is_file():
        raise CaseError(f"{path}: no manifest here; give the folder investigate wrote")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaseError(f"{path} is not readable JSON ({exc})") from exc
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("outputs"), list)
        or not all(
            isinstance(o, dict) and {"path", "sha256", "bytes"} <= set(o) for o in value["outputs"]
        )
    ):
        raise CaseError(
            f"{path} does not list output checksums; re-run investigate with this "
            "version to get one that does"
        )
    return value


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


def verify(out_dir: Path, case_dir: Path | None = None) -> Verification:
    """Compare OUT (and the case folder: given, else the manifest's) with OUT/manifest.json."""
    if not out_dir.is_dir():
        raise CaseError(f"{out_dir}: no such folder; give the folder investigate wrote")
    manifest = read_manifest(out_dir)
    case = case_dir or (Path(manifest["case_dir"]) if manifest.get("case_dir") else None)
    result = Verification(out_dir, case)
    listed = {str(o["path"]) for o in manifest["outputs"]}
    for item in manifest["outputs"]:
        _check(out_dir, "output", item, result)
    for path in sorted(out_dir.rglob("*")):
        rel = path.relative_to(out_dir).as_posix()
        if (path.is_file() or path.is_symlink()) and rel != MANIFEST and rel not in listed:
            result.differences.append(Difference("output", rel, "not in the manifest"))
    inputs = manifest.get("inputs") or []
    if inputs and (case is None or not case.is_dir()):
        result.differences.append(
            Difference("input", str(case or ""), "case folder not found; give it with --case")
        )
        return result
    for item in inputs:
        _check(case, "input", item, result)  # type: ignore[arg-type]
    return result
