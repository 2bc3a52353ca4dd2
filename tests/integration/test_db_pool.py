"""The pool's liveness check (db._check): pinged unless the connection was returned moments
ago; a connection the server dropped costs at most the one transaction that finds out."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memworker import errors
from memworker.storage import db


def _backend_pid(pool: Any) -> int:
    with db.system_tx(pool) as conn:
        return int(conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"])


def _terminate(owner_url: str, pid: int) -> None:
    with psycopg.connect(owner_url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]


@pytest.fixture()
def pool(stack: dict[str, Any]) -> Any:
    p = db.open_pool(stack["app_url"], min_size=1, max_size=1)
    yield p
    p.close()


def test_an_idle_connection_is_pinged_and_a_dead_one_replaced(
    stack: dict[str, Any], pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _backend_pid(pool)
    _terminate(stack["owner_url"], first)
    monkeypatch.setattr(db, "TRUST_RECENT_S", 0.0)  # as if it had been idle for longer
    assert _backend_pid(pool) != first  # the ping found it dead; the caller never saw it


def test_a_just_returned_connection_is_lent_without_a_ping(
    stack: dict[str, Any], pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "TRUST_RECENT_S", 3600.0)
    first = _backend_pid(pool)
    _terminate(stack["owner_url"], first)
    # Trusted without a ping, so this transaction is the one that finds the server gone:
    # a clear Unavailable, and the pool replaces the connection when it comes back broken.
    with pytest.raises(errors.Unavailable):
        _backend_pid(pool)
    assert _backend_pid(pool) != first
