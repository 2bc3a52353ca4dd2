"""Large agents: the HNSW index from which recall takes a large agent's vector candidates
(sql/0019: memories_ann) holds only the agents past EXACT_MAX live memories, and no write
inserts into it: an insert into the dense graph a large agent's clusters need (sql/0019)
costs more than the rest of a memory's write (bench/write_upkeep.py), so writes store a
large agent's memories pending (ann_pending) and recall scans those exactly next to the
index. index() moves them in, in batches, off the write path. An agent crosses once: index()
marks it (its new memories are stored pending from then on), puts its older live memories
in, then marks it ready; from then on recall reads it through the bounded statement. The
retention sweep calls it for an agent it finds past the size, and again on each later sweep
(each one moves the memories written since into the index)."""

from __future__ import annotations

from uuid import UUID

from memworker import errors
from memworker.storage import _sql, core_db, db
from memworker.storage.db import Pool

# The switch: an agent with more live memories than this goes into the HNSW index and recall
# gives it the bounded statement (recall.EXACT_MAX is this number). The exact statement's cost
# grows with the agent, the bounded one's hardly: bench/agent_size.py measured exact 30 ms /
# bounded 58 ms at 10,000 memories and 60 / 49 at 20,000 (the bounded scan of a shared index
# also steps over the larger agents' rows), so the switch sits between them.
EXACT_MAX = 15_000
BATCH = 2_000  # memories put into the index per transaction


def index_if_large(pool: Pool, *, tenant_id: UUID, agent_id: str, live: int) -> int:
    """index() when the agent has more than EXACT_MAX live memories; returns how many
    older memories went into the index (0 once it is in)."""
    if live <= EXACT_MAX:
        return 0
    return index(pool, tenant_id=tenant_id, agent_id=agent_id)


def index(pool: Pool, *, tenant_id: UUID, agent_id: str, batch: int = BATCH) -> int:
    """Put the agent's live memories into the HNSW index and mark it ready for recall's bounded
    statement; returns how many memories went in. Idempotent: an agent already ready has its
    pending memories (written since the last call) moved in. Raises NotFound for an unknown
    agent."""
    with db.tenant_tx(pool, tenant_id) as conn:
        ready = core_db.ann_enable(conn, tenant_id=tenant_id, agent_id=agent_id)
    if ready is None:
        raise errors.NotFound("agent not found")
    if ready:
        return _fill(pool, tenant_id, agent_id, batch, core_db.ann_flush)
    filled = _fill(pool, tenant_id, agent_id, batch, core_db.ann_fill)
    with db.tenant_tx(pool, tenant_id) as conn:
        core_db.ann_ready(conn, tenant_id=tenant_id, agent_id=agent_id)
    # a memory whose write began before ann_enable committed, and ended after the last batch
    return filled + _fill(pool, tenant_id, agent_id, batch, core_db.ann_fill)


def _fill(pool: Pool, tenant_id: UUID, agent_id: str, batch: int, step: _sql.Run) -> int:
    filled = 0
    while True:
        with db.tenant_tx(pool, tenant_id) as conn:
            n = step(conn, tenant_id=tenant_id, agent_id=agent_id, batch=batch)
        filled += n
        if n < batch:
            return filled
