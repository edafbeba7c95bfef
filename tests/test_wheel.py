"""queries/ and templates/ ship inside the built wheel: build it, install it in a fresh virtual
environment and run a command that loads queries from the installed package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO


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
    venv.EnvBuilder(with_pip=False).create(env_dir)  # this pip installs into it (--python)
    python = env_dir / "bin" / "python"
    # Dependencies come from this test environment (a plain path entry: its .pth files, such as
    # an editable install of this checkout, are not processed); the package itself from the wheel.
    site_dir = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    deps = sysconfig.get_paths()["purelib"]
    (Path(site_dir.stdout.strip()) / "kvf_test_deps.pth").write_text(deps + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + [str(wheel)],
        check=True,
    )
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [
            str(env_dir / "bin" / "kvforensics"),
            "ingest",
            str(EXAMPLES / "semantics-seq"),
            "--db",
            str(tmp_path / "c.duckdb"),
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows_loaded"] == 7 + 30 + 1 + 8  # accounts, events, ...
    where = subprocess.run(
        [str(python), "-c", "import forensics.resources as r; print(r.resource_dir('queries'))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env,
        check=True,
    )
    assert "_resources" in where.stdout and str(REPO) not in where.stdout
