"""Large agents: the HNSW index from which recall takes a large agent's vector candidates
(sql/0012: memories_ann) holds only the agents past EXACT_MAX live memories, because an
HNSW insert costs about as much as the rest of a memory's write and the exact scan serves
small agents as fast. An agent crosses once: index() marks it (its new memories go into the
index as they are written), puts its older live memories in, in batches, then marks it ready;
from then on recall reads it through the bounded statement. The retention sweep calls it for
an agent it finds past the size."""

from __future__ import annotations

from uuid import UUID

from memworker import errors
from memworker.storage import core_db, db
from memworker.storage.db import Pool

# The switch: an agent with more live memories than this goes into the HNSW index and recall
# gives it the bounded statement (recall.EXACT_MAX is this number). Below it the exact scan is
# as fast (bench/agent_size.py) and needs no statistics from elsewhere.
EXACT_MAX = 5_000
BATCH = 2_000  # memories put into the index per transaction


def index_if_large(pool: Pool, *, tenant_id: UUID, agent_id: str, live: int) -> int:
    """index() when the agent has more than EXACT_MAX live memories; returns how many
    older memories went into the index (0 once it is in)."""
    if live <= EXACT_MAX:
        return 0
    return index(pool, tenant_id=tenant_id, agent_id=agent_id)


def index(pool: Pool, *, tenant_id: UUID, agent_id: str, batch: int = BATCH) -> int:
    """Put the agent's live memories into the HNSW index and mark it ready for recall's bounded
    statement; returns how many older memories went in. Idempotent: an agent already ready
    costs one update. Raises NotFound for an unknown agent."""
    with db.tenant_tx(pool, tenant_id) as conn:
        ready = core_db.ann_enable(conn, tenant_id=tenant_id, agent_id=agent_id)
    if ready is None:
        raise errors.NotFound("agent not found")
    if ready:
        return 0
    filled = _fill(pool, tenant_id, agent_id, batch)
    with db.tenant_tx(pool, tenant_id) as conn:
        core_db.ann_ready(conn, tenant_id=tenant_id, agent_id=agent_id)
    # a memory whose write began before ann_enable committed, and ended after the last batch
    return filled + _fill(pool, tenant_id, agent_id, batch)


def _fill(pool: Pool, tenant_id: UUID, agent_id: str, batch: int) -> int:
    filled = 0
    while True:
        with db.tenant_tx(pool, tenant_id) as conn:
            n = core_db.ann_fill(conn, tenant_id=tenant_id, agent_id=agent_id, batch=batch)
        filled += n
        if n < batch:
            return filled
