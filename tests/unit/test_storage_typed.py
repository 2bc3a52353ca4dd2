"""Typed storage: every named query in memworker/storage/queries/<area>.sql has exactly one typed
function, memworker.storage.<area>_db.<query name>, and nothing outside memworker/storage/
calls a query by its string name (store.one / store.all_ / store.run).

Areas still being converted are listed in PENDING; the test then only checks that they are
not half done (a typed module for an area covers all of its queries or does not exist)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "memworker" / "storage" / "queries"
AREAS = sorted(p.stem for p in QUERIES.glob("*.sql"))

# Areas whose call sites still use store.one/all_/run(conn, "name"): remove an area from
# here when its module memworker/storage/<area>_db.py types every query of <area>.sql.
PENDING = {"core", "lifecycle"}
# Files outside memworker/storage/ allowed a string-named call though their area is typed:
# tests/conftest.py may not be edited (docs/CONTRIBUTING.md).
ALLOWED_FILES = {"tests/conftest.py"}
SCANNED = ("memworker", "tasks", "tests", "bench")


def names_of(area: str) -> list[str]:
    return re.findall(r"^-- name: (\S+)", (QUERIES / f"{area}.sql").read_text(), flags=re.M)


def area_of() -> dict[str, str]:
    return {name: area for area in AREAS for name in names_of(area)}


def typed_module(area: str) -> object | None:
    name = f"memworker.storage.{area}_db"
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def test_every_query_of_a_typed_area_has_its_typed_function() -> None:
    assert set(PENDING) <= set(AREAS)
    for area in AREAS:
        module = typed_module(area)
        if area in PENDING:
            assert module is None, f"{area}_db exists: finish {area} and remove it from PENDING"
            continue
        assert module is not None, f"memworker/storage/{area}_db.py is missing"
        functions = {n for n, f in inspect.getmembers(module, inspect.isfunction) if f.__module__ == module.__name__}
        missing = [n for n in names_of(area) if n not in functions]
        assert not missing, f"queries of {area}.sql without a typed function: {missing}"


def test_no_query_is_typed_twice() -> None:
    owners: dict[str, list[str]] = {}
    for area in AREAS:
        module = typed_module(area)
        if module is None:
            continue
        for n, f in inspect.getmembers(module, inspect.isfunction):
            if f.__module__ == module.__name__:
                owners.setdefault(n, []).append(area)
    queries = area_of()
    for name, areas in owners.items():
        if name in queries:
            assert areas == [queries[name]], f"{name} is typed in {areas}, belongs to {queries[name]}"


def string_named_calls() -> list[tuple[str, int, str | None]]:
    """(file, line, query name or None when not a literal) of store.one/all_/run calls
    outside memworker/storage/."""
    found = []
    for root in SCANNED:
        for path in sorted((ROOT / root).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("memworker/storage/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("one", "all_", "run")
                    and ast.unparse(node.func.value).split(".")[-1] == "store"
                ):
                    arg = node.args[1] if len(node.args) > 1 else None
                    name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
                    found.append((rel, node.lineno, name))
    return found


def test_no_call_by_string_name_outside_storage() -> None:
    queries = area_of()
    bad = []
    for rel, line, name in string_named_calls():
        if rel in ALLOWED_FILES:
            continue
        # A name chosen at run time: allowed only while every query of the file's area is
        # pending (today lifecycle/retention.py picks among retention_forget_*).
        if name is None and rel == "memworker/lifecycle/retention.py" and "lifecycle" in PENDING:
            continue
        if name is not None and queries.get(name) in PENDING:
            continue
        bad.append(f"{rel}:{line} {name or '<name not a literal>'}")
    assert not bad, "call the typed function (memworker.storage.<area>_db) instead:\n" + "\n".join(bad)


def test_the_scan_sees_calls() -> None:
    """The scan itself works: the pending areas' call sites are found (drop this when none is pending)."""
    queries = area_of()
    pending = {queries.get(name) for _, _, name in string_named_calls() if name is not None}
    assert pending & PENDING or not PENDING
