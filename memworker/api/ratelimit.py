"""Token buckets in Redis, per API key and per tenant, shared by every API process. One round
trip per request (a Lua script checks and takes from both buckets atomically, and reads the
cache generation: runtime.invalidate_caches). If Redis is unreachable requests pass:
Postgres, not the limiter, protects the data, and ingest already tolerates Redis loss.

Failed authentications take from a third bucket, per client address: once a
client has used up its failures, it gets 429 for bad keys and good ones alike until the
bucket refills, so guessing keys is throttled before any key is known. The same round trip
checks (without taking) that bucket for authenticated requests."""

from __future__ import annotations

import logging
import time

import redis

from memworker import errors
from memworker.storage import redis_keys

logger = logging.getLogger(__name__)

# KEYS: the cache generation, then the bucket keys; ARGV: now, how many of the buckets (the
# first ones) to take a token from (the others are only checked), then (rate, burst) per bucket.
# Returns {wait, generation}: wait is 0 when allowed, else the seconds until the emptiest
# bucket has a token again.
_SCRIPT = """
local now = tonumber(ARGV[1])
local taken = tonumber(ARGV[2])
local generation = redis.call('GET', KEYS[1]) or '0'
local wait = 0
local state = {}
local buckets = {}
for i = 2, #KEYS do buckets[i - 1] = KEYS[i] end
for i, key in ipairs(buckets) do
  local rate = tonumber(ARGV[2 * i + 1]); local burst = tonumber(ARGV[2 * i + 2])
  local b = redis.call('HMGET', key, 't', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  tokens = math.min(burst, tokens + (now - ts) * rate)
  if tokens < 1 then wait = math.max(wait, (1 - tokens) / rate) end
  state[i] = tokens
end
if wait > 0 then return {tostring(wait), generation} end
for i = 1, taken do
  local rate = tonumber(ARGV[2 * i + 1]); local burst = tonumber(ARGV[2 * i + 2])
  redis.call('HSET', buckets[i], 't', state[i] - 1, 'ts', now)
  redis.call('EXPIRE', buckets[i], math.ceil(burst / rate) + 1)
end
return {'0', generation}
"""


class Limiter:
    def __init__(
        self,
        client: redis.Redis,
        *,
        key_rate: float,
        key_burst: int,
        tenant_rate: float,
        tenant_burst: int,
        auth_fail_rate: float = 1.0,
        auth_fail_burst: int = 30,
    ) -> None:
        self._script = client.register_script(_SCRIPT)
        self.key_rate, self.key_burst = key_rate, key_burst
        self.tenant_rate, self.tenant_burst = tenant_rate, tenant_burst
        self.auth_fail_rate, self.auth_fail_burst = auth_fail_rate, auth_fail_burst

    def take(self, key_id: str, tenant_id: str, client: str | None = None) -> int | None:
        """Take one token from the key's and the tenant's bucket, or raise RateLimited (also
        when `client` has used up its failed authentications). Returns the cache generation
        (None when Redis is unreachable)."""
        buckets = [redis_keys.rate_bucket_for_key(key_id), redis_keys.rate_bucket_for_tenant(tenant_id)]
        args: list[float] = [self.key_rate, self.key_burst, self.tenant_rate, self.tenant_burst]
        if client is not None:  # checked, not taken: only failures spend this bucket
            buckets.append(redis_keys.failed_auth_bucket(client))
            args += [self.auth_fail_rate, self.auth_fail_burst]
        return self._run(buckets, 2, args)

    def failed_auth(self, client: str) -> None:
        """Take one token from the client's failed-authentication bucket; RateLimited when it is
        empty (the caller answers 429 instead of 401)."""
        self._run([redis_keys.failed_auth_bucket(client)], 1, [self.auth_fail_rate, self.auth_fail_burst])

    def _run(self, buckets: list[str], taken: int, args: list[float]) -> int | None:
        try:
            wait, generation = self._script(
                keys=[redis_keys.CACHE_GENERATION, *buckets], args=[time.time(), taken, *args]
            )
        except redis.RedisError as exc:
            logger.warning("rate limiter unavailable, letting the request through: %s", exc)
            return None
        if float(wait) > 0:
            raise errors.RateLimited(retry_after_s=float(wait))
        return int(generation)
