"""Helpers for killing a consolidation or retention pass mid-way (tests/faults/test_pass_kills.py):
a pause point inside the pass's transaction, the worker's paused backend, table snapshots,
the agent lock, and where the killed task's message is in Redis.

The pause is deterministic: a trigger installed for the test makes one chosen statement of
the pass wait on an advisory lock the test holds, so the pass is stopped inside its open
transaction, after everything it wrote before that statement. The test sees it waiting in
pg_stat_activity, kills the worker there, and then lets the orphaned statement go on; the
client that could have sent COMMIT is dead, so Postgres can only roll it back."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psutil
import psycopg
import redis

from memworker.storage import db
from tests.faults.harness import FaultStack

PAUSE_KEY = 7_310_593_858_020_081_013  # the test's advisory lock; the paused statement waits on it
HOLD_KEY = PAUSE_KEY + 1  # the same for the redelivered run, held at its start while the test looks
TABLES = (
    "memories",
    "memory_terms",
    "memory_connections",
    "memory_events",
    "memory_aliases",
    "memory_reviews",
    "agent_profiles",
)  # everything a pass may write for one agent


def call(stack: FaultStack, tenant: str, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(
        method,
        stack.api_url + path,
        timeout=60,
        headers={"Authorization": f"Bearer {stack.tenants[tenant]['key']}"},
        **kw,
    )


def write_memories(stack: FaultStack, tenant: str, agent: str, memories: list[dict[str, Any]]) -> dict[str, str]:
    """Direct writes through the API; returns id -> text."""
    r = call(stack, tenant, "POST", f"/v1/agents/{agent}/memories/batch", json={"memories": memories})
    assert r.status_code == 201, r.text
    return {m["id"]: m["text"] for m in r.json()["memories"]}


def set_policy(stack: FaultStack, tenant: str, agent: str, overrides: dict[str, Any]) -> None:
    r = call(stack, tenant, "PUT", f"/v1/agents/{agent}/policy", json=overrides)
    assert r.status_code == 200, r.text


def snapshot(stack: FaultStack, tenant: str, agent: str) -> dict[str, list[str]]:
    """Every row the agent has in the tables a pass writes, and its agents row, as sorted JSON
    text: two snapshots are equal only if nothing was written in between."""
    tid = stack.tenants[tenant]["id"]
    out = {}
    with psycopg.connect(stack.owner_url) as conn:
        for t in TABLES:
            rows = conn.execute(
                f"SELECT to_jsonb(x)::text FROM memworker.{t} x WHERE tenant_id = %s AND agent_id = %s", (tid, agent)
            ).fetchall()
            out[t] = sorted(r[0] for r in rows)
        rows = conn.execute(
            "SELECT to_jsonb(a)::text FROM memworker.agents a WHERE tenant_id = %s AND id = %s", (tid, agent)
        ).fetchall()
        out["agents"] = [r[0] for r in rows]
    return out


@contextmanager
def pause_on(
    stack: FaultStack, table: str, event: str, when: str, *, name: str = "test_pause", key: int = PAUSE_KEY
) -> Iterator[Callable[[], None]]:
    """While inside: a statement that fires `event` on `table` for a row matching `when` (SQL
    over NEW and OLD) waits there, inside its transaction, until release() is called (or the
    block ends). Enter it before the pass starts and leave it after the pass is over: creating
    or dropping a trigger waits for every transaction that has written the table."""
    hold = psycopg.connect(stack.owner_url, autocommit=True)
    hold.execute("SELECT pg_advisory_lock(%s)", (key,))
    with psycopg.connect(stack.owner_url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '10s'")  # fail rather than hang behind a stuck writer
        conn.execute(f"""
            CREATE OR REPLACE FUNCTION memworker.{name}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_advisory_xact_lock_shared({key}); RETURN NULL; END $$;
            CREATE TRIGGER {name} AFTER {event} ON memworker.{table}
              FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION memworker.{name}();""")
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            hold.execute("SELECT pg_advisory_unlock(%s)", (key,))
            released = True

    try:
        yield release
    finally:
        release()
        hold.close()
        with psycopg.connect(stack.owner_url, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")
            try:
                conn.execute(f"DROP TRIGGER IF EXISTS {name} ON memworker.{table}")
            except psycopg.errors.LockNotAvailable:
                pass  # a failed test left a writer stuck (in the LLM); the trigger, now released, is inert


def paused_backend(stack: FaultStack, *, on_lock: bool, timeout: float = 90.0) -> tuple[int, set[str]]:
    """The worker's Postgres backend once it is paused inside a transaction that has written
    (it holds a transaction id): waiting on the pause lock, or idle in transaction (waiting on
    the LLM). Returns its pid and the tables it has written in that open transaction."""
    cond = "wait_event_type = 'Lock' AND wait_event = 'advisory'" if on_lock else "state = 'idle in transaction'"
    deadline = time.monotonic() + timeout
    while True:
        rows = stack.query(
            f"SELECT pid FROM pg_stat_activity WHERE usename = 'memworker_app' AND backend_xid IS NOT NULL AND {cond}"
        )
        if rows:
            break
        assert time.monotonic() < deadline, f"the pass never paused; logs in {stack.dir}"
        time.sleep(0.2)
    pid = int(rows[0][0])
    written = stack.query(
        "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE l.pid = %s AND l.mode = 'RowExclusiveLock' AND c.relkind = 'r'",
        pid,
    )
    return pid, {r[0] for r in written}


def wait_backend_gone(stack: FaultStack, pid: int, timeout: float = 60.0) -> None:
    """Until Postgres has ended the dead client's backend (and so rolled its transaction back)."""
    wait(
        lambda: not stack.query("SELECT 1 FROM pg_stat_activity WHERE pid = %s", pid),
        timeout,
        f"backend {pid} to end",
        stack,
    )


def agent_locked(stack: FaultStack, tenant: str, agent: str) -> bool:
    """Whether another transaction holds the agent's advisory lock (the product's own check)."""
    with db.connect(stack.owner_url) as conn:
        free = db.try_agent_lock(conn, stack.tenants[tenant]["id"], agent)
        conn.rollback()  # the lock is transaction-scoped: this lets it go again
    return not free


def kill(stack: FaultStack, how: str) -> None:
    """SIGKILL worker 0 whole ('worker': a lost node; its unacked message comes back after the
    visibility timeout) or only its pool child ('child': the parent sees the loss, requeues
    the message at once and forks a new child)."""
    if how == "worker":
        stack.kill_worker(0)
        return
    children = psutil.Process(stack.workers[0].pid).children(recursive=True)
    assert children, "the worker has no pool child"
    for child in children:
        child.kill()


def wait_pending(stack: FaultStack, task: str, needle: str, timeout: float = 30.0) -> float:
    """Until the killed task's message is seen in Redis (it was not lost): its delivery time
    when unacked, 0.0 when back on its queue."""
    deadline = time.monotonic() + timeout
    while (at := pending_message(stack, task, needle)) is None:
        assert time.monotonic() < deadline, f"the message of {task} ({needle}) was lost"
        time.sleep(0.1)
    return at


def pending_message(stack: FaultStack, task: str, needle: str) -> float | None:
    """Where the killed task's message is: its delivery time when it is unacked (Redis gives
    it back after the visibility timeout), 0.0 when it is back on a queue, None when lost (or
    for an instant, in flight between the queue and the unacked set)."""
    r = redis.Redis.from_url(stack.redis_url)
    try:
        for tag, raw in r.hgetall("unacked").items():
            headers = json.loads(raw)[0]["headers"]
            if headers.get("task") == task and needle in headers.get("argsrepr", ""):
                score = r.zscore("unacked_index", tag)
                return float(score) if score is not None else 0.0
        for queue in ("consolidate", "maintenance"):
            for raw in r.lrange(queue, 0, -1):
                headers = json.loads(raw)["headers"]
                if headers.get("task") == task and needle in headers.get("argsrepr", ""):
                    return 0.0
        return None
    finally:
        r.close()


def restart_after_visibility(stack: FaultStack, delivered_at: float) -> None:
    """Restart worker 0 once the unacked message is past the visibility timeout: the new
    worker gives such messages back to their queue as it starts, and then takes it."""
    ready = delivered_at + stack.settings.visibility_timeout_s + 0.5
    while time.time() < ready:
        time.sleep(0.2)
    stack.restart_worker(0)


def wait(cond: Callable[[], Any], timeout: float, what: str, stack: FaultStack) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= deadline:
            log = stack.dir / "worker0.log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise AssertionError(f"{what}: not after {timeout}s; worker log ends:\n{tail}")
        time.sleep(0.3)
