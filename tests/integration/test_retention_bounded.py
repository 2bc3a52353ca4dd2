"""The retention sweep's merge and contradiction pass is bounded per run: a pass over more fresh
memories than one run checks goes on in the next runs from where it stopped, checks each
memory once, and only when finished moves the agent's mark on, to the clock it began at."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from memworker.domain import memories
from memworker.lifecycle import governance, retention
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder
from tests.pg_only import stack  # noqa: F401  (Postgres only: no Redis database)

EMB = FakeEmbedder()
HOUR = timedelta(hours=1)
FACTS = [
    "The build server is called hal9000 in the lab.",
    "Lunch is served at noon in the canteen.",
    "The quarterly report is due on the fifth of March.",
    "Maria leads the data platform team in Porto.",
    "The office plants are watered every Tuesday.",
    "Backups of the billing database run nightly at two.",
    "The build server is called hal9000 in the lab!",  # a near-duplicate of the first
]


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:  # noqa: F811
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


def write(pool: Any, tenant: UUID, agent: str, text: str) -> UUID:
    """A memory written straight to the store (no write-path checks: the sweep's to do)."""
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        mid, _ = store.write_memory(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            embedding=EMB.embed([text])[0],
            draft=memories.Draft(text=text, kind="fact", tier="L1", confidence=0.7, salience=0.5, provenance=("api",)),
            source_key=f"t:{agent}:{text}",
        )
    assert mid is not None
    return mid


def mark(pool: Any, tenant: UUID, agent: str) -> dict[str, Any]:
    with db.tenant_tx(pool, tenant) as conn:
        row = conn.execute(
            "SELECT retention_done_at, retention_repair_clock, retention_repair_after FROM agents"
            " WHERE tenant_id = %s AND id = %s",
            (tenant, agent),
        ).fetchone()
    assert row is not None
    return dict(row)


def test_a_pass_longer_than_a_run_goes_on_in_the_next_runs(
    pool: Any, tenants: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, agent = tenants["alice"]["id"], "bounded"
    ids = [write(pool, alice, agent, text) for text in FACTS]
    with db.tenant_tx(pool, alice) as conn:
        start = governance.clock(conn) + timedelta(days=1)
    monkeypatch.setattr(retention, "REPAIR_PER_RUN", 3)

    first = retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=start)
    assert first.status == "done"
    m = mark(pool, alice, agent)
    assert m["retention_done_at"] is None  # the pass is not finished: the mark has not moved
    assert m["retention_repair_clock"] == start and m["retention_repair_after"] in ids

    second = retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=start + HOUR)
    assert mark(pool, alice, agent)["retention_repair_clock"] == start  # 6 of 7 checked: still going
    third = retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=start + 2 * HOUR)
    m = mark(pool, alice, agent)
    # finished: the next pass starts after the clock this one began at, nothing is left pending
    assert m == {"retention_done_at": start, "retention_repair_clock": None, "retention_repair_after": None}
    assert first.merged + second.merged + third.merged == 1  # the near-duplicate, found once
    with db.tenant_tx(pool, alice) as conn:
        live = conn.execute("SELECT count(*) AS n FROM memories WHERE agent_id = %s", (agent,)).fetchone()
    assert live is not None and live["n"] == len(FACTS) - 1

    # a memory written after the pass began is checked by the next one
    late = write(pool, alice, agent, "Lunch is served at noon in the canteen!")
    with db.tenant_tx(pool, alice) as conn:
        conn.execute("UPDATE memories SET updated_at = %s WHERE id = %s", (start + 3 * HOUR, late))
    fourth = retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=start + 4 * HOUR)
    assert fourth.merged == 1
    assert mark(pool, alice, agent)["retention_done_at"] == start + 4 * HOUR
