"""Which of a pass's window holds now: of two live memories in an open review (a conflict a
person has not settled yet, governance.add_review) the newer is the better guess at what is
true now, so the older is no evidence for what the pass derives (insights, conclusions, the
profile), and neither side is absorbed into a summary (a merge would remove the memory and its
review with it, and could leave the older value standing alone). docs/consolidation.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from memworker.storage import core_db
from memworker.storage.db import Conn


@dataclass(frozen=True)
class Standing:
    in_conflict: frozenset[str] = field(default_factory=frozenset)  # either side of an open review
    outdated: frozenset[str] = field(default_factory=frozenset)  # the older side: not evidence


def standing(conn: Conn, *, tenant_id: UUID, ids: list[str]) -> Standing:
    """The window's memories in open reviews with live memories (one query)."""
    if not ids:
        return Standing()
    return of_rows(core_db.recall_related(conn, tenant_id=tenant_id, ids=[UUID(i) for i in ids]))


def of_rows(rows: list[core_db.RelatedRow]) -> Standing:
    """Pure: the older side of a review (its other_id) is outdated."""
    conflicts = [r for r in rows if r.relation == "conflict"]
    outdated = {str(r.memory_id) for r in conflicts if not r.newer}
    return Standing(frozenset(str(r.memory_id) for r in conflicts), frozenset(outdated))
