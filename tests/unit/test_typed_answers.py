"""Functions answer named types (dataclasses, TypedDicts, pydantic models), not open dicts: an
open dict's keys are a contract nobody can read or check. A few stay open on purpose (a user's
metadata, JSON passed through whole); at most MAX_OPEN_ANSWERS of them, checked from the source."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_OPEN_ANSWERS = 30
_OPEN = r"(dict\[str, (Any|object)\]|Mapping\[str, (Any|object)\])"
OPEN_ANSWER = re.compile(rf"^({_OPEN}|(list|Sequence|Iterator|Iterable)\[{_OPEN}\])( \| None)?$")


def _sources() -> list[Path]:
    return sorted([*(ROOT / "memworker").rglob("*.py"), *(ROOT / "tasks").glob("*.py")])


def _aliases(trees: dict[Path, ast.Module]) -> dict[str, str]:
    """Module-level names bound to an open dict type (`Row = dict[str, Any]`), to see through."""
    found = {}
    for tree in trees.values():
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if value is not None and isinstance(target, ast.Name):
                text = ast.unparse(value).strip("'\"")
                if OPEN_ANSWER.match(text):
                    found[target.id] = text
    return found


def open_answers() -> list[str]:
    trees = {p: ast.parse(p.read_text(), str(p)) for p in _sources()}
    aliases = _aliases(trees)
    out = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
                text = ast.unparse(node.returns).replace("'", "").replace('"', "")
                for alias, meaning in aliases.items():
                    text = re.sub(rf"\b{alias}\b", meaning, text)
                if OPEN_ANSWER.match(text):
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} -> {text}")
    return out


def test_the_matcher_itself() -> None:
    for open_ in ("dict[str, Any]", "list[dict[str, object]]", "Mapping[str, Any] | None", "Iterator[dict[str, Any]]"):
        assert OPEN_ANSWER.match(open_), open_
    for closed in ("dict[str, int]", "MemoryOut", "list[Hit]", "dict[UUID, list[UUID]]"):
        assert not OPEN_ANSWER.match(closed), closed


def test_few_functions_answer_open_dicts() -> None:
    found = open_answers()
    assert len(found) <= MAX_OPEN_ANSWERS, (
        f"{len(found)} functions answer an open dict (at most {MAX_OPEN_ANSWERS}); name the answer "
        "(a dataclass, a TypedDict or a schemas.py model):\n" + "\n".join(found)
    )
