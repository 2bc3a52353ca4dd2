"""Per-process resources, built once per process (after fork in Celery workers) from
Settings: the app-role connection pool, the embedder and the reflector. Also where a
process finds the embedded stack's URLs when MEMWORKER_*_URL are unset."""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import redis

from memworker import errors, reflection
from memworker.domain.policy import PolicyCache
from memworker.models import embeddings
from memworker.recall.stats import Stats
from memworker.settings import Settings
from memworker.storage import db, redis_keys
from memworker.storage.db import Pool

logger = logging.getLogger(__name__)

STACK_FILE = "stack.json"


def stack_file(settings: Settings) -> Path:
    return settings.data_dir / STACK_FILE


def resolve(settings: Settings) -> Settings:
    """Fill unset URLs from a running `memworker up` on the same data dir.

    Raises ConfigError when neither is available, saying how to fix it."""
    if settings.database_url and settings.redis_url:
        return settings
    path = stack_file(settings)
    if not path.exists():
        missing = "MEMWORKER_DATABASE_URL" if not settings.database_url else "MEMWORKER_REDIS_URL"
        raise errors.ConfigError(
            f"{missing} is unset and no `memworker up` is running on {settings.data_dir}; "
            "start one (memworker up) or set the URL"
        )
    stack = json.loads(path.read_text())
    return settings.replace(
        database_url=settings.database_url or stack["database_url"],
        admin_database_url=settings.admin_database_url
        or (None if settings.database_url else stack["admin_database_url"]),
        redis_url=settings.redis_url or stack["redis_url"],
        # `memworker up --replica`'s standby, for a process on the same stack
        read_database_url=settings.read_database_url
        or (None if settings.database_url else stack.get("read_database_url")),
    )


def admin_url(settings: Settings) -> str:
    url = settings.admin_database_url or settings.database_url
    if not url:
        raise errors.ConfigError("MEMWORKER_DATABASE_URL is unset")
    return url


@dataclass
class Resources:
    settings: Settings
    pool: Pool
    embedder: embeddings.Embedder
    query_embedder: embeddings.CachedQueryEmbedder
    reflector: reflection.Reflector
    policies: PolicyCache = field(default_factory=PolicyCache)
    # large agents' statistics as recall's bounded statement reads them (memworker/recall/stats.py)
    recall_stats: Stats = field(default_factory=Stats)

    def close(self) -> None:
        self.pool.close()


_lock = threading.Lock()
_by_pid: dict[int, Resources] = {}


def build(settings: Settings, *, embedder: embeddings.Embedder | None = None) -> Resources:
    assert settings.database_url, "resolve() the settings first"
    pool = db.open_pool(
        settings.database_url,
        min_size=settings.db_pool_min,
        max_size=settings.db_pool_max,
        timeout_s=settings.db_pool_timeout_s,
    )
    emb = embedder or embeddings.for_settings(settings)
    queries = embedder or embeddings.for_queries(settings, emb)  # a given embedder serves both
    return Resources(
        settings,
        pool,
        emb,
        embeddings.CachedQueryEmbedder(queries, max_batch=settings.query_batch_max),
        reflection.build(settings.llm_base_url, settings.llm_model, settings.llm_api_key, settings.llm_timeout_s),
    )


def for_process(settings: Settings) -> Resources:
    """This process's resources; a forked child builds its own instead of sharing sockets."""
    pid = os.getpid()
    with _lock:
        if pid not in _by_pid:
            _by_pid[pid] = build(settings)
        return _by_pid[pid]


_pools: dict[int, Pool] = {}


def pool_for_process(settings: Settings) -> Pool:
    """Only a connection pool, for work that needs no model (the webhook senders): the
    process's Resources' pool when it has them, else a pool of its own."""
    assert settings.database_url, "resolve() the settings first"
    pid = os.getpid()
    with _lock:
        if pid in _by_pid:
            return _by_pid[pid].pool
        if pid not in _pools:
            _pools[pid] = db.open_pool(
                settings.database_url,
                min_size=settings.db_pool_min,
                max_size=settings.db_pool_max,
                timeout_s=settings.db_pool_timeout_s,
            )
        return _pools[pid]


def invalidate_caches(redis_url: str | None) -> None:
    """Make every API process forget its cached keys and policies (a key was revoked, a
    policy changed). Best effort: without Redis the caches still expire within their TTL."""
    if not redis_url:
        return
    client = redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.incr(redis_keys.CACHE_GENERATION)
    except redis.RedisError as exc:
        logger.warning("could not invalidate the API caches (they expire within 10 s): %s", exc)
    finally:
        client.close()
