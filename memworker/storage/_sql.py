"""The named SQL (queries/<area>.sql, `-- name: xxx` blocks) and the generic helpers that run a
query by its name. For memworker/storage/ only: everything else calls the typed function of
its query, memworker.storage.<area>_db.<query name> (tests/unit/test_storage_typed.py checks)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, LiteralString, cast

import psycopg


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


def _load_all(folder: Path) -> dict[str, LiteralString]:
    queries: dict[str, LiteralString] = {}
    for path in sorted(folder.glob("*.sql")):
        for name, sql in _load(path).items():
            if name in queries:
                raise RuntimeError(f"query {name!r} is defined twice ({path.name})")
            queries[name] = sql
    return queries


Q = _load_all(Path(__file__).with_name("queries"))

Row = dict[str, Any]


def one(conn: psycopg.Connection, query: str, /, **params: Any) -> Row | None:
    # Every connection is made with row_factory=dict_row (db.connect, db.open_pool); the bare
    # psycopg.Connection annotation used across the code base says tuple rows.
    return cast("Row | None", conn.execute(Q[query], params).fetchone())


def run(conn: psycopg.Connection, query: str, /, **params: Any) -> int:
    """Execute a statement that returns no rows; returns the affected row count."""
    return conn.execute(Q[query], params).rowcount


def all_(conn: psycopg.Connection, query: str, /, **params: Any) -> list[Row]:
    return cast("list[Row]", conn.execute(Q[query], params).fetchall())  # dict rows, as in one()


def without_ctes(sql: LiteralString, names: tuple[str, ...]) -> LiteralString:
    """sql with the named WITH-clause entries (`, name AS (...)`) cut out: how a statement's
    read-only form is made from the one text (a hot standby refuses a statement that holds a
    data-modifying CTE, even one that changes no row). Comments and string literals are
    skipped when matching parentheses. ValueError when a name is not one of sql's CTEs."""
    for name in names:
        found = re.search(rf",\s*{name}\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\(", sql)
        if found is None:
            raise ValueError(f"no CTE named {name!r} in the statement")
        end = _closing(sql, found.end())
        sql = sql[: found.start()] + sql[end + 1 :]  # a cut of our own text: literal still
    return sql


def _closing(sql: str, i: int) -> int:
    """The index of the parenthesis closing the one just before i."""
    depth = 1
    while i < len(sql):
        c = sql[i]
        if sql.startswith("--", i):
            i = sql.find("\n", i)
            if i < 0:
                break
        elif c == "'":
            i = sql.find("'", i + 1)
            if i < 0:
                break
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced parentheses in the statement")
