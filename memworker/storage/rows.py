"""Database rows as plain JSON values: the one conversion the API, the CLI and the sleep
reports share."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from memworker.settings import JSON_DEPTH_CEILING

# What a stored json/jsonb value nested deeper than the ceiling reads as (sql/0008 writes the
# same kind of marker into rows deeper than the API's limit).
DEEP_MARKER = {"_repaired": f"metadata exceeded depth {JSON_DEPTH_CEILING}"}


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """A row with UUIDs and datetimes as strings."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, UUID):
            v = str(v)
        elif isinstance(v, datetime):
            v = v.isoformat()
        elif isinstance(v, list) and v and isinstance(v[0], UUID):
            v = [str(x) for x in v]
        out[k] = v
    return out


def load_json(data: str | bytes) -> Any:
    """psycopg's json/jsonb loader (db.py): json.loads, except that a value nested deeper
    than JSON_DEPTH_CEILING reads as DEEP_MARKER. The API refuses such values, but a row
    written by an older release or by hand must not make every read of its agent fail (the
    answer's JSON encoder, and json.loads itself, give up a few hundred levels down)."""
    raw = data if isinstance(data, bytes) else data.encode()
    if raw.count(b"{") + raw.count(b"[") <= JSON_DEPTH_CEILING:  # the common case: too few brackets to be that deep
        return json.loads(raw)
    try:
        value = json.loads(raw)
    except RecursionError:
        return dict(DEEP_MARKER)
    return dict(DEEP_MARKER) if depth(value) > JSON_DEPTH_CEILING else value


def depth(value: Any) -> int:
    """How many objects and arrays deep a JSON value nests (a scalar: 0). Iterative."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest
