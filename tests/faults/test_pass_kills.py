"""SIGKILL the worker in the middle of a consolidation pass or a retention sweep, on a real
stack: memory is as before the (batch of the) pass, nothing half-written, the agent's lock is
free, and the killed task is delivered again and completes.

How the kill lands mid-pass (no sleeping and hoping): the pass is paused at a known point
inside its open transaction, either by the LLM answering one call never (consolidation waits
on it holding its transaction) or by a trigger that makes one statement wait on an advisory
lock the test holds (tests/faults/passes.py). The test sees the worker's backend paused with
a transaction id (it has written) and kills either the pool child (the parent requeues the
message at once) or the whole worker (a lost node: restarted once the unacked message is
past the visibility timeout). The redelivered task is held at its start until the state
left by the kill has been checked, then let go, and the same run must finish. docs/faults.md."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery

from memworker.lifecycle import retention
from memworker.testing import FakeLLM
from tests.faults import passes
from tests.faults.harness import FaultStack

VISIBILITY_S = 5  # short, so a killed worker's message comes back within the test

# One rollout's facts, none a changed value of another (memworker.domain.updates): a superseded
# memory leaves the pass's window, so it would stay unconsolidated.
ORION = [
    "The Orion rollout failed at the schema migration step on Tuesday.",
    "The accounts table stayed locked for nine minutes during the Orion migration.",
    "The team rolled Orion back and reopened the change request.",
    "A dry run of the Orion migration on a staging copy took forty minutes.",
    "Priya owns the Orion migration script and its runbook.",
    "The Orion retry is planned for the Saturday maintenance window.",
    "Support saw a spike of login errors during the Orion attempt.",
    "Orion needs an online index build instead of a blocking one.",
]
EXPIRING = [
    "The billing export to the warehouse ran late on Monday.",
    "Marta asked for the quarterly roadmap slides in Spanish.",
    "A power cut in the Lisbon office stopped the build farm.",
    "The new intern prefers pair programming over code review.",
    "Vendor invoices from Acme arrive as scanned PDF files.",
    "The staging cluster certificate was renewed by hand.",
    "Customer churn spiked after the pricing email went out.",
    "The design team moved their standup to Thursday afternoons.",
    "A typo in the robots file hid the docs site from search.",
    "Legal approved the data retention clause for the EU contract.",
]
RECALLED = [
    "Deploys to production need two approvals from the platform team.",
    "The on-call rota swaps every Wednesday at noon UTC.",
    "Kafka consumer lag alerts page the data engineering channel.",
    "Backups of the orders database are tested every quarter.",
    "The mobile app release train leaves every second Tuesday.",
    "Feature flags older than ninety days get cleaned up.",
]
PLAIN = [
    "The office coffee machine was replaced with an espresso grinder.",
    "Product analytics dashboards live in the Looker workspace.",
    "Our style guide forbids abbreviations in public API names.",
    "The summer party will be held at the river boathouse.",
    "Security training is mandatory for contractors as well.",
    "The old monolith still handles password resets.",
]


class PassLLM(FakeLLM):
    """Answers consolidation's prompts usefully (every memory about Orion, links, an insight,
    a conclusion), and answers the one call named by `stall` never."""

    def __init__(self) -> None:
        super().__init__(echo=True)
        self.stall: str | None = None

    def _echo(self, body: dict[str, Any]) -> Any:  # type: ignore[override]  # under the server lock: never sleep
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if self.stall and system.startswith(self.stall):
            self.stall = None
            return ("sleep", 3600, "[]")  # the handler sleeps outside the lock; the worker waits on it
        n = len(re.findall(r"^\[\d+\] ", user, flags=re.MULTILINE))
        if system.startswith("You extract metadata"):
            return json.dumps([{"id": i, "entities": ["Orion"], "topics": ["orion rollout"]} for i in range(1, n + 1)])
        if system.startswith("You link"):
            return json.dumps([{"from": i, "to": i + 1, "relationship": "same rollout"} for i in range(1, min(n, 4))])
        if system.startswith("You consolidate"):
            return "Orion keeps failing on blocking schema migrations; the retry hinges on an online index build."
        if system.startswith("You turn several"):
            return json.dumps(
                {"conclusion": "Orion migrations need an online index build and a rehearsal.", "confidence": 0.8}
            )
        return "[]"


@pytest.fixture(scope="module")
def llm() -> Iterator[PassLLM]:
    server = PassLLM()
    yield server
    server.close()


@pytest.fixture(scope="module")
def stack(llm: PassLLM) -> Iterator[FaultStack]:
    s = FaultStack(lease_s=30, llm_url=llm.url)
    # The LLM timeout must outlast the stalled call, or the pass would skip the step and go on.
    s.settings = s.settings.replace(llm_timeout_s=600.0, visibility_timeout_s=VISIBILITY_S)
    try:
        for name in ("alice", "bob", "charlie"):
            s.add_tenant(name)
        s.start_api()
        s.start_workers(1, queues="consolidate,maintenance")
        # bob's agent is the bystander: nothing done to alice's or charlie's agents touches it
        passes.write_memories(s, "bob", "bystander", [{"text": t, "kind": "event"} for t in PLAIN[:3]])
        yield s
    finally:
        s.close()


@pytest.fixture
def bystander(stack: FaultStack) -> Iterator[None]:
    before = passes.snapshot(stack, "bob", "bystander")
    yield
    assert passes.snapshot(stack, "bob", "bystander") == before


def _run(stack: FaultStack, tenant: str, run_id: str) -> dict[str, Any]:
    (row,) = stack.query(
        "SELECT to_jsonb(r) FROM memworker.consolidation_runs r WHERE tenant_id = %s AND id = %s",
        stack.tenants[tenant]["id"],
        run_id,
    )
    return row[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("pause", "how"), [("llm", "child"), ("commit", "worker")])
def test_kill_consolidation_mid_pass(stack: FaultStack, llm: PassLLM, bystander: None, pause: str, how: str) -> None:
    """pause=llm: stuck in the connections LLM call, after the metadata step wrote entities and
    topics. pause=commit: in the pass's last statement (its run report), after it wrote the
    insight, conclusion, links, salience, consolidated marks, profile and agent gates.
    how: the pool child is killed (the parent requeues the message at once) or the whole
    worker (the message comes back after the visibility timeout, to the restarted worker)."""
    agent = f"sleeper-{pause}"
    passes.set_policy(stack, "alice", agent, {"consolidation_enabled": True})
    passes.write_memories(stack, "alice", agent, [{"text": t, "kind": "event"} for t in ORION])
    llm.stall = "You link" if pause == "llm" else None
    with (
        passes.pause_on(
            stack, "consolidation_runs", "UPDATE", f"NEW.status = 'done' AND NEW.agent_id = '{agent}'"
        ) as release,
        # the redelivered run (at once after a child kill) waits at its start until we have looked
        passes.pause_on(
            stack,
            "consolidation_runs",
            "UPDATE",
            f"OLD.status = 'running' AND NEW.status = 'running' AND NEW.agent_id = '{agent}'",
            name="test_hold",
            key=passes.HOLD_KEY,
        ) as let_go,
    ):
        if pause == "llm":
            release()  # only the LLM holds this pass
        r = passes.call(stack, "alice", "POST", f"/v1/agents/{agent}/consolidate")
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        before = passes.snapshot(stack, "alice", agent)  # the pass cannot commit: it will pause first
        if pause == "llm":
            passes.wait(lambda: llm.stall is None, 90, "the stalled LLM call", stack)
        pid, written = passes.paused_backend(stack, on_lock=pause == "commit")
        expected = (
            {"memories"}
            if pause == "llm"
            else {
                "memories",
                "memory_terms",
                "memory_connections",
                "memory_events",
                "agent_profiles",
                "agents",
                "consolidation_runs",
            }
        )
        assert expected <= written, written  # mid-way: these are written, uncommitted
        assert passes.agent_locked(stack, "alice", agent)
        assert _run(stack, "alice", run_id)["status"] == "running"

        passes.kill(stack, how)
        delivered_at = passes.wait_pending(stack, "memworker.consolidate", run_id)
        release()  # the orphaned statement may finish now; nobody is left to send COMMIT
        passes.wait_backend_gone(stack, pid)

        assert passes.snapshot(stack, "alice", agent) == before  # atomic: nothing of the pass is left
        assert not passes.agent_locked(stack, "alice", agent)  # the transaction-scoped lock went with it
        assert _run(stack, "alice", run_id)["status"] == "running"  # the run waits for its redelivery

        let_go()
        if how == "worker":
            passes.restart_after_visibility(stack, delivered_at)
        done = passes.wait(
            lambda: (
                _run(stack, "alice", run_id)["status"] not in ("queued", "running") and _run(stack, "alice", run_id)
            ),
            180,
            "the redelivered pass",
            stack,
        )
    # The same run, delivered again, completed (no beat runs in this stack: nothing else could).
    assert done["status"] == "done", done
    assert (done["insights_written"], done["conclusions_written"]) == (1, 1), done
    assert done["connections_made"] == 3 and done["report"]["profile_version"] == 1, done
    tid = stack.tenants["alice"]["id"]
    kinds = Counter(
        k
        for (k,) in stack.query(
            "SELECT kind FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s", tid, agent
        )
    )
    assert kinds == {"event": len(ORION), "insight": 1, "conclusion": 1}  # written once, not twice
    assert stack.query(
        "SELECT count(*) FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s AND consolidated_at IS NULL",
        tid,
        agent,
    ) == [(0,)]
    assert stack.query(
        "SELECT count(*) FROM memworker.consolidation_runs WHERE tenant_id = %s AND agent_id = %s", tid, agent
    ) == [(1,)]
    assert not passes.agent_locked(stack, "alice", agent)
    # isolation: the other tenants cannot see the agent or its runs
    for other in ("bob", "charlie"):
        assert passes.call(stack, other, "GET", f"/v1/agents/{agent}/consolidation/runs").status_code == 404


def _seed_retention_agent(stack: FaultStack, agent: str) -> dict[str, str]:
    """Ten memories that expire, six recalled often enough to be promoted, six that only decay;
    small batches so the sweep takes many transactions. Returns id -> text."""
    passes.set_policy(stack, "charlie", agent, {"retention_batch": 4, "ttl_l1_hours": None})
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    ids = passes.write_memories(
        stack,
        "charlie",
        agent,
        [{"text": t, "kind": "event", "expires_at": soon} for t in EXPIRING]
        + [{"text": t, "kind": "event"} for t in RECALLED + PLAIN],
    )
    stack.query(
        "UPDATE memworker.memories SET access_count = 3, last_access_at = now() "
        "WHERE tenant_id = %s AND agent_id = %s AND text = ANY(%s) RETURNING id",
        stack.tenants["charlie"]["id"],
        agent,
        RECALLED,
    )
    return ids


def _sweep(stack: FaultStack, agent: str, clock: datetime) -> None:
    """What the hourly tick sends for one agent (tasks/retention_tasks.py)."""
    app = Celery(broker=stack.redis_url)
    try:
        app.send_task(
            "memworker.retention_sweep",
            args=[str(stack.tenants["charlie"]["id"]), agent, clock.isoformat()],
            queue="maintenance",
        )
    finally:
        app.close()


def _retention_run(stack: FaultStack, agent: str) -> dict[str, Any] | None:
    rows = stack.query(
        "SELECT to_jsonb(r) FROM memworker.retention_runs r WHERE tenant_id = %s AND agent_id = %s",
        stack.tenants["charlie"]["id"],
        agent,
    )
    assert len(rows) <= 1, rows
    return rows[0][0] if rows else None


def _outcome(stack: FaultStack, agent: str, texts: dict[str, str]) -> tuple[list[tuple[Any, ...]], Counter[Any]]:
    """The agent's memories (by text) and the retention events (by memory text): comparable
    between two agents that started with the same memories."""
    tid = stack.tenants["charlie"]["id"]
    rows = stack.query(
        "SELECT text, kind, tier, access_count, expires_at, valid_to, decayed_at, "
        "round(salience::numeric, 4), round(confidence::numeric, 4) FROM memworker.memories "
        "WHERE tenant_id = %s AND agent_id = %s ORDER BY text",
        tid,
        agent,
    )
    events = Counter(
        (event, reason, texts.get(str(mid), "?"))
        for event, reason, mid in stack.query(
            "SELECT event, reason, memory_id FROM memworker.memory_events WHERE tenant_id = %s AND agent_id = %s "
            "AND actor = 'retention'",
            tid,
            agent,
        )
    )
    return rows, events


@pytest.mark.parametrize(("pause", "how"), [("expire", "worker"), ("promote", "child")])
def test_kill_retention_mid_sweep(stack: FaultStack, bystander: None, pause: str, how: str) -> None:
    """pause=expire: in the sweep's first batch (its first write), so memory must be exactly as
    before the sweep. pause=promote: in a later batch that has promoted rows but not logged
    them, after the expire batches committed: the sweep is batched by design (short lock
    holds), so memory must be exactly as after the committed batches, with nothing of the
    paused one. Either way the redelivered sweep resumes the same run and finishes the job:
    the end state equals a twin agent's swept without a kill."""
    twin, agent = f"twin-{pause}", f"swept-{pause}"
    texts = _seed_retention_agent(stack, twin)
    texts.update(_seed_retention_agent(stack, agent))
    clock = retention.window(datetime.now(UTC) + timedelta(days=2), 3600)  # the tick's window, 2 days on
    _sweep(stack, twin, clock)
    passes.wait(lambda: (_retention_run(stack, twin) or {}).get("status") == "done", 120, "the twin's sweep", stack)
    before = passes.snapshot(stack, "charlie", agent)

    when = f"NEW.actor = 'retention' AND NEW.agent_id = '{agent}'" + (
        " AND NEW.event = 'promoted'" if pause == "promote" else ""
    )
    with (
        passes.pause_on(stack, "memory_events", "INSERT", when) as release,
        # the redelivered sweep (at once after a child kill) waits at its start until we have looked
        passes.pause_on(
            stack,
            "retention_runs",
            "UPDATE",
            f"OLD.status = 'running' AND NEW.status = 'running' AND NEW.agent_id = '{agent}'",
            name="test_hold",
            key=passes.HOLD_KEY,
        ) as let_go,
    ):
        _sweep(stack, agent, clock)
        pid, written = passes.paused_backend(stack, on_lock=True)
        assert {"memories", "memory_events"} <= written, written
        assert passes.agent_locked(stack, "charlie", agent)
        at_pause = passes.snapshot(stack, "charlie", agent)  # what the committed batches left
        killed = _retention_run(stack, agent)
        assert killed is not None and killed["status"] == "running"

        passes.kill(stack, how)
        delivered_at = passes.wait_pending(stack, "memworker.retention_sweep", agent)
        release()
        passes.wait_backend_gone(stack, pid)

        after = passes.snapshot(stack, "charlie", agent)
        assert after == at_pause  # the paused batch left nothing: no promotion without its event
        if pause == "expire":
            assert after == before
        else:
            rows, events = _outcome(stack, agent, texts)
            assert not {r[0] for r in rows} & set(EXPIRING)  # the expire batches did commit, whole:
            assert sorted(t for (e, _, t) in events.elements() if e == "expired") == sorted(EXPIRING)
            assert {r[2] for r in rows if r[0] in RECALLED} == {"L1"}  # the paused promotion is not there
        assert not passes.agent_locked(stack, "charlie", agent)
        assert _retention_run(stack, agent) == killed  # still 'running': nobody finished it

        let_go()
        if how == "worker":
            passes.restart_after_visibility(stack, delivered_at)
        done = passes.wait(
            lambda: (r := _retention_run(stack, agent)) and r["status"] != "running" and r,
            180,
            "the redelivered sweep",
            stack,
        )
    assert done["id"] == killed["id"] and done["status"] == "done", done  # the same run, resumed and finished
    assert _outcome(stack, agent, texts) == _outcome(stack, twin, texts)  # as if it had never been killed
    assert not passes.agent_locked(stack, "charlie", agent)
    for other in ("alice", "bob"):
        assert passes.call(stack, other, "GET", f"/v1/agents/{agent}/retention").status_code == 404
