"""Sessions: the stored side of working memory (memworker/sessions/working.py), execution plans
(memworker/sessions/plans.py), context use and the context flush. Everything lives in the
session's row (sql/0004_sessions.sql), changed under its row lock, so a plan and its
progress survive any process dying: what an answer confirmed is committed.

Context flush: the client reports how full its context window is (a share, or tokens), or
memworker estimates it as (transcript tokens stored for the session since the last flush +
the last context built) / the window. At or above policy.context_flush_at the session's
log not yet in long-term memory (working memory and plan changes since the last flush; the
transcript's episodes are reflected one by one already) is written as an episode and so
distilled by the reflective write. A flush disarms until the use drops below the threshold
again, so a client that keeps reporting 75 % is not flushed on every call."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker import errors
from memworker.domain import memories, redact
from memworker.domain.policy import Policy
from memworker.ingest import intake
from memworker.lifecycle import needles
from memworker.schemas import ContextUse, SessionOut, SessionUsage
from memworker.sessions import plans, working
from memworker.sessions.statuses import SessionStatus
from memworker.storage import sessions_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

SESSION_ID = memories.AGENT_ID  # the same alphabet as agent ids: safe in paths


def now() -> datetime:
    return datetime.now(UTC)


def create(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str | None,
    goal: str | None,
    window_tokens: int | None,
    metadata: dict[str, Any],
    subject: str | None = None,
) -> tuple[sessions_db.Session, bool]:
    """A new open session (the agent is created on first use); (row, created). An existing
    session_id returns that session unchanged with created False, unless `subject` is given
    and that session is not the subject's: Forbidden (the caller acts for that subject)."""
    sid = session_id or f"s-{uuid.uuid4().hex[:16]}"
    if not SESSION_ID.match(sid):
        raise errors.InvalidInput(
            "session_id must be 1-128 letters, digits and . _ : @ -, starting with a letter or digit"
        )
    tenancy.ensure_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id).redact_pii:  # stored redacted, like an episode
        goal = redact.redact(goal) if goal else goal
        metadata = redact.redact_value(metadata)
    doc = working.empty()
    if goal:
        doc["goal"], doc["goal_seq"] = " ".join(goal.split()), 1
    row = sessions_db.insert(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=sid,
        metadata=metadata,
        working=doc,
        window_tokens=window_tokens,
        revision=1 if goal else 0,
        subject=subject,  # its context calls recall for this subject; its flushes are about it
    )
    if row is not None:
        return row, True
    return load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=sid, subject=subject), False


def load(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    lock: bool = False,
    open_only: bool = False,
    subject: str | None = None,
) -> sessions_db.Session:
    """The session row. Raises NotFound (also for another tenant's or agent's session), and
    Conflict when open_only and the session is archived. `subject`: the subject the caller
    acts for; a session that is not that subject's (another subject's, or a general one) is
    Forbidden, since session ids are the caller's own and easy to guess."""
    get = sessions_db.get_locked if lock else sessions_db.get
    row = get(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    if row is None:
        raise errors.NotFound("session not found")
    if subject is not None and row.subject != subject:
        raise errors.Forbidden(
            f"session {session_id} is not subject {subject!r}'s: acting for it, only its sessions are reached"
        )
    if open_only and row.status != SessionStatus.OPEN:
        raise errors.Conflict(f"session {session_id} is archived; POST .../restore to reopen it")
    return row


def load_open(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None = None
) -> sessions_db.Session:
    """The session row locked for a change, which only an open session takes: load with
    lock and open_only (NotFound, Forbidden when not `subject`'s, Conflict when archived)."""
    return load(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, lock=True, open_only=True, subject=subject
    )


def summary(row: sessions_db.Session, policy: Policy) -> SessionOut:
    """What GET .../sessions/{id} answers."""
    doc = working.normalised(row.working)
    return {
        "session_id": row.id,
        "agent_id": row.agent_id,
        "status": row.status,
        "metadata": row.metadata,
        "subject": row.subject,
        "goal": doc["goal"],
        "intent": doc["intent"],
        "revision": row.revision,
        "working_items": len(doc["items"]),
        "plan": plans.resume(row.plan) if row.plan else None,
        "usage": usage_view(row, policy),
        "archives": row.archive_count,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
        "archived_at": row.archived_at.isoformat() if row.archived_at else None,
        "restored_at": row.restored_at.isoformat() if row.restored_at else None,
    }


def patch_working(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    patch: working.Patch,
    expected_revision: int | None,
    policy: Policy,
    subject: str | None = None,
) -> tuple[sessions_db.Session, working.Report]:
    """Apply a working-memory change under the session lock; (new row, report). Raises
    NotFound, Forbidden (not `subject`'s, see load), Conflict (archived, or revision moved
    on), InvalidInput."""
    row = load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    _check_revision(row, expected_revision)
    for item in patch.add:
        if item.memory_id is not None:
            store.get_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=_uuid(item.memory_id))
    revision = row.revision + 1
    doc, report = working.apply(
        row.working,
        redacted(patch) if policy.redact_pii else patch,
        revision=revision,
        now=now(),
        max_items=policy.working_max_items,
        prune_to=policy.working_prune_to,
    )
    saved = sessions_db.save_working(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        working=doc,
        revision=revision,
    )
    assert saved is not None
    return saved, report


def redacted(patch: working.Patch) -> working.Patch:
    """The patch with goal, intent and item texts redacted (policy redact_pii): the
    working memory, its flushes and the session's archives then never hold the raw values."""

    def text(value: Any) -> Any:
        return redact.redact(value) if isinstance(value, str) else value

    return dataclasses.replace(
        patch,
        goal=text(patch.goal),
        intent=text(patch.intent),
        add=tuple(dataclasses.replace(i, text=text(i.text)) for i in patch.add),
    )


def put_plan(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, spec: dict[str, Any], subject: str | None = None
) -> sessions_db.Session:
    """Replace the session's plan (keeping the progress of steps whose ids stay); the new row."""
    row = load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    revision = row.revision + 1
    plan = plans.build(spec, old=row.plan, now=now())
    plan["revision"] = revision
    return _save_plan(conn, tenant_id, agent_id, session_id, plan, revision)


def patch_step(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    step_id: str,
    patch: plans.StepPatch,
    expected_revision: int | None,
    subject: str | None = None,
) -> sessions_db.Session:
    """Change one step's status, progress or output; the new row. Raises NotFound (no plan,
    no such step), Forbidden (not `subject`'s), Conflict, InvalidInput."""
    row = load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    _check_revision(row, expected_revision)
    if not row.plan:
        raise errors.NotFound("this session has no plan; PUT .../plan first")
    plan = plans.patch_step(row.plan, step_id, patch, now=now())
    if plan == row.plan:  # the step already says so: nothing saved, no new revision
        return row
    revision = row.revision + 1
    plan["revision"] = revision
    return _save_plan(conn, tenant_id, agent_id, session_id, plan, revision)


def _save_plan(
    conn: Conn, tenant_id: UUID, agent_id: str, session_id: str, plan: plans.Plan, revision: int
) -> sessions_db.Session:
    saved = sessions_db.save_plan(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        plan=plan,
        revision=revision,
    )
    assert saved is not None
    return saved


def _check_revision(row: sessions_db.Session, expected: int | None) -> None:
    if expected is not None and expected != row.revision:
        raise errors.Conflict(f"session revision is {row.revision}, not {expected}: re-read and retry")


def _uuid(value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise errors.InvalidInput(f"memory_id {value!r} is not a uuid") from None


# --- context use and the flush --------------------------------------------------------------


@dataclass(frozen=True)
class Use:
    """Context use reported by the client: a share of the window, or tokens."""

    share: float | None = None
    used_tokens: int | None = None
    window_tokens: int | None = None

    @property
    def given(self) -> bool:
        return self.share is not None or self.used_tokens is not None


def window_of(row: sessions_db.Session, policy: Policy, reported: Use | None = None) -> int:
    return int((reported.window_tokens if reported else None) or row.window_tokens or policy.session_window_tokens)


def measure(
    row: sessions_db.Session, policy: Policy, reported: Use | None, context_tokens: int | None
) -> tuple[float, str]:
    """(share of the window in use, 'reported' | 'estimated')."""
    window = window_of(row, policy, reported)
    if reported is not None and reported.share is not None:
        return float(reported.share), "reported"
    if reported is not None and reported.used_tokens is not None:
        return reported.used_tokens / window, "reported"
    last = row.last_context_tokens if context_tokens is None else context_tokens
    return (row.log_tokens + last) / window, "estimated"


def usage_view(row: sessions_db.Session, policy: Policy) -> SessionUsage:
    share, _ = measure(row, policy, None, None)
    return {
        "log_tokens": row.log_tokens,
        "last_context_tokens": row.last_context_tokens,
        "window_tokens": window_of(row, policy),
        "estimated_use": round(share, 4),
        "reported_use": row.reported_used,
        "flush_at": policy.context_flush_at,
        "flush_armed": row.flush_armed,
        "flush_count": row.flush_count,
        "flushed_at": row.flushed_at.isoformat() if row.flushed_at else None,
        "last_flush_episode_id": str(row.last_flush_episode_id) if row.last_flush_episode_id else None,
    }


def record_use(
    conn: Conn,
    row: sessions_db.Session,
    *,
    policy: Policy,
    reported: Use | None,
    context_tokens: int | None,
    may_flush: bool = True,
) -> tuple[ContextUse, UUID | None]:
    """Store the use (and the last context's size), flush when due and may_flush (a caller
    without memories:write only counts: the session stays armed, and the next call by a key
    that may write flushes). The row must be locked. Returns (what happened, the flush episode
    to publish or None)."""
    share, source = measure(row, policy, reported, context_tokens)
    threshold = policy.context_flush_at
    info: ContextUse = {
        "use": round(share, 4),
        "source": source,
        "threshold": threshold,
        "window_tokens": window_of(row, policy, reported),
        "flushed": False,
        "episode_id": None,
        "reason": "below threshold",
    }
    armed = row.flush_armed or share < threshold  # dropping below the threshold re-arms
    sessions_db.record_use(
        conn,
        tenant_id=row.tenant_id,
        agent_id=row.agent_id,
        session_id=row.id,
        context_tokens=context_tokens,
        reported=share if source == "reported" else None,
        window_tokens=reported.window_tokens if reported else None,
        armed=armed,
    )
    if share < threshold:
        return info, None
    if not armed:
        info["reason"] = "already flushed at this level; waiting for use to drop below the threshold"
        return info, None
    if not may_flush:
        info["reason"] = "flush due, but this key lacks memories:write; the next call by a key that may write flushes"
        return info, None
    episode_id = flush(conn, row, share=share)
    info["flushed"] = True
    info["episode_id"] = str(episode_id) if episode_id else None
    info["reason"] = "distilled" if episode_id else "nothing new since the last flush"
    return info, episode_id


def flush(conn: Conn, row: sessions_db.Session, *, share: float) -> UUID | None:
    """Write the session's log since the last flush as an episode (the reflective write
    distils it) and reset the estimate. Returns the new episode id, or None when nothing
    changed since the last flush."""
    since = row.flushed_revision
    changed = working.changed_since(row.working, since)
    lines = working.render_lines(changed)
    if row.plan and int(row.plan.get("revision", 0)) > since:
        lines += plans.render_lines(row.plan)
    episode_id = None
    n = row.flush_count + 1
    if lines:
        ((episode_id, _),) = intake.accept(
            conn,
            tenant_id=row.tenant_id,
            agent_id=row.agent_id,
            episodes=[
                intake.NewEpisode(
                    "\n".join(lines),
                    session_id=row.id,
                    idempotency_key=f"session-flush:{row.id}:{n}:{row.revision}",
                    metadata={"source": "context_flush", "session_id": row.id, "flush": n, "use": round(share, 4)},
                    subject=row.subject,
                )
            ],
        )
    sessions_db.mark_flushed(
        conn,
        tenant_id=row.tenant_id,
        agent_id=row.agent_id,
        session_id=row.id,
        revision=row.revision,
        episode_id=episode_id,
    )
    return episode_id


def note_context(conn: Conn, row: sessions_db.Session, *, relevant_items: list[int]) -> None:
    """Working items relevant to a context call count as referenced once more."""
    if relevant_items:
        doc = working.referenced(row.working, relevant_items)
        sessions_db.set_working(conn, tenant_id=row.tenant_id, agent_id=row.agent_id, session_id=row.id, working=doc)


def forget_session(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> dict[str, int]:
    """Delete a session with its working memory, plan, context-call log, archives and items
    (cascade), and the webhook deliveries that mention it. Called by forget
    (memworker/erase/forget.py), which erases the session's episodes and memories."""
    counts = sessions_db.cascade_counts(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    deliveries = sessions_db.delete_deliveries(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    gone = sessions_db.delete(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    return {
        "sessions": gone,
        "context_calls": counts.calls,
        "archives": counts.archives,
        "items": counts.items,
        "webhook_deliveries": deliveries,
    }


def scrub_sessions(conn: Conn, *, tenant_id: UUID, agent_id: str, found: needles.Needles) -> dict[str, int]:
    """Take the needles' texts out of every session of the agent that holds them, for
    forget: working-memory lines and goal (working.scrub), plan texts (plans.scrub) and
    metadata strings are rewritten under the row lock with a new revision; logged context
    calls whose query holds one are deleted, and so are session items holding one in any
    string (memworker/sessions/items.py); webhook deliveries not yet pruned (a pre_turn
    payload carries the query) have those strings replaced. Returns counts per place."""
    out = {"sessions": 0, "working": 0, "plan": 0, "metadata": 0, "context_calls": 0, "items": 0}
    out["webhook_deliveries"] = 0
    if not found:
        return out
    terms = list(found.terms)
    for row in sessions_db.with_text(conn, tenant_id=tenant_id, agent_id=agent_id, needles=terms):
        doc, n_working = working.scrub(row.working, found.found_in)
        plan, n_plan = plans.scrub(row.plan, found.found_in)
        meta, n_meta = found.scrub(row.metadata)
        if not n_working + n_plan + n_meta:
            continue
        sessions_db.save_scrubbed(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            session_id=row.id,
            working=doc if n_working else row.working,
            plan=plan if n_plan else row.plan,
            metadata=meta,
        )
        out["sessions"] += 1
        out["working"] += n_working
        out["plan"] += n_plan
        out["metadata"] += n_meta
    out["context_calls"] = sessions_db.context_calls_scrub(conn, tenant_id=tenant_id, agent_id=agent_id, needles=terms)
    out["items"] = sessions_db.items_scrub(conn, tenant_id=tenant_id, agent_id=agent_id, needles=terms)
    for delivery in sessions_db.deliveries_with_text(conn, tenant_id=tenant_id, agent_id=agent_id, needles=terms):
        clean, n = found.scrub(delivery.payload)
        if n:
            sessions_db.delivery_scrubbed(conn, tenant_id=tenant_id, delivery_id=delivery.id, payload=Jsonb(clean))
            out["webhook_deliveries"] += 1
    return out
