"""What the forget tests look at from outside the code under test, through the owner's
connection (the embedded cluster's superuser, so row-level security hides nothing): the rows
of a tenant that still hold a marker, and one backend waiting for another's locks.

    from tests.probes import marked_rows, wait_until_blocked"""

from __future__ import annotations

import time
from typing import Any

import psycopg


def marked_rows(owner_url: str, tenant_id: Any, needle: str, *, agent_id: str | None = None) -> dict[str, list[str]]:
    """Every row of the tenant, in every table of the schema that has a tenant_id, whose text
    form holds needle (case ignored), by table: the rows' text forms, lower-cased. With
    agent_id, a table that has an agent_id column gives only that agent's rows."""
    found: dict[str, list[str]] = {}
    with psycopg.connect(owner_url) as conn:
        tables = conn.execute(
            "SELECT table_name, bool_or(column_name = 'agent_id') FROM information_schema.columns"
            " WHERE table_schema = 'memworker' GROUP BY 1"
            " HAVING bool_or(column_name = 'tenant_id') ORDER BY 1"
        ).fetchall()
        for table, by_agent in tables:
            sql = f"SELECT lower(x::text) FROM memworker.{table} x WHERE x.tenant_id = %s"
            params: list[Any] = [tenant_id]
            if by_agent and agent_id is not None:
                sql, params = sql + " AND x.agent_id = %s", [*params, agent_id]
            rows = conn.execute(sql + " AND strpos(lower(x::text), lower(%s)) > 0", [*params, needle]).fetchall()
            if rows:
                found[table] = [text for (text,) in rows]
    return found


def marked_counts(owner_url: str, tenant_id: Any, needle: str, *, agent_id: str | None = None) -> dict[str, int]:
    """marked_rows as a count of rows by table."""
    return {t: len(rows) for t, rows in marked_rows(owner_url, tenant_id, needle, agent_id=agent_id).items()}


def wait_until_blocked(owner_url: str, waiter_pid: int, holder_pid: int, timeout_s: float) -> None:
    """Until the backend waiter_pid waits for a lock that holder_pid holds (or queues ahead
    of it for): only that wait counts, not any other waiter in the cluster."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(owner_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT %s = ANY(pg_blocking_pids(%s))", (holder_pid, waiter_pid)).fetchone()
            if row and row[0]:
                return
            time.sleep(0.02)
    raise AssertionError(f"backend {waiter_pid} never waited for backend {holder_pid}")
