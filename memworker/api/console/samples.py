"""A small history of the service's own figures for the console's charts: recall latency per
minute, tenant and agent, kept in Redis for an hour. Ingest rate and backlog need no samples:
episodes carry their accept and store times in Postgres (storage/queries/console.sql).

Each API process sums its recalls in memory and adds them to Redis at most every few seconds
(HINCRBY, so every process's share lands in the same minute), off the event loop and after the
response is sent: a recall never waits on this."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from uuid import UUID

import anyio
import redis

from memworker import keys
from memworker.storage import redis_keys

logger = logging.getLogger(__name__)

TTL_S = 3900  # an hour of minutes, plus the minute being written
FLUSH_EVERY_S = 5.0
_RECALL_PATH = re.compile(r"^/v1/agents/([^/]+)/recall$")


def minute_of(t: float) -> int:
    return int(t // 60) * 60


def redis_key(tenant_id: UUID, minute: int) -> str:
    return redis_keys.console_recalls(tenant_id, minute)


class Recorder:
    """Recall counts and summed milliseconds per (tenant, minute, agent), waiting to be added to
    Redis. Thread-safe: the middleware notes on the event loop, flushes run in a thread."""

    def __init__(self, client: Callable[[], redis.Redis]) -> None:
        self.client = client  # the API process's own Redis connection (app.state.redis)
        self._lock = threading.Lock()
        self._pending: dict[tuple[UUID, int, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self._flushed_at = time.monotonic()

    def note(self, tenant_id: UUID, agent_id: str, seconds: float, *, now: float | None = None) -> None:
        with self._lock:
            cell = self._pending[(tenant_id, minute_of(time.time() if now is None else now), agent_id)]
            cell[0] += 1
            cell[1] += seconds * 1000

    def due(self) -> bool:
        return time.monotonic() - self._flushed_at >= FLUSH_EVERY_S

    def flush(self) -> None:
        """Add what is pending to Redis. On a Redis error the samples are dropped (logged):
        the charts are a convenience, never a reason to fail or to grow without bound."""
        with self._lock:
            pending, self._pending = self._pending, defaultdict(lambda: [0, 0.0])
            self._flushed_at = time.monotonic()
        if not pending:
            return
        try:
            pipe = self.client().pipeline(transaction=False)
            for (tenant_id, minute, agent_id), (n, ms) in pending.items():
                key = redis_key(tenant_id, minute)
                pipe.hincrby(key, f"{agent_id}|n", int(n))
                pipe.hincrbyfloat(key, f"{agent_id}|ms", ms)
                pipe.expire(key, TTL_S)
            pipe.execute()
        except redis.RedisError as exc:
            logger.warning("console: %d recall samples dropped: %s", len(pending), exc)

    def recall_minutes(
        self, tenant_id: UUID, agent_ids: frozenset[str] | None, minutes: list[int]
    ) -> list[tuple[int, float | None]]:
        """(recalls, mean ms or None) per minute, over the agents the key may see."""
        self.flush()  # this process's latest recalls count too
        pipe = self.client().pipeline(transaction=False)
        for m in minutes:
            pipe.hgetall(redis_key(tenant_id, m))
        out = []
        for fields in pipe.execute():
            n, ms = 0, 0.0
            for raw, value in fields.items():
                agent, _, what = raw.decode().rpartition("|")
                if agent_ids is not None and agent not in agent_ids:
                    continue
                if what == "n":
                    n += int(value)
                elif what == "ms":
                    ms += float(value)
            out.append((n, ms / n if n else None))
        return out


class RecallSampler:
    """ASGI middleware: notes the time of each answered recall for its tenant and agent. The
    tenant comes from the key cache the request itself just filled (deps.principal); a key not
    in it (the cache was cleared meanwhile) leaves that one recall out rather than cost a lookup."""

    def __init__(self, app: Any, recorder: Recorder, key_cache: Callable[[], keys.KeyCache]) -> None:
        self.app = app
        self.recorder = recorder
        self.key_cache = key_cache  # a getter: the app makes its cache when it starts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        match = _RECALL_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_note(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, send_and_note)
        if status != 200:
            return
        tenant_id = self._tenant(scope)
        if tenant_id is not None:
            self.recorder.note(tenant_id, match.group(1), time.perf_counter() - started)
        if self.recorder.due():
            await anyio.to_thread.run_sync(self.recorder.flush)

    def _tenant(self, scope: Any) -> UUID | None:
        key = keys.bearer_token(dict(scope["headers"]).get(b"authorization", b"").decode("latin-1"))
        if key is None:
            return None

        def not_cached(_: str) -> keys.Principal:
            raise LookupError

        try:
            return self.key_cache().get(key, not_cached).tenant_id
        except LookupError:
            return None
