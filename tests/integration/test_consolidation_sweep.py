"""The sleep sweep against the real database and Redis: which agents are due (time, sessions,
explicit request; quiet; not backing off; enabled), that a window is claimed once even when
the beat fires twice, that it defers while ingest is backed up, and that it spans tenants
while each run stays in its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
import redis
from psycopg.types.json import Jsonb

from memworker.domain import memories
from memworker.ingest import intake
from memworker.sleep import consolidation
from memworker.storage import db, sleep_db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder

EMB = FakeEmbedder()


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


def _agent(
    pool: Any,
    stack: dict[str, Any],
    tenant: UUID,
    agent: str,
    n: int,
    *,
    age_min: float = 0,
    sql: str = "",
    **params: Any,
) -> None:
    """An agent with n memories, created age_min minutes ago; sql runs as the owner after."""
    texts = [f"{agent} note {i} about the Postgres backup schedule." for i in range(n)]
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        for text, vec in zip(texts, EMB.embed(texts), strict=True):
            store.write_memory(
                conn,
                tenant_id=tenant,
                agent_id=agent,
                draft=memories.Draft(text=text),
                embedding=vec,
                source_key=f"{agent}:{text}",
            )
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(
            "UPDATE memworker.agents SET created_at = now() - make_interval(mins => %s) "
            "WHERE tenant_id = %s AND id = %s",
            (age_min, tenant, agent),
        )
        if sql:
            conn.execute(sql, {"tenant_id": tenant, "agent_id": agent, **params})


def _sweep(pool: Any, settings: Any, window: datetime, backlog: int = 0) -> dict[str, str]:
    result = consolidation.sweep(pool, settings, window=window, ingest_backlog=backlog)
    return {agent: trigger for _, agent, _, trigger in result.claimed}


@pytest.fixture(scope="module")
def fleet(pool: Any, stack: dict[str, Any], tenants: dict[str, Any]) -> dict[str, Any]:
    alice, bob = tenants["alice"]["id"], tenants["bob"]["id"]
    where = "WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s"
    _agent(pool, stack, alice, "old", 4, age_min=120)
    _agent(pool, stack, alice, "fresh", 4)
    _agent(pool, stack, alice, "asked", 1, sql=f"UPDATE memworker.agents SET consolidation_requested = true {where}")
    _agent(pool, stack, alice, "few", 2, age_min=120)
    _agent(
        pool,
        stack,
        alice,
        "noisy",
        4,
        age_min=120,
        sql=f"UPDATE memworker.agents SET last_episode_at = now() - interval '1 minute' {where}",
    )
    _agent(
        pool,
        stack,
        alice,
        "backoff",
        4,
        age_min=120,
        sql=f"UPDATE memworker.agents SET next_consolidation_at = now() + interval '5 minutes' {where}",
    )
    _agent(
        pool,
        stack,
        alice,
        "off",
        4,
        age_min=120,
        sql=f"UPDATE memworker.agents SET policy = '{{\"consolidation_enabled\": false}}' {where}",
    )
    _agent(
        pool,
        stack,
        alice,
        "slow",
        4,
        age_min=120,
        sql=f"UPDATE memworker.agents SET policy = '{{\"consolidation_interval_minutes\": 180}}' {where}",
    )
    _agent(pool, stack, alice, "sessions", 4)
    with db.tenant_tx(pool, alice) as conn:
        for i in range(5):
            intake.accept(
                conn,
                tenant_id=alice,
                agent_id="sessions",
                episodes=[intake.NewEpisode(f"Turn {i} of the day.", session_id=f"s{i}")],
            )
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(
            "UPDATE memworker.agents SET last_episode_at = now() - interval '10 minutes' "
            "WHERE tenant_id = %s AND id = 'sessions'",
            (alice,),
        )
    _agent(pool, stack, bob, "old", 4, age_min=120)
    return {"alice": alice, "bob": bob}


def test_each_gate_and_guard_decides_who_is_due(
    pool: Any, stack: dict[str, Any], fleet: dict[str, Any], tenants: dict[str, Any]
) -> None:
    r = redis.Redis.from_url(stack["redis_url"])
    try:
        r.rpush("ingest", *[b"{}"] * 200)  # a backed-up ingest queue, as Celery's Redis transport keeps it
        r.rpush("ingest\x06\x166", *[b"{}"] * 50)  # and its later priority's list
        from tasks.publish import Publisher

        publisher = Publisher.for_settings(stack["settings"])
        try:
            backlog = publisher.queue_depths()["ingest"]  # what the sweep task reads
        finally:
            publisher.close()
    finally:
        r.delete("ingest", "ingest\x06\x166")
        r.close()
    assert backlog == 250
    now = datetime.now(UTC)
    deferred = consolidation.sweep(pool, stack["settings"], window=now, ingest_backlog=backlog)
    assert deferred.claimed == [] and "ingest queue backed up" in (deferred.deferred or "")

    result = consolidation.sweep(pool, stack["settings"], window=now, ingest_backlog=0)
    claimed = {(t, a): trig for t, a, _, trig in result.claimed}
    assert claimed == {
        (fleet["alice"], "old"): "time",
        (fleet["alice"], "asked"): "requested",
        (fleet["alice"], "sessions"): "sessions",
        (fleet["bob"], "old"): "time",
    }
    # Each run is queued in its own tenant, keyed by the window.
    with db.tenant_tx(pool, fleet["bob"]) as conn:
        (run,) = sleep_db.runs_list(conn, tenant_id=fleet["bob"], agent_id="old", limit=10)
        assert sleep_db.runs_list(conn, tenant_id=fleet["bob"], agent_id="asked", limit=10) == []
    assert run.status == "queued" and run.run_key.startswith("beat:")
    # The same window again, or the next one: the claimed agents are leased.
    assert _sweep(pool, stack["settings"], now) == {}
    assert _sweep(pool, stack["settings"], now + timedelta(minutes=1)) == {}


def test_a_claimed_pass_resets_the_gates(pool: Any, stack: dict[str, Any], fleet: dict[str, Any]) -> None:
    alice = fleet["alice"]
    _sweep(pool, stack["settings"], datetime.now(UTC))  # a no-op when the test above claimed them
    with db.tenant_tx(pool, alice) as conn:
        runs = {
            a: sleep_db.runs_list(conn, tenant_id=alice, agent_id=a, limit=1)[0].id
            for a in ("old", "asked", "sessions")
        }
    reports = {
        a: consolidation.run_pass(pool, EMB, None, stack["settings"], tenant_id=alice, agent_id=a, run_id=r)
        for a, r in runs.items()
    }
    assert {a: r.status for a, r in reports.items()} == {"old": "done", "asked": "skipped", "sessions": "done"}
    with db.tenant_tx(pool, alice) as conn:
        for a in runs:
            gates = sleep_db.agent_gates(conn, tenant_id=alice, agent_id=a)
            assert gates is not None
            assert (gates.consolidation_requested, gates.sessions_since_pass, gates.next_consolidation_at) == (
                False,
                0,
                None,
            )
            assert gates.last_pass_at is not None
    later = datetime.now(UTC) + timedelta(minutes=10)
    assert "old" not in _sweep(pool, stack["settings"], later)  # its interval starts again


def test_a_double_fired_beat_claims_each_agent_once(pool: Any, stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    charlie = tenants["charlie"]["id"]
    for i in range(6):
        _agent(pool, stack, charlie, f"twin-{i}", 3, age_min=120)
    window = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=2)
    results: list[dict[str, str]] = []
    barrier = threading.Barrier(2)

    def fire() -> None:
        barrier.wait()
        results.append(_sweep(pool, stack["settings"], window))

    threads = [threading.Thread(target=fire) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    twins = [a for r in results for a in r if a.startswith("twin-")]
    assert sorted(twins) == [f"twin-{i}" for i in range(6)]
    with psycopg.connect(stack["owner_url"]) as conn:
        assert conn.execute(
            "SELECT count(*), count(DISTINCT agent_id) FROM memworker.consolidation_runs WHERE agent_id LIKE 'twin-%%'"
        ).fetchone() == (6, 6)


def test_with_a_paid_llm_the_default_is_off_until_a_tenant_switches_it_on(
    pool: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    charlie = tenants["charlie"]["id"]
    _agent(pool, stack, charlie, "paid", 3, age_min=120)
    paid = stack["settings"].replace(llm_base_url="http://127.0.0.1:9/v1")
    window = datetime.now(UTC) + timedelta(minutes=5)
    assert "paid" not in _sweep(pool, paid, window)
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(
            "UPDATE memworker.tenants SET policy = policy || %s WHERE id = %s",
            (Jsonb({"consolidation_enabled": True}), charlie),
        )
    try:
        assert _sweep(pool, paid, window).get("paid") == "time"
    finally:
        with psycopg.connect(stack["owner_url"]) as conn:
            conn.execute(
                "UPDATE memworker.tenants SET policy = policy - 'consolidation_enabled' WHERE id = %s", (charlie,)
            )


def test_a_backlog_keeps_the_agent_due_until_it_is_drained(
    pool: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    bob = tenants["bob"]["id"]
    _agent(pool, stack, bob, "busy-day", 45, age_min=120)
    with psycopg.connect(stack["owner_url"]) as conn:  # a window smaller than the backlog
        conn.execute(
            "UPDATE memworker.agents SET policy = policy || %s WHERE tenant_id = %s AND id = 'busy-day'",
            (Jsonb({"consolidation_window_size": 20}), bob),
        )
    window = datetime.now(UTC) + timedelta(minutes=20)
    passes = []
    for _ in range(5):
        claims = consolidation.sweep(pool, stack["settings"], window=window, ingest_backlog=0).claimed
        mine = [c for c in claims if c[1] == "busy-day"]
        if not mine:
            break
        ((_, _, run_id, trigger),) = mine
        passes.append(
            (
                trigger,
                consolidation.run_pass(
                    pool, EMB, None, stack["settings"], tenant_id=bob, agent_id="busy-day", run_id=run_id
                ).items_reviewed,
            )
        )
        window += timedelta(minutes=1)
    assert passes == [("time", 20), ("requested", 20), ("requested", 5)]


def test_ended_sessions_count_towards_the_gate(pool: Any, stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    bob = tenants["bob"]["id"]
    _agent(pool, stack, bob, "chatty", 3)
    window = datetime.now(UTC) + timedelta(minutes=1)
    assert "chatty" not in _sweep(pool, stack["settings"], window)
    with db.tenant_tx(pool, bob) as conn:
        for _ in range(5):
            sleep_db.session_ended(conn, tenant_id=bob, agent_id="chatty")  # what ending a session counts
    assert _sweep(pool, stack["settings"], window).get("chatty") == "sessions"


def _cli(stack: dict[str, Any], *argv: str) -> tuple[int, str]:
    import os
    import subprocess
    import sys

    env = {**os.environ, "MEMWORKER_DATABASE_URL": stack["owner_url"], "MEMWORKER_REDIS_URL": stack["redis_url"]}
    out = subprocess.run(
        [sys.executable, "-m", "memworker", *argv], capture_output=True, text=True, env=env, timeout=180, check=False
    )
    return out.returncode, out.stdout + out.stderr


def test_the_cli_switches_runs_and_reports(pool: Any, stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    charlie = tenants["charlie"]["id"]
    _agent(pool, stack, charlie, "cli-bot", 4)
    assert _cli(stack, "consolidation", "disable", "--tenant", "charlie", "--agent", "cli-bot") == (
        0,
        "consolidation off for agent cli-bot\n",
    )
    code, out = _cli(stack, "consolidation", "status", "--tenant", "charlie")
    assert code == 0 and any(line.split()[:2] == ["cli-bot", "no"] for line in out.splitlines())
    code, out = _cli(stack, "consolidation", "run", "--tenant", "charlie", "--agent", "cli-bot")
    assert code == 0 and ": done" in out and "4 reviewed" in out  # the operator asked: it runs anyway
    code, out = _cli(stack, "consolidation", "enable", "--tenant", "charlie", "--agent", "cli-bot", "--reset")
    assert (code, out) == (0, "consolidation on for agent cli-bot (default)\n")
    with db.tenant_tx(pool, charlie) as conn:
        gates = sleep_db.agent_gates(conn, tenant_id=charlie, agent_id="cli-bot")
        assert gates is not None and gates.policy == {}
        (run,) = sleep_db.runs_list(conn, tenant_id=charlie, agent_id="cli-bot", limit=5)
    assert (run.trigger, run.status, run.items_reviewed) == ("cli", "done", 4)
