"""Database rows as plain JSON values: the one conversion the API, the CLI and the sleep
reports share."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID


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
