"""The HTTP API (/v1): bearer API key -> one tenant, validation, fast writes, recall.

Routes are sync `def`s (Starlette runs them in its threadpool) so the API, the workers and
the CLI share one sync code path."""
from __future__ import annotations

import base64
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from memworker import db, errors, ingest, keys, memories, metrics, recall, runtime, store
from memworker.schemas import EpisodeBatch, EpisodeIn, MemoryBatch, MemoryIn, MemoryPatch, RecallIn
from memworker.settings import Settings

logger = logging.getLogger(__name__)

Publish = Callable[[UUID, list[UUID]], None]

_STATUS = {errors.NotFound: 404, errors.InvalidInput: 422, errors.Unauthorized: 401,
           errors.Forbidden: 403, errors.Unavailable: 503, errors.PayloadTooLarge: 413}


def celery_publisher(settings: Settings) -> Publish:
    from tasks.celery_app import INGEST, make_celery

    app = make_celery(settings)

    def publish(tenant_id: UUID, episode_ids: list[UUID]) -> None:
        app.send_task("memworker.ingest", args=[str(tenant_id), [str(e) for e in episode_ids]],
                      queue=INGEST)
    return publish


def create_app(settings: Settings | None = None, *, resources: runtime.Resources | None = None,
               publish: Publish | None = None) -> FastAPI:
    """The ASGI app. Without arguments (uvicorn --factory) it reads MEMWORKER_* itself."""
    settings = runtime.resolve(settings or Settings.from_env(os.environ))
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        state["res"] = resources or runtime.build(settings)
        state["publish"] = publish or celery_publisher(settings)
        yield
        if resources is None:
            state["res"].close()

    app = FastAPI(title="memworker", version="0.1.0", lifespan=lifespan,
                  description="Memory service for fleets of LLM agents.")

    def res() -> runtime.Resources:
        return state["res"]  # type: ignore[no-any-return]

    @app.middleware("http")
    async def limits_and_metrics(request: Request, call_next: Any) -> Response:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > settings.max_body_bytes:
            return JSONResponse({"error": f"request body over {settings.max_body_bytes} bytes"}, 413)
        started = time.perf_counter()
        response: Response = await call_next(request)
        route = request.scope.get("route")
        metrics.HTTP_SECONDS.labels(getattr(route, "path", "unmatched"), request.method,
                                    str(response.status_code)).observe(time.perf_counter() - started)
        return response

    for exc_type, code in _STATUS.items():
        app.add_exception_handler(exc_type, _handler(code))
    app.add_exception_handler(RequestValidationError, _validation_handler)

    key_cache = keys.KeyCache(ttl_s=10.0)

    def principal(request: Request) -> keys.Principal:
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            raise errors.Unauthorized("missing api key")
        return key_cache.get(header[7:].strip(), lambda key: keys.authenticate(res().pool, key))

    @contextmanager
    def tx(p: keys.Principal) -> Iterator[psycopg.Connection]:
        with db.tenant_tx(res().pool, p.tenant_id) as conn:
            yield conn

    # --- health and metrics -----------------------------------------------------------

    @app.get("/healthz", tags=["ops"])
    def healthz() -> JSONResponse:
        checks = {"postgres": "ok", "redis": "ok"}
        try:
            with db.system_tx(res().pool) as conn:
                conn.execute("SELECT 1")
        except errors.MemworkerError as exc:
            checks["postgres"] = f"down: {exc}"
        try:
            import redis

            client = redis.Redis.from_url(settings.redis_url or "", socket_timeout=2, socket_connect_timeout=2)
            client.ping()
            client.close()
        except Exception as exc:  # any failure here means 'down', reported, not raised
            checks["redis"] = f"down: {type(exc).__name__}"
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse({"status": "ok" if ok else "unavailable", **checks}, 200 if ok else 503)

    @app.get("/metrics", tags=["ops"])
    def metrics_text() -> Response:
        return Response(generate_latest(metrics.registry()), media_type=CONTENT_TYPE_LATEST)

    # --- episodes ---------------------------------------------------------------------

    def accept(p: keys.Principal, agent_id: str, bodies: list[EpisodeIn]) -> list[tuple[UUID, bool]]:
        p.require("episodes:write", agent_id)
        if len(bodies) > settings.max_batch:
            raise errors.PayloadTooLarge(f"at most {settings.max_batch} episodes per batch")
        eps = []
        for b in bodies:
            if b.messages:
                msgs = [m.model_dump() for m in b.messages]
                content = ingest.render(msgs)
            else:
                msgs, content = None, b.content or ""
            if len(content.encode()) > settings.max_content_bytes:
                raise errors.PayloadTooLarge(f"episode content over {settings.max_content_bytes} bytes")
            eps.append(ingest.EpisodeIn(content, msgs, b.session_id, b.idempotency_key,
                                        b.occurred_at, b.metadata))
        with tx(p) as conn:
            result = ingest.accept(conn, tenant_id=p.tenant_id, agent_id=agent_id, episodes=eps)
        new = [eid for eid, is_new in result if is_new]
        if new:
            try:
                state["publish"](p.tenant_id, new)
                with tx(p) as conn:
                    store.run(conn, "mark_enqueued", tenant_id=p.tenant_id, ids=new)
            except Exception as exc:  # the rows are durable; the reconciler sends them later
                logger.warning("enqueue failed, reconciler will retry: %s", exc)
        metrics.EPISODES.labels("accepted").inc(len(new))
        return result

    @app.post("/v1/agents/{agent_id}/episodes", status_code=202, tags=["episodes"])
    def post_episode(agent_id: str, body: EpisodeIn, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        (eid, is_new), = accept(p, agent_id, [body])
        return {"episode_id": str(eid), "status": "queued", "duplicate": not is_new}

    @app.post("/v1/agents/{agent_id}/episodes/batch", status_code=202, tags=["episodes"])
    def post_episodes(agent_id: str, body: EpisodeBatch, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        result = accept(p, agent_id, body.episodes)
        return {"episodes": [{"episode_id": str(e), "status": "queued", "duplicate": not n}
                             for e, n in result]}

    @app.get("/v1/agents/{agent_id}/episodes/{episode_id}", tags=["episodes"])
    def get_episode(agent_id: str, episode_id: UUID, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:read", agent_id)
        with tx(p) as conn:
            row = store.one(conn, "get_episode", tenant_id=p.tenant_id, agent_id=agent_id, episode_id=episode_id)
        if row is None:
            raise errors.NotFound("episode not found")
        return _episode_json(row)

    @app.post("/v1/agents/{agent_id}/episodes/{episode_id}/replay", status_code=202, tags=["episodes"])
    def replay_episode(agent_id: str, episode_id: UUID, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("episodes:write", agent_id)
        with tx(p) as conn:
            if store.one(conn, "replay_episode", tenant_id=p.tenant_id, agent_id=agent_id,
                         episode_id=episode_id) is None:
                raise errors.NotFound("no dead or failed episode with that id")
        state["publish"](p.tenant_id, [episode_id])
        return {"episode_id": str(episode_id), "status": "queued"}

    @app.get("/v1/episodes", tags=["episodes"])
    def list_episodes(status: str | None = None, agent_id: str | None = None,
                      limit: int = Query(100, ge=1, le=1000),
                      p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:read", agent_id)
        with tx(p) as conn:
            rows = store.all_(conn, "list_episodes", tenant_id=p.tenant_id, agent_id=agent_id,
                              status=status, limit=limit)
        return {"episodes": [_episode_json(r) for r in rows]}

    @app.get("/v1/usage", tags=["episodes"])
    def usage(agent_id: str | None = None, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:read", agent_id)
        with tx(p) as conn:
            rows = store.all_(conn, "usage", tenant_id=p.tenant_id, agent_id=agent_id)
        agents = [{k: (int(v) if isinstance(v, (int, float)) or hasattr(v, "as_integer_ratio") else v)
                   for k, v in r.items()} for r in rows]
        totals = {k: sum(a[k] for a in agents) for k in
                  ("episodes", "stored", "dead", "llm_calls", "tokens_in", "tokens_out", "llm_ms")}
        return {"tenant": totals, "agents": agents}

    # --- memories ---------------------------------------------------------------------

    def write(p: keys.Principal, agent_id: str, bodies: list[MemoryIn]) -> list[memories.Memory]:
        p.require("memories:write", agent_id)
        if len(bodies) > settings.max_batch:
            raise errors.PayloadTooLarge(f"at most {settings.max_batch} memories per batch")
        for b in bodies:
            _check_text(b.text)
        vectors = res().embedder.embed([b.text for b in bodies])
        out = []
        with tx(p) as conn:
            store.ensure_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
            policy = store.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id)
            for b, vec in zip(bodies, vectors, strict=True):
                key = f"api:{b.idempotency_key}" if b.idempotency_key else f"api:{os.urandom(12).hex()}"
                draft = memories.Draft(
                    text=b.text, kind=b.kind, tier=b.tier, salience=b.salience, confidence=b.confidence,
                    metadata=b.metadata, provenance=("api",), flags=memories.flags_for(b.text),
                    expires_at=b.expires_at or store.expiry(conn, policy, b.tier))
                mid = store.insert_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, draft=draft,
                                          embedding=vec, source_key=key, session_id=b.session_id,
                                          actor="api")
                if mid is None:
                    existing = store.one(conn, "memory_by_source_key", tenant_id=p.tenant_id, source_key=key)
                    assert existing is not None
                    mid = existing["id"]
                out.append(store.get_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=mid))
        return out

    @app.post("/v1/agents/{agent_id}/memories", status_code=201, tags=["memories"])
    def post_memory(agent_id: str, body: MemoryIn, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        return write(p, agent_id, [body])[0].to_json()

    @app.post("/v1/agents/{agent_id}/memories/batch", status_code=201, tags=["memories"])
    def post_memories(agent_id: str, body: MemoryBatch, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        return {"memories": [m.to_json() for m in write(p, agent_id, body.memories)]}

    @app.get("/v1/agents/{agent_id}/memories", tags=["memories"])
    def list_memories(agent_id: str, tier: str | None = None, kind: str | None = None,
                      session_id: str | None = Query(None, alias="session"),
                      limit: int = Query(50, ge=1, le=500), cursor: str | None = None,
                      p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:read", agent_id)
        after = _decode_cursor(cursor) if cursor else None
        with tx(p) as conn:
            store.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
            items = store.list_memories(conn, tenant_id=p.tenant_id, agent_id=agent_id, tier=tier,
                                        kind=kind, session_id=session_id, limit=limit, after=after)
        nxt = _encode_cursor(items[-1].created_at, items[-1].id) if len(items) == limit else None
        return {"memories": [m.to_json() for m in items], "next_cursor": nxt}

    @app.get("/v1/agents/{agent_id}/memories/{memory_id}", tags=["memories"])
    def get_memory(agent_id: str, memory_id: UUID, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:read", agent_id)
        with tx(p) as conn:
            return store.get_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id).to_json()

    @app.patch("/v1/agents/{agent_id}/memories/{memory_id}", tags=["memories"])
    def patch_memory(agent_id: str, memory_id: UUID, body: MemoryPatch,
                     p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:write", agent_id)
        changes = body.model_dump(exclude_unset=True)
        if not changes:
            raise errors.InvalidInput("nothing to change")
        vec = None
        if "text" in changes:
            _check_text(changes["text"])
            changes["flags"] = list(memories.flags_for(changes["text"]))
            vec = res().embedder.embed([changes["text"]])[0]
        with tx(p) as conn:
            return store.update_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id,
                                       changes=changes, embedding=vec).to_json()

    @app.delete("/v1/agents/{agent_id}/memories/{memory_id}", status_code=204, tags=["memories"])
    def delete_memory(agent_id: str, memory_id: UUID, p: keys.Principal = Depends(principal)) -> Response:
        p.require("memories:write", agent_id)
        with tx(p) as conn:
            store.delete_memory(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)
        return Response(status_code=204)

    # --- recall -----------------------------------------------------------------------

    @app.post("/v1/agents/{agent_id}/recall", tags=["recall"])
    def post_recall(agent_id: str, body: RecallIn, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
        p.require("memories:read", agent_id)
        started = time.perf_counter()
        q = recall.Query(body.query, body.k, tuple(body.tiers) if body.tiers else None,
                         tuple(body.kinds) if body.kinds else None, body.since, body.until,
                         body.metadata, body.explain)
        q.validate()
        with tx(p) as conn:
            policy = store.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
            hits = recall.recall(conn, res().query_embedder, tenant_id=p.tenant_id, agent_id=agent_id,
                                 query=q, policy=policy)
        took = time.perf_counter() - started
        metrics.RECALL_SECONDS.observe(took)
        return {"memories": hits, "took_ms": round(took * 1000, 3)}

    return app


def _check_text(text: str) -> None:
    if len(text) > memories.MAX_TEXT_CHARS:
        raise errors.InvalidInput(
            f"memory text is {len(text)} characters; the limit is {memories.MAX_TEXT_CHARS} "
            "(summarize, don't hoard: send long material as an episode)")
    if not text.strip():
        raise errors.InvalidInput("memory text must not be blank")


def _episode_json(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: (str(v) if isinstance(v, UUID) else v.isoformat() if isinstance(v, datetime) else v)
           for k, v in row.items()}
    out["episode_id"] = out.pop("id")
    out["memory_ids"] = [str(m) for m in row["memory_ids"]]
    return out


def _encode_cursor(created_at: datetime, memory_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{memory_id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        created, _, mid = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), UUID(mid)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.InvalidInput("invalid cursor") from exc


def _handler(code: int) -> Any:
    async def handle(_: Request, exc: Exception) -> JSONResponse:
        if code == 503:
            return JSONResponse({"error": str(exc)}, code, headers={"Retry-After": "5"})
        return JSONResponse({"error": str(exc)}, code)
    return handle


async def _validation_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = [{"field": ".".join(str(x) for x in e["loc"] if x != "body"), "problem": e["msg"]}
              for e in exc.errors()]
    first = detail[0] if detail else {"field": "", "problem": "invalid request"}
    return JSONResponse({"error": f"{first['field'] or 'body'}: {first['problem']}", "detail": detail}, 422)
