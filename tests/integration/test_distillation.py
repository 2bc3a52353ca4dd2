"""Sleep that distils, against the real database and embedding model: a pass turns a window's
turns into summaries naming exactly the messages they carry, merges the reflected facts they
say in full, and retention then forgets by value: a carried turn goes (however often it was
recalled), a turn nothing carries stays until it is long unused, the semantic layer stays.
With an LLM (a real HTTP server speaking the OpenAI protocol) one call distils the window and
the offline rule stands in when the answer is unusable."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from memworker.domain import episodic, memories
from memworker.lifecycle import governance, retention
from memworker.models.llm import OpenAICompatible
from memworker.sleep import consolidation
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeLLM

DAY = timedelta(days=1)
WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
CHAT = [
    {"role": "user", "name": "Caroline", "content": "Hey Mel! Good to see you! How have you been?"},
    {"role": "user", "name": "Melanie", "content": "I'm swamped with the kids & work. What's up with you?"},
    {
        "role": "user",
        "name": "Caroline",
        "content": "I went to a LGBTQ support group yesterday and it was so powerful.",
    },
    {"role": "user", "name": "Melanie", "content": "Wow, that's cool, Caroline!"},
    {
        "role": "user",
        "name": "Caroline",
        "content": "We meet every Tuesday at 7 pm in the Riverside library, room 204.",
    },
]


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


def _owner(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        cur = conn.execute(sql, args)
        return cur.fetchall() if cur.description else []


def _write(pool: Any, embedder: Any, tenant: UUID, agent: str, draft: memories.Draft, key: str) -> UUID:
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        mid, _ = store.write_memory(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            draft=draft,
            embedding=embedder.embed([draft.text])[0],
            source_key=key,
        )
    return mid


def _seed_episode(
    pool: Any, embedder: Any, tenant: UUID, agent: str, parts: dict[int, int] | None = None
) -> tuple[str, list[UUID], UUID, UUID]:
    """Turns as ingest writes them, an event the reflector drew from message 2, a preference;
    parts: a message's part count (default 1), as ingest stores a long one's."""
    episode = f"episode:{uuid.uuid4()}"
    turn_ids = []
    for t in episodic.turns(CHAT, "", WHEN):
        draft = memories.Draft(
            text=t.text,
            kind=memories.Kind.TURN,
            tier=memories.Tier.L0,
            provenance=(f"{episode}#m{t.message}",),
            metadata={"speaker": t.speaker, "role": t.role, "occurred_at": WHEN.isoformat()},
            parts=(parts or {}).get(t.message, 1),
        )
        turn_ids.append(_write(pool, embedder, tenant, agent, draft, f"{episode}:{t.source_key}"))
    event = memories.Draft(
        text="Caroline went to a LGBTQ support group yesterday.",
        kind=memories.Kind.EVENT,
        provenance=(f"{episode}#m2",),
    )
    pref = memories.Draft(
        text="Melanie prefers quiet evenings with the kids.",
        kind=memories.Kind.PREFERENCE,
        provenance=(f"{episode}#m1",),
    )
    return (
        episode,
        turn_ids,
        _write(pool, embedder, tenant, agent, event, f"{episode}:event"),
        _write(pool, embedder, tenant, agent, pref, f"{episode}:pref"),
    )


def _pass(
    pool: Any, embedder: Any, settings: Any, tenant: UUID, agent: str, *, client: Any = None, force: bool = False
) -> consolidation.Report:
    with db.tenant_tx(pool, tenant) as conn:
        run_id = consolidation.request_run(conn, tenant_id=tenant, agent_id=agent, trigger="test")
    return consolidation.run_pass(
        pool, embedder, client, settings, tenant_id=tenant, agent_id=agent, run_id=run_id, force=force
    )


def test_a_pass_distils_turns_and_retention_forgets_by_value(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice, agent = tenants["alice"]["id"], "distiller"
    episode, turn_ids, event, pref = _seed_episode(pool, embedder, alice, agent)
    r = _pass(pool, embedder, stack["settings"], alice, agent)
    assert r.status == "done" and r.steps["distil"] == "rules", r
    assert (r.summaries_written, r.turns_distilled, r.items_absorbed) == (1, 5, 1), r
    (summary,) = _owner(
        stack,
        "SELECT id, text, tier, expires_at, provenance, consolidated_at FROM memworker.memories "
        "WHERE agent_id = %s AND kind = 'summary'",
        agent,
    )
    sid, text, tier, expires, provenance, consolidated = summary
    assert tier == "L1" and expires is None and consolidated is not None
    assert provenance[0] == f"{episode}#m1,2,4"  # 0 and 3 are greetings and reactions: nothing to carry
    assert provenance[1:] == [f"{episode}#m2"]  # the event merged into it brought its own source
    assert "8 May 2023" in text and "Riverside library, room 204" in text and "How have you been" not in text
    carried = _owner(stack, "SELECT id FROM memworker.memories WHERE agent_id = %s AND carried_by = %s", agent, sid)
    assert {c[0] for c in carried} == set(turn_ids)
    assert not _owner(stack, "SELECT 1 FROM memworker.memories WHERE id = %s", event)  # merged into the summary
    with db.tenant_tx(pool, alice) as conn:
        assert governance.resolve(conn, tenant_id=alice, agent_id=agent, memory_id=event) == sid

    # a later turn no pass has distilled, recalled often; a carried turn recalled often too
    late = _write(
        pool,
        embedder,
        alice,
        agent,
        memories.Draft(
            text="Melanie (9 May 2023): My sister Ana moved to Porto in March.",
            kind=memories.Kind.TURN,
            tier=memories.Tier.L0,
            provenance=(f"{episode}#m9",),
        ),
        f"{episode}:late",
    )
    _owner(stack, "UPDATE memworker.memories SET access_count = 9 WHERE id = ANY(%s)", [late, turn_ids[2]])
    with db.tenant_tx(pool, alice) as conn:
        t0 = governance.clock(conn)
    early = retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=t0 + 6 * DAY)
    assert early.forgotten_distilled == 0 and early.expired == 0
    week = retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=t0 + 8 * DAY)
    assert week.forgotten_distilled == len(turn_ids)
    live = {r[0] for r in _owner(stack, "SELECT id FROM memworker.memories WHERE agent_id = %s", agent)}
    derived = _owner(
        stack,
        "SELECT id, provenance FROM memworker.memories WHERE agent_id = %s AND kind IN ('insight', 'conclusion')",
        agent,
    )
    # derived memories name the run, then the messages of the evidence their text quotes
    assert all(
        p[0] == f"consolidation:{r.run_id}" and all(x.startswith(f"{episode}#m") for x in p[1:]) for _, p in derived
    )
    assert any(len(p) > 1 for _, p in derived)
    assert live == {sid, pref, late} | {d[0] for d in derived}
    (reason,) = _owner(
        stack, "SELECT reason FROM memworker.memory_events WHERE memory_id = %s AND event = 'forgotten'", turn_ids[2]
    )[0]
    assert "distilled" in reason
    # two months on: the semantic layer has no clock; the undistilled turn stays until long unused
    retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=t0 + 60 * DAY)
    assert {r[0] for r in _owner(stack, "SELECT id FROM memworker.memories WHERE agent_id = %s", agent)} == live
    retention.sweep_agent(pool, tenant_id=alice, agent_id=agent, now=t0 + 91 * DAY)
    assert {r[0] for r in _owner(stack, "SELECT id FROM memworker.memories WHERE agent_id = %s", agent)} == live - {
        late
    }


@pytest.mark.parametrize(("parts", "weighed"), [({1: 6, 2: 8, 4: 7}, 6), ({1: 6, 2: 1, 4: 7}, 1)])
def test_a_summary_is_weighed_as_the_messages_it_carries(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], parts: dict[int, int], weighed: int
) -> None:
    # recall lowers a long message by its part count; a summary of long messages standing in for
    # them must pay it too (the fewest among them: a short one it carries may say it all)
    alice, agent = tenants["alice"]["id"], f"summary-parts-{weighed}"
    _seed_episode(pool, embedder, alice, agent, parts)
    assert _pass(pool, embedder, stack["settings"], alice, agent).summaries_written == 1
    assert _owner(stack, "SELECT parts FROM memworker.memories WHERE agent_id = %s AND kind = 'summary'", agent) == [
        (weighed,)
    ]


def test_a_turn_whose_summary_is_forgotten_is_kept(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    bob, agent = tenants["bob"]["id"], "unsummarised"
    _, turn_ids, _, _ = _seed_episode(pool, embedder, bob, agent)
    r = _pass(pool, embedder, stack["settings"], bob, agent)
    assert r.summaries_written == 1
    (sid,) = r.summary_ids
    _owner(stack, "DELETE FROM memworker.memories WHERE id = %s", UUID(sid))  # as a forget or a merge would
    with db.tenant_tx(pool, bob) as conn:
        t0 = governance.clock(conn)
    report = retention.sweep_agent(pool, tenant_id=bob, agent_id=agent, now=t0 + 30 * DAY)
    assert report.forgotten_distilled == 0
    assert len(_owner(stack, "SELECT 1 FROM memworker.memories WHERE id = ANY(%s)", turn_ids)) == len(turn_ids)


def test_with_an_llm_one_call_distils_the_window_and_the_rules_stand_in_when_it_fails(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    charlie = tenants["charlie"]["id"]
    note = '[{"text": "Caroline joined an LGBTQ support group: Tuesdays 7 pm, Riverside library room 204.", "messages": [3, 5]}]'
    fake = FakeLLM(default=note)
    try:
        settings = stack["settings"].replace(llm_base_url=fake.url)
        client = OpenAICompatible(fake.url, "m", None, 10)
        episode, turn_ids, _, _ = _seed_episode(pool, embedder, charlie, "llm-sleeper")
        fake.script("[]", "[]", "[]")  # metadata, connections, insight: nothing useful
        r = _pass(pool, embedder, settings, charlie, "llm-sleeper", client=client, force=True)
        assert r.status == "done" and r.steps["distil"] == "llm", r
        distil_calls = [q for q in fake.requests if "condense a conversation" in q["messages"][0]["content"]]
        assert len(distil_calls) == 1 and r.tokens_in > 0 and r.llm_calls == len(fake.requests)
        (prov,) = _owner(stack, "SELECT provenance FROM memworker.memories WHERE id = %s", UUID(r.summary_ids[0]))[0]
        assert prov[0] == f"{episode}#m2,4"
        carried = _owner(
            stack, "SELECT id FROM memworker.memories WHERE carried_by IS NOT NULL AND agent_id = 'llm-sleeper'"
        )
        assert {c[0] for c in carried} == {turn_ids[2], turn_ids[4]}  # what the note does not carry stays

        fake.default = "this is not JSON"
        _seed_episode(pool, embedder, charlie, "llm-fallback")
        r = _pass(pool, embedder, settings, charlie, "llm-fallback", client=client, force=True)
        assert r.status == "done" and r.steps["distil"].startswith("rules (llm answer malformed"), r
        assert r.summaries_written == 1 and r.turns_distilled == 5
    finally:
        fake.close()
