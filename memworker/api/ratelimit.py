"""Token buckets in Redis, per API key and per tenant, shared by every API process. One round
trip per request (a Lua script checks and takes from both buckets atomically, and reads the
cache generation: runtime.invalidate_caches). If Redis is unreachable requests pass:
Postgres, not the limiter, protects the data, and ingest already tolerates Redis loss."""

from __future__ import annotations

import logging
import time

import redis

from memworker import errors, runtime

logger = logging.getLogger(__name__)

# KEYS: the cache generation, then the bucket keys; ARGV: now, then (rate, burst) per bucket.
# Returns {wait, generation}: wait is 0 when allowed, else the seconds until the emptiest
# bucket has a token again.
_SCRIPT = """
local now = tonumber(ARGV[1])
local generation = redis.call('GET', KEYS[1]) or '0'
local wait = 0
local state = {}
local buckets = {}
for i = 2, #KEYS do buckets[i - 1] = KEYS[i] end
for i, key in ipairs(buckets) do
  local rate = tonumber(ARGV[2 * i]); local burst = tonumber(ARGV[2 * i + 1])
  local b = redis.call('HMGET', key, 't', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  tokens = math.min(burst, tokens + (now - ts) * rate)
  if tokens < 1 then wait = math.max(wait, (1 - tokens) / rate) end
  state[i] = tokens
end
if wait > 0 then return {tostring(wait), generation} end
for i, key in ipairs(buckets) do
  local rate = tonumber(ARGV[2 * i]); local burst = tonumber(ARGV[2 * i + 1])
  redis.call('HSET', key, 't', state[i] - 1, 'ts', now)
  redis.call('EXPIRE', key, math.ceil(burst / rate) + 1)
end
return {'0', generation}
"""


class Limiter:
    def __init__(
        self, client: redis.Redis, *, key_rate: float, key_burst: int, tenant_rate: float, tenant_burst: int
    ) -> None:
        self._script = client.register_script(_SCRIPT)
        self.key_rate, self.key_burst = key_rate, key_burst
        self.tenant_rate, self.tenant_burst = tenant_rate, tenant_burst

    def take(self, key_id: str, tenant_id: str) -> int | None:
        """Take one token from the key's and the tenant's bucket, or raise RateLimited.
        Returns the cache generation (None when Redis is unreachable)."""
        try:
            wait, generation = self._script(
                keys=[runtime.CACHE_GENERATION, f"memworker:rl:key:{key_id}", f"memworker:rl:tenant:{tenant_id}"],
                args=[time.time(), self.key_rate, self.key_burst, self.tenant_rate, self.tenant_burst],
            )
        except redis.RedisError as exc:
            logger.warning("rate limiter unavailable, letting the request through: %s", exc)
            return None
        if float(wait) > 0:
            raise errors.RateLimited(retry_after_s=float(wait))
        return int(generation)
