"""The pool's liveness check (db._check): pinged unless the connection was returned moments
ago; a connection the server dropped costs at most the one transaction that finds out. And
the order it lends in: the connection returned last first."""

from __future__ import annotations

import time
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


def _wait_returned(pool: Any, n: int) -> None:
    deadline = time.monotonic() + 10
    while pool.get_stats()["pool_available"] < n:
        assert time.monotonic() < deadline, "the pool never took its connections back"
        time.sleep(0.01)


def test_the_connection_returned_last_is_lent_first(stack: dict[str, Any]) -> None:
    pool = db.open_pool(stack["app_url"], min_size=3, max_size=3)
    try:
        held = [pool.getconn() for _ in range(3)]
        pids = [c.info.backend_pid for c in held]
        for conn in held:  # returned in the order borrowed: the third is the most recent
            pool.putconn(conn)
            _wait_returned(pool, held.index(conn) + 1)  # the pool's worker takes returns back
        assert _backend_pid(pool) == pids[2]
        _wait_returned(pool, 3)
        assert _backend_pid(pool) == pids[2]  # and again: one warm server process serves a lone caller
    finally:
        pool.close()
