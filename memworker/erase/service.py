"""Erase's use cases: forget what a request names in one agent, one subject across the tenant,
or a whole agent. The one way in for the API, the console, the CLI and the Celery tasks."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from memworker.erase import agents, forget, subjects
from memworker.erase.agents import AgentReceipt
from memworker.erase.forget import Receipt, Request
from memworker.erase.subjects import SubjectReceipt
from memworker.storage.db import Conn

__all__ = [
    "MAX_IDS",
    "AgentReceipt",
    "Receipt",
    "Request",
    "SubjectReceipt",
    "erase_agent",
    "forget_in_agent",
    "forget_subject",
]

MAX_IDS = forget.MAX_IDS  # memory ids one request may name


def forget_in_agent(
    conn: Conn, *, tenant_id: UUID, agent_id: str, request: Request, actor: str, now: datetime | None = None
) -> Receipt:
    """Erase what the request names from the agent (memworker/erase/forget.py); the receipt.
    Raises NotFound, InvalidInput, Unavailable (nothing erased)."""
    return forget.forget(conn, tenant_id=tenant_id, agent_id=agent_id, request=request, actor=actor, now=now)


def forget_subject(
    conn: Conn, *, tenant_id: UUID, subject: str, actor: str, keep_turns: bool = False
) -> SubjectReceipt:
    """Erase the subject from every agent and pool of the tenant (memworker/erase/subjects.py).
    Raises InvalidInput, Unavailable (nothing erased)."""
    return subjects.forget_subject(conn, tenant_id=tenant_id, subject=subject, actor=actor, keep_turns=keep_turns)


def erase_agent(conn: Conn, *, tenant_id: UUID, agent_id: str) -> AgentReceipt:
    """Erase the agent and everything of it (memworker/erase/agents.py). Raises NotFound."""
    return agents.erase_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
