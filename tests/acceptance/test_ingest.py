"""Episodes through the real API, Redis and a real `celery worker` process."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from celery import Celery

from memworker.sdk import ApiError, Client
from tests.conftest import start_worker, stop_worker


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["alice"]["key"])


def _rows(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        return conn.execute(sql, args).fetchall()


def test_an_episode_becomes_typed_concise_memories(alice: Client, worker: Any) -> None:
    r = alice.add_episode(
        "ops-bot",
        "Hi! I prefer dark roast coffee. We decided to move the API to Go next quarter.",
        session_id="s-1",
        metadata={"channel": "slack"},
    )
    assert r["status"] == "queued"
    ep = alice.wait_for_episode("ops-bot", r["episode_id"])
    assert ep["status"] == "stored" and ep["attempts"] == 1 and ep["reflector"] == "offline"
    mems = [alice.get_memory("ops-bot", m) for m in ep["memory_ids"]]
    assert {m["kind"] for m in mems} == {"preference", "decision"}
    for m in mems:
        assert len(m["text"]) <= 280 and m["tier"] == "L1" and m["session_id"] == "s-1"
        assert m["provenance"] == [f"episode:{r['episode_id']}"] and m["metadata"] == {"channel": "slack"}
    assert alice.recall("ops-bot", "which coffee roast?")["memories"][0]["kind"] == "preference"


def test_message_lists_point_back_to_their_messages(alice: Client, worker: Any) -> None:
    r = alice.add_episode(
        "ops-bot",
        messages=[
            {"role": "user", "content": "hello!"},
            {"role": "user", "content": "Our staging database lives in Frankfurt since March."},
        ],
    )
    ep = alice.wait_for_episode("ops-bot", r["episode_id"])
    (mid,) = ep["memory_ids"]
    assert alice.get_memory("ops-bot", mid)["provenance"] == [f"episode:{r['episode_id']}#m1"]


def test_idempotency_key_returns_the_same_episode_and_enqueues_nothing(
    alice: Client, worker: Any, stack: dict[str, Any]
) -> None:
    a = alice.add_episode("idem-bot", "The build server is called hal9000.", idempotency_key="same")
    b = alice.add_episode("idem-bot", "The build server is called hal9000.", idempotency_key="same")
    assert a["episode_id"] == b["episode_id"] and b["duplicate"] is True
    alice.wait_for_episode("idem-bot", a["episode_id"])
    assert _rows(stack, "SELECT count(*) FROM memworker.episodes WHERE agent_id = 'idem-bot'") == [(1,)]


def test_duplicates_strengthen_instead_of_storing_twice(alice: Client, worker: Any) -> None:
    first = alice.wait_for_episode(
        "dup-bot", alice.add_episode("dup-bot", "The on-call rotation changes every Monday.")["episode_id"]
    )
    second = alice.wait_for_episode(
        "dup-bot", alice.add_episode("dup-bot", "The on-call rotation changes every monday!")["episode_id"]
    )
    assert first["memory_ids"] == second["memory_ids"]
    m = alice.get_memory("dup-bot", first["memory_ids"][0])
    assert len(m["provenance"]) == 2 and m["salience"] > 0.5


def test_batch_of_episodes_all_stored_once(alice: Client, worker: Any, stack: dict[str, Any]) -> None:
    eps = [{"content": f"Ticket {i} was closed by engineer number {i}.", "idempotency_key": f"b{i}"} for i in range(40)]
    out = alice.add_episodes("batch-bot", eps)
    assert len(out) == 40
    for e in out:
        assert alice.wait_for_episode("batch-bot", e["episode_id"])["status"] == "stored"
    assert _rows(
        stack,
        "SELECT kind = 'turn', count(*), count(DISTINCT source_key) FROM memworker.memories "
        "WHERE agent_id = 'batch-bot' GROUP BY 1 ORDER BY 1",
    ) == [(False, 40, 40), (True, 40, 40)]  # one item and one turn per episode, once each


@pytest.mark.parametrize(
    "body,status",
    [
        ({"content": ""}, 422),
        ({"content": "   "}, 422),
        ({}, 422),
        ({"content": "a", "messages": [{"role": "user", "content": "b"}]}, 422),
        ({"content": 12}, 422),
        ({"content": "ok", "surprise": True}, 422),
        ({"messages": [{"role": "wizard", "content": "b"}]}, 422),
        ({"content": "x" * 40_000}, 413),
    ],
)
def test_bad_episodes_are_rejected_and_write_nothing(
    api: str, tenants: dict[str, Any], stack: dict[str, Any], body: dict[str, Any], status: int
) -> None:
    before = _rows(stack, "SELECT count(*) FROM memworker.episodes")
    r = httpx.post(
        f"{api}/v1/agents/bad-bot/episodes", json=body, headers={"Authorization": f"Bearer {tenants['bob']['key']}"}
    )
    assert r.status_code == status and "error" in r.json()
    assert _rows(stack, "SELECT count(*) FROM memworker.episodes") == before


def test_other_tenants_episodes_are_404(alice: Client, api: str, tenants: dict[str, Any], worker: Any) -> None:
    r = alice.add_episode("private-bot", "Alice's private roadmap mentions Project Falcon.")
    bob = Client(api, tenants["bob"]["key"])
    with pytest.raises(ApiError) as err:
        bob.get_episode("private-bot", r["episode_id"])
    assert err.value.status == 404


def test_a_task_published_twice_is_harmless(
    alice: Client, worker: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    r = alice.add_episode("twice-bot", "The payment service retries three times before paging.")
    alice.wait_for_episode("twice-bot", r["episode_id"])
    app = Celery(broker=stack["redis_url"])
    for _ in range(2):
        app.send_task("memworker.ingest", args=[str(tenants["alice"]["id"]), [r["episode_id"]]], queue="ingest")
    app.close()
    time.sleep(2)
    assert _rows(
        stack,
        "SELECT kind = 'turn', count(*) FROM memworker.memories WHERE agent_id = 'twice-bot' GROUP BY 1 ORDER BY 1",
    ) == [(False, 1), (True, 1)]  # its item and its turn, once
    assert alice.get_episode("twice-bot", r["episode_id"])["attempts"] == 1


def test_in_cluster_enqueue_ends_with_a_durable_row(
    alice: Client, worker: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    from memworker import enqueue_in_cluster

    key = enqueue_in_cluster(
        stack["redis_url"],
        tenant_id=str(tenants["alice"]["id"]),
        agent_id="cluster-bot",
        content="The cache warms up every night at 02:00 UTC.",
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = _rows(stack, "SELECT status FROM memworker.episodes WHERE idempotency_key = %s", key)
        if rows and rows[0][0] == "stored":
            break
        time.sleep(0.2)
    assert rows == [("stored",)]
    assert alice.recall("cluster-bot", "when does the cache warm up")["memories"]


@pytest.fixture()
def paused_worker(worker: Any) -> Iterator[None]:
    """Stop the module's worker so a test can start its own (a kill test, an LLM test)."""
    os.killpg(worker.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(worker.pid, signal.SIGCONT)


def test_sigkill_mid_batch_leaves_every_episode_stored_once(
    alice: Client, stack: dict[str, Any], paused_worker: None
) -> None:
    settings = stack["settings"]
    out = alice.add_episodes(
        "kill-bot", [{"content": f"Service {i} depends on database shard {i % 7}."} for i in range(120)]
    )
    victim = start_worker(settings, "victim")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        n = _rows(stack, "SELECT count(*) FROM memworker.episodes WHERE agent_id = 'kill-bot' AND status = 'stored'")[
            0
        ][0]
        if n >= 5:
            break
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)  # the worker and its pool child, mid-batch
    victim.wait()
    survivor = start_worker(settings, "survivor")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            left = _rows(
                stack, "SELECT count(*) FROM memworker.episodes WHERE agent_id = 'kill-bot' AND status <> 'stored'"
            )[0][0]
            if left == 0:
                break
            # the reconciler's job, run by hand: claims expire after the 5 s test lease
            from memworker import maintenance
            from memworker.storage import db as dbm

            pool = dbm.open_pool(stack["app_url"], max_size=1)
            app = Celery(broker=stack["redis_url"])
            maintenance.requeue_stale(
                pool,
                lambda t, ids: app.send_task("memworker.ingest", args=[str(t), [str(i) for i in ids]], queue="ingest"),
                older_than_s=5,
            )
            app.close()
            pool.close()
            time.sleep(2)
        assert left == 0
    finally:
        stop_worker(survivor)
    total, distinct = _rows(
        stack, "SELECT count(*), count(DISTINCT source_key) FROM memworker.memories WHERE agent_id = 'kill-bot'"
    )[0]
    assert total == distinct
    per_episode = _rows(
        stack, "SELECT count(*) FROM memworker.episodes WHERE agent_id = 'kill-bot' AND cardinality(memory_ids) = 0"
    )
    assert per_episode == [(0,)]
    assert len(out) == 120


def test_a_poison_episode_goes_dead_alone_and_can_be_replayed(
    alice: Client, worker: Any, stack: dict[str, Any]
) -> None:
    # A real fault in the database: any memory mentioning POISON fails to insert.
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute("""
            CREATE FUNCTION memworker.poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.text LIKE '%POISON%' THEN RAISE EXCEPTION 'poison pill'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER poison BEFORE INSERT ON memworker.memories FOR EACH ROW EXECUTE FUNCTION memworker.poison();
        """)
    try:
        bad = alice.add_episode("poison-bot", "This POISON episode breaks the store every time it runs.")
        good = [
            alice.add_episode("poison-bot", f"Healthy episode number {i} mentions the staging cluster.")
            for i in range(5)
        ]
        for g in good:
            assert alice.wait_for_episode("poison-bot", g["episode_id"])["status"] == "stored"
        dead = alice.wait_for_episode("poison-bot", bad["episode_id"], timeout=90)
        assert dead["status"] == "dead" and dead["attempts"] == 3 and "poison pill" in dead["last_error"]
        assert bad["episode_id"] in [e["episode_id"] for e in alice.list_episodes(status="dead")]
    finally:
        with psycopg.connect(stack["owner_url"]) as conn:
            conn.execute("DROP TRIGGER poison ON memworker.memories; DROP FUNCTION memworker.poison()")
    alice.replay_episode("poison-bot", bad["episode_id"])
    assert alice.wait_for_episode("poison-bot", bad["episode_id"])["status"] == "stored"


def test_the_reconciler_recovers_episodes_lost_with_redis(alice: Client, worker: Any, stack: dict[str, Any]) -> None:
    import redis

    os.killpg(worker.pid, signal.SIGSTOP)
    try:
        ids = [
            alice.add_episode("lost-bot", f"Runbook step {i}: restart the ingest worker gently.")["episode_id"]
            for i in range(10)
        ]
        r = redis.Redis.from_url(stack["redis_url"])
        r.flushdb()  # Redis restarted with its data lost: every queued message is gone
        r.close()
    finally:
        os.killpg(worker.pid, signal.SIGCONT)
    time.sleep(stack["settings"].episode_lease_s + 1)
    app = Celery(broker=stack["redis_url"])
    app.send_task("memworker.reconcile", queue="maintenance")
    app.close()
    for eid in ids:
        assert alice.wait_for_episode("lost-bot", eid, timeout=60)["status"] == "stored"
