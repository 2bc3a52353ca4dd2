"""Token buckets in Redis, per API key and per tenant. One round trip per request (a Lua
script checks and takes from both buckets atomically). If Redis is unreachable requests
pass: Postgres, not the limiter, protects the data, and ingest already tolerates Redis loss."""

from __future__ import annotations

import logging
import time

import redis

from memworker import errors

logger = logging.getLogger(__name__)

# KEYS: bucket keys; ARGV: now, then (rate, burst) per key. Returns 0 when allowed, else the
# seconds until the emptiest bucket has a token again.
_SCRIPT = """
local now = tonumber(ARGV[1])
local wait = 0
local state = {}
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i]); local burst = tonumber(ARGV[2 * i + 1])
  local b = redis.call('HMGET', key, 't', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  tokens = math.min(burst, tokens + (now - ts) * rate)
  if tokens < 1 then wait = math.max(wait, (1 - tokens) / rate) end
  state[i] = tokens
end
if wait > 0 then return tostring(wait) end
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i]); local burst = tonumber(ARGV[2 * i + 1])
  redis.call('HSET', key, 't', state[i] - 1, 'ts', now)
  redis.call('EXPIRE', key, math.ceil(burst / rate) + 1)
end
return '0'
"""


class Limiter:
    def __init__(
        self, client: redis.Redis, *, key_rate: float, key_burst: int, tenant_rate: float, tenant_burst: int
    ) -> None:
        self._script = client.register_script(_SCRIPT)
        self.key_rate, self.key_burst = key_rate, key_burst
        self.tenant_rate, self.tenant_burst = tenant_rate, tenant_burst

    def take(self, key_id: str, tenant_id: str) -> None:
        """Take one token from the key's and the tenant's bucket, or raise RateLimited."""
        try:
            wait = float(
                self._script(
                    keys=[f"memworker:rl:key:{key_id}", f"memworker:rl:tenant:{tenant_id}"],
                    args=[time.time(), self.key_rate, self.key_burst, self.tenant_rate, self.tenant_burst],
                )
            )
        except redis.RedisError as exc:
            logger.warning("rate limiter unavailable, letting the request through: %s", exc)
            return
        if wait > 0:
            raise errors.RateLimited(retry_after_s=wait)
