"""Request plumbing shared by every router: the caller's principal, a transaction bound to
its tenant, the process resources, and the JSON helpers."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, cast
from uuid import UUID

from fastapi import Path, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memworker import errors, keys, runtime, schemas
from memworker.domain import memories
from memworker.storage import db, replicas
from memworker.storage.db import Conn
from memworker.storage.rows import jsonable as jsonable  # the routes' row -> JSON helper

if TYPE_CHECKING:
    from tasks.publish import Publisher

WRITE_LSN = "write_lsn"  # request.state: the WAL position of the request's writes (app.WriteLsn answers it)

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


# The OpenAPI security scheme of every operation that takes `principal`, so /openapi.json
# says each needs `Authorization: Bearer <key>` and /docs offers "Authorize". It checks nothing
# (auto_error off): principal does, with the API's own 401 and failed-authentication limit.
BEARER = HTTPBearer(
    scheme_name="bearer",
    bearerFormat="memworker API key",
    description="An API key (`memworker key create`), bound to one tenant, sent as `Authorization: Bearer <key>`.",
    auto_error=False,
)


def principal(
    request: Request, _documented: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None
) -> keys.Principal:
    """The caller, from its bearer key (FastAPI dependency; `_documented` only declares the
    scheme). Raises Unauthorized, or RateLimited once the client address has used up its
    failed authentications."""
    state = request.app.state
    try:
        return _principal(request)
    except errors.Unauthorized:
        state.limiter.failed_auth(client_address(request))  # RateLimited (429) once they run out
        raise


def _principal(request: Request) -> keys.Principal:
    key = keys.bearer_token(request.headers.get("authorization", ""))
    if key is None:
        raise errors.Unauthorized("missing api key")
    res, state = resources(request), request.app.state
    cache: keys.KeyCache = state.key_cache
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
def tx(request: Request, p: keys.Principal) -> Iterator[Conn]:
    """One transaction bound to the caller's tenant (row-level security applies). With
    replicas, a transaction that wrote notes its commit's WAL position for the reads after
    it (the tenant's and the path's agent's, in Redis; the client's, in X-Memworker-LSN)."""
    router = reads(request)
    if router is None:
        with db.tenant_tx(resources(request).pool, p.tenant_id) as conn:
            yield conn
        return
    lsn: list[int] = []
    with replicas.write_tx(resources(request).pool, p.tenant_id, lsn) as conn:
        yield conn
    if lsn:
        router.note_write(p.tenant_id, request.path_params.get("agent_id"), lsn[0])
        setattr(request.state, WRITE_LSN, max(lsn[0], getattr(request.state, WRITE_LSN, 0)))


def reads(request: Request) -> replicas.Reads | None:
    """The process's replica router; None when every read goes to the primary."""
    return cast("replicas.Reads | None", getattr(request.app.state, "reads", None))


@contextmanager
def read_tx(request: Request, p: keys.Principal, agent_id: str | None) -> Iterator[Conn]:
    """A transaction for a read that a replica may serve (lists, single memories, the
    console): on one that has replayed the caller's last write, else on the primary. The
    block only reads. A replica that fails under it answers 503 once (the client retries;
    the replica is skipped from then on); recall retries on the primary itself."""
    router = reads(request)
    if router is None:
        with tx(request, p) as conn:
            yield conn
        return
    with router.read_tx(p.tenant_id, agent_id=agent_id, client_lsn=client_lsn(request)) as conn:
        yield conn


def client_lsn(request: Request) -> int:
    """The WAL position the client last wrote at, from X-Memworker-LSN (0 without one)."""
    header = request.headers.get("x-memworker-lsn")
    return replicas.parse_lsn(header.strip()) if header else 0


def encode_cursor(created_at: datetime, item_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{item_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        created, _, item_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), UUID(item_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.InvalidInput("invalid cursor") from exc
