"""The named SQL (`-- name: xxx` blocks of storage's shared queries/<area>.sql and of each
capability's own <capability>/queries.sql) and the runners that declare each query once with
the type of its rows (Rows, Row, One, Run over psycopg row factories). The <area>_db modules
and the capabilities' queries.py declare them; everything else calls those, never a query by
its name (tests/unit/test_storage_typed.py checks)."""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import Any, Generic, LiteralString, TypeVar

import psycopg
from psycopg.rows import RowFactory, RowMaker, class_row, dict_row

from memworker.storage.db import Conn


def _load(path: Path) -> dict[str, LiteralString]:
    queries: dict[str, LiteralString] = {}
    fragments: dict[str, str] = {}
    blocks = re.split(r"^-- (name|fragment): ", path.read_text(), flags=re.M)[1:]
    for kind, block in zip(blocks[::2], blocks[1::2], strict=True):
        name, _, body = block.partition("\n")
        # The leading `--` lines document the query here; the server gets its name instead, as
        # a block comment: pg_stat_activity and the SQL spans of a trace (docs/tracing.md) say
        # which query ran, and such a span is named by the verb after it rather than "--".
        lines = body.strip().splitlines()
        while lines and lines[0].lstrip().startswith("--"):
            lines.pop(0)
        text = "\n".join(lines).rstrip(";")
        if kind == "fragment":
            fragments[name.strip()] = text
        else:
            queries[name.strip()] = f"/* {name.strip()} */ {text}"  # our files' text: literal in spirit
    return {name: _included(sql, fragments, path) for name, sql in queries.items()}


def _included(sql: LiteralString, fragments: dict[str, str], path: Path) -> LiteralString:
    """sql with each `-- include: NAME` line replaced by the text of the file's `-- fragment:
    NAME` block: a part two statements share is written once (a fragment is not a query)."""

    def fragment(found: re.Match[str]) -> str:
        if found[1] not in fragments:
            raise RuntimeError(f"no fragment {found[1]!r} in {path.name}")
        return fragments[found[1]]

    return re.sub(r"^-- include: (\S+)$", fragment, sql, flags=re.M)  # our files' text, as in _load


def _load_all(files: list[Path]) -> dict[str, LiteralString]:
    queries: dict[str, LiteralString] = {}
    for path in files:
        for name, sql in _load(path).items():
            if name in queries:
                raise RuntimeError(f"query {name!r} is defined twice ({path.name})")
            queries[name] = sql
    return queries


def _files() -> list[Path]:
    """Storage's shared statements (queries/<area>.sql) and each capability's own
    (memworker/<capability>/queries.sql, typed beside it in queries.py)."""
    shared = Path(__file__).with_name("queries")
    return [*sorted(shared.glob("*.sql")), *sorted(shared.parents[1].glob("*/queries.sql"))]


Q = _load_all(_files())


def compact(sql: LiteralString) -> LiteralString:
    """sql as the server gets it: without `--` comments (outside string literals), indentation
    and blank lines. The files document each statement for their readers; every call sends and
    converts the text, and psycopg caches its conversion only for texts up to 4 KB (a longer
    one is parsed again on every call, 0.2 ms for recall's)."""
    lines = []
    for line in sql.splitlines():
        quoted, cut = False, len(line)
        for i, c in enumerate(line):
            if c == "'":
                quoted = not quoted
            elif not quoted and line.startswith("--", i):
                cut = i
                break
        if kept := line[:cut].strip():
            lines.append(kept)
    return "\n".join(lines)  # our files' text, cut: literal still


R = TypeVar("R")


class _Query(Generic[R]):
    """One named statement of queries/*.sql and the shape of its rows: a dataclass (its fields
    named like the columns), or a row factory (`first`, `via`). Called with the statement's
    parameters by keyword; a missing or unknown keyword is a TypeError before anything runs
    (psycopg would ignore an unknown one)."""

    __slots__ = ("name", "sql", "rows", "params", "defaults")

    def __init__(self, name: str, rows: type[R] | RowFactory[R], **defaults: Any) -> None:
        self.name, self.sql, self.defaults = name, compact(Q[name]), defaults
        self.rows: RowFactory[R] = class_row(rows) if isinstance(rows, type) else rows
        self.params = frozenset(re.findall(r"%\((\w+)\)s", self.sql))
        if not self.params >= defaults.keys():
            raise TypeError(f"{name}: no parameter {sorted(defaults.keys() - self.params)}")

    def _cursor(self, conn: Conn, params: dict[str, Any]) -> psycopg.Cursor[R]:
        if self.defaults:
            params = self.defaults | params
        if params.keys() != self.params:
            raise TypeError(f"{self.name}: expected {sorted(self.params)}, got {sorted(params)}")
        return conn.cursor(row_factory=self.rows).execute(self.sql, params)


class Rows(_Query[R]):
    """A query answering any number of rows."""

    __slots__ = ()

    def __call__(self, conn: Conn, /, **params: Any) -> list[R]:
        return self._cursor(conn, params).fetchall()


class Row(_Query[R]):
    """A query answering at most one row (None: none)."""

    __slots__ = ()

    def __call__(self, conn: Conn, /, **params: Any) -> R | None:
        return self._cursor(conn, params).fetchone()


class One(_Query[R]):
    """A query that always answers one row (an aggregate, an INSERT ... RETURNING)."""

    __slots__ = ()

    def __call__(self, conn: Conn, /, **params: Any) -> R:
        row = self._cursor(conn, params).fetchone()
        if row is None:
            raise RuntimeError(f"{self.name} answered no row")
        return row


class Run(_Query[None]):
    """A statement run for its effect: answers the rows it changed."""

    __slots__ = ()

    def __init__(self, name: str, **defaults: Any) -> None:
        super().__init__(name, _none, **defaults)

    def __call__(self, conn: Conn, /, **params: Any) -> int:
        return self._cursor(conn, params).rowcount


def first(cursor: psycopg.Cursor[Any]) -> RowMaker[Any]:
    """Rows as their first column (a query that answers one value per row)."""
    return itemgetter(0)


def via(make: Callable[[dict[str, Any]], R]) -> RowFactory[R]:
    """Rows as make(the row as a dict): for a domain class with a constructor of its own."""

    def factory(cursor: psycopg.Cursor[Any]) -> RowMaker[R]:
        as_dict = dict_row(cursor)
        return lambda values: make(as_dict(values))

    return factory


def _none(cursor: psycopg.Cursor[Any]) -> RowMaker[None]:
    return lambda values: None
