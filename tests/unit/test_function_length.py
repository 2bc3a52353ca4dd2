"""No function in memworker/ or tasks/ runs over 80 lines, counted from the source (ast) from
its `def` line (decorators aside) to its last line, functions inside functions and methods
included. Ruff's complexity, branch, statement and argument limits (pyproject.toml) keep
functions small in other ways; this keeps them short enough to read on one screen."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memworker", "tasks")
MAX_LINES = 80


def long_functions(source: str, path: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                found.append(f"{path}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_over_the_limit() -> None:
    files = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    assert len(files) > 50  # the walk found the packages
    found = [hit for p in files for hit in long_functions(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == [], f"functions over {MAX_LINES} lines; split them by what they do: {found}"


def test_the_count_includes_nested_functions_and_methods() -> None:
    inner_body = "\n".join(f"            y{i} = {i}" for i in range(70))
    outer_rest = "\n".join(f"        x{i} = {i}" for i in range(10))
    source = f"class C:\n    def outer(self) -> None:\n        def inner() -> None:\n{inner_body}\n{outer_rest}\n"
    assert long_functions(source, "example.py") == ["example.py:2 outer (82 lines)"]  # inner: 71 lines
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert long_functions(f"def f() -> None:\n{body}\n", "example.py") == [f"example.py:1 f ({MAX_LINES + 1} lines)"]
    assert long_functions(f"def f() -> None:\n{body}\n".replace("    x0 = 0\n", ""), "example.py") == []
