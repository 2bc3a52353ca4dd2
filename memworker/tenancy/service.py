"""Tenants, their agents and each agent's effective policy: the one way in for every entry
point and capability that needs to know who an agent is and which rules it runs under."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from memworker import errors, keys
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.storage import core_db, db
from memworker.storage.db import Conn

Tenant = core_db.Tenant
ApiKey = core_db.ApiKey


def policy_for(conn: Conn, *, tenant_id: UUID, agent_id: str | None, must_exist: bool = False) -> Policy:
    """The agent's effective policy: defaults, tenant overrides, agent overrides.

    Raises NotFound when must_exist and the agent is not in this tenant."""
    row = core_db.policies(conn, tenant_id=tenant_id, agent_id=agent_id)
    if must_exist and (row is None or row.agent_policy is None):
        raise errors.NotFound("agent not found")
    if row is None:
        return Policy()
    return Policy.resolve(row.tenant_policy, row.agent_policy, stored=True)


def ensure_agent(conn: Conn, *, tenant_id: UUID, agent_id: str) -> None:
    """Create the agent on first use within the tenant."""
    if not memories.AGENT_ID.fullmatch(agent_id):
        raise errors.InvalidInput(
            "agent_id must be 1-128 characters of letters, digits and . _ : @ -, starting with a letter or digit"
        )
    core_db.ensure_agent(conn, tenant_id=tenant_id, agent_id=agent_id)


def require_agent(conn: Conn, *, tenant_id: UUID, agent_id: str) -> None:
    """Raises NotFound unless the agent exists in this tenant."""
    if not core_db.agent_exists(conn, tenant_id=tenant_id, agent_id=agent_id):
        raise errors.NotFound("agent not found")


def tenant_by_name(conn: Conn, name: str) -> Tenant | None:
    return core_db.tenant_by_name(conn, name=name)


def named_tenant(conn: Conn, name: str) -> Tenant:
    """The tenant of that name. Raises NotFound."""
    tenant = core_db.tenant_by_name(conn, name=name)
    if tenant is None:
        raise errors.NotFound(f"no tenant named {name!r} (memworker tenant list)")
    return tenant


def tenants(conn: Conn) -> list[Tenant]:
    return list(core_db.list_tenants(conn))


def create_tenant(conn: Conn, name: str) -> tuple[Tenant, str]:
    """A new tenant and its first API key (the key's secret is shown once). The connection is the
    owner's; it is bound to the new tenant afterwards."""
    if core_db.tenant_by_name(conn, name=name):
        raise errors.InvalidInput(f"tenant {name!r} exists; add a key with `memworker key create`")
    tenant = core_db.create_tenant(conn, name=name)
    db.bind_tenant(conn, tenant.id)
    key, _ = keys.create(conn, tenant_id=tenant.id, name="initial")
    return tenant, key


def api_keys(conn: Conn, tenant_id: UUID) -> list[ApiKey]:
    return list(core_db.list_api_keys(conn, tenant_id=tenant_id))


def revoke_api_key(conn: Conn, tenant_id: UUID, prefix: str) -> None:
    """Raises NotFound when no active key has the prefix."""
    if core_db.revoke_api_key(conn, tenant_id=tenant_id, prefix=prefix) is None:
        raise errors.NotFound(f"no active key with prefix {prefix!r}")


@dataclass(frozen=True, slots=True)
class LlmBudget:
    """The tenant's daily LLM budget (policy llm_tokens_per_day, None: no limit) and its spend
    this UTC day, reflection and sleep together."""

    tokens_per_day: int | None
    spent_today: int

    @property
    def paused(self) -> bool:
        """Spent: reflection uses the offline rules and sleep runs without the LLM until the day turns."""
        return self.tokens_per_day is not None and self.spent_today >= self.tokens_per_day


def llm_budget(conn: Conn, tenant_id: UUID) -> LlmBudget:
    policy = policy_for(conn, tenant_id=tenant_id, agent_id=None)
    return LlmBudget(policy.llm_tokens_per_day, core_db.llm_spent_today(conn, tenant_id=tenant_id))
