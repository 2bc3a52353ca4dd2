"""Every key memworker keeps in Redis, named in one place. A key's shape is a contract between
processes (the API, the workers, the CLI) that may run different releases during a rolling
upgrade: change one only with a plan for the old shape."""

from __future__ import annotations

from uuid import UUID

# Bumped to tell every process to drop its cached keys and policies.
CACHE_GENERATION = "memworker:cache_generation"

# Recalls' access bumps (storage/bumps.py): the hash waiting to be applied, the batch being
# applied, its time (epoch seconds), and the lock of the one applier.
BUMPS_PENDING = "memworker:bumps:pending"
BUMPS_BATCH = "memworker:bumps:batch"
BUMPS_BATCH_AT = "memworker:bumps:batch_at"
BUMPS_LOCK = "memworker:bumps:lock"


def rate_bucket_for_key(key_id: str) -> str:
    return f"memworker:rl:key:{key_id}"


def rate_bucket_for_tenant(tenant_id: str | UUID) -> str:
    return f"memworker:rl:tenant:{tenant_id}"


def failed_auth_bucket(client: str) -> str:
    return f"memworker:rl:authfail:{client}"


def console_recalls(tenant_id: UUID, minute: int) -> str:
    """The recall samples the console charts for one tenant and minute."""
    return f"memworker:console:recall:{tenant_id}:{minute}"


def webhook_slots(tenant_id: UUID | str) -> str:
    """The sorted set of a tenant's webhook deliveries in flight."""
    return f"memworker:webhook_slots:{tenant_id}"


def write_lsn(tenant_id: UUID | str, agent_id: str | None) -> str:
    """The WAL position of an agent's last write (agent None: a write of the tenant outside any
    agent), which a read on a replica waits for (read-your-writes)."""
    return f"memworker:lsn:{tenant_id}:{agent_id or '*'}"
