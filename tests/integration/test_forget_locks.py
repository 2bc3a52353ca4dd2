"""Forget takes the rows it erases in ingest's order, episodes before memories: an ingest
holds its episode's row while it confirms the memories its items repeat, so a forget that
took those memories first and then waited for the episode could close a wait-for cycle.
The episodes themselves it holds in two batches (the named ones, then those its memories
came from), so a writer taking them in id order can still close one: Postgres then ends the
forget's part, which forget undoes to its savepoint and plans again. Real Postgres; the
ingest and the other writer are stood in for by transactions holding episode rows."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from memworker.domain import memories
from memworker.erase import forget
from memworker.ingest import intake
from memworker.storage import core_db, db, store
from tests.probes import wait_until_blocked

AGENT = "lock-bot"
TEXT = "The user's office number is 0151 496 0000."


def test_forget_waits_for_a_held_episode_before_taking_any_memory_row(
    stack: dict[str, Any], tenants: dict[str, Any], embedder: Any
) -> None:
    tenant = tenants["alice"]["id"]
    pool = db.open_pool(stack["app_url"], max_size=4)
    receipts: list[dict[str, Any]] = []
    failed: list[BaseException] = []
    try:
        with db.tenant_tx(pool, tenant) as conn:
            ((episode, _),) = intake.accept(
                conn, tenant_id=tenant, agent_id=AGENT, episodes=[intake.NewEpisode(f"Note: {TEXT}")]
            )
            memory, _ = store.write_memory(
                conn,
                tenant_id=tenant,
                agent_id=AGENT,
                draft=memories.Draft(text=TEXT, provenance=(f"episode:{episode}",)),
                embedding=embedder.embed([TEXT])[0],
                source_key=f"test:{episode}",
            )

        def erase() -> None:
            try:
                with db.tenant_tx(pool, tenant) as conn:
                    request = forget.Request(provenance=f"episode:{episode}")
                    receipts.append(forget.forget(conn, tenant_id=tenant, agent_id=AGENT, request=request, actor="t"))
            except BaseException as exc:  # surfaced below
                failed.append(exc)

        with db.tenant_tx(pool, tenant) as ingesting:  # an ingest of this episode, mid-store
            assert core_db.lock_claimed_episode(ingesting, tenant_id=tenant, episode_id=episode) is not None
            thread = threading.Thread(target=erase)
            thread.start()
            _wait_for_a_waiter(pool, tenant)
            # the ingest may still confirm the memory: the forget holds no memory row yet
            with db.tenant_tx(pool, tenant) as confirm:
                row = confirm.execute("SELECT id FROM memories WHERE id = %s FOR UPDATE NOWAIT", (memory,)).fetchone()
                assert row is not None and row["id"] == memory
        thread.join(60)
    finally:
        pool.close()
    assert not thread.is_alive() and not failed, failed
    (receipt,) = receipts
    assert receipt["memories"]["ids"] == [str(memory)] and receipt["episodes"]["ids"] == [str(episode)]


def _wait_for_a_waiter(pool: Any, tenant: UUID) -> None:
    """Until a transaction of this database waits for a lock (the forget, on the episode);
    a row lock's wait names no database, so the waiter's session says which."""
    deadline = time.monotonic() + 60
    with db.tenant_tx(pool, tenant) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE NOT l.granted AND a.datname = current_database()"
            ).fetchone()
            if row is not None and row["n"]:
                return
            time.sleep(0.05)
    raise AssertionError("the forget never waited for the held episode")


DEADLOCK_TIMEOUT = "5s"  # the forget's deadlock check: long after the other writer closes the cycle


@pytest.fixture
def slow_deadlock_check(stack: dict[str, Any]) -> Iterator[db.Pool]:
    """A pool of the app role whose sessions check for a deadlock only after DEADLOCK_TIMEOUT
    of waiting, so the test closes a cycle well before the forget's check finds it."""
    with psycopg.connect(stack["owner_url"], autocommit=True) as conn:
        alter = sql.SQL("ALTER ROLE {} IN DATABASE {} ").format(
            sql.Identifier(db.APP_ROLE), sql.Identifier(conn.info.dbname)
        )
        conn.execute(alter + sql.SQL("SET deadlock_timeout = {}").format(sql.Literal(DEADLOCK_TIMEOUT)))
        pool = db.open_pool(stack["app_url"], max_size=2)
        try:
            yield pool
        finally:
            pool.close()
            conn.execute(alter + sql.SQL("RESET deadlock_timeout"))


def test_a_deadlock_with_another_writer_is_planned_again_not_a_503(
    stack: dict[str, Any], tenants: dict[str, Any], embedder: Any, slow_deadlock_check: db.Pool
) -> None:
    """A memory came from two episodes; the forget names the later one by id and holds it,
    then waits for the earlier one, which another writer holds. That writer, taking rows in
    id order, then asks for the named one: a cycle. The forget's deadlock check runs first
    (DEADLOCK_TIMEOUT against the writer's 60 s) and ends the forget's part; the forget undoes
    it and plans again, and erases both episodes once the writer has committed."""
    tenant, pool = tenants["bob"]["id"], slow_deadlock_check
    with db.tenant_tx(pool, tenant) as conn:
        accepted = intake.accept(
            conn,
            tenant_id=tenant,
            agent_id=AGENT,
            episodes=[intake.NewEpisode(f"Note {i}: {TEXT}") for i in range(2)],
        )
        first, named = sorted(e for e, _ in accepted)  # named holds first, then waits for the earlier
        memory, _ = store.write_memory(
            conn,
            tenant_id=tenant,
            agent_id=AGENT,
            draft=memories.Draft(text=TEXT, provenance=(f"episode:{named}", f"episode:{first}")),
            embedding=embedder.embed([TEXT])[0],
            source_key=f"test:{named}",
        )
    pids: dict[str, int] = {}
    receipts: list[dict[str, Any]] = []
    failed: list[BaseException] = []
    erasing = threading.Event()

    def erase() -> None:
        try:
            with db.tenant_tx(pool, tenant) as conn:
                pids["forget"] = conn.info.backend_pid
                erasing.set()
                request = forget.Request(provenance=f"episode:{named}")
                receipts.append(forget.forget(conn, tenant_id=tenant, agent_id=AGENT, request=request, actor="t"))
        except BaseException as exc:  # surfaced below
            failed.append(exc)

    deadlocks = _deadlocks(stack)
    with psycopg.connect(stack["owner_url"]) as writer:  # the other writer: rows in id order
        writer.execute("SET deadlock_timeout = '60s'")  # its own check never comes first
        writer.execute("SELECT id FROM memworker.episodes WHERE id = %s FOR UPDATE", (first,))
        thread = threading.Thread(target=erase)
        thread.start()
        assert erasing.wait(60), failed
        wait_until_blocked(stack["owner_url"], pids["forget"], writer.info.backend_pid, 60)
        # closes the cycle; granted once Postgres has ended the forget's part
        writer.execute("SELECT id FROM memworker.episodes WHERE id = %s FOR UPDATE", (named,))
        writer.commit()
    thread.join(60)
    assert not thread.is_alive() and not failed, failed
    (receipt,) = receipts
    assert receipt["memories"]["ids"] == [str(memory)]
    assert sorted(receipt["episodes"]["ids"]) == sorted([str(first), str(named)])
    assert _deadlocks(stack, above=deadlocks) > deadlocks  # the cycle did close


def _deadlocks(stack: dict[str, Any], above: int = -1) -> int:
    """The deadlocks Postgres has counted in this database (its statistics are flushed a
    little after the fact: with above, waits up to 30 s for a count above it)."""
    deadline = time.monotonic() + 30
    with psycopg.connect(stack["owner_url"], autocommit=True) as conn:
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()
            count = int(row[0]) if row else 0
            if count > above or time.monotonic() > deadline:
                return count
            time.sleep(0.2)
