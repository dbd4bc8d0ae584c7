"""The shape of the code: no function longer than a reader can hold (80 lines, its docstring
not counted), in the package, the benchmarks and the tests."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("privaudit", "benchmarks", "tests")
MAX_LINES = 80
#: functions known to be over MAX_LINES whose split is under way elsewhere, as "path:name"
#: (path relative to the repository root, name as in ``def``). Add one only with the work that
#: splits it in hand; test_pending_functions_are_still_long fails once one is split, so that it
#: leaves this list with the split. (benchmarks/bench_few_refs.py:evaluate, the last one, was
#: split in 3d89ee0.)
PENDING: set[str] = set()


def _has_docstring(body: list[ast.stmt]) -> bool:
    first = body[0]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of a function's body, from its first statement to its last, a leading
    docstring left out (the ``def`` line, the arguments and decorators are not counted)."""
    body = node.body[1:] if _has_docstring(node.body) else node.body
    if not body:
        return 0
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


@functools.cache
def function_lengths() -> dict[str, int]:
    """Every function and method (nested ones too) of every .py file under FOLDERS, as
    "path:name" → its body's lines (the longest, when a file defines a name twice)."""
    lengths: dict[str, int] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    key = f"{rel}:{node.name}"
                    lengths[key] = max(lengths.get(key, 0), body_lines(node))
    return lengths


def test_no_function_is_longer_than_80_lines():
    long = {k: n for k, n in function_lengths().items() if n > MAX_LINES and k not in PENDING}
    assert not long, (f"functions over {MAX_LINES} lines (docstring not counted); split each into helpers named "
                      "for what they do:\n" + "\n".join(f"  {k}: {n} lines" for k, n in sorted(long.items())))


def test_pending_functions_are_still_long():
    lengths = function_lengths()
    stale = sorted(k for k in PENDING if lengths.get(k, 0) <= MAX_LINES)
    assert not stale, ("in PENDING but no longer over the limit (or gone): take them off the list:\n"
                       + "\n".join(f"  {k}: {lengths.get(k, 'not found')}" for k in stale))


def test_the_measure_leaves_out_the_docstring_and_the_signature():
    source = ('@decorator\ndef f(\n    a,\n    b,\n):\n    """Doc,\n\n    long."""\n    x = 1\n\n    return x\n\n\n'
              "def g():\n    '''Only a docstring.'''\n")
    f, g = (n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    assert (body_lines(f), body_lines(g)) == (3, 0)
