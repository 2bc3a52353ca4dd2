"""ASGI guards in front of every route: the body size limit, and the overload bound that
answers 503 with Retry-After at once instead of queueing without end."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from memworker import metrics

# Cheap, and what an orchestrator polls while the process is busiest: never refused.
UNBOUNDED_PATHS = frozenset({"/healthz", "/metrics"})
STREAMED_SUFFIX = "/import"  # POST /v1/agents/{a}/import: bodies the route itself streams and bounds


class Overload:
    """At most max_inflight requests inside this process at once (running or waiting for a
    worker thread or a pooled connection). One more is answered 503 with Retry-After: 1
    before its body is read, so under a flood latency stays bounded and clients back off,
    where an unbounded queue would let every request's wait grow. Per process: N API
    processes hold N times the bound."""

    def __init__(self, app: Any, max_inflight: int) -> None:
        self.app = app
        self.max_inflight = max_inflight
        self.inflight = 0  # the event loop's thread alone changes it

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in UNBOUNDED_PATHS:
            await self.app(scope, receive, send)
            return
        if self.inflight >= self.max_inflight:
            metrics.OVERLOAD_REJECTED.inc()
            busy = JSONResponse(
                {"error": f"overloaded: {self.inflight} requests in progress; retry after 1 s"},
                503,
                headers={"Retry-After": "1"},
            )
            await busy(scope, receive, send)
            return
        self.inflight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.inflight -= 1


class BodyLimit:
    """413 for a body over the limit, whether it declares its length or streams in chunks.

    The body is read (up to the limit) before the route runs and then handed on: JSON
    routes read it whole anyway, and a route must not start work on a body it will refuse."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "POST" and scope["path"].endswith(STREAMED_SUFFIX):
            # an import streams its body to a file as it arrives, with its own bound
            # (routes/portability.py): held here, a large file would sit in memory
            await self.app(scope, receive, send)
            return
        too_large = JSONResponse({"error": f"request body over {self.limit} bytes"}, 413)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await too_large(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
