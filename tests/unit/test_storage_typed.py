"""Typed storage: every named query (storage's shared memworker/storage/queries/<area>.sql and
each capability's own memworker/<capability>/queries.sql) has exactly one typed way in: a query
runner of _sql declared with its row type, or a function where the call picks among forms of one
statement, in memworker.storage.<area>_db or memworker.<capability>.queries; and nothing outside
memworker/storage/ calls a query by its string name."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from memworker.storage import _sql

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "memworker" / "storage" / "queries"
# an area: its .sql file and the module that types it
FILES = {
    **{p.stem: (p, f"memworker.storage.{p.stem}_db") for p in QUERIES.glob("*.sql")},
    **{p.parent.name: (p, f"memworker.{p.parent.name}.queries") for p in (ROOT / "memworker").glob("*/queries.sql")},
}
AREAS = sorted(FILES)

SCANNED = ("memworker", "tasks", "tests", "bench")


def names_of(area: str) -> list[str]:
    return re.findall(r"^-- name: (\S+)", FILES[area][0].read_text(), flags=re.M)


def area_of() -> dict[str, str]:
    return {name: area for area in AREAS for name in names_of(area)}


def typed_module(area: str) -> object | None:
    name = FILES[area][1]
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def typed_names(module: Any) -> set[str]:
    """The module's own functions and the runners named like the query they run."""
    own = {n for n, f in inspect.getmembers(module, inspect.isfunction) if f.__module__ == module.__name__}
    runners = {n for n, q in inspect.getmembers(module, lambda v: isinstance(v, _sql._Query)) if q.name == n}
    return own | runners


def test_every_query_has_its_typed_function() -> None:
    for area in AREAS:
        module = typed_module(area)
        assert module is not None, f"{FILES[area][1]} is missing"
        missing = [n for n in names_of(area) if n not in typed_names(module)]
        assert not missing, f"queries of {area}.sql without a typed function: {missing}"


def test_no_query_is_typed_twice() -> None:
    owners: dict[str, list[str]] = {}
    for area in AREAS:
        module = typed_module(area)
        if module is None:
            continue
        for n in typed_names(module):
            owners.setdefault(n, []).append(area)
    queries = area_of()
    for name, areas in owners.items():
        if name in queries:
            assert areas == [queries[name]], f"{name} is typed in {areas}, belongs to {queries[name]}"


def calls_by_name(source: str, rel: str) -> list[tuple[str, int, str | None]]:
    """(file, line, query name or None when not a literal) of one/all_/run calls on store or
    _sql (the generic by-name helpers) in one module's source."""
    found = []
    for node in ast.walk(ast.parse(source, rel)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("one", "all_", "run")
            and ast.unparse(node.func.value).split(".")[-1] in ("store", "_sql")
        ):
            arg = node.args[1] if len(node.args) > 1 else None
            name = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
            found.append((rel, node.lineno, name))
    return found


def test_no_call_by_string_name_outside_storage() -> None:
    bad = []
    for root in SCANNED:
        for path in sorted((ROOT / root).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith("memworker/storage/"):
                bad += calls_by_name(path.read_text(), rel)
    assert not bad, (
        "call the typed function (memworker.storage.<area>_db, memworker.<capability>.queries) instead:\n"
        + "\n".join(map(str, bad))
    )


def test_the_scan_sees_calls() -> None:
    source = 'store.one(conn, "create_tenant", name="x")\nstorage._sql.all_(conn, q)\ncore_db.create_tenant(conn)\n'
    assert calls_by_name(source, "x.py") == [("x.py", 1, "create_tenant"), ("x.py", 2, None)]


def test_a_runner_refuses_a_missing_or_unknown_keyword_before_it_runs() -> None:
    from memworker.storage import core_db

    conn: Any = None  # never reached: the keywords are checked first
    with pytest.raises(TypeError, match=r"tenant_by_name: expected \['name'\], got \['nam'\]"):
        core_db.tenant_by_name(conn, nam="x")
    with pytest.raises(TypeError, match="expected"):
        core_db.tenant_by_name(conn)
    with pytest.raises(TypeError, match="no parameter"):
        _sql.Rows("tenant_by_name", core_db.Tenant, subject=None)  # a default the statement lacks
    assert core_db.list_episodes.defaults == {"agent_ids": None}  # what a caller may leave out


def test_the_server_gets_statements_without_comments_or_indentation() -> None:
    sql = "/* q */ SELECT 'a -- b' AS x,  -- why\n    'it''s' AS y\n\n  -- a note\nFROM t"
    assert _sql.compact(sql) == "/* q */ SELECT 'a -- b' AS x,\n'it''s' AS y\nFROM t"


def test_recall_fits_the_conversion_cache_of_psycopg() -> None:
    """psycopg converts a statement's %(name)s placeholders on every call and caches the result
    only for texts up to 4 KB (MAX_CACHED_STATEMENT_LENGTH): past it the exact recall
    statement, which serves every agent up to recall.EXACT_MAX memories, was parsed again on
    every call (0.2 ms of the API's CPU)."""
    size = len(_sql.compact(_sql.Q["recall"]).encode())
    assert size <= 4096, f"recall's statement is {size} bytes as sent"
