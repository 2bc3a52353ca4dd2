"""Direct memory writes (recallable when the call returns), reads, changes, deletes."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from memworker import errors, keys
from memworker.api.deps import AgentId, check_metadata, decode_cursor, encode_cursor, principal, read_tx, resources, tx
from memworker.domain import memories, redact
from memworker.fleet import pools
from memworker.lifecycle import governance
from memworker.schemas import Kind, MemoryBatch, MemoryIn, MemoryList, MemoryOut, MemoryPatch, Tier
from memworker.storage import store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["memories"])


def check_text(text: str) -> None:
    """Raises InvalidInput for a blank text or one over the 280-character limit."""
    if len(text) > memories.MAX_TEXT_CHARS:
        raise errors.InvalidInput(
            f"memory text is {len(text)} characters; the limit is {memories.MAX_TEXT_CHARS} "
            "(summarize, don't hoard: send long material as an episode)"
        )
    if not text.strip():
        raise errors.InvalidInput("memory text must not be blank")


def _source_key(agent_id: str, subject: str | None, idempotency_key: str | None) -> str:
    """The source key of a direct write. Source keys are unique per tenant, so the key names the
    agent (a pool by its owner id, 'pool~<name>') and the subject: one agent's or subject's
    idempotency key never answers (or blocks) another's write. No two (agent, subject, key)
    spell one source key: a subject's write is tagged 'api-subject:' and a general one 'api:',
    and '/' is in neither the agent-id nor the subject alphabet, so the first '/'s end the
    agent and the subject whatever the key holds. Without an idempotency key: a random one,
    never seen again."""
    if idempotency_key is None:
        return f"api:{os.urandom(12).hex()}"
    if subject is None:
        return f"api:{agent_id}/{idempotency_key}"
    return f"api-subject:{agent_id}/{subject}/{idempotency_key}"


def _write(request: Request, p: keys.Principal, agent_id: str, bodies: list[MemoryIn]) -> list[memories.Memory]:
    """Direct writes to an agent, or to a pool (agent_id its owner id, memworker/fleet/pools.py)."""
    p.require("memories:write", agent_id)
    res = resources(request)
    if len(bodies) > res.settings.max_batch:
        raise errors.PayloadTooLarge(f"at most {res.settings.max_batch} memories per batch")
    for b in bodies:
        check_text(b.text)
        check_metadata(request, b.metadata)
    vectors: Any = res.embedder.embed([b.text for b in bodies])
    ids: list[UUID] = []
    with tx(request, p) as conn:
        pool = pools.name_of(agent_id)
        if pool is None:
            tenancy.ensure_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        else:
            pools.ensure(conn, tenant_id=p.tenant_id, name=pool)
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        if policy.redact_pii:  # a direct write is redacted like an episode
            bodies, vectors = _redacted(request, bodies, vectors)
        written: list[tuple[UUID, memories.Draft]] = []
        for b, vec in zip(bodies, vectors, strict=True):
            key = _source_key(agent_id, b.subject, b.idempotency_key)
            draft = memories.Draft(
                text=b.text,
                kind=b.kind,
                tier=b.tier,
                salience=b.salience,
                confidence=b.confidence,
                metadata=b.metadata,
                provenance=("api",),
                flags=memories.flags_for(b.text),
                trust="api",
                expires_at=b.expires_at or store.expiry(conn, policy, b.tier),
                subject=b.subject,
            )
            mid, new = store.write_memory(
                conn,
                tenant_id=p.tenant_id,
                agent_id=agent_id,
                draft=draft,
                embedding=vec,
                source_key=key,
                session_id=b.session_id,
                actor="api",
            )
            if new:  # else the same idempotency key: the first write stands
                written.append((mid, draft))
            ids.append(mid)
        # a fact a new memory changes is superseded, or the contradiction queued for review
        governance.check_new(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, written=written, policy=policy, actor="api"
        )
        out = [store.get_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=mid) for mid in ids]
    return out


def _redacted(request: Request, bodies: list[MemoryIn], vectors: Any) -> tuple[list[MemoryIn], list[Any]]:
    """The bodies with text and metadata redacted; a text that changed is embedded again (only
    then: most writes hold nothing to redact, and the policy is read inside the transaction)."""
    out = [
        b.model_copy(update={"text": redact.redact(b.text), "metadata": redact.redact_value(b.metadata)})
        for b in bodies
    ]
    changed = [i for i, (b, r) in enumerate(zip(bodies, out, strict=True)) if b.text != r.text]
    vecs = list(vectors)
    if changed:
        for i, vec in zip(changed, resources(request).embedder.embed([out[i].text for i in changed]), strict=True):
            vecs[i] = vec
    return out, vecs


@router.post("/v1/agents/{agent_id}/memories", status_code=201, response_model=MemoryOut)
def post_memory(
    agent_id: AgentId, body: MemoryIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    return _write(request, p, agent_id, [body])[0].to_json()


@router.post("/v1/agents/{agent_id}/memories/batch", status_code=201, response_model=MemoryList)
def post_memories(
    agent_id: AgentId, body: MemoryBatch, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    return {"memories": [m.to_json() for m in _write(request, p, agent_id, body.memories)]}


@router.get("/v1/agents/{agent_id}/memories", response_model=MemoryList)
def list_memories(
    agent_id: AgentId,
    request: Request,
    tier: Tier | None = None,
    kind: Kind | None = None,
    session_id: str | None = Query(None, alias="session", max_length=128, pattern=r"^[^\x00]*$"),
    metadata: str | None = Query(
        None, description='a JSON object: only memories whose metadata contains it (jsonb @>), e.g. {"project": "x"}'
    ),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = None,
    subject: str | None = Query(
        None, pattern=memories.SUBJECT_PATTERN, description="only this subject's memories (default: every memory)"
    ),
    p: keys.Principal = Depends(principal),
) -> dict[str, Any]:
    p.require("memories:read", agent_id)
    after = decode_cursor(cursor) if cursor else None
    contains = _metadata_filter(request, metadata) if metadata is not None else None
    with read_tx(request, p, agent_id) as conn:  # a replica's, when there are some
        tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        items, nxt = memory_page(
            conn,
            p.tenant_id,
            agent_id,
            limit=limit,
            after=after,
            subject=subject,
            tier=tier,
            kind=kind,
            session_id=session_id,
            metadata=contains,
        )
    return {"memories": [m.to_json() for m in items], "next_cursor": nxt}


def memory_page(
    conn: Conn,
    tenant_id: UUID,
    owner: str,
    *,
    limit: int,
    after: tuple[datetime, UUID] | None,
    subject: str | None,
    tier: str | None = None,
    kind: str | None = None,
    session_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[list[memories.Memory], str | None]:
    """One page of an owner's (an agent's or a pool's) memories, newest first, and the cursor
    of the next page: None when this page is not full, so no page follows."""
    items = store.list_memories(
        conn,
        tenant_id=tenant_id,
        agent_id=owner,
        tier=tier,
        kind=kind,
        session_id=session_id,
        metadata=metadata,
        limit=limit,
        after=after,
        subject=subject,
    )
    nxt = encode_cursor(items[-1].created_at, items[-1].id) if len(items) == limit else None
    return items, nxt


def _metadata_filter(request: Request, raw: str) -> dict[str, Any]:
    """The list route's metadata filter: a JSON object, within the same depth and size limits
    as the metadata it is matched against (InvalidInput otherwise)."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise errors.InvalidInput(f"metadata filter: not JSON ({exc})") from exc
    except RecursionError as exc:  # '[[[[...' deeper than the parser goes: too deep for any limit
        raise errors.InvalidInput("metadata filter: nested too deeply") from exc
    if not isinstance(value, dict):
        raise errors.InvalidInput("metadata filter: must be a JSON object")
    check_metadata(request, value, "metadata filter")
    return value


@router.get("/v1/agents/{agent_id}/memories/{memory_id}", response_model=MemoryOut)
def get_memory(
    agent_id: AgentId, memory_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    p.require("memories:read", agent_id)
    with read_tx(request, p, agent_id) as conn:  # a merged-away id resolves to its survivor
        memory_id = governance.resolve(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)
        return store.get_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id).to_json()


@router.patch("/v1/agents/{agent_id}/memories/{memory_id}", response_model=MemoryOut)
def patch_memory(
    agent_id: AgentId, memory_id: UUID, body: MemoryPatch, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    p.require("memories:write", agent_id)
    # null clears expires_at; for every other field it means "no change"
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k == "expires_at"}
    if not changes:
        raise errors.InvalidInput("nothing to change")
    check_metadata(request, changes.get("metadata"))
    vec = None
    if "text" in changes:
        check_text(changes["text"])
        vec = resources(request).embedder.embed([changes["text"]])[0]
    with tx(request, p) as conn:
        if tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id).redact_pii:  # like a write
            raw = changes.get("text")
            changes.update({k: redact.redact_value(changes[k]) for k in ("text", "metadata") if k in changes})
            if raw is not None and changes["text"] != raw:
                vec = resources(request).embedder.embed([changes["text"]])[0]
        if "text" in changes:
            changes["flags"] = list(memories.flags_for(changes["text"]))
        return store.update_memory(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id, changes=changes, embedding=vec
        ).to_json()


@router.delete("/v1/agents/{agent_id}/memories/{memory_id}", status_code=204)
def delete_memory(
    agent_id: AgentId, memory_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> Response:
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        store.delete_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)
        # its copies in shared pools go with it
        pools.forget_copies(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_ids=[memory_id])
        pools.forget_proposals(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_ids=[memory_id])
    return Response(status_code=204)
