"""Fair ingest: one tenant's backlog of hundreds of episodes does not hold back
another tenant's lone episode (real API, Redis and `celery worker` process; docs/episodes.md)."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from memworker.sdk import Client

BACKLOG = 600  # alice's episodes, about 19 queue messages of ingest_batch_max (32)
_SERVICES = ("billing", "search", "auth", "checkout", "gateway", "payments", "reporting")


def _rows(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        return conn.execute(sql, args).fetchall()


def test_a_lone_episode_is_stored_before_another_tenants_backlog_drains(
    api: str, tenants: dict[str, Any], worker: Any, stack: dict[str, Any]
) -> None:
    alice = Client(api, tenants["alice"]["key"])
    bob = Client(api, tenants["bob"]["key"])
    charlie = Client(api, tenants["charlie"]["key"])
    for start in range(0, BACKLOG, 100):
        alice.add_episodes(
            "backlog-bot",
            [
                {"content": f"Ticket {i} about the {_SERVICES[i % 7]} outage was closed by engineer {i % 17}."}
                for i in range(start, start + 100)
            ],
        )
    # FIFO served this after every message of alice's backlog; it goes first now
    lone = bob.add_episode("lone-bot", "The staging cluster for the search team lives in Frankfurt.")
    ep = bob.wait_for_episode("lone-bot", lone["episode_id"], timeout=120)
    assert ep["status"] == "stored" and ep["attempts"] == 1
    ((stored_at,),) = _rows(stack, "SELECT stored_at FROM memworker.episodes WHERE id = %s", lone["episode_id"])
    ((behind,),) = _rows(
        stack,
        "SELECT count(*) FROM memworker.episodes WHERE agent_id = 'backlog-bot' "
        "AND (stored_at IS NULL OR stored_at > %s)",
        stored_at,
    )
    assert behind > 0, "bob's lone episode waited until alice's whole backlog was stored"

    # the backlog still drains, every episode stored exactly once (the claim compare-and-set)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ((left,),) = _rows(
            stack, "SELECT count(*) FROM memworker.episodes WHERE agent_id = 'backlog-bot' AND status <> 'stored'"
        )
        if left == 0:
            break
        time.sleep(1)
    assert left == 0
    total, distinct = _rows(
        stack,
        "SELECT count(*), count(DISTINCT source_key) FROM memworker.memories WHERE agent_id = 'backlog-bot'",
    )[0]
    assert total == distinct >= BACKLOG
    assert _rows(stack, "SELECT max(attempts) FROM memworker.episodes WHERE agent_id = 'backlog-bot'") == [(1,)]
    # isolation: each tenant sees only its own episodes
    assert {e["agent_id"] for e in bob.list_episodes()} == {"lone-bot"}
    assert charlie.list_episodes() == []
    assert lone["episode_id"] not in {e["episode_id"] for e in alice.list_episodes(limit=1000)}


def test_extra_batches_of_a_backlog_stop_while_another_tenants_message_waits(
    stack: dict[str, Any], tenants: dict[str, Any], embedder: Any
) -> None:
    from uuid import UUID

    from memworker import reflection
    from memworker.ingest import intake, processing
    from memworker.sessions import hooks
    from memworker.storage import db

    settings, tenant = stack["settings"], UUID(str(tenants["charlie"]["id"]))
    batch = settings.ingest_batch_max
    eps = [intake.NewEpisode(f"Runbook {i}: the {_SERVICES[i % 7]} deploy needs approval.") for i in range(6 * batch)]
    pool = db.open_pool(stack["app_url"], max_size=4)
    try:
        with db.tenant_tx(pool, tenant) as conn:
            ids = [e for e, _ in intake.accept(conn, tenant_id=tenant, agent_id="yield-bot", episodes=eps)]
        asked: list[bool] = []

        def someone_waits(answer: bool) -> Any:
            return lambda: asked.append(answer) or answer

        # another tenant's urgent message waits: the named batch only, then the task ends
        out = processing.process(
            pool,
            embedder,
            reflection.OfflineReflector(),
            settings,
            tenant_id=tenant,
            episode_ids=ids[:batch],
            post_turn=hooks.episode_stored,
            others_waiting=someone_waits(True),
        )
        assert len(out.stored) == batch and asked == [True]
        # nobody waits: the named batch and EXTRA_BATCHES more of the backlog, as before
        out = processing.process(
            pool,
            embedder,
            reflection.OfflineReflector(),
            settings,
            tenant_id=tenant,
            episode_ids=ids[batch : 2 * batch],
            post_turn=hooks.episode_stored,
            others_waiting=someone_waits(False),
        )
        assert len(out.stored) == 5 * batch == len(set(out.stored))
        assert set(out.stored) == set(ids[batch:])
        assert asked.count(False) == processing.EXTRA_BATCHES
    finally:
        pool.close()
