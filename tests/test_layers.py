"""The package's layer order, enforced: every import (lazy ones inside functions included)
goes to the same layer or one below it, and every module belongs to a layer.

Bottom to top: the package root and its errors; the maths (``analysis``); the defences (``defences``: their
registry, knobs and training hooks, plain torch); the run vocabulary
(``core``: configs, defaults, seeds, provenance); safe files (``files``); data; models;
training; the attacks' maths; the pipeline steps (``pipeline``: workspace, get-or-train, pools,
canaries, attacking a target); the report; the theory experiments (which draw with the report's
plots); the audit of a model from its outputs (``scanning``); orchestration (``executor``: the
audit's job graph and its executors; ``reproduction``); the Python API; the command line.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "privaudit"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("package root and errors", ("privaudit", "errors")),
    ("maths", ("analysis",)),
    ("defences' vocabulary and hooks", ("defences",)),
    ("run vocabulary", ("core",)),
    ("files", ("files",)),
    ("data", ("data",)),
    ("models", ("models",)),
    ("training", ("training",)),
    ("attacks", ("attacks",)),
    ("workspace and pipeline steps", ("pipeline",)),
    ("report", ("reporting",)),
    ("theory", ("theorems",)),
    ("audits from outputs", ("scanning",)),
    ("orchestration", ("executor", "reproduction")),
    ("the Python API", ("api",)),
    ("command line", ("cli", "__main__")),
]


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of a dotted module name (``privaudit.reporting.html`` → report)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "privaudit"
    for i, (_, names) in enumerate(LAYERS):
        if top in names:
            return i
    raise KeyError(f"{module} is in no layer of tests/test_layers.py: place it")


def imports_of(source: str, module: str) -> list[tuple[int, str]]:
    """(line, imported privaudit module) for every import in ``source``, at any depth;
    relative imports resolved against ``module``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if node.level:
                base = module.split(".")[: -node.level]
                name = ".".join(base + ([name] if name else []))
            if name.split(".")[0] == "privaudit":
                out.append((node.lineno, name))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "privaudit"]
    return out


def upward_imports(files: dict[str, str]) -> list[str]:
    """``module:line imports target (layer → layer)`` for each import that goes up."""
    bad = []
    for module, source in sorted(files.items()):
        here = layer_of(module)
        for line, target in imports_of(source, module):
            there = layer_of(target)
            if there > here:
                bad.append(f"{module}:{line} imports {target} ({LAYERS[here][0]} → {LAYERS[there][0]})")
    return bad


def package_files() -> dict[str, str]:
    files = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[module] = path.read_text()
    return files


def test_every_import_goes_down_or_sideways():
    files = package_files()
    assert len(files) > 50
    assert upward_imports(files) == []


def test_every_module_has_a_layer():
    for module in package_files():
        layer_of(module)


def test_the_check_catches_an_upward_import():
    planted = {"privaudit.models.evil": "def f():\n    from privaudit.reporting.html import render_report\n",
               "privaudit.reporting.fine": "from privaudit.models import build_model\nfrom . import html\n"}
    assert upward_imports(planted) == ["privaudit.models.evil:2 imports privaudit.reporting.html (models → report)"]


def import_circles(files: dict[str, str]) -> list[list[str]]:
    """The import circles among ``files``' modules (strongly connected groups of more than one
    module, lazy imports inside functions included), each sorted."""
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, source in files.items():
        for _, target in imports_of(source, module):
            # ``from privaudit.data import loaders`` names a module too
            graph[module].update(t for t in (target,) if t in files and t != module)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                graph[module].update(f"{node.module}.{a.name}" for a in node.names
                                     if f"{node.module}.{a.name}" in files)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_module_imports_itself_through_others():
    assert import_circles(package_files()) == []


def test_the_circle_check_finds_a_planted_circle():
    planted = {"privaudit.a": "from privaudit.b import x\n", "privaudit.b": "def f():\n    from privaudit.c import y\n",
               "privaudit.c": "import privaudit.a\n", "privaudit.d": "from privaudit.a import z\n"}
    assert import_circles(planted) == [["privaudit.a", "privaudit.b", "privaudit.c"]]
