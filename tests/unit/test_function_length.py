"""No product function is longer than a reader can hold in view: at most ``MAX_LINES`` lines.

Ruff has no length rule (its complexity rules, in pyproject.toml, bound branches and
statements, not lines), so this counts them. A function's lines run from its ``def`` line (its
decorators left out) to its last line, both included: the docstring, comments and blank lines
inside count, and a nested function counts both on its own and in the function around it.
A long function becomes a short sequence of named phases, not an entry below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

MAX_LINES = 60

PRODUCT = Path(__file__).resolve().parents[2] / "xds_control"

LONG_UNTIL_SPLIT: dict[str, str] = {}
"""Functions allowed over ``MAX_LINES`` (``path:qualified name``) while they are rewritten
elsewhere, each with what ends its stay. An entry whose function is no longer long fails too,
so the list only shrinks."""


def _functions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function under ``node`` with its qualified name (``Class.method``,
    ``outer.<locals>.inner``, as Python's ``__qualname__``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.<locals>.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def _length(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert function.end_lineno is not None  # set by ast.parse
    return function.end_lineno - function.lineno + 1


def _lengths() -> dict[str, int]:
    """``path:qualified name`` -> lines, for every function of the product."""
    lengths: dict[str, int] = {}
    for path in sorted(PRODUCT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, function in _functions(tree):
            lengths[f"{path.relative_to(PRODUCT).as_posix()}:{name}"] = _length(function)
    return lengths


def test_no_product_function_is_over_the_limit() -> None:
    long = {name: n for name, n in _lengths().items() if n > MAX_LINES}
    over = sorted(f"{name} ({n} lines)" for name, n in long.items() if name not in LONG_UNTIL_SPLIT)
    assert not over, f"functions over {MAX_LINES} lines (split into named phases): {over}"


def test_every_allowed_function_is_still_long() -> None:
    lengths = _lengths()
    stale = sorted(name for name in LONG_UNTIL_SPLIT if lengths.get(name, 0) <= MAX_LINES)
    assert not stale, f"remove from LONG_UNTIL_SPLIT, no longer over {MAX_LINES} lines: {stale}"


def test_the_count_runs_from_def_to_the_last_line() -> None:
    source = (
        "@decorator\n"
        "def f():\n"
        "    '''Doc.'''\n"
        "\n"
        "    # why\n"
        "    return 1\n"
        "class C:\n"
        "    async def m(self):\n"
        "        def inner():\n"
        "            pass\n"
    )
    lengths = {name: _length(f) for name, f in _functions(ast.parse(source))}
    assert lengths == {"f": 5, "C.m": 3, "C.m.<locals>.inner": 2}
