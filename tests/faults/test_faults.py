"""Break things on the real stack and prove nothing is lost or duplicated.

The default run is the short version; `python -m pytest -m faults` runs the long one
(5,000 episodes). bench/soak.py runs it and writes bench/results/faults.md."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import psutil
import psycopg
import pytest
from celery import Celery

from memworker.testing import FakeLLM
from tests.faults import passes
from tests.faults.harness import FaultStack, HistoryClient, check

SHORT, LONG = 300, 5_000


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM(echo=True)
    yield server
    server.close()


@pytest.fixture(scope="module")
def fault_stack(llm: FakeLLM) -> Iterator[FaultStack]:
    stack = FaultStack(lease_s=5, max_attempts=5, llm_url=llm.url)
    try:
        stack.start_fleet()
        yield stack
    finally:
        stack.close()


def _flow(stack: FaultStack, n: int, seed: int, *, rate: float | None = None) -> tuple[HistoryClient, threading.Thread]:
    client = HistoryClient(stack.api_url, stack.tenants)
    thread = threading.Thread(target=client.run, args=(n,), kwargs={"seed": seed, "rate_per_s": rate}, daemon=True)
    thread.start()
    return client, thread


def _episodes_for(client: HistoryClient) -> list[str]:
    return [op.key for op in client.ops if op.state in ("ok", "timeout")]


def test_sigkill_workers_while_episodes_flow(fault_stack: FaultStack, llm: FakeLLM) -> None:
    _kill_workers_while_flowing(fault_stack, llm, SHORT)


@pytest.mark.faults
def test_sigkill_workers_while_5000_episodes_flow(fault_stack: FaultStack, llm: FakeLLM) -> None:
    _kill_workers_while_flowing(fault_stack, llm, LONG)


def _kill_workers_while_flowing(fault_stack: FaultStack, llm: FakeLLM, n: int) -> None:
    rng = random.Random(5)
    calls_before = len(llm.requests)
    client, thread = _flow(fault_stack, n, seed=1)
    kills = 0
    while thread.is_alive() or kills < 3:
        time.sleep(rng.uniform(1.0, 3.0))
        fault_stack.kill_random_worker(rng)
        kills += 1
        if not thread.is_alive() and kills >= 3:
            break
    thread.join()
    drain = fault_stack.wait_drained(_episodes_for(client), timeout=300)
    verdict = check(fault_stack, client.ops, scope="op-1-")
    assert verdict.lost == verdict.duplicated == verdict.unexpected == 0, verdict.details[:10]
    assert verdict.ok == n and verdict.dead == 0
    (left,) = fault_stack.query("SELECT count(*) FROM memworker.episodes WHERE status IN ('queued', 'processing')")[0]
    assert left == 0
    llm_calls = len(llm.requests) - calls_before
    assert llm_calls <= n + kills * 1, (llm_calls, n, kills)  # concurrency 1 per worker process
    print(f"episodes={n} kills={kills} llm_calls={llm_calls} drain_s={drain:.1f} verdict={verdict.as_dict()}")


def test_redis_restart_with_data_lost(fault_stack: FaultStack) -> None:
    n = 75
    client, thread = _flow(fault_stack, n, seed=2, rate=50)
    time.sleep(1.0)
    fault_stack.restart_redis(lose_data=True)  # every queued and unacked message is gone
    restarted = time.monotonic()
    thread.join()
    fault_stack.wait_drained(_episodes_for(client), timeout=120)
    recovery = time.monotonic() - restarted
    verdict = check(fault_stack, client.ops, scope="op-2-")
    assert verdict.lost == verdict.duplicated == verdict.unexpected == 0, verdict.details[:10]
    assert verdict.ok + verdict.failed == n  # a post during the restart may be refused, never lost
    print(
        f"redis restart: recovered in {recovery:.1f}s (lease {fault_stack.settings.episode_lease_s}s); {verdict.as_dict()}"
    )


def test_postgres_down_answers_503_and_loses_nothing(fault_stack: FaultStack) -> None:
    client = HistoryClient(fault_stack.api_url, fault_stack.tenants, timeout_s=15.0)
    stop = threading.Event()

    def post_until_stopped(worker: int) -> None:
        i = 0
        while not stop.is_set():
            client.post(
                "alice", "pg-outage", f"Outage note {worker}-{i}: replica lag was {i} seconds.", f"op-3-{worker}-{i}"
            )
            i += 1
            time.sleep(0.1)

    threads = [threading.Thread(target=post_until_stopped, args=(w,), daemon=True) for w in range(4)]
    for th in threads:
        th.start()
    time.sleep(1.0)
    fault_stack.stop_postgres()
    down_at = time.monotonic()
    time.sleep(8.0)
    fault_stack.start_postgres()
    up_at = time.monotonic()
    time.sleep(2.0)
    stop.set()
    for th in threads:
        th.join()
    during = [op for op in client.ops if down_at + 0.5 <= op.started + op.took_s <= up_at]
    assert during, "requests were answered while Postgres was down"
    assert {op.status_code for op in during} == {503}  # not 500, and not a 202 it could not keep
    assert all(op.state != "timeout" for op in client.ops)  # an answer every time, never a hang
    fault_stack.wait_drained(_episodes_for(client), timeout=180)
    verdict = check(fault_stack, client.ops, scope="op-3-")
    assert verdict.lost == verdict.duplicated == verdict.unexpected == 0, verdict.details[:10]
    slowest = max(op.took_s for op in during)
    print(f"postgres down 8s: {len(during)} answers, all 503, slowest {slowest:.2f}s; {verdict.as_dict()}")


def test_a_task_published_twice_and_redelivered_writes_once(fault_stack: FaultStack) -> None:
    client = HistoryClient(fault_stack.api_url, fault_stack.tenants)
    for i in range(20):
        client.post("bob", "twice", f"Deploy {i} of the ledger service moved to region {i % 3}.", f"twice-{i}")
    ids = [op.episode_id for op in client.ops]
    app = Celery(broker=fault_stack.redis_url)
    for _ in range(2):  # the same message twice, and once more later, as a visibility-timeout redelivery would
        app.send_task("memworker.ingest", args=[str(fault_stack.tenants["bob"]["id"]), ids], queue="ingest")
    fault_stack.wait_drained([op.key for op in client.ops], timeout=60)
    app.send_task("memworker.ingest", args=[str(fault_stack.tenants["bob"]["id"]), ids], queue="ingest")
    app.close()
    time.sleep(2)
    verdict = check(fault_stack, client.ops, scope="twice-")
    assert verdict.lost == verdict.duplicated == verdict.unexpected == 0
    rows = fault_stack.query("SELECT max(attempts) FROM memworker.episodes WHERE idempotency_key LIKE 'twice-%%'")
    assert rows == [(1,)]


def test_poison_episodes_go_dead_without_stopping_others(fault_stack: FaultStack) -> None:
    with psycopg.connect(fault_stack.owner_url) as conn:
        conn.execute("""
            CREATE OR REPLACE FUNCTION memworker.poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.text LIKE '%POISON%' THEN RAISE EXCEPTION 'poison pill'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER poison BEFORE INSERT ON memworker.memories FOR EACH ROW EXECUTE FUNCTION memworker.poison();
        """)
    try:
        client = HistoryClient(fault_stack.api_url, fault_stack.tenants)
        for i in range(5):
            client.post("charlie", "poisoned", f"POISON episode {i} always fails to store.", f"poison-{i}")
        client.post(
            "charlie", "poisoned", "Huge episode. " + "The quick brown fox jumps over the lazy dog. " * 700, "huge-0"
        )
        others = HistoryClient(fault_stack.api_url, fault_stack.tenants)
        for i in range(30):
            others.post(
                "alice" if i % 2 else "bob", "healthy", f"Healthy note {i}: the cache hit rate is {i}%.", f"ok-{i}"
            )
        others_drain = fault_stack.wait_drained([op.key for op in others.ops], timeout=120)
        fault_stack.wait_drained([op.key for op in client.ops], timeout=300)
        dead = fault_stack.query(
            "SELECT count(*), max(attempts) FROM memworker.episodes "
            "WHERE idempotency_key LIKE 'poison-%%' AND status = 'dead'"
        )
        assert dead == [(5, 5)]
        assert fault_stack.query("SELECT status FROM memworker.episodes WHERE idempotency_key = 'huge-0'") == [
            ("stored",)
        ]
        verdict = check(fault_stack, others.ops, scope="ok-")
        assert verdict.lost == verdict.duplicated == verdict.unexpected == 0
        print(
            f"poison: 5 dead after 5 attempts each; 30 healthy episodes of other tenants drained in {others_drain:.1f}s"
        )
    finally:
        with psycopg.connect(fault_stack.owner_url) as conn:
            conn.execute("DROP TRIGGER IF EXISTS poison ON memworker.memories")


def test_sigkill_in_the_middle_of_a_two_layer_write(fault_stack: FaultStack) -> None:
    """The worker is paused (tests/faults/passes.py: a trigger waiting on the test's advisory
    lock) right after it inserted the episode's last turn, with the reflected items still to
    write, and its pool children are killed there. The redelivered task writes every turn and
    every item exactly once: the transaction that died left nothing behind."""
    agent = "two-layer"
    messages = [
        {"role": "user", "name": "Ana", "content": "The invoice service moved to the Paris region on Monday."},
        {"role": "assistant", "content": "ok"},  # no content: skipped
        {"role": "user", "name": "Ana", "content": "I prefer release notes written in French, please."},
        {"role": "user", "name": "Ben", "content": "We decided to retire the old ledger API next quarter."},
    ]
    with passes.pause_on(
        fault_stack, "memories", "INSERT", f"NEW.agent_id = '{agent}' AND NEW.source_key LIKE '%:t3.0'"
    ) as release:
        r = passes.call(fault_stack, "alice", "POST", f"/v1/agents/{agent}/episodes", json={"messages": messages})
        assert r.status_code == 202, r.text
        episode_id = r.json()["episode_id"]
        pid, written = passes.paused_backend(fault_stack, on_lock=True)
        assert {"memories", "memory_terms", "memory_events"} <= written, written  # turns written, uncommitted
        for w in fault_stack.workers:  # whichever child holds it: kill every pool child
            for child in psutil.Process(w.pid).children(recursive=True):
                child.kill()
        release()  # the orphaned statement may finish now; nobody is left to send COMMIT
        passes.wait_backend_gone(fault_stack, pid)
        tid = fault_stack.tenants["alice"]["id"]
        assert fault_stack.query(
            "SELECT count(*) FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s", tid, agent
        ) == [(0,)]  # rolled back whole: no turn without its items
        passes.wait(
            lambda: (
                fault_stack.query("SELECT status FROM memworker.episodes WHERE id = %s", episode_id) == [("stored",)]
            ),
            180,
            "the redelivered episode",
            fault_stack,
        )
    rows = fault_stack.query(
        "SELECT kind, provenance, source_key FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s",
        tid,
        agent,
    )
    turns = sorted(p[0] for kind, p, _ in rows if kind == "turn")
    assert turns == [f"episode:{episode_id}#m{i}" for i in (0, 2, 3)]  # each once; "ok" skipped
    assert len({key for _, _, key in rows}) == len(rows)
    ((item_ids,),) = fault_stack.query("SELECT memory_ids FROM memworker.episodes WHERE id = %s", episode_id)
    assert sorted(str(i) for i in item_ids) == sorted(
        str(i)
        for (i,) in fault_stack.query(
            "SELECT id FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s AND kind <> 'turn'",
            tid,
            agent,
        )
    )  # the reflected items, written once, beside the turns
    seen_by_bob = passes.call(fault_stack, "bob", "GET", f"/v1/agents/{agent}/memories")
    assert seen_by_bob.status_code == 404 or seen_by_bob.json()["memories"] == []  # isolation
