"""What sleep built from a memory, when that memory is superseded (governance.supersede calls
on_superseded in the same transaction): nothing derived from a fact that no longer holds is
served as current.

- An insight or conclusion whose evidence (metadata.evidence) names the superseded memory is
  retired too (valid_to, kept for history as long as the memory itself; no superseded_by) with
  a 'superseded' event naming the evidence that changed and the memory that replaced it; its
  other live evidence and the newer memory go back into sleep's window and the agent is asked
  for a pass, so the next pass builds again from what is true now.
- A summary naming a message the memory came from stays (a dated record of what was said,
  which carries its turns) and is marked: metadata.outdated names the memory and its
  replacement, with an 'outdated' event.

docs/lifecycle.md, "What sleep built from a superseded memory"."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker.domain import memories
from memworker.storage import sleep_db, store
from memworker.storage.db import Conn

RETIRED_KINDS = (memories.Kind.INSIGHT, memories.Kind.CONCLUSION)


@dataclass
class Outcome:
    """What one supersede did to the memories derived from the superseded one."""

    retired: list[UUID] = field(default_factory=list)  # insights and conclusions out of recall
    marked: list[UUID] = field(default_factory=list)  # summaries that name what changed
    requeued: list[UUID] = field(default_factory=list)  # evidence back in sleep's window


def on_superseded(
    conn: Conn, *, tenant_id: UUID, agent_id: str, older_id: UUID, newer_id: UUID, now: datetime
) -> Outcome:
    """Retire or mark what sleep derived from older_id, now superseded by newer_id (the
    caller's transaction; docstring of the module)."""
    ids: dict[str, Any] = {"tenant_id": tenant_id, "agent_id": agent_id}
    found = sleep_db.derived_of(conn, older_id=older_id, now=now, **ids)
    out = Outcome()
    if not found:
        return out
    why = f"evidence memory:{older_id} superseded by memory:{newer_id}"
    stale = [d.id for d in found if d.kind in RETIRED_KINDS]
    if stale:
        out.retired = sleep_db.derived_retire(conn, ids=stale, older_id=older_id, now=now, **ids)
        for mid in out.retired:
            store.event(conn, memory_id=mid, event="superseded", reason=why, related_ids=[older_id, newer_id], **ids)
        evidence = {UUID(e) for d in found if d.id in out.retired for e in d.evidence if _is_uuid(e)}
        evidence = (evidence - {older_id}) | {newer_id}
        out.requeued = sleep_db.derived_requeue(conn, ids=sorted(evidence), **ids)
        sleep_db.request_pass(conn, **ids)
    summaries = [d.id for d in found if d.kind == memories.Kind.SUMMARY]
    if summaries:
        mark = Jsonb([{"memory_id": str(older_id), "superseded_by": str(newer_id), "at": now.isoformat()}])
        out.marked = sleep_db.derived_mark(conn, ids=summaries, mark=mark, now=now, **ids)
        for mid in out.marked:
            store.event(conn, memory_id=mid, event="outdated", reason=why, related_ids=[older_id, newer_id], **ids)
    return out


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return True
