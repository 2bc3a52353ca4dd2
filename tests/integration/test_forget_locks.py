"""Forget takes the rows it erases in ingest's order, episodes before memories: an ingest
holds its episode's row while it confirms the memories its items repeat, so a forget that
took those memories first and then waited for the episode could close a wait-for cycle.
Real Postgres; the ingest is stood in for by a transaction holding the episode row."""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from memworker import memories
from memworker.erase import forget
from memworker.ingest import intake
from memworker.storage import core_db, db, store

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
