"""Sleep and subjects: a consolidation pass works on each due subject's memories (and the
agent's general ones) apart, so its connections, insight, conclusions and summaries never mix
two people; and a subject's profile, the same five sections as the agent's
(memworker.sleep.profile), is built on read from that subject's live memories only. The
agent's own stored profile holds its general knowledge: what one customer prefers is never
listed as the agent's, nor shown in another customer's profile."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.lifecycle import governance
from memworker.sleep import profile
from memworker.sleep.synthesis import Item
from memworker.storage import store
from memworker.storage.db import Conn

MAX_MEMORIES = 500  # the newest live memories of the subject the profile is built from


def by_subject(window: list[Item]) -> list[tuple[str | None, list[Item]]]:
    """The pass's window cut by subject (None: the general memories), each subject's items
    oldest first, the subjects in the order of their first item. A pass consolidates each
    subject that is due apart; a subject with too few items waits for more."""
    groups: dict[str | None, list[Item]] = {}
    for item in window:  # oldest first: dict order is first appearance
        groups.setdefault(item.subject, []).append(item)
    return list(groups.items())


def merged_steps(steps: list[tuple[str | None, dict[str, str]]]) -> dict[str, str]:
    """One report's steps from each subject's: as they are for one subject, else each step
    as '<subject>: <what>' joined by ' | ' (the general memories as 'general')."""
    if len(steps) == 1:
        return dict(steps[0][1])
    keys = [k for _, done in steps for k in done]
    return {
        key: " | ".join(f"{subject or 'general'}: {done[key]}" for subject, done in steps if key in done)
        for key in dict.fromkeys(keys)
    }


def build(conn: Conn, *, tenant_id: UUID, agent_id: str, subject: str, policy: Policy) -> dict[str, Any]:
    """The subject's profile document (version 0: it is computed, not stored)."""
    now = governance.clock(conn)
    rows = store.list_memories(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        tier=None,
        kind=None,
        session_id=None,
        limit=MAX_MEMORIES,
        after=None,
        subject=subject,
    )
    window = [_item(m) for m in rows if m.kind != memories.Kind.TURN]
    doc, _ = profile.update(
        profile.empty(),
        window,
        similar=lambda a, b: 0.0,  # every live memory stands: superseded ones are already out
        live_ids={i.id for i in window},
        now=now,
        min_confidence=policy.consolidation_profile_min_confidence,
        stale_days=policy.consolidation_profile_stale_days,
    )
    doc["subject"] = subject
    doc["updated_at"] = now.isoformat()
    return doc


def _item(m: memories.Memory) -> Item:
    return Item(
        id=m.id,
        text=m.text,
        kind=m.kind,
        tier=m.tier,
        salience=m.salience,
        confidence=m.confidence,
        created_at=m.created_at,
        access_count=m.access_count,
        last_access_at=m.last_access_at,
        entities=tuple(m.entities),
        topics=tuple(m.topics),
        flags=tuple(m.flags),
    )
