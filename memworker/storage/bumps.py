"""Access bumps of recalls: queued in Redis, applied on the primary in batches.

Recall's statement only reads (a replica can run it, and concurrent recalls of one agent
never wait on each other's row locks), so a recall counts its hits in its process's Buffer,
which adds them to one Redis hash (field "<tenant>:<memory id>", value: how many recalls
found it) once every FLUSH_S, in one script call: one call per recall cost Redis more CPU
than the rate limit's. Access counts are best effort: the hash is bounded (MAX_PENDING
memories), and past it further bumps are dropped and counted; a process that dies loses its
last FLUSH_S of bumps, and Redis losing its data loses what waits there. A drain (the beat
task memworker.drain_access, every MEMWORKER_ACCESS_DRAIN_EVERY_S) renames the hash to a
batch with its own timestamp and applies it tenant by tenant (core.sql access_apply). Only
one drain runs at a time (a Redis lock). A drain that dies leaves its batch behind; the next
one applies it again, and rows the first already counted carry the batch's time in
last_access_at, so they are not counted twice."""

from __future__ import annotations

import logging
import secrets
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import cast
from uuid import UUID

import redis
from redis.commands.core import Script

from memworker import metrics
from memworker.storage import core_db, db, redis_keys
from memworker.storage.db import Pool

logger = logging.getLogger(__name__)

MAX_PENDING = 200_000  # memories with bumps waiting; about 20 MB of Redis at most
LOCK_S = 120  # a drain holds the lock at most this long (a dead drain's lock lapses)

FLUSH_S = 1.0  # how often a process's Buffer sends its bumps to Redis

# ARGV: the bound, then (field, count) pairs; returns the bumps added (0: the hash is full).
_QUEUE = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
local n = 0
for i = 2, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  n = n + tonumber(ARGV[i + 1])
end
return n
"""
# The batch to apply: the one a dead drain left, else the pending hash renamed (atomically, so
# a bump queued meanwhile lands in a fresh pending hash), else none.
_TAKE = """
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.call('GET', KEYS[3]) end
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('SET', KEYS[3], ARGV[1])
return ARGV[1]
"""
_UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def _send(queue: Script, counts: Counter[str]) -> int:
    if not counts:
        return 0
    args: list[str | int] = [MAX_PENDING]
    for field, n in counts.items():
        args += [field, n]
    try:
        queued = int(cast(int, queue(keys=[redis_keys.BUMPS_PENDING], args=args)))
    except redis.RedisError as exc:
        logger.warning("access bumps lost (Redis): %s", exc)
        queued = 0
    total = sum(counts.values())
    metrics.ACCESS_BUMPS.labels("queued").inc(queued)
    if queued < total:
        metrics.ACCESS_BUMPS.labels("dropped").inc(total - queued)
    return queued


class Buffer:
    """A process's access bumps on their way to Redis: add() counts them in memory, and a
    thread sends what has gathered every FLUSH_S in one script call (close() sends the rest)."""

    def __init__(self, client: redis.Redis, every_s: float = FLUSH_S) -> None:
        self.client = client
        self._queue = client.register_script(_QUEUE)  # its hash once: each flush sends only the hash
        self._every_s = every_s
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="access-bumps", daemon=True)
        self._thread.start()

    def add(self, tenant_id: UUID, memory_ids: Iterable[UUID | str]) -> None:
        with self._lock:
            self._counts.update(f"{tenant_id}:{m}" for m in memory_ids)

    def flush(self) -> int:
        """Send what has gathered now; returns how many bumps Redis took."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
        return _send(self._queue, counts)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.flush()


def drain(pool: Pool, client: redis.Redis) -> int:
    """Apply the queued bumps on the primary (pool); returns the memory rows updated, 0 when
    another drain holds the lock or nothing waits."""
    token = secrets.token_hex(8)
    if not client.set(redis_keys.BUMPS_LOCK, token, nx=True, ex=LOCK_S):
        return 0
    try:
        at = client.eval(
            _TAKE, 3, redis_keys.BUMPS_PENDING, redis_keys.BUMPS_BATCH, redis_keys.BUMPS_BATCH_AT, repr(_clock(pool))
        )
        if at is None:
            return 0
        batch = cast("dict[bytes, bytes]", client.hgetall(redis_keys.BUMPS_BATCH))
        updated = _apply(pool, batch, datetime.fromtimestamp(float(cast(bytes, at)), UTC))
        client.delete(redis_keys.BUMPS_BATCH, redis_keys.BUMPS_BATCH_AT)
        metrics.ACCESS_BUMPS.labels("applied").inc(sum(int(v) for v in batch.values()))
        return updated
    finally:
        client.eval(_UNLOCK, 1, redis_keys.BUMPS_LOCK, token)


def _clock(pool: Pool) -> float:
    """The primary's time (epoch seconds): a batch's time is compared with last_access_at
    values that other writers took from the same clock."""
    with db.system_tx(pool) as conn:
        row = cast(
            "dict[str, float]", conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8 AS t").fetchone()
        )
    return float(row["t"])


def _apply(pool: Pool, batch: dict[bytes, bytes], at: datetime) -> int:
    by_tenant: dict[str, tuple[list[UUID], list[int]]] = defaultdict(lambda: ([], []))
    for key, count in batch.items():
        tenant, _, memory = key.decode().partition(":")
        ids, counts = by_tenant[tenant]
        ids.append(UUID(memory))
        counts.append(int(count))
    updated = 0
    for tenant, (ids, counts) in sorted(by_tenant.items()):
        with db.tenant_tx(pool, tenant) as conn:
            updated += core_db.access_apply(conn, tenant_id=UUID(tenant), ids=ids, counts=counts, at=at)
    return updated
