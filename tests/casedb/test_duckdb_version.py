"""A DuckDB older than the project runs on is refused before any case database is opened, with
the fix, and pyproject.toml asks for the same release the check names.

Found by running the suite on older DuckDB releases: on 1.3 and 1.4 `investigate` on the sample
stopped with a parser error or a missing relation method; on 1.5 and 2.0.0 fetching a
time-zone-aware timestamp needs pytz, and on 1.5 35 tests gave other answers (timestamps out of
range, the formats' instants). The oracle here is the release numbers themselves."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from support.paths import REPO

from forensics.casedb.dbopen import MIN_DUCKDB, check_duckdb_version, open_database
from forensics.errors import UsageError

Cli = Callable[..., tuple[int, str, str]]
NEED = ".".join(map(str, MIN_DUCKDB))


def test_pyproject_asks_for_the_release_the_check_names() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if re.match(r"duckdb\b", d)]
    assert pins == [f"duckdb>={NEED}"]


def test_the_installed_duckdb_passes() -> None:
    check_duckdb_version(duckdb.__version__)


@pytest.mark.parametrize("found", ["2.0.1", "2.0.2", "2.1.0", "2.1", "3.0.0", "2.0.1.dev17"])
def test_releases_from_the_oldest_on_pass(found: str) -> None:
    check_duckdb_version(found)


@pytest.mark.parametrize("found", ["2.0.0", "2.0", "1.5.6", "1.4.0", "1.3.2", "0.10.3"])
def test_older_releases_are_refused_with_the_fix(found: str) -> None:
    with pytest.raises(UsageError) as err:
        check_duckdb_version(found)
    text = str(err.value)
    assert f"DuckDB {found} is installed" in text
    assert f"pip install -U 'duckdb>={NEED}'" in text


def test_the_command_stops_before_it_writes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli: Cli
) -> None:
    monkeypatch.setattr(duckdb, "__version__", "1.4.0")
    with pytest.raises(UsageError):
        open_database(tmp_path / "case.duckdb")
    out = tmp_path / "out"
    code, printed, err = cli("investigate", REPO / "data_samples" / "incident", "--out", out)
    assert code == 2
    assert "DuckDB 1.4.0 is installed" in " ".join((printed + err).split())
    assert not out.exists() and not (tmp_path / "case.duckdb").exists()
