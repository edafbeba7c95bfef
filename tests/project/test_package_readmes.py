"""Every package folder of forensics/ has a short README.md that names each of its modules.

A package folder is a folder under forensics/ that holds an `__init__.py`, or a folder right
under forensics/ that holds Python modules without one (a namespace package). Its README names
every module file of the folder (`__init__.py` excepted) in backquotes, `stage.py`; a
backquoted file name ending in `.py` must exist: a bare name in the folder itself, a name with a
slash in the folder (`sglang_site/sitecustomize.py`) or in the repository
(`forensics/engines/pools.py`)."""

from __future__ import annotations

import re
from pathlib import Path

from support.paths import REPO

PACKAGE = REPO / "forensics"
NAMED = re.compile(r"`([^`\s]+\.py)`")
SKIPPED = {"__pycache__", "_resources"}


def package_folders(root: Path) -> list[Path]:
    """The package folders under root, sorted."""
    found = []
    for folder in sorted(p for p in root.rglob("*") if p.is_dir()):
        if SKIPPED & set(folder.relative_to(root).parts):
            continue
        holds_modules = any(folder.glob("*.py"))
        if (folder / "__init__.py").is_file() or (folder.parent == root and holds_modules):
            found.append(folder)
    return found


def modules_of(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")


def readme_problems(folder: Path, repo: Path) -> list[str]:
    """What the folder's README.md lacks or names wrongly, one line each."""
    rel = folder.relative_to(repo)
    readme = folder / "README.md"
    if not readme.is_file():
        return [f"{rel}: no README.md"]
    named = NAMED.findall(readme.read_text(encoding="utf-8"))
    problems = [
        f"{rel}/README.md does not name `{module}`"
        for module in modules_of(folder)
        if module not in named
    ]
    for name in sorted(set(named)):
        places = [folder / name] + ([repo / name] if "/" in name else [])
        if not any(p.is_file() for p in places):
            problems.append(f"{rel}/README.md names `{name}`, which does not exist")
    return problems


def test_the_package_folders_are_found() -> None:
    """The walk sees the package folders and skips the nested non-package folder, as it should."""
    names = {str(p.relative_to(PACKAGE)) for p in package_folders(PACKAGE)}
    assert {"analysis", "cli", "report", "simulate", "tap"} <= names
    assert "tap/sglang_site" not in names


def test_every_package_folder_has_a_readme_naming_its_modules() -> None:
    problems = [line for f in package_folders(PACKAGE) for line in readme_problems(f, REPO)]
    assert not problems, "\n".join(problems)


def test_the_check_fails_on_a_missing_row_and_a_stale_name(tmp_path: Path) -> None:
    pkg = tmp_path / "forensics" / "stage_pkg"
    pkg.mkdir(parents=True)
    for name in ("__init__.py", "load.py", "store.py"):
        (pkg / name).write_text("", encoding="utf-8")
    (pkg / "README.md").write_text(
        "| module | what it does |\n|---|---|\n| `load.py` | loads |\n| `gone.py` | was |\n",
        encoding="utf-8",
    )
    assert readme_problems(pkg, tmp_path) == [
        "forensics/stage_pkg/README.md does not name `store.py`",
        "forensics/stage_pkg/README.md names `gone.py`, which does not exist",
    ]
    (pkg / "README.md").unlink()
    assert readme_problems(pkg, tmp_path) == ["forensics/stage_pkg: no README.md"]
