"""Sleep's use cases: the agents' consolidation gates and status, their pass reports, asking
for a pass or running one, and the switch that turns consolidation on or off. The one way in
for the API, the console, the CLI and the Celery tasks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, cast
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker import errors
from memworker.domain.policy import Policy
from memworker.models import embeddings, llm
from memworker.models.embeddings import Embedder
from memworker.schemas import ProfileOut
from memworker.settings import Settings
from memworker.sleep import consolidation, profile, subjects
from memworker.sleep.consolidation import Report
from memworker.sleep.reports import RunJson, StatusJson, run_json, status_json
from memworker.storage import db, sleep_db
from memworker.storage.db import Conn, Pool
from memworker.tenancy import service as tenancy

Run = sleep_db.Run
AgentGates = sleep_db.AgentGates


def gates(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None = None) -> list[AgentGates]:
    """The tenant's agents with their consolidation gates, by agent id (agent_ids: only those)."""
    return sleep_db.gates(conn, tenant_id=tenant_id, agent_ids=agent_ids)


def agent_gates(conn: Conn, *, tenant_id: UUID, agent_id: str) -> AgentGates:
    """One agent's consolidation gates. Raises NotFound when the agent is not in this tenant."""
    row = sleep_db.agent_gates(conn, tenant_id=tenant_id, agent_id=agent_id)
    if row is None:
        raise errors.NotFound("agent not found")
    return row


def runs(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> list[Run]:
    """The agent's pass reports, newest first."""
    return sleep_db.runs_list(conn, tenant_id=tenant_id, agent_id=agent_id, limit=limit)


def request_pass(conn: Conn, *, tenant_id: UUID, agent_id: str) -> None:
    """Raise the agent's gate: the next sweep takes it for a pass."""
    sleep_db.request_pass(conn, tenant_id=tenant_id, agent_id=agent_id)


@dataclass(frozen=True, slots=True)
class Status:
    """An agent's gates and whether consolidation is on for it."""

    gates: AgentGates
    enabled: bool

    @property
    def flagged(self) -> bool:
        """Its passes failed FLAG_AFTER times in a row: a human should look."""
        return self.gates.consolidation_failures >= consolidation.FLAG_AFTER

    def to_json(self) -> StatusJson:
        return status_json(self.gates, self.enabled)


def status(conn: Conn, settings: Settings, *, tenant_id: UUID, agent_id: str) -> Status:
    """One agent's consolidation status. Raises NotFound for an unknown agent."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    return Status(agent_gates(conn, tenant_id=tenant_id, agent_id=agent_id), consolidation.enabled(policy, settings))


def statuses(conn: Conn, settings: Settings, *, tenant_id: UUID) -> list[Status]:
    """Every agent's consolidation status, by agent id."""
    return [
        Status(g, consolidation.enabled(tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=g.agent_id), settings))
        for g in gates(conn, tenant_id=tenant_id)
    ]


class OverviewJson(TypedDict):
    agents: list[StatusJson]
    runs: list[RunJson]


@dataclass(frozen=True, slots=True)
class Overview:
    """The agents' consolidation status, and one agent's latest pass reports."""

    statuses: list[Status]
    runs: list[Run]  # newest first; none for the whole tenant

    def to_json(self) -> OverviewJson:
        return OverviewJson(agents=[s.to_json() for s in self.statuses], runs=[run_json(r) for r in self.runs])


def overview(conn: Conn, settings: Settings, *, tenant_id: UUID, agent_id: str | None, runs: int) -> Overview:
    """One agent's status and its latest `runs` reports, or every agent's status (no reports).
    Raises NotFound for an unknown agent."""
    if agent_id is None:
        return Overview(statuses(conn, settings, tenant_id=tenant_id), [])
    one = status(conn, settings, tenant_id=tenant_id, agent_id=agent_id)
    return Overview([one], sleep_db.runs_list(conn, tenant_id=tenant_id, agent_id=agent_id, limit=runs))


def run_reports(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> list[RunJson]:
    """The agent's pass reports as JSON, newest first. Raises NotFound for an unknown agent."""
    tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    return [run_json(r) for r in runs(conn, tenant_id=tenant_id, agent_id=agent_id, limit=limit)]


def queue_pass(conn: Conn, settings: Settings, *, tenant_id: UUID, agent_id: str, trigger: str) -> UUID:
    """A queued run for one pass now (the caller enqueues it once this commits), and the
    agent's gate raised as well: if that message is lost, the next sweep takes the agent.
    Raises NotFound for an unknown agent, InvalidInput when its policy has consolidation off
    (with a paid LLM it must be switched on first)."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    if not consolidation.enabled(policy, settings):
        raise errors.InvalidInput(
            "consolidation is off for this agent; set its policy consolidation_enabled to true "
            "(memworker consolidation enable --agent ...)"
        )
    run_id = consolidation.request_run(conn, tenant_id=tenant_id, agent_id=agent_id, trigger=trigger)
    request_pass(conn, tenant_id=tenant_id, agent_id=agent_id)
    return run_id


def run_now(pool: Pool, settings: Settings, *, tenant_id: UUID, agent_id: str, trigger: str) -> Report:
    """Run one pass for the agent in this process, even where its policy has consolidation off
    (an operator asked for it). Raises NotFound for an unknown agent."""
    with db.tenant_tx(pool, tenant_id) as conn:
        tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
        run_id = consolidation.request_run(conn, tenant_id=tenant_id, agent_id=agent_id, trigger=trigger)
    return consolidation.run_pass(
        pool,
        embeddings.for_settings(settings),
        llm.for_settings(settings),
        settings,
        tenant_id=tenant_id,
        agent_id=agent_id,
        run_id=run_id,
        force=True,
    )


def set_enabled(conn: Conn, settings: Settings, *, tenant_id: UUID, agent_id: str | None, value: bool | None) -> bool:
    """Switch consolidation on or off for the tenant (agent_id None) or one agent; value None
    removes the override (back to the default: on offline, off with a paid LLM). Answers
    whether it is on now at that level. Raises NotFound for an unknown agent, InvalidInput
    (nothing kept: the caller rolls back) when the overrides would not be a valid policy."""
    field, stored = "consolidation_enabled", None if value is None else Jsonb(value)
    if agent_id:
        tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
        overrides = sleep_db.set_agent_policy_field(
            conn, tenant_id=tenant_id, agent_id=agent_id, field=field, value=stored
        )
    else:
        overrides = sleep_db.set_tenant_policy_field(conn, tenant_id=tenant_id, field=field, value=stored)
    assert overrides is not None
    Policy.validated(overrides)  # never leave a policy the service would reject
    return consolidation.enabled(tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id), settings)


@dataclass(frozen=True, slots=True)
class Profile:
    """An agent's (or a subject's) profile: its stored document, passed through whole (a
    restored or hand-written one can hold anything)."""

    agent_id: str
    document: dict[str, Any]

    def to_json(self) -> ProfileOut:
        return cast(ProfileOut, {"agent_id": self.agent_id, **self.document})


def agent_profile(
    conn: Conn, *, tenant_id: UUID, agent_id: str, version: int | None = None, subject: str | None = None
) -> Profile:
    """The agent's profile (the latest version, or the given one of the last ten), or a
    subject's, built from its live memories now (no versions). Raises NotFound for an unknown
    agent or version, InvalidInput for both a subject and a version."""
    if subject is not None and version is not None:
        raise errors.InvalidInput("a subject's profile has no versions: give subject or version, not both")
    if subject is not None:
        policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
        doc = subjects.build(conn, tenant_id=tenant_id, agent_id=agent_id, subject=subject, policy=policy)
        return Profile(agent_id, doc)
    tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    doc = profile.load(conn, tenant_id=tenant_id, agent_id=agent_id, version=version)
    if version is not None and doc["version"] != version:
        raise errors.NotFound("profile version not found")
    return Profile(agent_id, doc)


def sweep(pool: Pool, settings: Settings, *, window: datetime, ingest_backlog: int) -> consolidation.Sweep:
    """Claim the agents due for a pass in this window (one queued run each); deferred while the
    ingest queue is longer than settings.consolidation_backlog_max (sleep never starves ingest)."""
    return consolidation.sweep(pool, settings, window=window, ingest_backlog=ingest_backlog)


def run_queued(
    pool: Pool,
    embedder: Embedder,
    client: llm.LLM | None,
    settings: Settings,
    *,
    tenant_id: UUID,
    agent_id: str,
    run_id: UUID,
) -> Report:
    """Run the queued run run_id (consolidation.run_pass): done, skipped, failed, or busy (the
    agent's lock is held: nothing written, try again)."""
    return consolidation.run_pass(
        pool, embedder, client, settings, tenant_id=tenant_id, agent_id=agent_id, run_id=run_id
    )


def give_up(pool: Pool, *, tenant_id: UUID, agent_id: str, run_id: UUID, why: str) -> None:
    """Close a run that could not get the agent's lock after its retries (skipped, with why)."""
    consolidation.give_up(pool, tenant_id=tenant_id, agent_id=agent_id, run_id=run_id, why=why)
