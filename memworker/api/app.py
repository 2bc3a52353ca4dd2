"""The HTTP API (/v1): the app factory, error mapping, limits, health and metrics. Routes
live in routes_*.py, one router per domain noun.

Routes are sync `def`s (Starlette runs them in its threadpool) so the API, the workers and
the CLI share one sync code path. The hottest one, one agent's recall, is an async route that
hands its sync work to the threadpool itself, once (routes/recall.py)."""

from __future__ import annotations

import hmac
import json
import logging
import math
import os
import time
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException

from memworker import errors, keys, metrics, runtime, tracing
from memworker.api import deps, limits, ratelimit
from memworker.api.console import pages as console
from memworker.api.routes import (
    admin,
    archives,
    consolidation,
    episodes,
    hooks,
    lifecycle,
    memories,
    pools,
    portability,
    proposals,
    recall,
    sessions,
    subjects,
)
from memworker.ingest import overview
from memworker.settings import Settings
from memworker.storage import bumps, db, replicas
from tasks.publish import Publisher

logger = logging.getLogger(__name__)

ROUTERS = [episodes.router, memories.router, recall.router]
ROUTERS.append(consolidation.router)  # sleep
ROUTERS.append(lifecycle.router)  # lifecycle governance
ROUTERS += [sessions.router, archives.router, hooks.router]  # sessions
ROUTERS += [pools.router, proposals.router]  # fleet: shared pools, sleep's proposals to them
ROUTERS.append(portability.router)  # export and import
ROUTERS += [admin.router, subjects.router]  # administration within a tenant: agents, keys, subject requests
_STATUS = {
    errors.NotFound: 404,
    errors.InvalidInput: 422,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.Unavailable: 503,
    errors.PayloadTooLarge: 413,
    errors.Conflict: 409,
}


def create_app(
    settings: Settings | None = None, *, resources: runtime.Resources | None = None, publisher: Publisher | None = None
) -> FastAPI:
    """The ASGI app. Without arguments (uvicorn --factory) it reads MEMWORKER_* itself."""
    settings = runtime.resolve(settings or Settings.from_env(os.environ))

    async def lifespan(app: FastAPI) -> Any:
        _open_state(app, settings, resources, publisher)
        yield
        app.state.bumps.close()
        if app.state.reads is not None:
            app.state.reads.close()
        app.state.redis.close()
        if resources is None:
            app.state.resources.close()

    app = FastAPI(
        title="memworker", version="0.1.0", lifespan=lifespan, description="Memory service for fleets of LLM agents."
    )
    for router in ROUTERS:
        app.include_router(router)
    console.mount(app)  # the operator's console at /console
    _add_error_handlers(app)
    _add_middleware(app, settings)
    # OpenTelemetry when MEMWORKER_OTEL_ENDPOINT / OTEL_* ask for it (docs/tracing.md): here,
    # before the lifespan opens the pool, so psycopg's instrumentation sees its connections
    tracing.setup(settings, "api", app=app)
    _add_ops_routes(app, settings)
    return app


def _open_state(
    app: FastAPI, settings: Settings, resources: runtime.Resources | None, publisher: Publisher | None
) -> None:
    """What the process shares across requests: the pool, the publisher, the key cache, one Redis
    connection pool, the rate limiter, the fleet gauges and the read replicas."""
    app.state.resources = resources or runtime.build(settings)
    app.state.resources.query_embedder.load()  # the query model now: no first recall waits for it
    app.state.publisher = publisher or Publisher.for_settings(settings)
    app.state.key_cache = keys.KeyCache(ttl_s=10.0)
    app.state.cache_generation = None  # the first request reads it (deps.principal)
    # the process's one Redis connection pool: rate limits, queue depths, the console's samples
    app.state.redis = redis.Redis.from_url(settings.redis_url or "", socket_timeout=1, socket_connect_timeout=1)
    app.state.bumps = bumps.Buffer(app.state.redis)  # recalls' access bumps, to Redis every second
    app.state.limiter = ratelimit.Limiter(
        app.state.redis,
        key_rate=settings.rate_key_per_s,
        key_burst=settings.rate_key_burst,
        tenant_rate=settings.rate_tenant_per_s,
        tenant_burst=settings.rate_tenant_burst,
        auth_fail_rate=settings.rate_auth_fail_per_s,
        auth_fail_burst=settings.rate_auth_fail_burst,
    )
    app.state.fleet = metrics.FleetCollector(
        lambda: app.state.publisher.queue_depths(app.state.redis),
        lambda: memory_estimates(app.state.resources.pool),
    )
    # replicas (MEMWORKER_READ_DATABASE_URL): recall, context, lists and the console read there
    app.state.reads = (
        replicas.Reads.open(
            app.state.resources.pool,
            settings.read_urls(),
            app.state.redis,
            max_lag_s=settings.read_max_lag_s,
            wait_s=settings.read_wait_s,
            pool_max=settings.db_pool_max,
            pool_timeout_s=settings.db_pool_timeout_s,
        )
        if settings.read_urls()
        else None
    )


def _add_error_handlers(app: FastAPI) -> None:
    """Each domain error as its status code, with one JSON shape for every error."""
    for exc_type, code in _STATUS.items():
        app.add_exception_handler(exc_type, _handler(code))
    app.add_exception_handler(RequestValidationError, _validation_handler)
    app.add_exception_handler(HTTPException, _http_error)  # an unknown route, a body that is not JSON, ...
    app.add_exception_handler(errors.RateLimited, _rate_limited)


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """Body and in-flight limits, replica read-your-writes and request metrics (added last: outermost)."""
    app.add_middleware(limits.BodyLimit, limit=settings.max_body_bytes)
    # outermost: an overloaded process answers before it reads a body or takes a thread
    app.add_middleware(limits.Overload, max_inflight=settings.api_max_inflight)

    if settings.read_urls():
        app.add_middleware(WriteLsn)
    app.add_middleware(RequestMetrics)  # outermost: it times the refused requests too


def _add_ops_routes(app: FastAPI, settings: Settings) -> None:
    """/healthz and /metrics, outside /v1 and without an API key; /metrics asks for
    MEMWORKER_METRICS_TOKEN when it is set."""

    @app.get("/healthz", tags=["ops"])
    def healthz(request: Request) -> JSONResponse:
        """Postgres and Redis reachability; 503 naming what is down."""
        checks = {"postgres": "ok", "redis": "ok"}
        try:
            with db.system_tx(request.app.state.resources.pool) as conn:
                conn.execute("SELECT 1")
        except errors.MemworkerError as exc:
            checks["postgres"] = f"down: {exc}"
        try:
            request.app.state.redis.ping()  # the process's own connection pool, not a new client
        except Exception as exc:  # any failure here means 'down', reported, not raised
            checks["redis"] = f"down: {type(exc).__name__}"
        ok = all(v == "ok" for v in checks.values())
        body: dict[str, Any] = {"status": "ok" if ok else "unavailable", **checks}
        if request.app.state.reads is not None:  # a skipped replica is reported, not fatal: the primary serves
            body["replicas"] = request.app.state.reads.status()
        return JSONResponse(body, 200 if ok else 503)

    @app.get("/metrics", tags=["ops"])
    def metrics_text(request: Request) -> Response:
        if settings.metrics_token and not _bearer_is(request, settings.metrics_token):
            request.app.state.limiter.failed_auth(deps.client_address(request))  # 429 once they run out
            raise errors.Unauthorized("metrics token required (Authorization: Bearer <MEMWORKER_METRICS_TOKEN>)")
        return Response(generate_latest(metrics.registry(request.app.state.fleet)), media_type=CONTENT_TYPE_LATEST)


def _bearer_is(request: Request, token: str) -> bool:
    """Whether the request's bearer token is `token`, compared in constant time."""
    given = keys.bearer_token(request.headers.get("authorization", ""))
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def memory_estimates(pool: Any) -> list[tuple[str, str, float]]:
    with db.system_tx(pool) as conn:
        rows = overview.memory_estimates(conn)
    return [(r.attribute, r.value, float(r.estimate)) for r in rows]


class ErrorJSON(JSONResponse):
    """An error answer that always encodes: the message may quote the caller's input, and a
    lone surrogate in it would make the UTF-8 encoding fail (ASCII escapes it instead)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _handler(code: int) -> Any:
    async def handle(_: Request, exc: Exception) -> JSONResponse:
        headers = {"Retry-After": "5"} if code == 503 else None
        return ErrorJSON({"error": str(exc)}, code, headers=headers)

    return handle


async def _rate_limited(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.RateLimited)
    return ErrorJSON({"error": str(exc)}, 429, headers={"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))})


async def _http_error(_: Request, exc: Exception) -> Response:
    """Starlette's and FastAPI's own errors (404 for an unknown route, 405, 400 for a body
    that is not UTF-8 or nests past the JSON decoder's limit) in the API's shape."""
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return ErrorJSON({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)


async def _validation_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = [_problem(e) for e in exc.errors()]
    first = detail[0] if detail else {"field": "", "problem": "invalid request"}
    return ErrorJSON({"error": f"{first['field'] or 'body'}: {first['problem']}", "detail": detail}, 422)


def _problem(e: dict[str, Any]) -> dict[str, str]:
    """One validation error as {field, problem}; a body that is not JSON says where it breaks
    (its loc is the character offset, not a field)."""
    if e.get("type") == "json_invalid":
        at = e["loc"][1] if len(e["loc"]) > 1 else 0
        why = (e.get("ctx") or {}).get("error", "JSON decode error")
        return {"field": "body", "problem": f"not valid JSON at character {at}: {why}"}
    return {"field": ".".join(str(x) for x in e["loc"] if x != "body"), "problem": e["msg"]}


class WriteLsn:
    """With replicas: a request that wrote answers the WAL position of its commit in
    X-Memworker-LSN (deps.tx notes it); a read that sends it back sees that write."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_lsn(message: Any) -> None:
            lsn = scope.get("state", {}).get(deps.WRITE_LSN)
            if message["type"] == "http.response.start" and lsn:
                headers = [*message.get("headers", []), (b"x-memworker-lsn", replicas.format_lsn(lsn).encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_lsn)


class RequestMetrics:
    """Latency per route, method and status (memworker_http_request_seconds). Plain ASGI, not
    @app.middleware("http"): that wrapper runs every request through a task group and memory
    streams, a measurable share of a recall's time."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before it starts a response

        async def send_and_note(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics.HTTP_SECONDS.labels(route, scope["method"], str(status)).observe(time.perf_counter() - started)
