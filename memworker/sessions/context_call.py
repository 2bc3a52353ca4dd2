"""One runtime-context call (the pre-turn step): gather what the agent knows, pack it under
the token budget, and record the call against its session; the route only adapts HTTP to it.

Inside the caller's transaction: the session row is locked, the packed memories' use is
counted, the session's context use recorded (which may ask for a flush episode), the call
logged, and the pre_turn webhook queued as a durable delivery. The caller publishes the flush
episode and the deliveries after its commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from memworker.models.budget import Counter
from memworker.recall import hybrid as recall
from memworker.schemas import ContextUse
from memworker.sessions import context, hooks, session
from memworker.storage import sessions_db
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy


@dataclass
class Call:
    packed: context.Packed
    max_tokens: int
    call_id: str | None = None
    use: ContextUse | None = None
    flush_episode: UUID | None = None  # to publish after the commit
    deliveries: list[UUID] = field(default_factory=list)  # to publish after the commit


def run(
    conn: Conn,
    probe: recall.Probe,
    *,
    tenant_id: UUID,
    agent_id: str,
    query: str,
    session_id: str | None,
    k: int | None,
    max_tokens: int | None,
    reported: session.Use | None,
    count: Counter,
    may_flush: bool = True,
    subject: str | None = None,
    gathered: context.Inputs | None = None,
) -> Call:
    """The context for one turn; NotFound for an unknown agent or session, Conflict for a
    closed session, Forbidden for a session not the named `subject`'s. may_flush False (a key
    without memories:write): the use is counted but a due flush waits for a caller that may
    write. gathered: the inputs of a call without a session, already read on a replica
    (gather_sessionless)."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    row = _session(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    budget = max_tokens or policy.context_max_tokens
    inputs = gathered or context.gather(
        conn,
        probe,
        tenant_id=tenant_id,
        agent_id=agent_id,
        query=query,
        k=k or policy.context_recall_k,
        policy=policy,
        session=row,
        subject=subject if subject is not None else (row.subject if row else None),
    )
    packed = context.build(inputs, query=query, agent_id=agent_id, session_id=session_id, budget=budget, count=count)
    if gathered is None:  # else the caller queues the bumps, as a replica's recall does
        context.bump_used(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=packed.memory_ids)
    call = Call(packed, budget)
    if row is not None:
        relevant = [int(x.ref[1:]) for x in packed.kept if x.ref and x.ref.startswith("w") and x.relevant]
        session.note_context(conn, row, relevant_items=relevant)
        call.use, call.flush_episode = session.record_use(
            conn, row, policy=policy, reported=reported, context_tokens=packed.tokens, may_flush=may_flush
        )
        call.call_id = str(
            sessions_db.context_call_insert(
                conn,
                tenant_id=tenant_id,
                agent_id=agent_id,
                session_id=row.id,
                query=query,
                max_tokens=budget,
                tokens=packed.tokens,
                memory_ids=packed.memory_ids,
                dropped=packed.dropped_counts(),
                sections=packed.section_tokens,
                used=call.use["use"],
            )
        )
    call.deliveries = hooks.emit(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        event="pre_turn",
        session_id=session_id,
        data={
            "query": query,
            "tokens": packed.tokens,
            "max_tokens": budget,
            "memory_ids": packed.memory_ids,
            "dropped": packed.dropped_counts(),
            "context_call_id": call.call_id,
        },
    )
    return call


def _session(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str | None, subject: str | None
) -> sessions_db.Session | None:
    """The call's session, locked and open, or None without one. A caller naming a subject
    acts for it: it recalls that subject's memories and reaches that subject's sessions only."""
    if not session_id:
        return None
    return session.load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)


def gather_sessionless(
    conn: Conn, probe: recall.Probe, *, tenant_id: UUID, agent_id: str, query: str, k: int | None, subject: str | None
) -> context.Inputs:
    """What a context call without a session reads (recall, the profile): only reads, so a
    replica may serve it; run(gathered=...) then does the call's writes on the primary."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    return context.gather(
        conn,
        probe,
        tenant_id=tenant_id,
        agent_id=agent_id,
        query=policy.redacted(query),  # as the route's own call
        k=k or policy.context_recall_k,
        policy=policy,
        session=None,
        subject=subject,
    )
