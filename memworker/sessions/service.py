"""The sessions capability's use cases: sessions and their working memory, plans, raw items,
the runtime context and context use, archives, webhooks and their deliveries, rumination. The
one way in for the API (and so the CLI, its client) and the Celery tasks; each function runs in
the caller's transaction (or opens its own where it takes a pool) and answers a named type.

What a change creates for after the commit (a flush or summary episode to ingest, webhook
deliveries to send) comes back beside its answer (Outcome): the caller publishes it once its
transaction has committed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

from memworker import errors
from memworker.domain import redact
from memworker.models import budget
from memworker.models.budget import Counter
from memworker.recall import hybrid as recall
from memworker.schemas import (
    ArchiveList,
    ArchiveOut,
    ContextCalls,
    ContextOut,
    ContextUse,
    DeliveryList,
    PlanOut,
    Restored,
    SessionItemList,
    SessionItemPopped,
    SessionItemsAdded,
    SessionItemsCleared,
    SessionList,
    SessionOut,
    WebhookList,
    WebhookOut,
    WorkingOut,
)
from memworker.sessions import archive, context, context_call, hooks, items, plans, rumination, session, slots, working
from memworker.sessions.session import Use
from memworker.settings import Settings
from memworker.storage import sessions_db
from memworker.storage.db import Conn, Pool
from memworker.storage.rows import jsonable
from memworker.tenancy import service as tenancy

T = TypeVar("T")
PLAN_TEXTS = frozenset({"title", "output", "note"})  # the free text of a plan, its milestones and steps

MAX_RUMINATING = rumination.MAX_AGENTS  # agents one day's rumination fans out to
Attempt = hooks.Attempt
Slots = slots.TenantSlots

__all__ = ["MAX_RUMINATING", "PLAN_TEXTS", "Attempt", "Outcome", "Slots", "Use"]


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """A use case's answer and what its transaction created to publish after the commit."""

    answer: T
    episode_id: UUID | None = None  # a flush or summary episode to ingest
    deliveries: list[UUID] = field(default_factory=list)  # webhook deliveries to send


# --- sessions and working memory -----------------------------------------------------------


def open_session(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str | None,
    goal: str | None,
    window_tokens: int | None,
    metadata: dict[str, Any],
    subject: str | None,
) -> SessionOut:
    """A new open session, or the existing one unchanged (created false)."""
    row, created = session.create(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        goal=goal,
        window_tokens=window_tokens,
        metadata=metadata,
        subject=subject,
    )
    out = session.summary(row, tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id))
    out["created"] = created
    return out


def sessions(conn: Conn, *, tenant_id: UUID, agent_id: str, status: str | None, limit: int) -> SessionList:
    """The agent's sessions (of one status, unless None), the last updated first."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
    rows = sessions_db.recent(conn, tenant_id=tenant_id, agent_id=agent_id, status=status, limit=limit)
    return {"sessions": [session.summary(r, policy) for r in rows]}


def get_session(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None) -> SessionOut:
    row = session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    return session.summary(row, tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id))


def get_working(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None) -> WorkingOut:
    """An open session's working memory grouped by kind, with its plan's steps."""
    row = session.load(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, open_only=True, subject=subject
    )
    return _working(row)


def change_working(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    patch: working.Patch,
    expected_revision: int | None,
    subject: str | None,
) -> WorkingOut:
    """Apply a working-memory change (redacted when the policy says so); with what changed."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
    row, report = session.patch_working(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        patch=patch,
        expected_revision=expected_revision,
        policy=policy,
        subject=subject,
    )
    out = _working(row)
    out["changes"] = dict(report.to_json())
    return out


def _working(row: sessions_db.Session) -> WorkingOut:
    steps = [
        {"id": s["id"], "title": s["title"], "status": s["status"], "progress": s["progress"]}
        for m in (row.plan or {}).get("milestones", [])
        for s in m["steps"]
    ]
    v = working.view(row.working)
    return {
        "session_id": row.id,
        "status": row.status,
        "revision": row.revision,
        "goal": v["goal"],
        "intent": v["intent"],
        "constraints": v["constraints"],
        "decisions": v["decisions"],
        "open_questions": v["open_questions"],
        "candidates": v["candidates"],
        "items": v["items"],
        "pruned_total": v["pruned_total"],
        "steps": steps,
    }


# --- plans ---------------------------------------------------------------------------------


def replace_plan(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, spec: dict[str, Any], subject: str | None
) -> PlanOut:
    """Replace the session's plan (a PUT body); its texts are redacted when the policy says so,
    so archives, flushes and webhooks then hold no raw value."""
    if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id).redact_pii:
        spec = redact.redact_keys(spec, PLAN_TEXTS)
    row = session.put_plan(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, spec=spec, subject=subject
    )
    return _plan(row)


def get_plan(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None) -> PlanOut:
    """An open session's plan with each milestone's status and progress, and where to resume."""
    row = session.load(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, open_only=True, subject=subject
    )
    return _plan(row)


def change_step(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    step_id: str,
    patch: plans.StepPatch,
    expected_revision: int | None,
    subject: str | None,
) -> PlanOut:
    """Change one step; its output and note are redacted when the policy says so."""
    if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id).redact_pii:
        patch = plans.StepPatch(
            patch.status, patch.progress, *(redact.redact(t) if t else t for t in (patch.output, patch.note))
        )
    row = session.patch_step(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        step_id=step_id,
        patch=patch,
        expected_revision=expected_revision,
        subject=subject,
    )
    return _plan(row)


def _plan(row: sessions_db.Session) -> PlanOut:
    if not row.plan:
        raise errors.NotFound("this session has no plan; PUT .../plan first")
    v = plans.view(row.plan)
    out: PlanOut = {
        "session_id": row.id,
        "revision": v.get("revision", row.revision),  # the plan's own revision, as stored with it
        "milestones": [dict(m) for m in v["milestones"]],
        "resume": v["resume"],
    }
    if "title" in v:
        out["title"] = v["title"]
    if "updated_at" in v:
        out["updated_at"] = v["updated_at"]
    return out


# --- session items -------------------------------------------------------------------------


def add_items(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, new: list[dict[str, Any]], subject: str | None
) -> SessionItemsAdded:
    """Append items after the session's last one; the positions they took."""
    positions = items.append(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, items=new, subject=subject
    )
    return {"session_id": session_id, "positions": positions}


def list_items(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, limit: int | None, subject: str | None
) -> SessionItemList:
    """The session's last `limit` items (None: all), oldest first; an archived session's too."""
    rows = items.listing(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, limit=limit, subject=subject
    )
    return {"session_id": session_id, "items": [items.view(r) for r in rows]}


def pop_item(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None) -> SessionItemPopped:
    """Delete and answer the session's last item; position and item None when it has none."""
    row = items.pop(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    if row is None:
        return {"session_id": session_id, "position": None, "item": None}
    v = items.view(row)
    return {"session_id": session_id, "position": v["position"], "item": v["item"], "created_at": v["created_at"]}


def clear_items(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None
) -> SessionItemsCleared:
    n = items.clear(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    return {"session_id": session_id, "deleted": n}


# --- runtime context and context use --------------------------------------------------------


@dataclass(frozen=True)
class ContextBuilt:
    """A context call's answer, what it created to publish, and the memory ids it packed."""

    answer: ContextOut
    episode_id: UUID | None
    deliveries: list[UUID]
    memory_ids: list[str]


def gather_sessionless(
    conn: Conn, probe: recall.Probe, *, tenant_id: UUID, agent_id: str, query: str, k: int | None, subject: str | None
) -> context.Inputs:
    """The reads of a context call without a session (a replica may serve them)."""
    return context_call.gather_sessionless(
        conn, probe, tenant_id=tenant_id, agent_id=agent_id, query=query, k=k, subject=subject
    )


def build_context(
    conn: Conn,
    probe: recall.Probe,
    *,
    tenant_id: UUID,
    agent_id: str,
    query: str,
    session_id: str | None,
    k: int | None,
    max_tokens: int | None,
    reported: Use | None,
    count: Counter,
    may_flush: bool,
    subject: str | None,
    gathered: context.Inputs | None = None,
) -> ContextBuilt:
    """One turn's runtime context. The query is kept (context-call log, pre_turn webhooks), so
    it is redacted like any stored text when the policy says so."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
    call = context_call.run(
        conn,
        probe,
        tenant_id=tenant_id,
        agent_id=agent_id,
        query=policy.redacted(query),
        session_id=session_id,
        k=k,
        max_tokens=max_tokens,
        reported=reported,
        count=count,
        may_flush=may_flush,
        subject=subject,
        gathered=gathered,
    )
    packed = call.packed
    answer: ContextOut = {
        "context": packed.context,
        "sections": packed.sections,
        "tokens": packed.tokens,
        "max_tokens": call.max_tokens,
        "memory_ids": packed.memory_ids,
        "dropped": packed.dropped_counts(),
        "section_tokens": packed.section_tokens,
        "tokenizer": budget.NAME,
        "context_call_id": call.call_id,
        "usage": call.use,
    }
    return ContextBuilt(answer, call.flush_episode, call.deliveries, packed.memory_ids)


def report_use(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, reported: Use | None, subject: str | None
) -> Outcome[ContextUse]:
    """Record how full the client's window is (None: estimate it); at or above the policy's
    flush_at the session log is distilled (the episode to publish)."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
    row = session.load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    use, episode_id = session.record_use(conn, row, policy=policy, reported=reported, context_tokens=None)
    return Outcome(use, episode_id)


def context_calls(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, limit: int, subject: str | None
) -> ContextCalls:
    """The session's logged context calls, newest first."""
    session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    rows = sessions_db.context_calls_recent(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, limit=limit
    )
    return {"context_calls": [jsonable(asdict(r)) for r in rows]}


# --- archives ------------------------------------------------------------------------------


def archive_session(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None
) -> Outcome[ArchiveOut]:
    """Snapshot, close and distil the session (an archived one answers its latest archive)."""
    out, episode_id, deliveries = archive.archive(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject
    )
    return Outcome(out, episode_id, deliveries)


def restore_session(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, version: int | None, subject: str | None
) -> Restored:
    """Reopen an archived session from its latest (or the given) archive."""
    return archive.restore(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version, subject=subject
    )


def archives(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None) -> ArchiveList:
    return {
        "archives": archive.list_archives(
            conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject
        )
    }


def archive_bytes(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, version: int, subject: str | None
) -> bytes:
    """An archive as stored: gzip-compressed JSONL."""
    return archive.download(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version, subject=subject
    )


# --- webhooks ------------------------------------------------------------------------------


def create_webhook(
    conn: Conn,
    *,
    tenant_id: UUID,
    url: str,
    events: list[str],
    agent_ids: list[str] | None,
    settings: Settings,
    description: str,
) -> WebhookOut:
    """Register a webhook; the answer holds its signing secret, shown this once."""
    row, secret = hooks.create(
        conn,
        tenant_id=tenant_id,
        url=url,
        events=events,
        agent_ids=agent_ids,
        settings=settings,
        description=description,
    )
    out = hooks.public(row)
    out["secret"] = secret
    return out


def webhooks(conn: Conn, *, tenant_id: UUID, visible_to: frozenset[str] | None) -> WebhookList:
    """The tenant's webhooks a key limited to `visible_to` (None: unlimited) may see."""
    rows = sessions_db.webhook_list(conn, tenant_id=tenant_id)
    return {"webhooks": [hooks.public(r) for r in rows if hooks.visible_to(r, visible_to)]}


def delete_webhook(conn: Conn, *, tenant_id: UUID, webhook_id: UUID, visible_to: frozenset[str] | None) -> None:
    """Delete a webhook and its pending and past deliveries; NotFound when the key may not see it."""
    _webhook(conn, tenant_id=tenant_id, webhook_id=webhook_id, visible_to=visible_to)
    sessions_db.webhook_delete(conn, tenant_id=tenant_id, webhook_id=webhook_id)


def deliveries(
    conn: Conn, *, tenant_id: UUID, webhook_id: UUID, visible_to: frozenset[str] | None, limit: int
) -> DeliveryList:
    """The webhook's deliveries, newest first."""
    _webhook(conn, tenant_id=tenant_id, webhook_id=webhook_id, visible_to=visible_to)
    rows = sessions_db.webhook_deliveries(conn, tenant_id=tenant_id, webhook_id=webhook_id, limit=limit)
    return {"deliveries": [jsonable(asdict(r)) for r in rows]}


def _webhook(
    conn: Conn, *, tenant_id: UUID, webhook_id: UUID, visible_to: frozenset[str] | None
) -> sessions_db.Webhook:
    row = sessions_db.webhook_get(conn, tenant_id=tenant_id, webhook_id=webhook_id)
    if row is None or not hooks.visible_to(row, visible_to):
        raise errors.NotFound("webhook not found")
    return row


# --- the workers: webhook deliveries, the post-turn hook, rumination -------------------------


def webhook_slots(settings: Settings) -> Slots:
    """A sender process's per-tenant delivery slots (the caller keeps one per process)."""
    return slots.build(settings)


def deliver_webhook(pool: Pool, settings: Settings, *, tenant_id: UUID, delivery_id: UUID, slots: Slots) -> Attempt:
    """One attempt at one delivery in one of its tenant's slots; the outcome says whether to
    try again and when (retry, busy)."""
    return hooks.deliver(pool, settings, tenant_id=tenant_id, delivery_id=delivery_id, slots=slots)


def deliveries_due(pool: Pool, *, before: datetime) -> list[tuple[UUID, UUID]]:
    """(tenant, delivery) pairs due before `before`, or stuck past their lease: to send again."""
    return hooks.due(pool, before=before)


def prune_deliveries(pool: Pool, *, before: datetime) -> int:
    """Delete the finished deliveries created before `before`; how many went."""
    return hooks.prune(pool, before=before)


# The post-turn hook ingest runs in the transaction that stores an episode (processing.PostTurn):
# the session's transcript estimate grows, post_turn webhooks are queued; the deliveries to send.
episode_stored = hooks.episode_stored


def rumination_day(when: datetime) -> tuple[datetime, datetime]:
    """The day before `when`, [start, end): the window one rumination tick covers."""
    return rumination.day_window(when)


def ruminating_agents(pool: Pool, *, start: datetime, end: datetime) -> list[tuple[UUID, str]]:
    """(tenant, agent) pairs that archived sessions in [start, end) and have rumination on."""
    return rumination.due(pool, start=start, end=end)


def ruminate(pool: Pool, *, tenant_id: UUID, agent_id: str, start: datetime, end: datetime) -> UUID | None:
    """The agent's rumination episode for [start, end) when it is new (to publish), else None."""
    return rumination.ruminate(pool, tenant_id=tenant_id, agent_id=agent_id, start=start, end=end)
