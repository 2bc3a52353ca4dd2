"""Two writers storing the same sentence at the same moment leave one live memory: the
duplicate check and the insert are atomic per agent (store.find_duplicate takes the agent's
dedup lock, held to the end of the writer's transaction)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from memworker.domain import memories
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder
from tests.pg_only import stack  # noqa: F401  (Postgres only: no Redis database)

EMB = FakeEmbedder()
ROUNDS = 25


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


def store_once(
    pool: Any, tenant: UUID, agent: str, text: str, writer: int, barrier: threading.Barrier, subject: str | None = None
) -> None:
    """As ingest stores one item: look for a live copy, confirm it or insert, in one transaction."""
    vec = EMB.embed([text])[0]
    with db.tenant_tx(pool, tenant) as conn:
        barrier.wait(timeout=30)
        dup = store.find_duplicate(
            conn, tenant_id=tenant, agent_id=agent, text=text, embedding=vec, threshold=0.9, subject=subject
        )
        if dup is None:
            store.write_memory(
                conn,
                tenant_id=tenant,
                agent_id=agent,
                draft=memories.Draft(text=text, provenance=(f"writer:{writer}",), subject=subject),
                embedding=vec,
                source_key=f"race:{writer}:{text}",
            )


def live_copies(stack: dict[str, Any], tenant: UUID, agent: str, text: str) -> int:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s AND text = %s "
            "AND valid_to IS NULL",
            (tenant, agent, text),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_two_writers_racing_on_one_sentence_leave_one_live_memory(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    alice, bob = tenants["alice"]["id"], tenants["bob"]["id"]
    agent = "racer"
    for tenant in (alice, bob):
        with db.tenant_tx(pool, tenant) as conn:
            tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
    for n in range(ROUNDS):
        text = f"The deploy window for service number {n} opens at nine."
        subject = "customer-7" if n % 3 == 2 else None  # a subject's writers race the same way
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def run(writer: int, text: str = text, barrier: threading.Barrier = barrier, subject: Any = subject) -> None:
            try:
                store_once(pool, alice, agent, text, writer, barrier, subject)
            except BaseException as exc:  # surfaced below: a thread's failure must fail the test
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,)) for w in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert live_copies(stack, alice, agent, text) == 1, f"round {n}: two live copies of {text!r}"
    # the lock is per tenant and agent: another tenant's agent of the same name writes its own copy
    text = "The deploy window for service number 0 opens at nine."
    store_once(pool, bob, agent, text, 3, threading.Barrier(1))
    assert live_copies(stack, bob, agent, text) == 1 and live_copies(stack, alice, agent, text) == 1
