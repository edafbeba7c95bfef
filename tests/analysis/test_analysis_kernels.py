"""The compiled building blocks of the sweep, each against a naive per-cell model: run maps
(forensics.analysis.runmap) and holder maps (forensics.analysis.holders); the compile options
every kernel must keep (nopython, cached, releasing the GIL); and a stale compiled-code cache,
which must be recompiled rather than fail, whichever module is imported first."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import forensics
from forensics.analysis.holders import Holders, new_pool, set_entries, update_holders, with_room
from forensics.analysis.runmap import (
    RunMap,
    bs_around,
    bs_next,
    bs_prev,
    bs_test,
    new_map,
    rm_assign,
)
from forensics.simulate import kernels as sim_kernels
from forensics.simulate.ledger import ROW

KERNEL_MODULES = ("buffers", "coverage", "holders", "kinds", "runmap", "sweep")
KERNEL_MODULES += ("violations",)


def _starts(m: RunMap) -> list[int]:
    return [c for c in range(m.n) if bs_test(m.words, c)]


def _maximal_runs(cells: list) -> list[int]:
    """Where the maximal runs of equal values start."""
    return [c for c in range(len(cells)) if c == 0 or cells[c] != cells[c - 1]]


@pytest.mark.parametrize(
    ("n", "ops", "seed"), [(1, 20, 0), (70, 400, 1), (300, 400, 2), (5000, 60, 3)]
)
def test_run_map_matches_a_per_cell_array(n: int, ops: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = new_map(n, -1)
    cells = [-1] * n
    for _ in range(ops):
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, n + 1))
        v = int(rng.integers(-1, 3))
        rm_assign(m, a, b, v)
        cells[a:b] = [v] * (b - a)
        assert _starts(m) == _maximal_runs(cells)
    starts = _starts(m)
    for c in range(n):
        prev = bs_prev(m.words, c)
        assert m.val[prev] == cells[c]
        assert prev == max(s for s in starts if s <= c)
        assert bs_next(m.words, c, n) == min([s for s in starts if s >= c], default=n)
    assert bs_next(m.words, n, n) == n


@pytest.mark.parametrize(
    ("n", "levels"), [(64, 1), (65, 2), (4096, 2), (4097, 3), (262_144, 3), (300_000, 4)]
)
def test_run_starts_are_found_across_every_level(n: int, levels: int) -> None:
    """A map of several levels (each word of one is a bit of the next): run starts far apart
    and at the edges of the words of each level, found from either side, against a list."""
    m = new_map(n, 0)
    assert int(m.words[0]) == levels
    rng = np.random.default_rng(n)
    edges = [c for k in (64, 4096, 262144) for c in (k - 1, k, k + 1) if c < n]
    cuts = sorted({*edges, *rng.integers(1, n, 12).tolist(), n - 1} - {0})
    values = list(range(1, len(cuts) + 2))
    for (a, b), v in zip(pairwise([0, *cuts, n]), values, strict=True):
        rm_assign(m, a, b, v)
    starts = [0, *cuts]
    probes = sorted({0, n - 1, *(c + d for c in cuts for d in (-1, 0, 1) if 0 <= c + d < n)})
    for c in probes:
        assert bs_prev(m.words, c) == max(s for s in starts if s <= c)
        assert bs_next(m.words, c, n) == min([s for s in starts if s >= c], default=n)
        assert bs_around(m.words, c, n) == (
            max(s for s in starts if s <= c),
            min([s for s in starts if s > c], default=n),
        )
    for i, (a, b) in enumerate(pairwise([*starts[::2], n])):  # the starts inside are wiped
        rm_assign(m, a, b, -1 - i)
    kept = sorted(set(starts[::2]))
    for c in probes:
        assert bs_prev(m.words, c) == max(s for s in kept if s <= c)
        assert bs_next(m.words, c, n) == min([s for s in kept if s >= c], default=n)
    if n > 2:  # no run start after cell 1: every level's last word is empty
        rm_assign(m, 1, n, -99)
        assert [bs_next(m.words, c, n) for c in (1, 2, max(2, n - 64), n - 1)] == [1, n, n, n]
        assert [bs_prev(m.words, c) for c in (0, 1, n - 1)] == [0, 1, 1]


def test_a_map_of_more_cells_than_its_levels_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="more than a run map holds"):
        new_map(1 << 40, 0)  # refused before anything is allocated


@pytest.mark.parametrize(("n", "ops", "seed"), [(40, 300, 4), (200, 300, 5), (3000, 80, 6)])
def test_holder_map_matches_per_cell_dicts(n: int, ops: int, seed: int) -> None:
    """Random acquisitions and releases in a pool that starts tiny, so it is compacted and
    grown many times on the way."""
    rng = np.random.default_rng(seed)
    h = Holders(new_map(n, 0), new_pool(16))
    cells: list[dict[int, int]] = [{} for _ in range(n)]
    for t in range(ops):
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, min(n, a + n // 4 + 1) + 1))
        r = int(rng.integers(0, 6))
        acq = -1 if rng.random() < 0.4 else t
        h = with_room(h, a, b)
        update_holders(h, a, b, r, acq)
        for c in range(a, b):
            if acq < 0:
                cells[c].pop(r, None)
            else:
                cells[c][r] = acq
        assert _starts(h.runs) == _maximal_runs(cells)
    for c in range(n):
        sid = int(h.runs.val[bs_prev(h.runs.words, c)])
        assert set_entries(h.pool, sid) == sorted(cells[c].items())
        assert (sid < 0) == (len(cells[c]) == 1), "a set of one holder is kept in the map"


def test_every_analysis_kernel_is_cached_and_releases_the_gil() -> None:
    kernels = [
        (name, fn)
        for module in KERNEL_MODULES
        for name, fn in vars(importlib.import_module(f"forensics.analysis.{module}")).items()
        if isinstance(fn, CPUDispatcher)
    ]
    assert len(kernels) > 20
    for name, fn in kernels:
        assert fn.targetoptions.get("nopython", True), name
        assert fn.targetoptions.get("nogil"), name
        assert type(fn._cache).__name__ != "NullCache", name


def _called_kernels(fn: CPUDispatcher) -> list[CPUDispatcher]:
    """The compiled functions fn's source calls by name (in fn's module namespace)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn.py_func)))
    names = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    found = (fn.py_func.__globals__.get(name) for name in sorted(names))
    return [k for k in found if isinstance(k, CPUDispatcher)]


def test_the_event_loop_and_all_it_calls_count_no_references() -> None:
    """sweep_until and every kernel it reaches are compiled with _nrt=False: counting a
    reference per array passed per call took more than half of the sweep's time."""
    from forensics.analysis.sweep import sweep_until

    seen: dict[str, CPUDispatcher] = {}
    todo = [sweep_until]
    while todo:
        fn = todo.pop()
        if fn.py_func.__qualname__ not in seen:
            seen[fn.py_func.__qualname__] = fn
            todo.extend(_called_kernels(fn))
    assert {"looks", "read", "foreign_run", "classify", "check_holders", "update_holders"} <= set(
        seen
    )
    assert {"bs_next", "bs_prev", "set_find", "push_category", "rm_assign"} <= set(seen)
    for name, fn in seen.items():
        assert fn.targetoptions.get("_nrt") is False, name


def test_simulator_field_rows_follow_the_ledger_fields() -> None:
    names = ("ts", "node", "rid", "op", "start", "count", "pos", "src", "hash", "emit")
    got = [getattr(sim_kernels, n.upper()) for n in names]
    assert got == [ROW[n] for n in names]


_STALE_MODULE = """
    from typing import NamedTuple

    import numpy as np
    from numba import njit

    import forensics.base.jitcache  # noqa: F401


    class {name}(NamedTuple):
        values: np.ndarray


    @njit(cache=True)
    def total(p):
        return p.values.sum()


    print(total({name}(np.arange(5))))
"""


def test_a_cache_naming_a_renamed_class_is_recompiled(tmp_path: Path) -> None:
    """A cached signature names its named-tuple argument's class; once the class is renamed,
    numba could no longer read the cache index (AttributeError). It must recompile instead."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path))
    module = tmp_path / "renamed.py"
    outputs = []
    for name in ("Pair", "Couple"):  # same function, same line; only the class name changes
        module.write_text(textwrap.dedent(_STALE_MODULE.format(name=name)))
        run = subprocess.run(
            [sys.executable, "-c", "import renamed"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout.strip())
    assert outputs == ["10", "10"]
    assert list((tmp_path / "cache").rglob("*.nbi")), "the first run wrote no cache"


_CALLEE = """
    from numba import njit


    @njit(cache=True)
    def step(x):
        return x + {inc}
"""

_CALLER = """
    from pathlib import Path

    import forensics.base.jitcache as jitcache

    jitcache.SHARED_FOLDERS.add(Path(__file__).resolve().parent)

    from numba import njit

    from kernelpkg.callee import step


    @njit(cache=True)
    def twice(x):
        return step(step(x))


    print(twice(1))
"""


def test_a_change_to_a_called_kernel_recompiles_its_cached_callers(tmp_path: Path) -> None:
    """A cached kernel's code includes the kernels it calls from other modules of its folder;
    numba judges a cache by the kernel's own file alone, so after a change to the callee only
    the caller would run stale code. The stamp covers the folder, so it is compiled again."""
    package = tmp_path / "kernelpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(textwrap.dedent(_CALLER))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path))
    outputs = []
    for inc in (1, 10):  # only the callee changes between the two runs
        (package / "callee.py").write_text(textwrap.dedent(_CALLEE.format(inc=inc)))
        run = subprocess.run(
            [sys.executable, "-c", "import kernelpkg.caller"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout.split())
    assert list((tmp_path / "cache").rglob("*.nbi")), "the first run wrote no cache"
    assert outputs == [["3"], ["21"]]


def _modules_with_kernels() -> list[str]:
    """Every forensics module that compiles a kernel of its own (a decorator at top level)."""
    root = Path(forensics.__file__).resolve().parent
    defines = re.compile(r"^@(njit|loop_kernel|inline_kernel)\b", re.MULTILINE)
    return sorted(
        ".".join(("forensics", *path.relative_to(root).with_suffix("").parts))
        for path in root.rglob("*.py")
        if defines.search(path.read_text(encoding="utf-8"))
    )


# Imported alone, in a fresh interpreter: the type of each cached kernel's source stamp.
_STAMPS = """
import importlib, sys
from numba.core.registry import CPUDispatcher

module = importlib.import_module(sys.argv[1])
for name, fn in sorted(vars(module).items()):
    if isinstance(fn, CPUDispatcher) and fn.py_func.__module__ == module.__name__:
        print(name, type(fn._cache._cache_file._source_stamp).__name__)
"""


def test_the_modules_with_kernels_are_all_found() -> None:
    found = {name.rsplit(".", 1)[1] for name in _modules_with_kernels()}
    assert set(KERNEL_MODULES) | {"fetch", "runfacts", "kernels"} <= found


@pytest.mark.parametrize("module", _modules_with_kernels())
def test_a_kernel_module_imported_first_stamps_its_cache_with_its_folder(module: str) -> None:
    """A cache's stamp is taken when its kernel is defined, so a module whose kernels were
    defined before forensics.base.jitcache was imported kept numba's own stamp (its file
    alone). Two commands importing the modules in different orders then overwrote each other's
    caches, recompiling every time (12 s), and a change to a called kernel in another module
    could run stale code. Each module must import jitcache before defining a kernel."""
    run = subprocess.run(
        [sys.executable, "-c", _STAMPS, module],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    stamps = dict(line.split() for line in run.stdout.splitlines())
    assert stamps, f"{module} compiled no cached kernel"
    assert set(stamps.values()) == {"tuple"}, stamps  # (numba's stamp, the folder's digest)
