"""Where a pool proposal is (pool_proposals.status: sql/schema.sql checks these values)."""

from __future__ import annotations

from memworker.domain.memories import Word


class ProposalStatus(Word):
    """Open until a person decides it: approved (shared into the pool) or rejected (never
    proposed to this pool again, nor shared into it automatically)."""

    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
