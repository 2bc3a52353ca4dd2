"""The HTTP API (/v1): the app factory, error mapping, limits, health and metrics. Routes
live in routes_*.py, one router per domain noun.

Routes are sync `def`s (Starlette runs them in its threadpool) so the API, the workers and
the CLI share one sync code path."""
from __future__ import annotations

import logging
import os
import time
from typing import Any
from uuid import UUID

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from memworker import db, errors, keys, metrics, routes_episodes, routes_memories, routes_recall, runtime
from memworker.settings import Settings
from memworker.web import Publish

logger = logging.getLogger(__name__)

ROUTERS = [routes_episodes.router, routes_memories.router, routes_recall.router]
_STATUS = {errors.NotFound: 404, errors.InvalidInput: 422, errors.Unauthorized: 401,
           errors.Forbidden: 403, errors.Unavailable: 503, errors.PayloadTooLarge: 413}


def celery_publisher(settings: Settings) -> Publish:
    from tasks.celery_app import INGEST, make_celery

    app = make_celery(settings)

    def publish(tenant_id: UUID, episode_ids: list[UUID]) -> None:
        app.send_task("memworker.ingest", args=[str(tenant_id), [str(e) for e in episode_ids]], queue=INGEST)
    return publish


def create_app(settings: Settings | None = None, *, resources: runtime.Resources | None = None,
               publish: Publish | None = None) -> FastAPI:
    """The ASGI app. Without arguments (uvicorn --factory) it reads MEMWORKER_* itself."""
    settings = runtime.resolve(settings or Settings.from_env(os.environ))

    async def lifespan(app: FastAPI) -> Any:
        app.state.resources = resources or runtime.build(settings)
        app.state.publish = publish or celery_publisher(settings)
        app.state.key_cache = keys.KeyCache(ttl_s=10.0)
        yield
        if resources is None:
            app.state.resources.close()

    app = FastAPI(title="memworker", version="0.1.0", lifespan=lifespan,
                  description="Memory service for fleets of LLM agents.")
    for router in ROUTERS:
        app.include_router(router)
    for exc_type, code in _STATUS.items():
        app.add_exception_handler(exc_type, _handler(code))
    app.add_exception_handler(RequestValidationError, _validation_handler)

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

    return app


def _handler(code: int) -> Any:
    async def handle(_: Request, exc: Exception) -> JSONResponse:
        headers = {"Retry-After": "5"} if code == 503 else None
        return JSONResponse({"error": str(exc)}, code, headers=headers)
    return handle


async def _validation_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = [{"field": ".".join(str(x) for x in e["loc"] if x != "body"), "problem": e["msg"]}
              for e in exc.errors()]
    first = detail[0] if detail else {"field": "", "problem": "invalid request"}
    return JSONResponse({"error": f"{first['field'] or 'body'}: {first['problem']}", "detail": detail}, 422)
