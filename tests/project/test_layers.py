"""The package's import graph has no cycle and its layers hold (docs/DESIGN.md §8, "Layers").

Every module of forensics/ is parsed with `ast`; every import counts, at module level or inside
a function. Imports under `if TYPE_CHECKING:` never run: they count for the layers, not for
cycles."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import forensics

ROOT = "forensics"

# Highest layer first, as docs/DESIGN.md §8 ("Layout and layers") names them. A module may
# import modules of its own layer or of a lower one, never of a higher one; within a layer only
# the absence of cycles is checked (between folders too, type-only imports included).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commands", ("forensics.cli", "forensics.__main__")),
    ("whole runs", ("forensics.run", "forensics.bench", "forensics.probe")),
    ("report", ("forensics.report",)),
    ("late stages", ("forensics.reconstruct", "forensics.simulate", "forensics.notify")),
    ("replay", ("forensics.replay",)),
    ("analysis", ("forensics.analysis",)),
    ("ingest", ("forensics.ingest",)),
    ("readers and engines", ("forensics.logs", "forensics.tap", "forensics.engines")),
    (
        "stage contract",
        ("forensics.context", "forensics.db", "forensics.options", "forensics.figures"),
    ),
    ("ledger store", ("forensics.ledger",)),
    ("input contract", ("forensics.case",)),
    ("case database", ("forensics.casedb",)),
    ("base", (ROOT, "forensics.base", "forensics.errors")),
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`
    lazy: bool = False  # inside a function


def find_modules(package_dir: Path, root: str = ROOT) -> dict[str, Path]:
    """{dotted module name: file} for every .py file under package_dir."""
    out: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [root, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement loads (`from P import m` loads P.m when m is a
    module; the caller keeps the names that are modules of the package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def module_edges(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """The imports of one module that land in the package, function-level ones included."""
    edges: list[Edge] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, type_only: bool, lazy: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True, lazy)
            for child in node.orelse:
                visit(child, type_only, lazy)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = _imported(node, module, is_package)
            submodules = [n for n in names[1:] if n in modules]
            if isinstance(node, ast.Import):
                targets = [_owner(n, modules) for n in names]
            else:
                # `from P import m` runs P and m; P counts only when something else is taken
                rest = len(submodules) < len(names) - 1
                targets = submodules + ([_owner(names[0], modules)] if rest else [])
            for target in targets:
                if target is not None and target != module:
                    edges.append(Edge(module, target, node.lineno, type_only, lazy))
            return
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, type_only, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False, False)
    return edges


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The package module that `name` is or lies in (None outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_edges(package_dir: Path, root: str = ROOT) -> list[Edge]:
    modules = find_modules(package_dir, root)
    return [e for m, path in modules.items() for e in module_edges(m, path, modules)]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None. Iterative depth-first search,
    nodes and neighbours in sorted order so the answer is stable."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        state[start] = 1
        pending = [iter(sorted(graph.get(start, ())))]
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                pending.append(iter(sorted(graph.get(nxt, ()))))
    return None


def runtime_graph(edges: list[Edge]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not e.type_only:
            graph.setdefault(e.source, set()).add(e.target)
    return graph


def layer_of(module: str) -> int | None:
    """Index into LAYERS (0 is the highest) of the longest prefix naming the module."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            hit = module == prefix or (prefix != ROOT and module.startswith(prefix + "."))
            if hit and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def layer_violations(edges: list[Edge]) -> list[str]:
    out = []
    for e in edges:
        source, target = layer_of(e.source), layer_of(e.target)
        if source is not None and target is not None and target < source:
            out.append(
                f"{e.source} (layer {LAYERS[source][0]!r}) imports {e.target} "
                f"(layer {LAYERS[target][0]!r}) at line {e.line}"
            )
    return out


# The optional extras: a module that imports one at load time is imported lazily by the rest.
OPTIONAL_EXTRAS = frozenset({"torch", "transformers", "safetensors", "accelerate", "ray"})


def load_time_imports(path: Path) -> set[str]:
    """Top-level names of every package a module imports when it loads (outside functions)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def needing_extras(package_dir: Path, edges: list[Edge], root: str = ROOT) -> set[str]:
    """Modules that import an optional extra when they load, themselves or through package
    modules they import at load time."""
    modules = find_modules(package_dir, root)
    needs = {m for m, path in modules.items() if load_time_imports(path) & OPTIONAL_EXTRAS}
    loads = [(e.source, e.target) for e in edges if not e.lazy and not e.type_only]
    grew = True
    while grew:
        before = len(needs)
        needs |= {source for source, target in loads if target in needs}
        grew = len(needs) > before
    return needs


SEAMS = frozenset({"forensics.simulate.outputs", "forensics.simulate.run"})


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def hidden_imports(package_dir: Path, root: str = ROOT) -> list[str]:
    """Function-level imports of another package's module by a module below the whole-run
    layer, where the imported module needs no optional extra (so nothing but a cycle or a
    layer breach would call for the import to be hidden in a function). The base layer is
    exempt as a target: it imports nothing above it, so a late import of it hides nothing. So are
    the simulator's outputs and run modules as sources: they reach the replay package through a
    seam that tests/simulate/test_simulate_outputs.py replaces in sys.modules."""
    edges = import_edges(package_dir, root)
    needs = needing_extras(package_dir, edges, root)
    whole_runs = [name for name, _ in LAYERS].index("whole runs")
    base = len(LAYERS) - 1
    out = []
    for e in edges:
        source, target = layer_of(e.source), layer_of(e.target)
        if not e.lazy or source is None or source <= whole_runs or target == base:
            continue
        if e.source in SEAMS:
            continue
        if _package(e.source) != _package(e.target) and e.target not in needs:
            out.append(f"{e.source} imports {e.target} inside a function (line {e.line})")
    return out


PACKAGE_DIR = Path(forensics.__file__).parent


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(runtime_graph(import_edges(PACKAGE_DIR)))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_cycle_even_through_type_only_imports() -> None:
    graph: dict[str, set[str]] = {}
    for e in import_edges(PACKAGE_DIR):
        graph.setdefault(e.source, set()).add(e.target)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle (type-only imports included): " + " -> ".join(cycle or [])


def folder_graph(edges: list[Edge]) -> dict[str, set[str]]:
    """Folder (or root module) -> the folders and root modules it imports, type-only included."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        source, target = _package(e.source), _package(e.target)
        if source != target:
            graph.setdefault(source, set()).add(target)
    return graph


def test_no_two_folders_import_each_other() -> None:
    cycle = find_cycle(folder_graph(import_edges(PACKAGE_DIR)))
    assert cycle is None, "folders that import each other: " + " -> ".join(cycle or [])


ROOT_MODULES_AT_MOST = 8


def test_the_package_root_holds_few_modules() -> None:
    root = sorted(p.name for p in PACKAGE_DIR.glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, root


def test_the_design_document_draws_every_folder() -> None:
    """docs/DESIGN.md §8's tree names every folder of the package (`name/`)."""
    design = (PACKAGE_DIR.parent / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    tree = design.split("## 8. Shape of the code", 1)[1].split("### Layers", 1)[0]
    folders = sorted(
        p.name for p in PACKAGE_DIR.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )
    missing = [name for name in folders if f"{name}/" not in tree]
    assert not missing, f"folders of forensics/ not drawn in docs/DESIGN.md §8: {missing}"


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in find_modules(PACKAGE_DIR) if layer_of(m) is None]
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/DESIGN.md): {unplaced}"


def test_no_module_imports_a_higher_layer() -> None:
    violations = layer_violations(import_edges(PACKAGE_DIR))
    assert not violations, "\n".join(violations)


def test_the_stage_modules_see_neither_the_pipeline_nor_the_commands() -> None:
    """The brief form of the rule, spelled out: the stage packages never import the command
    layer, the stage list, investigate or the report."""
    lower = ("ingest", "analysis", "logs", "replay", "notify", "ledger", "reconstruct", "tap")
    lower += ("engines", "simulate")
    upper = (
        "forensics.cli",
        "forensics.run.pipeline",
        "forensics.run.investigate",
        "forensics.report",
    )
    bad = [
        f"{e.source} imports {e.target} (line {e.line})"
        for e in import_edges(PACKAGE_DIR)
        if e.source.split(".")[1] in lower
        and any(e.target == u or e.target.startswith(u + ".") for u in upper)
    ]
    assert not bad, "\n".join(bad)


def test_stages_import_other_packages_at_load_time() -> None:
    """Below the whole-run layer, a module imports another package's module inside a function
    only when that module needs an optional extra (torch for replay, ray)."""
    hidden = hidden_imports(PACKAGE_DIR)
    assert not hidden, "\n".join(hidden)


def test_the_stage_list_imports_nothing_late() -> None:
    late = [e for e in import_edges(PACKAGE_DIR) if e.source == "forensics.run.pipeline" and e.lazy]
    assert not late, late


def test_find_cycle_on_hand_made_graphs() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None  # diamond
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"y"}, "y": {"y"}}) == ["y", "y"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"d"}, "d": {"e"}, "e": {"c"}}) == [
        "c",
        "d",
        "e",
        "c",
    ]


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    package = tmp_path / ROOT
    for rel, text in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_a_cycle_behind_a_function_level_import_is_found(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "run/__init__.py": "",
            "run/pipeline.py": "from forensics.ingest.stage import run\n",
            "ingest/__init__.py": "",
            "ingest/stage.py": (
                "def run():\n    from forensics.run.pipeline import x\n    return x\n"
            ),
        },
    )
    edges = import_edges(package)
    assert find_cycle(runtime_graph(edges)) == [
        "forensics.ingest.stage",
        "forensics.run.pipeline",
        "forensics.ingest.stage",
    ]
    violation = layer_violations(edges)
    assert violation == [
        "forensics.ingest.stage (layer 'ingest') imports forensics.run.pipeline "
        "(layer 'whole runs') at line 2"
    ]


def test_relative_and_type_only_imports(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "tap/__init__.py": "",
            "tap/writer.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from .recorder import Settings\n"
            ),
            "tap/recorder.py": "from . import writer\nfrom ..report import stage\n",
            "report/__init__.py": "",
            "report/stage.py": "import json\n",
        },
    )
    edges = {(e.source, e.target, e.type_only) for e in import_edges(package)}
    assert edges == {
        ("forensics.tap.writer", "forensics.tap.recorder", True),
        ("forensics.tap.recorder", "forensics.tap.writer", False),
        ("forensics.tap.recorder", "forensics.report.stage", False),
    }
    assert find_cycle(runtime_graph(import_edges(package))) is None  # the type-only edge
    assert len(layer_violations(import_edges(package))) == 1  # tap may not use the report


def test_a_hidden_import_is_found_unless_it_needs_an_extra(tmp_path: Path) -> None:
    package = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "replay/__init__.py": "",
            "replay/decode.py": "import torch\n",
            "replay/testmodel.py": "import numpy\n",
            "replay/replay.py": "from forensics.replay import decode\n",
            "reconstruct/__init__.py": "",
            "reconstruct/decide.py": (
                "def f():\n"
                "    from forensics.replay.replay import x\n"  # needs torch through decode
                "    from forensics.replay import testmodel\n"  # needs no extra: hidden
                "    from forensics.errors import E\n"  # the base layer: exempt
                "    return x, testmodel, E\n"
            ),
        },
    )
    edges = import_edges(package)
    assert needing_extras(package, edges) == {"forensics.replay.decode", "forensics.replay.replay"}
    assert hidden_imports(package) == [
        "forensics.reconstruct.decide imports forensics.replay.testmodel inside a function (line 3)"
    ]


def test_the_commands_load_without_matplotlib() -> None:
    """matplotlib takes about a second to import; only drawing a report loads it, so `--help`
    and every other command start without it."""
    import subprocess
    import sys

    code = "import sys, forensics.cli; print(sorted(m for m in sys.modules if 'matplotlib' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
