"""Rumination: once a day, look back over the sessions an agent archived the day
before and distil what they have in common into new long-term memories: one episode per
agent and day, reflected like any other (by the LLM when one is configured). Off by
default (policy rumination_enabled); the beat task passes the day it covers, and the
episode's idempotency key is that day, so a double fire writes nothing twice."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from uuid import UUID

from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.ingest import intake
from memworker.sessions import archive, plans
from memworker.sessions.working import ItemKind
from memworker.storage import db, sessions_db
from memworker.storage.db import Pool
from memworker.tenancy import service as tenancy

MAX_AGENTS = 10_000  # per day; the rest would wait for tomorrow's window (logged by the task)


def day_window(when: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the UTC day before `when`'s day."""
    end = when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return end - timedelta(days=1), end


def due(pool: Pool, *, start: datetime, end: datetime) -> list[tuple[UUID, str]]:
    """Agents with sessions archived in [start, end) whose policy has rumination on."""
    defaults = {"rumination_enabled": Policy().rumination_enabled}
    with db.system_tx(pool) as conn:
        rows = sessions_db.rumination_due(conn, start=start, end=end, defaults=defaults, limit=MAX_AGENTS)
    return [(r.tenant_id, r.agent_id) for r in rows]


def lines_of(snapshots: list[list[archive.Line]], day: str) -> list[str]:
    """What the day's sessions say together: their goals, what recurs across sessions
    (constraints, decisions, questions stated in two or more), questions left open, how
    the plans ended. Pure."""
    goals, outcomes = [], []
    seen_in: Counter[tuple[str, str]] = Counter()
    text_of: dict[tuple[str, str], str] = {}
    open_questions: list[str] = []
    for lines in snapshots:
        doc = next(x["document"] for x in lines if x["type"] == "working")
        plan = next(x["document"] for x in lines if x["type"] == "plan")
        if doc.get("goal"):
            goals.append(doc["goal"])
        keys = set()
        for item in doc.get("items", []):
            if item.get("text"):
                key = (item["kind"], memories.normalise(item["text"]))
                keys.add(key)
                text_of.setdefault(key, item["text"])
                if item["kind"] == "question":
                    open_questions.append(item["text"])
        seen_in.update(keys)
        if plan:
            r = plans.resume(plan)
            title = plan.get("title") or doc.get("goal") or "a plan"
            outcomes.append(f"{title} finished" if r["done"] else f"{title} stopped at {r['progress']}%")
    label: dict[str, str] = {
        ItemKind.CONSTRAINT: "constraint",
        ItemKind.DECISION: "decision",
        ItemKind.QUESTION: "open question",
        ItemKind.CANDIDATE: "point worth remembering",
    }
    out = [f"On {day} the agent worked in {len(snapshots)} archived sessions."]
    if goals:
        out.append("Session goals: " + "; ".join(dict.fromkeys(goals)) + ".")
    for key, n in seen_in.most_common():
        if n >= 2:
            out.append(f"A recurring {label[key[0]]} across {n} sessions: {text_of[key]}")
    if open_questions:
        out.append("Questions still open: " + "; ".join(dict.fromkeys(open_questions)) + ".")
    if outcomes:
        out.append("Plans: " + "; ".join(outcomes) + ".")
    return out


def ruminate(pool: Pool, *, tenant_id: UUID, agent_id: str, start: datetime, end: datetime) -> UUID | None:
    """Write the agent's rumination episode for [start, end); returns its id when it is new
    (to be published), None when there was nothing or it was written before."""
    day = start.date().isoformat()
    with db.tenant_tx(pool, tenant_id) as conn:
        policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
        if not policy.rumination_enabled:
            return None
        rows = sessions_db.archives_in_window(conn, tenant_id=tenant_id, agent_id=agent_id, start=start, end=end)
        if not rows:
            return None
        snapshots = [archive.decode(bytes(r.data)) for r in rows]
        sids = sorted({r.session_id for r in rows})
        ((episode_id, new),) = intake.accept(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            episodes=[
                intake.NewEpisode(
                    "\n".join(lines_of(snapshots, day)),
                    idempotency_key=f"rumination:{day}",
                    metadata={"source": "rumination", "day": day, "sessions": sids},
                )
            ],
        )
    return episode_id if new else None
