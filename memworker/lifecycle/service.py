"""Lifecycle's use cases: promote a memory, its history, the review list and settling a review,
the policy of the tenant or of an agent, and retention sweeps with their reports. The one way
in for the API, the console, the CLI and the Celery tasks; answers as the API sends them."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from memworker import errors
from memworker.domain import memories
from memworker.lifecycle import governance, retention
from memworker.lifecycle.governance import PolicyView
from memworker.lifecycle.retention import Report
from memworker.schemas import History, RetentionReport, RetentionRuns, ReviewList, ReviewResolved
from memworker.storage.db import Conn, Pool
from memworker.storage.rows import jsonable
from memworker.tenancy import service as tenancy


def promote(
    conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID, tier: str, reason: str, actor: str
) -> memories.Memory:
    """Move a live memory (a merged-away id: its survivor) up to `tier`, audited with the
    reason (redacted when the agent's policy says so). Raises NotFound, InvalidInput."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    memory_id = governance.resolve(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return governance.promote(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        tier=tier,
        reason=policy.redacted(reason),  # kept in the audit trail
        actor=actor,
        policy=policy,
    )


def history(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> History:
    """The supersede chain through a memory (oldest first) and its audit events. Raises NotFound."""
    h = governance.history(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return History(
        memory_id=str(h["memory_id"]),
        asked=str(h["asked"]),
        versions=[jsonable(dict(v)) for v in h["versions"]],
        events=[jsonable(dict(e)) for e in h["events"]],
    )


def reviews(conn: Conn, *, tenant_id: UUID, agent_id: str, status: str | None, limit: int) -> ReviewList:
    """The agent's contradictions the rules could not settle (status open or resolved; None:
    both), newest first. Raises NotFound for an unknown agent."""
    tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    items = governance.reviews(conn, tenant_id=tenant_id, agent_id=agent_id, status=status, limit=limit)
    return ReviewList(
        reviews=[
            {**jsonable(dict(i)), "newer": jsonable(dict(i["newer"])), "older": jsonable(dict(i["older"]))}
            for i in items
        ]
    )


def resolve_review(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    review_id: UUID,
    keep: str,
    reason: str,
    actor: str,
    may_change_l3: bool,
) -> ReviewResolved:
    """Keep 'both', or keep one memory and supersede the other by it; the reason is redacted
    when the agent's policy says so. Raises NotFound, InvalidInput, Forbidden (retiring an L3
    memory without may_change_l3)."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    return governance.resolve_review(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        review_id=review_id,
        keep=keep,
        reason=policy.redacted(reason),  # kept in the audit trail
        actor=actor,
        may_change_l3=may_change_l3,
        policy=policy,
    )


def policy(conn: Conn, *, tenant_id: UUID, agent_id: str | None) -> PolicyView:
    """The overrides of the tenant (agent_id None) or of one agent, and the effective policy.
    Raises NotFound for an unknown agent."""
    return governance.get_policy(conn, tenant_id=tenant_id, agent_id=agent_id)


def set_policy(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str | None,
    overrides: dict[str, Any],
    reach: Collection[str] | None = None,
) -> PolicyView:
    """Replace the overrides of the tenant (agent_id None) or of one agent (created on first
    use). reach: the agents and pools ('pool~<name>') of a key limited to some (None: all).
    Such a key cannot change the tenant's defaults, and may grant an agent (pools_read,
    pools_write) only the pools it reaches itself or those the agent already has: else it
    could read and write any pool of the tenant through the agent. Raises Forbidden, or
    InvalidInput naming the bad field (nothing is written then)."""
    if reach is not None:
        if agent_id is None:
            raise errors.Forbidden("a key limited to some agents cannot change the tenant's defaults")
        current = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
        for name in ("pools_read", "pools_write"):
            asked = overrides.get(name)
            had = set(getattr(current, name))
            for pool in asked if isinstance(asked, list) else []:  # a malformed value is put_policy's 422
                if isinstance(pool, str) and pool not in had and memories.POOL_PREFIX + pool not in reach:
                    raise errors.Forbidden(f"{name}: this key does not reach pool {pool!r}, so it cannot grant it")
    return governance.put_policy(conn, tenant_id=tenant_id, agent_id=agent_id, overrides=overrides)


def apply_policies(
    conn: Conn, *, tenant_id: UUID, defaults: dict[str, Any] | None, agents: Mapping[str, dict[str, Any]]
) -> None:
    """Replace the tenant's defaults (None: leave them) and each named agent's overrides, in the
    caller's transaction: a bad value raises InvalidInput naming the agent and the field, and the
    caller rolls all of it back."""
    if defaults is not None:
        governance.put_policy(conn, tenant_id=tenant_id, agent_id=None, overrides=defaults)
    for agent_id, overrides in agents.items():
        try:
            governance.put_policy(conn, tenant_id=tenant_id, agent_id=agent_id, overrides=overrides)
        except errors.InvalidInput as exc:
            raise errors.InvalidInput(f"agents.{agent_id}: {exc}") from None


def sweep(
    pool: Pool,
    *,
    tenant_id: UUID,
    agent_id: str,
    trigger: str,
    now: datetime | None = None,
    run_key: str | None = None,
    resume: bool = False,
) -> Report:
    """One retention sweep of the agent now (or judged at `now`); see retention.sweep_agent.
    Raises NotFound for an unknown agent."""
    return retention.sweep_agent(
        pool, tenant_id=tenant_id, agent_id=agent_id, now=now, run_key=run_key, trigger=trigger, resume=resume
    )


def sweep_report(pool: Pool, *, tenant_id: UUID, agent_id: str, trigger: str) -> RetentionReport:
    """Sweep the agent now; the report as the API answers it."""
    return sweep(pool, tenant_id=tenant_id, agent_id=agent_id, trigger=trigger).to_json()


def retention_runs(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> list[retention.RunRow]:
    """The agent's latest retention reports, newest first. Raises NotFound for an unknown agent."""
    return retention.runs(conn, tenant_id=tenant_id, agent_id=agent_id, limit=limit)


def retention_reports(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> RetentionRuns:
    """retention_runs as the API answers them (ids and dates as strings)."""
    return RetentionRuns(
        runs=[jsonable(dict(r)) for r in retention_runs(conn, tenant_id=tenant_id, agent_id=agent_id, limit=limit)]
    )


def due(pool: Pool, *, before: datetime, limit: int) -> list[tuple[UUID, str]]:
    """(tenant, agent) of the agents not swept since `before`, least recently swept first."""
    return retention.due(pool, before=before, limit=limit)


def window(now: datetime, every_s: float) -> datetime:
    """The start of the beat window `now` falls in: every fire in it gets the same run key."""
    return retention.window(now, every_s)
