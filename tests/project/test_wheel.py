"""queries/ and templates/ ship inside the built wheel: build it, install it in a fresh virtual
environment and run a command that loads queries from the installed package."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from support.paths import EXAMPLES, REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(REPO),
        ],
        check=True,
    )
    return next(dist.glob("kvforensics-*.whl"))


def _environment_lent(env_dir: Path, lent: Path) -> Path:
    """A fresh virtual environment without pip (this pip installs into it with --python) that
    sees `lent` as a plain path entry; its python."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site_dir = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site_dir) / "kvf_test_lent.pth").write_text(f"{lent}\n")
    return python


def _run_outside(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run outside the checkout, without this environment's PYTHONPATH."""
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        list(args), cwd=cwd, capture_output=True, text=True, env=clean_env, check=False
    )


def test_wheel_carries_queries_and_templates(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    prefix = "forensics/_resources/queries/"
    queries = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    shipped = {
        p.relative_to(REPO / "queries").as_posix() for p in (REPO / "queries").rglob("*.sql")
    }
    assert shipped and shipped <= queries
    assert any("/" in q for q in shipped)  # the stage folders are kept
    assert any(n.startswith("forensics/_resources/templates/") for n in names) or not any(
        (REPO / "templates").iterdir()
    )


def test_installed_wheel_runs_ingest(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    # Dependencies come from this test environment (a plain path entry: its .pth files, such as
    # an editable install of this checkout, are not processed); the package itself from the wheel.
    python = _environment_lent(env_dir, Path(sysconfig.get_paths()["purelib"]))
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + [str(wheel)],
        check=True,
    )
    kvforensics = str(env_dir / "bin" / "kvforensics")
    db = str(tmp_path / "c.duckdb")
    proc = _run_outside(
        tmp_path, kvforensics, "ingest", str(EXAMPLES / "semantics-seq"), "--db", db, "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows_loaded"] == 7 + 30 + 1 + 8  # accounts, events, ...
    where = _run_outside(
        tmp_path,
        str(python),
        "-c",
        "import forensics.casedb.resources as r; print(r.resource_dir('queries'))",
    )
    assert where.returncode == 0, where.stderr
    assert "_resources" in where.stdout and str(REPO) not in where.stdout


TAP_PAGE = REPO / "docs" / "guides" / "recording-a-ledger.md"
BUILD_LINE = "pip wheel . -w dist --no-deps"
INSTALL_LINE = "/path/to/engine-venv/bin/pip install --no-deps dist/kvforensics-*.whl pyarrow"


def _documented_tap_install() -> list[str]:
    """The commands of the tap page's install block, comments dropped."""
    text = TAP_PAGE.read_text(encoding="utf-8")
    section = text.split("## Installing the tap", 1)[1]
    block = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _lent_entries() -> list[Path]:
    """pyarrow's folder and metadata, and those of what that pyarrow itself requires (numpy,
    before pyarrow 18): what pip would install beside it in an engine's environment."""
    entries = []
    for name in ["pyarrow", *_own_requirements("pyarrow")]:
        module = importlib.import_module(name)
        folder = Path(module.__file__ or "").resolve().parent
        entries += [folder, *folder.parent.glob(f"{name}-*.dist-info")]
    return entries


def _own_requirements(dist: str) -> list[str]:
    """The distributions `dist` requires outside any extra, by import name."""
    import importlib.metadata as metadata

    found = []
    for req in metadata.requires(dist) or []:
        if "extra ==" not in req:
            found.append(re.split(r"[ <>=!;~\[(]", req, maxsplit=1)[0].replace("-", "_"))
    return found


def test_the_documented_tap_install_works_with_only_pyarrow(wheel, tmp_path):
    """docs/guides/recording-a-ledger.md's install lines, run as written: the wheel (built by the
    fixture with the documented `pip wheel . -w dist --no-deps`, plus --no-build-isolation so
    that hatchling comes from this environment instead of the index) installed with --no-deps
    into an engine-like environment that holds pyarrow and nothing else of kvforensics'
    requirements; the vLLM plugin, its entry point and the SGLang patches load there."""
    assert _documented_tap_install() == [BUILD_LINE, INSTALL_LINE]
    env_dir = tmp_path / "engine-venv"
    # pyarrow (and its metadata, so pip sees it installed) is this environment's, lent through a
    # folder that holds only it: nothing else of kvforensics' requirements is importable there.
    lent = tmp_path / "only-pyarrow"
    lent.mkdir()
    for entry in _lent_entries():
        (lent / entry.name).symlink_to(entry)
    python = _environment_lent(env_dir, lent)
    install = INSTALL_LINE.split()
    assert install[:2] == ["/path/to/engine-venv/bin/pip", "install"]
    args = [str(wheel) if a == "dist/kvforensics-*.whl" else a for a in install[2:]]
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    subprocess.run(pip + args, check=True, env={**os.environ, "PIP_NO_INDEX": "1"})
    probe = (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        "import forensics.tap.vllm_plugin, forensics.tap.sglang_patch, forensics.tap.launch\n"
        "eps = {e.name: e.value for e in m.entry_points(group='vllm.general_plugins')}\n"
        "assert eps == {'kvforensics_tap': 'forensics.tap.vllm_plugin:register'}, eps\n"
        "assert forensics.tap.launch.SITE.joinpath('sitecustomize.py').is_file()\n"
        "for absent in ('duckdb', 'polars', 'numba', 'typer'):\n"
        "    assert u.find_spec(absent) is None, absent\n"
        "print(forensics.tap.vllm_plugin.__file__)\n"
    )
    done = _run_outside(tmp_path, str(python), "-c", probe)
    assert done.returncode == 0, done.stderr
    assert str(env_dir) in done.stdout and str(REPO) not in done.stdout
