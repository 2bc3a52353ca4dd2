"""Session items: a session's raw conversation log as an agent framework keeps it (the OpenAI
Agents SDK's Session items: messages, tool calls, their outputs), whole and in order
(sql/0023_session_items.sql; docs/sessions.md, "Session items").

They are not memories: nothing recalls, packs, distils, decays or retains them, and no cap
counts them. Each has a position, its place in the session: an append takes the places
after the last one under the session's row lock, so concurrent appenders never share one
(a pop or a clear frees the places it took: the next append goes on from the last item left).
Reads are allowed on an archived session; a change is refused (Conflict) until it is restored.
They go with their session (forget of the session, of its subject, an agent's erase), and a
forget by text deletes every item holding one of its needles."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker import errors, schemas
from memworker.domain import redact
from memworker.sessions import session
from memworker.storage import sessions_db
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

MAX_ITEM_BYTES = schemas.MAX_SESSION_ITEM_BYTES  # one item as compact UTF-8 JSON: a message or a tool output
MAX_BATCH = schemas.MAX_SESSION_ITEMS_BATCH  # items one append takes


def check(items: list[dict[str, Any]]) -> None:
    """PayloadTooLarge (413) naming the first item over MAX_ITEM_BYTES, before anything is
    written; InvalidInput for an empty or oversized batch."""
    if not items:
        raise errors.InvalidInput("items: give at least one item")
    if len(items) > MAX_BATCH:
        raise errors.InvalidInput(f"items: {len(items)} items; one call takes at most {MAX_BATCH}")
    for i, item in enumerate(items):
        problem = schemas.session_item_problem(item)
        if problem:
            raise errors.PayloadTooLarge(f"items[{i}]: {problem} (nothing was written)")


def append(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    items: list[dict[str, Any]],
    subject: str | None = None,
) -> list[int]:
    """Append the items, in order, after the session's last one; their positions. Raises
    NotFound, Forbidden (not `subject`'s), Conflict (archived), InvalidInput."""
    check(items)
    session.load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id).redact_pii:  # stored redacted, like an episode
        items = [redact.redact_value(i) for i in items]
    places = sessions_db.items_append(
        conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, items=Jsonb(items)
    )
    return sorted(places)


def listing(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, limit: int | None, subject: str | None = None
) -> list[sessions_db.SessionItem]:
    """The session's last `limit` items (None: all), oldest first. An archived session's
    items are read as they were."""
    session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    return sessions_db.items_list(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, limit=limit)


def pop(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None = None
) -> sessions_db.SessionItem | None:
    """Delete and return the session's last item; None when it has none."""
    session.load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    return sessions_db.items_pop(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def clear(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None = None) -> int:
    """Delete every item of the session; how many went."""
    session.load_open(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    return sessions_db.items_clear(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def view(row: sessions_db.SessionItem) -> schemas.SessionItemOut:
    return {"position": row.position, "item": row.item, "created_at": row.created_at.isoformat()}
