"""Request plumbing shared by every router: the caller's principal, a transaction bound to
its tenant, the process resources, and the JSON helpers."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, cast
from uuid import UUID

import psycopg
from fastapi import Path, Query, Request

from memworker import errors, keys, memories, runtime, schemas
from memworker.storage import db
from memworker.storage.rows import jsonable as jsonable  # the routes' row -> JSON helper

if TYPE_CHECKING:
    from tasks.publish import Publisher

# Every {agent_id} in a path: checked before any query sees it.
AgentId = Annotated[
    str,
    Path(
        pattern=memories.AGENT_ID.pattern,
        max_length=128,
        description="letters, digits and . _ : @ -, starting with a letter or digit",
    ),
]
AgentIdQuery = Annotated[str | None, Query(pattern=memories.AGENT_ID.pattern, max_length=128)]


def resources(request: Request) -> runtime.Resources:
    return cast(runtime.Resources, request.app.state.resources)


def check_metadata(request: Request, value: dict[str, Any] | None, what: str = "metadata") -> None:
    """InvalidInput (422) for a free-form JSON object over this process's depth or size
    limit (MEMWORKER_MAX_METADATA_DEPTH / _BYTES), before anything is written."""
    s = resources(request).settings
    schemas.check_metadata(value, max_depth=s.max_metadata_depth, max_bytes=s.max_metadata_bytes, what=what)


def publisher(request: Request) -> Publisher:
    """The process's task publisher (tasks/publish.py), made when the app starts."""
    return cast("Publisher", request.app.state.publisher)


def client_address(request: Request) -> str:
    """The peer's address as the server saw it (uvicorn's --proxy-headers / --forwarded-allow-ips
    decide whether a trusted proxy's X-Forwarded-For counts); never a header taken on trust."""
    return request.client.host if request.client else "unknown"


def principal(request: Request) -> keys.Principal:
    """The caller, from its bearer key (FastAPI dependency). Raises Unauthorized, or
    RateLimited once the client address has used up its failed authentications (issue 18)."""
    state = request.app.state
    try:
        return _principal(request)
    except errors.Unauthorized:
        state.limiter.failed_auth(client_address(request))  # RateLimited (429) once they run out
        raise


def _principal(request: Request) -> keys.Principal:
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        raise errors.Unauthorized("missing api key")
    res, state = resources(request), request.app.state
    cache: keys.KeyCache = state.key_cache
    key = header[7:].strip()
    p = cache.get(key, lambda k: keys.authenticate(res.pool, k))
    generation = state.limiter.take(str(p.key_id), str(p.tenant_id), client_address(request))
    if generation is not None and generation != state.cache_generation:
        # a key was revoked or a policy changed, in this process or another: drop what this
        # process remembers, and check this key again
        cache.clear()
        res.policies.clear()
        state.cache_generation = generation
        p = cache.get(key, lambda k: keys.authenticate(res.pool, k))
    return p


@contextmanager
def tx(request: Request, p: keys.Principal) -> Iterator[psycopg.Connection]:
    """One transaction bound to the caller's tenant (row-level security applies)."""
    with db.tenant_tx(resources(request).pool, p.tenant_id) as conn:
        yield conn


def encode_cursor(created_at: datetime, item_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{item_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        created, _, item_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), UUID(item_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.InvalidInput("invalid cursor") from exc
