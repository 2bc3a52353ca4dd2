"""Access bumps of recalls: the beat's drain that applies them on the primary
(memworker/storage/bumps.py does the work)."""

from __future__ import annotations

import logging
import os

import redis

from memworker import runtime
from memworker.storage import bumps
from tasks.celery_app import MAINTENANCE, app, settings_of

logger = logging.getLogger(__name__)

_clients: dict[int, redis.Redis] = {}


def _client(url: str) -> redis.Redis:
    """This process's Redis client (a forked child makes its own)."""
    pid = os.getpid()
    if pid not in _clients:
        _clients[pid] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return _clients[pid]


@app.task(name="memworker.drain_access", queue=MAINTENANCE)
def drain_access(window: str | None = None) -> int:
    """Apply the queued access bumps; one drain at a time (a Redis lock), and a batch applied
    twice counts once, so a double fire or a redelivered message is harmless. The window is
    unused: a drain takes whatever is queued when it runs."""
    settings = settings_of(app)
    res = runtime.for_process(settings)
    n = bumps.drain(res.pool, _client(settings.redis_url or ""))
    if n:
        logger.info("applied access bumps to %d memories", n)
    return n
