"""One sleep pass covers every subject that is due and the general memories, each on its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from memworker import reflection
from memworker.domain import memories
from memworker.sleep import consolidation
from memworker.storage import db, store
from memworker.tenancy import service as tenancy


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


def _texts(who: str) -> list[str]:
    return [
        f"The invoice export for {who} timed out again on Monday.",
        f"The invoice export for {who} timed out again on Friday.",
        f"{who.capitalize()} prefers status updates by email.",
    ]


def _seed(pool: Any, embedder: Any, tenant: UUID, agent: str, texts: list[str], subject: str | None) -> list[str]:
    ids = []
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        for text, vec in zip(texts, embedder.embed(texts), strict=True):
            draft = memories.Draft(
                text=text,
                kind=reflection._kind(text),
                entities=reflection.entities_of(text),
                topics=reflection.topics_of(text),
                subject=subject,
            )
            mid, _ = store.write_memory(
                conn, tenant_id=tenant, agent_id=agent, draft=draft, embedding=vec, source_key=f"seed:{text}"
            )
            ids.append(str(mid))
    return ids


def test_one_pass_consolidates_each_due_subject_and_the_general_memories_apart(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    agent = "desk"
    subject_of: dict[str, str | None] = {}
    for subject in ("ann", "ben", None):
        for mid in _seed(pool, embedder, alice, agent, _texts(subject or "the team"), subject):
            subject_of[mid] = subject
    (waiting,) = _seed(pool, embedder, alice, agent, ["Cleo asked about the export."], "cleo")  # one: not due
    with db.tenant_tx(pool, alice) as conn:
        run_id = consolidation.request_run(conn, tenant_id=alice, agent_id=agent, trigger="test")
    r = consolidation.run_pass(pool, embedder, None, stack["settings"], tenant_id=alice, agent_id=agent, run_id=run_id)
    assert (r.status, r.items_reviewed, r.insights_written) == ("done", 9, 3), r
    assert r.steps["insight"] == "ann: rules | ben: rules | general: rules"
    with psycopg.connect(stack["owner_url"]) as conn:
        rows = conn.execute(
            "SELECT id::text, subject, metadata->'evidence', consolidated_at IS NOT NULL FROM memworker.memories "
            "WHERE tenant_id = %s AND agent_id = %s",
            (alice, agent),
        ).fetchall()

    derived = [(mid, subject, evidence) for mid, subject, evidence, _ in rows if evidence]
    assert sorted(s or "" for _, s, _ in derived) == ["", "ann", "ben"]
    for _, subject, evidence in derived:
        assert {subject_of[e] for e in evidence} == {subject}  # never two people in one insight
    assert {mid for mid, _, _, done in rows if not done} == {waiting}  # Cleo's waits for more
    with db.tenant_tx(pool, tenants["bob"]["id"]) as conn:  # another tenant sees none of it
        seen = conn.execute("SELECT count(*) AS n FROM memworker.memories WHERE agent_id = %s", (agent,)).fetchone()
    assert seen is not None and seen["n"] == 0
