"""The right to be forgotten: POST /v1/agents/{agent_id}/forget with exactly one of
provenance, memory_ids, session_id or before.

What goes, in one transaction (so the receipt is exactly what happened):
- the memories the request names, with their embeddings (a column of the row), BM25
  postings, connections, reviews and aliases (all cascade on delete);
- the raw episodes: those the request names (the episode of an 'episode:<id>' provenance,
  the session's, those received before the time) and every episode a forgotten memory came
  from, since they hold its text verbatim;
- memories derived from those episodes (a session's or a time range's);
- insights and conclusions whose evidence includes a forgotten memory, recursively. They
  are removed, not rewritten: their text may repeat what was forgotten, and an LLM rewrite
  could keep it. The evidence that remains goes back into consolidation's window
  (consolidated_at cleared) so the next pass derives new ones from what is left;
- profile versions that cite a forgotten memory by id or by text.

Audit rows stay: they carry ids and reasons, never text."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from memworker import errors
from memworker.lifecycle import governance, rules
from memworker.storage import db, lifecycle_db, store

MAX_IDS = 1_000
MAX_DERIVED_ROUNDS = 5  # insights of insights: a handful of levels at most
LOCK_WAIT_S = 30.0


@dataclass(frozen=True)
class Request:
    """Exactly one of the four selectors."""

    provenance: str | None = None
    memory_ids: tuple[UUID, ...] | None = None
    session_id: str | None = None
    before: datetime | None = None

    def validate(self) -> None:
        given = [k for k in ("provenance", "memory_ids", "session_id", "before") if getattr(self, k) is not None]
        if len(given) != 1:
            raise errors.InvalidInput("give exactly one of provenance, memory_ids, session_id or before")
        if self.provenance is not None and not self.provenance.strip():
            raise errors.InvalidInput("provenance must not be blank")
        if self.memory_ids is not None and not 1 <= len(self.memory_ids) <= MAX_IDS:
            raise errors.InvalidInput(f"memory_ids: give 1 to {MAX_IDS} ids")
        if self.before is not None and self.before.tzinfo is None:
            raise errors.InvalidInput("before: give a timestamp with a time zone")

    def describe(self) -> str:
        if self.provenance is not None:
            return f"provenance={self.provenance}"
        if self.memory_ids is not None:
            return f"memory_ids ({len(self.memory_ids)})"
        if self.session_id is not None:
            return f"session_id={self.session_id}"
        assert self.before is not None
        return f"before={self.before.isoformat()}"


def episode_of(source: str) -> UUID | None:
    """The episode id behind a provenance entry 'episode:<id>' or 'episode:<id>#m0,2'."""
    if not source.startswith("episode:"):
        return None
    try:
        return UUID(source[len("episode:") :].split("#", 1)[0])
    except ValueError:
        return None


def forget(
    conn: psycopg.Connection,
    *,
    tenant_id: UUID,
    agent_id: str,
    request: Request,
    actor: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Erase what the request names (see the module docstring) and return the receipt.

    Raises NotFound for an unknown agent, InvalidInput for a bad request, Unavailable when
    the agent stays locked by a consolidation pass for LOCK_WAIT_S."""
    request.validate()
    store.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    _lock(conn, tenant_id, agent_id)
    now = now or governance.clock(conn)
    base: dict[str, Any] = dict(tenant_id=tenant_id, agent_id=agent_id)
    ids = list(request.memory_ids or ())
    resolved = [governance.resolve(conn, **base, memory_id=i) for i in ids]
    named_episode = episode_of(request.provenance) if request.provenance else None
    episode_ids = set(
        lifecycle_db.forget_match_episodes(
            conn,
            **base,
            session_id=request.session_id,
            before=request.before,
            episode_ids=[named_episode] if named_episode else [],
        )
    )
    matched = lifecycle_db.forget_match(
        conn,
        **base,
        provenance=request.provenance,
        memory_ids=resolved or None,
        session_id=request.session_id,
        before=request.before,
        sources=[f"episode:{e}" for e in episode_ids],
    )
    forgotten = {r.id for r in matched}
    for r in matched:  # the episodes they came from hold their text
        episode_ids |= {e for e in map(episode_of, r.provenance) if e is not None}
    derived: set[UUID] = set()
    frontier = set(forgotten)
    for _ in range(MAX_DERIVED_ROUNDS):
        if not frontier:
            break
        rows = lifecycle_db.forget_derived(
            conn,
            **base,
            kinds=list(rules.DERIVED_KINDS),
            ids=list(forgotten | derived),
            id_texts=[str(i) for i in frontier],
        )
        frontier = {r.id for r in rows} - derived - forgotten
        derived |= frontier
    everything = list(forgotten | derived)
    # Profile entries may quote a memory rather than cite its id; very short texts would
    # match anything, so only quotes of some length count.
    texts = [t for t in lifecycle_db.forget_texts(conn, **base, ids=everything) if len(t) >= 12]
    counts = lifecycle_db.forget_counts(conn, tenant_id=tenant_id, ids=everything)
    rederive = lifecycle_db.forget_rederive(conn, **base, forgotten=everything, derived=list(derived))
    profiles = (
        lifecycle_db.forget_profiles(conn, **base, needles=[str(i) for i in everything] + texts) if everything else []
    )
    deleted = lifecycle_db.forget_delete_memories(conn, **base, ids=everything)
    erased = lifecycle_db.forget_delete_episodes(conn, **base, ids=list(episode_ids))
    why = f"right to be forgotten: {request.describe()}"
    events = [(i, why if i in forgotten else f"{why}; derived from forgotten evidence") for i in deleted]
    if events:
        lifecycle_db.lifecycle_insert_events(
            conn,
            **base,
            event="forgotten",
            actor=actor,
            now=now,
            ids=[str(i) for i, _ in events],
            reasons=[r for _, r in events],
            related=[None] * len(events),
        )
    if erased:
        store.event(
            conn,
            **base,
            memory_id=None,
            event="forgotten",
            actor=actor,
            reason=f"{why}; {len(erased)} raw episode(s) erased",
            related_ids=erased,
        )
    return {
        "agent_id": agent_id,
        "request": request.describe(),
        "at": now.isoformat(),
        "memories": {"count": len(forgotten & set(deleted)), "ids": sorted(str(i) for i in forgotten & set(deleted))},
        "derived": {
            "count": len(derived & set(deleted)),
            "ids": sorted(str(i) for i in derived & set(deleted)),
            "policy": "removed; their remaining evidence is re-queued for consolidation",
            "requeued_evidence": len(rederive),
        },
        "episodes": {"count": len(erased), "ids": sorted(str(i) for i in erased)},
        "embeddings": len(deleted),
        "terms": counts.terms,
        "connections": counts.connections,
        "aliases": counts.aliases,
        "profile_versions": len(profiles),
        "not_found": sorted(str(i) for i, r in zip(ids, resolved, strict=True) if r not in forgotten),
    }


def _lock(conn: psycopg.Connection, tenant_id: UUID, agent_id: str) -> None:
    """Wait (up to LOCK_WAIT_S) for the agent's advisory lock: a consolidation pass must not
    write an insight from memories this call is erasing."""
    deadline = LOCK_WAIT_S
    waited = 0.0
    while not db.try_agent_lock(conn, tenant_id, agent_id):
        if waited >= deadline:
            raise errors.Unavailable("the agent is busy (a consolidation or retention pass); retry shortly")
        conn.execute("SELECT pg_sleep(0.1)")
        waited += 0.1
