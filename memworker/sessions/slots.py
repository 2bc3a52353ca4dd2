"""Per-tenant delivery slots: at most N webhook deliveries of one tenant in flight
at once, over every sender process, so one tenant's hanging receivers cannot hold every
sender. A Redis sorted set per tenant: members are slot tokens, scores their lease ends (a
sender that died frees its slot when the lease runs out)."""

from __future__ import annotations

import logging
import secrets
from uuid import UUID

import redis

from memworker.settings import Settings
from memworker.storage import redis_keys

logger = logging.getLogger(__name__)


# KEYS[1] the tenant's set; ARGV: limit, lease seconds, token. Server time, so senders'
# clocks do not matter.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return 1
"""


class TenantSlots:
    """acquire() a slot before sending, release() it after."""

    def __init__(self, client: redis.Redis, *, limit: int, lease_s: float) -> None:
        self._client = client
        self._limit = limit
        self._lease_s = lease_s
        self._acquire = client.register_script(_ACQUIRE)

    def acquire(self, tenant_id: UUID | str) -> str | None:
        """A token when the tenant has a free slot, else None. Without Redis the limit is not
        enforced (logged): a broker outage must not also stop deliveries that can go."""
        token = secrets.token_hex(8)
        try:
            ok = self._acquire(keys=[redis_keys.webhook_slots(tenant_id)], args=[self._limit, self._lease_s, token])
        except redis.RedisError as exc:
            logger.warning("webhook slots unavailable (%s); sending without the per-tenant limit", exc)
            return token
        return token if ok == 1 else None

    def release(self, tenant_id: UUID | str, token: str) -> None:
        try:
            self._client.zrem(redis_keys.webhook_slots(tenant_id), token)
        except redis.RedisError as exc:  # the lease frees it
            logger.warning("could not release a webhook slot of tenant %s: %s", tenant_id, exc)


def build(settings: Settings) -> TenantSlots:
    """A sender process's slots over its own Redis client (the caller keeps one per process:
    a forked child builds its own)."""
    assert settings.redis_url, "resolve() the settings first"
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    # an attempt's connect, write and read may each take the timeout; a lookup and the claim
    # and record transactions come on top
    lease = 4 * settings.webhook_timeout_s + 30
    return TenantSlots(client, limit=settings.webhook_tenant_inflight, lease_s=lease)
