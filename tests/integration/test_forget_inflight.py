"""A forget is final whatever ingest has in flight. The worker stores an episode's memories
and turns in one transaction that holds the episode's row; here the real ingest
(processing.process) is held inside that transaction, after it wrote everything and before
it commits (its post-turn hook waits for the test), while a forget that erases the episode
runs. Once the forget has to wait for the worker, the worker is let go: nothing holding the
marker may survive the forget, in any table of the tenant. Another tenant's copy stays."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from memworker import reflection
from memworker.domain import memories
from memworker.erase import forget
from memworker.ingest import intake, processing
from memworker.sessions import archive, hooks, session
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from tests.probes import marked_counts, wait_until_blocked

MARKER = "RK-71683"
SUBJECT = "user-rk"
GOAL = f"Close account {MARKER} for the user before Friday"
SAID = f"The user closed account {MARKER} at the Leeds branch yesterday."
HOLD_S = 60.0


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[db.Pool]:
    p = db.open_pool(stack["app_url"], max_size=6)
    yield p
    p.close()


@pytest.fixture(scope="module")
def bystander(stack: dict[str, Any], tenants: dict[str, Any], pool: db.Pool, embedder: Any) -> UUID:
    """The same marker in another tenant: no forget here may touch it."""
    tenant = tenants["bob"]["id"]
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id="agent-subject")
        store.write_memory(
            conn,
            tenant_id=tenant,
            agent_id="agent-subject",
            draft=memories.Draft(text=SAID),
            embedding=embedder.embed([SAID])[0],
            source_key="bystander",
        )
    return UUID(str(tenant))


def _archived_session(pool: db.Pool, tenant: UUID, agent: str) -> UUID:
    """A session with the subject whose goal holds the marker, archived: its summary episode."""
    with db.tenant_tx(pool, tenant) as conn:
        session.create(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            session_id="s-rk",
            goal=GOAL,
            window_tokens=None,
            metadata={},
            subject=SUBJECT,
        )
        _, episode, _ = archive.archive(conn, tenant_id=tenant, agent_id=agent, session_id="s-rk")
    assert episode is not None
    return episode


def _episode(pool: db.Pool, tenant: UUID, agent: str, said: str = SAID) -> UUID:
    with db.tenant_tx(pool, tenant) as conn:
        ((episode, _),) = intake.accept(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            episodes=[intake.NewEpisode("", messages=[{"role": "user", "content": said}], session_id=None)],
        )
    return episode


def _ingest(pool: db.Pool, settings: Any, embedder: Any, tenant: UUID, episode: UUID, post_turn: Any) -> Any:
    return processing.process(
        pool,
        embedder,
        reflection.OfflineReflector(),
        settings,
        tenant_id=tenant,
        episode_ids=[episode],
        post_turn=post_turn,
    )


def _scenario(kind: str, pool: db.Pool, settings: Any, embedder: Any, tenant: UUID) -> tuple[UUID, forget.Request]:
    """The episode the worker is held on, and a forget that erases it."""
    agent = f"agent-{kind}"
    if kind == "memory_ids":  # the episode restates a stored memory, which the worker confirms
        first = _episode(pool, tenant, agent)
        assert _ingest(pool, settings, embedder, tenant, first, hooks.episode_stored).stored == [first]
        with db.tenant_tx(pool, tenant) as conn:
            found = conn.execute(
                "SELECT id FROM memories WHERE agent_id = %s AND kind <> 'turn' AND strpos(text, %s) > 0",
                (agent, MARKER),
            ).fetchall()
        assert found
        return _episode(pool, tenant, agent), forget.Request(memory_ids=tuple(r["id"] for r in found))
    episode = _archived_session(pool, tenant, agent)
    requests = {
        "subject": forget.Request(subject=SUBJECT),
        "session_id": forget.Request(session_id="s-rk"),
        "provenance": forget.Request(provenance=f"episode:{episode}"),
        "before": forget.Request(before=datetime.now(UTC)),
    }
    return episode, requests[kind]


@pytest.mark.parametrize("kind", ["subject", "session_id", "provenance", "before", "memory_ids"])
def test_a_forget_racing_the_ingest_of_its_episode_leaves_nothing(
    kind: str, stack: dict[str, Any], tenants: dict[str, Any], pool: db.Pool, embedder: Any, bystander: UUID
) -> None:
    tenant = UUID(str(tenants["alice"]["id"]))
    episode, request = _scenario(kind, pool, stack["settings"], embedder, tenant)
    outcome, receipt = _race(stack, pool, embedder, tenant, f"agent-{kind}", episode, request)
    assert outcome.stored == [episode]  # the worker committed first ...
    assert str(episode) in receipt["episodes"]["ids"]  # ... and the forget erased the episode
    owner = stack["owner_url"]
    assert marked_counts(owner, tenant, MARKER, agent_id=f"agent-{kind}") == {}  # and everything the worker wrote
    assert marked_counts(owner, bystander, MARKER, agent_id="agent-subject")["memories"] == 1


def test_a_memory_confirmed_mid_forget_takes_the_confirming_episode_along(
    stack: dict[str, Any], tenants: dict[str, Any], pool: db.Pool, embedder: Any
) -> None:
    """An episode that restates a memory in other words (no needle of it: not a copy) is
    being stored, confirming the memory (its provenance gains the episode), while a forget of
    that memory runs. The memory came from that episode too, so the episode and its turn go
    with it, as they would had the confirmation committed before the forget began."""
    tenant, agent = UUID(str(tenants["charlie"]["id"])), "agent-paraphrase"
    settings = stack["settings"]
    first = _episode(pool, tenant, agent, "The user prefers green tea in the morning.")
    assert _ingest(pool, settings, embedder, tenant, first, hooks.episode_stored).stored == [first]
    with db.tenant_tx(pool, tenant) as conn:
        (memory,) = [r["id"] for r in conn.execute("SELECT id FROM memories WHERE kind <> 'turn'").fetchall()]
    again = _episode(pool, tenant, agent, "The user prefers green tea in the mornings.")
    outcome, receipt = _race(stack, pool, embedder, tenant, agent, again, forget.Request(memory_ids=(memory,)))
    assert outcome.stored == [again] and outcome.duplicates == 1  # it confirmed the memory ...
    assert receipt["memories"]["ids"] == [str(memory)]
    assert sorted(receipt["episodes"]["ids"]) == sorted([str(first), str(again)])  # ... so it went too
    with db.tenant_tx(pool, tenant) as conn:
        left = conn.execute("SELECT count(*) AS n FROM memories WHERE strpos(text, 'green tea') > 0").fetchone()
        episodes = conn.execute("SELECT count(*) AS n FROM episodes").fetchone()
    assert left is not None and left["n"] == 0 and episodes is not None and episodes["n"] == 0


def _race(
    stack: dict[str, Any],
    pool: db.Pool,
    embedder: Any,
    tenant: UUID,
    agent: str,
    episode: UUID,
    request: forget.Request,
) -> tuple[processing.Outcome, dict[str, Any]]:
    """The worker stores the episode and is held before its commit; the forget starts and,
    once it waits for the worker's transaction, the worker is let go. Both answers."""
    inside, go = threading.Event(), threading.Event()
    pids: dict[str, int] = {}  # the backends of the worker's and the forget's transactions

    def held(conn: db.Conn, **kw: Any) -> list[UUID]:
        out = hooks.episode_stored(conn, **kw)
        pids["worker"] = conn.info.backend_pid
        inside.set()  # everything of the episode written, not committed
        assert go.wait(HOLD_S)
        return out

    outcomes: list[Any] = []
    receipts: list[Any] = []
    failed: list[BaseException] = []

    def run(target: Any, into: list[Any]) -> threading.Thread:
        def body() -> None:
            try:
                into.append(target())
            except BaseException as exc:  # surfaced below
                failed.append(exc)

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    erasing = threading.Event()

    def erase() -> dict[str, Any]:
        with db.tenant_tx(pool, tenant) as conn:
            pids["forget"] = conn.info.backend_pid
            erasing.set()
            return forget.forget(conn, tenant_id=tenant, agent_id=agent, request=request, actor="t")

    worker = run(lambda: _ingest(pool, stack["settings"], embedder, tenant, episode, held), outcomes)
    try:
        assert inside.wait(HOLD_S), failed
        eraser = run(erase, receipts)
        assert erasing.wait(HOLD_S), failed
        # the forget's own backend now waits for the worker's transaction (no other waiter counts)
        wait_until_blocked(stack["owner_url"], pids["forget"], pids["worker"], HOLD_S)
    finally:
        go.set()
    worker.join(HOLD_S)
    eraser.join(HOLD_S)
    assert not failed, failed
    return outcomes[0], receipts[0]
