"""Sleep's use cases: the agents' consolidation gates, their pass reports, and asking for a pass.
The one way in for the API, the console, the CLI and the Celery tasks."""

from __future__ import annotations

from uuid import UUID

from memworker import errors
from memworker.storage import sleep_db
from memworker.storage.db import Conn

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
