"""Sessions over HTTP: sessions and their working memory, execution plans, raw items, the
runtime context and context use (the flush). Archives are in archives.py, webhooks in hooks.py."""

from __future__ import annotations

import logging
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import Field

from memworker import errors, keys
from memworker.api.deps import (
    AgentId,
    check_metadata,
    client_lsn,
    principal,
    publisher,
    reads,
    resources,
    tx,
)
from memworker.domain import memories
from memworker.models import budget
from memworker.recall import hybrid as recall
from memworker.schemas import (
    MAX_QUERY_CHARS,
    PG_INT_MAX,
    ContextCalls,
    ContextOut,
    ContextUse,
    PlanOut,
    SessionItemList,
    SessionItemPopped,
    SessionItemsAdded,
    SessionItemsCleared,
    SessionItemsIn,
    SessionList,
    SessionOut,
    Strict,
    WorkingOut,
    subject_field,
)
from memworker.sessions import items, plans, service, working
from memworker.sessions.statuses import SessionStatus, StepStatus
from memworker.sessions.working import ItemKind

logger = logging.getLogger(__name__)
router = APIRouter(tags=["sessions"])

SessionId = Annotated[str, Path(pattern=memories.AGENT_ID.pattern, max_length=128)]
StepId = Annotated[str, Path(pattern=plans.ID.pattern, max_length=64)]
ItemId = Annotated[int, Field(ge=1, le=PG_INT_MAX)]  # a working item's id (working.py numbers them from 1)
SESSION_PATTERN = memories.AGENT_ID.pattern
# Whom the caller acts for: a session that is not that subject's is refused (session.load).
ActingSubject = Annotated[
    str | None,
    Query(
        pattern=memories.SUBJECT_PATTERN,
        description="the subject the caller acts for: another subject's session, or a general one, is 403",
    ),
]


class SessionIn(Strict):
    session_id: str | None = Field(default=None, pattern=SESSION_PATTERN, max_length=128)
    goal: str | None = Field(default=None, min_length=1, max_length=working.MAX_TEXT)
    context_window_tokens: int | None = Field(default=None, ge=256, le=10_000_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    subject: str | None = subject_field()  # an existing session_id must be this subject's (else 403)


class WorkingItemIn(Strict):
    kind: ItemKind
    text: str | None = Field(default=None, min_length=1, max_length=working.MAX_TEXT)
    memory_id: UUID | None = None


class WorkingPatchIn(Strict):
    goal: str | None = Field(default=None, max_length=working.MAX_TEXT)  # null clears it
    intent: str | None = Field(default=None, max_length=working.MAX_TEXT)
    add: list[WorkingItemIn] = Field(default_factory=list, max_length=100)
    remove: list[ItemId] = Field(default_factory=list, max_length=500)
    touch: list[ItemId] = Field(default_factory=list, max_length=500)
    expected_revision: int | None = Field(default=None, ge=0, le=PG_INT_MAX)


class StepIn(Strict):
    id: str | None = Field(default=None, pattern=plans.ID.pattern)
    title: str = Field(min_length=1, max_length=500)
    status: StepStatus | None = None
    progress: int | None = Field(default=None, ge=0, le=100)
    output: str | None = Field(default=None, max_length=plans.MAX_OUTPUT)
    note: str | None = Field(default=None, max_length=plans.MAX_OUTPUT)


class MilestoneIn(Strict):
    id: str | None = Field(default=None, pattern=plans.ID.pattern)
    title: str = Field(min_length=1, max_length=500)
    steps: list[StepIn] = Field(min_length=1, max_length=plans.MAX_STEPS)


class PlanIn(Strict):
    title: str | None = Field(default=None, min_length=1, max_length=500)
    milestones: list[MilestoneIn] = Field(min_length=1, max_length=plans.MAX_MILESTONES)


class StepPatchIn(Strict):
    status: StepStatus | None = None
    progress: int | None = Field(default=None, ge=0, le=100)
    output: str | None = Field(default=None, max_length=plans.MAX_OUTPUT)
    note: str | None = Field(default=None, max_length=plans.MAX_OUTPUT)
    expected_revision: int | None = Field(default=None, ge=0, le=PG_INT_MAX)


class UsageIn(Strict):
    context_used: float | None = Field(default=None, ge=0, le=10)  # share of the window in use
    used_tokens: int | None = Field(default=None, ge=0, le=PG_INT_MAX)
    window_tokens: int | None = Field(default=None, ge=1, le=10_000_000)


class ContextIn(UsageIn):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    session_id: str | None = Field(default=None, pattern=SESSION_PATTERN, max_length=128)
    max_tokens: int | None = Field(default=None, ge=16, le=1_000_000)
    k: int | None = Field(default=None, ge=1, le=100)
    # default: the session's subject; given with a session_id, the session must be its (else 403)
    subject: str | None = subject_field()


def _use(body: UsageIn) -> service.Use | None:
    use = service.Use(body.context_used, body.used_tokens, body.window_tokens)
    return use if use.given else None


def after_commit(request: Request, tenant_id: UUID, episode_id: UUID | None, deliveries: list[UUID]) -> None:
    """Publish what the committed transaction created. Both are durable rows already: a lost
    message is re-sent by the reconciler (episodes) or the webhook sweep (deliveries)."""
    try:
        if episode_id is not None:
            publisher(request).ingest(tenant_id, [episode_id])
        if deliveries:
            publisher(request).deliver_webhooks(tenant_id, deliveries)
    except Exception as exc:  # the request's edge: its work is committed; record and move on
        logger.warning("publish after commit failed (the sweeps will send it): %s", exc)


# --- sessions and working memory -----------------------------------------------------------


@router.post("/v1/agents/{agent_id}/sessions", status_code=201, response_model=SessionOut)
def post_session(
    agent_id: AgentId,
    request: Request,
    response: Response,
    body: SessionIn | None = None,
    p: keys.Principal = Depends(principal),
) -> SessionOut:
    """Open a session; an existing session_id answers 200 with that session unchanged."""
    p.require("memories:write", agent_id)
    body = body or SessionIn()
    check_metadata(request, body.metadata)
    with tx(request, p) as conn:
        out = service.open_session(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            session_id=body.session_id,
            goal=body.goal,
            window_tokens=body.context_window_tokens,
            metadata=body.metadata,
            subject=body.subject,
        )
    if not out.get("created"):
        response.status_code = 200
    return out


@router.get("/v1/agents/{agent_id}/sessions", response_model=SessionList)
def list_sessions(
    agent_id: AgentId,
    request: Request,
    status: SessionStatus | None = None,
    limit: int = Query(50, ge=1, le=500),
    p: keys.Principal = Depends(principal),
) -> SessionList:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.sessions(conn, tenant_id=p.tenant_id, agent_id=agent_id, status=status, limit=limit)


@router.get("/v1/agents/{agent_id}/sessions/{session_id}", response_model=SessionOut)
def get_session(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> SessionOut:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.get_session(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject
        )


@router.get("/v1/agents/{agent_id}/sessions/{session_id}/working", response_model=WorkingOut)
def get_working(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> WorkingOut:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.get_working(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject
        )


@router.patch("/v1/agents/{agent_id}/sessions/{session_id}/working", response_model=WorkingOut)
def patch_working(
    agent_id: AgentId,
    session_id: SessionId,
    body: WorkingPatchIn,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> WorkingOut:
    """Set goal or intent, add (a restated item is referenced once more), remove or touch items."""
    p.require("memories:write", agent_id)
    fields = body.model_fields_set
    if not fields - {"expected_revision"}:
        raise errors.InvalidInput("nothing to change: give goal, intent, add, remove or touch")
    patch = working.Patch(
        goal=body.goal if "goal" in fields else working.UNSET,
        intent=body.intent if "intent" in fields else working.UNSET,
        add=tuple(working.NewItem(a.kind, a.text, str(a.memory_id) if a.memory_id else None) for a in body.add),
        remove=tuple(body.remove),
        touch=tuple(body.touch),
    )
    with tx(request, p) as conn:
        return service.change_working(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            session_id=session_id,
            patch=patch,
            expected_revision=body.expected_revision,
            subject=subject,
        )


# --- plans ---------------------------------------------------------------------------------


@router.put("/v1/agents/{agent_id}/sessions/{session_id}/plan", response_model=PlanOut)
def put_plan(
    agent_id: AgentId,
    session_id: SessionId,
    body: PlanIn,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> PlanOut:
    p.require("memories:write", agent_id)
    spec = body.model_dump(exclude_unset=True)
    with tx(request, p) as conn:
        return service.replace_plan(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, spec=spec, subject=subject
        )


@router.get("/v1/agents/{agent_id}/sessions/{session_id}/plan", response_model=PlanOut)
def get_plan(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> PlanOut:
    """The plan with each milestone's status and progress, and `resume`: the last completed
    milestone and the next step."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.get_plan(conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)


@router.patch("/v1/agents/{agent_id}/sessions/{session_id}/plan/steps/{step_id}", response_model=PlanOut)
def patch_step(
    agent_id: AgentId,
    session_id: SessionId,
    step_id: StepId,
    body: StepPatchIn,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> PlanOut:
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        return service.change_step(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            session_id=session_id,
            step_id=step_id,
            patch=plans.StepPatch(body.status, body.progress, body.output, body.note),
            expected_revision=body.expected_revision,
            subject=subject,
        )


# --- session items: a framework's raw conversation log ---------------------------------------


@router.post("/v1/agents/{agent_id}/sessions/{session_id}/items", status_code=201, response_model=SessionItemsAdded)
def post_items(
    agent_id: AgentId,
    session_id: SessionId,
    body: SessionItemsIn,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> SessionItemsAdded:
    """Append items (JSON objects, kept as given) to the session's log, after its last one;
    the positions they took. Never recalled or distilled (docs/sessions.md, "Session items")."""
    p.require("memories:write", agent_id)
    items.check(body.items)  # before the transaction: an oversized item changes nothing
    with tx(request, p) as conn:
        return service.add_items(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, new=body.items, subject=subject
        )


@router.get("/v1/agents/{agent_id}/sessions/{session_id}/items", response_model=SessionItemList)
def get_items(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    limit: int | None = Query(None, ge=1, le=PG_INT_MAX, description="the last N items; absent: every item"),
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> SessionItemList:
    """The session's items, oldest first (with `limit`, the last N of them); an archived
    session's too."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.list_items(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, limit=limit, subject=subject
        )


@router.delete("/v1/agents/{agent_id}/sessions/{session_id}/items/last", response_model=SessionItemPopped)
def pop_item(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> SessionItemPopped:
    """Delete and answer the session's last item; item and position null when it has none."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        return service.pop_item(conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)


@router.delete("/v1/agents/{agent_id}/sessions/{session_id}/items", response_model=SessionItemsCleared)
def clear_items(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> SessionItemsCleared:
    """Delete every item of the session; how many went."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        return service.clear_items(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject
        )


# --- runtime context and context use --------------------------------------------------------


@router.post("/v1/agents/{agent_id}/context", response_model=ContextOut)
def post_context(
    agent_id: AgentId, body: ContextIn, request: Request, p: keys.Principal = Depends(principal)
) -> ContextOut:
    """Profile, working memory, plan progress and recalled memories packed under max_tokens."""
    p.require("memories:read", agent_id)
    res = resources(request)
    count = budget.counter(res.settings.embedding_model)
    # the query embedded before the transaction: no connection waits on the model
    probe = recall.Probe(res.query_embedder.embed_one(body.query), res.recall_stats)
    router, gathered = reads(request), None
    if router is not None and body.session_id is None:  # its reads on a replica, its writes below
        gathered = router.read(
            p.tenant_id,
            lambda conn: service.gather_sessionless(
                conn, probe, tenant_id=p.tenant_id, agent_id=agent_id, query=body.query, k=body.k, subject=body.subject
            ),
            agent_id=agent_id,
            client_lsn=client_lsn(request),
        )
    with tx(request, p) as conn:
        built = service.build_context(
            conn,
            probe,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            query=body.query,
            session_id=body.session_id,
            k=body.k,
            max_tokens=body.max_tokens,
            reported=_use(body),
            count=count,
            may_flush="memories:write" in p.scopes,  # a read-only key never causes a write
            subject=body.subject,
            gathered=gathered,
        )
    if router is not None and gathered is not None:
        request.app.state.bumps.add(p.tenant_id, built.memory_ids)
    after_commit(request, p.tenant_id, built.episode_id, built.deliveries)
    return built.answer


@router.post("/v1/agents/{agent_id}/sessions/{session_id}/usage", response_model=ContextUse)
def post_usage(
    agent_id: AgentId,
    session_id: SessionId,
    body: UsageIn,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> ContextUse:
    """Report how full the client's context window is (or, with an empty body, ask for the
    estimate); at or above the policy's flush_at the session log is distilled."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        done = service.report_use(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, reported=_use(body), subject=subject
        )
    after_commit(request, p.tenant_id, done.episode_id, done.deliveries)
    return done.answer


@router.get("/v1/agents/{agent_id}/sessions/{session_id}/context_calls", response_model=ContextCalls)
def context_calls(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    limit: int = Query(50, ge=1, le=1000),
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> ContextCalls:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.context_calls(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, limit=limit, subject=subject
        )
