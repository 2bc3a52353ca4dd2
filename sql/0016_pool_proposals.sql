-- Pool proposals: what a sleep pass found that several agents of the tenant learnt
-- independently (the same normalised words), waiting for a person to approve it into a
-- shared pool or reject it, when the agent's policy says pools_propose = 'review'
-- (memworker/fleet/proposals.py, docs/subjects.md). Nothing reaches the pool before approval.
--
-- One row per pool and fact (content_hash): the next pass, or another agent's pass, adds its
-- sources to the open row instead of a second one, and a rejected fact is not proposed again.
-- sources are provenance strings 'memory:<agent>/<id>', as a pool copy's provenance names
-- them: erasing any of those memories deletes the row (forgetting reaches proposals as it
-- reaches copies).
CREATE TABLE memworker.pool_proposals (
  id              uuid NOT NULL DEFAULT gen_random_uuid(),
  tenant_id       uuid NOT NULL,
  pool            text NOT NULL,            -- the pool's agents row: 'pool~<name>'
  agent_id        text NOT NULL,            -- the agent whose pass proposed it first
  memory_id       uuid NOT NULL,            -- that agent's memory: the text a copy takes
  content_hash    text NOT NULL,
  sources         text[] NOT NULL CHECK (cardinality(sources) BETWEEN 1 AND 100),
  status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'approved', 'rejected')),
  pool_memory_id  uuid,                     -- the pool memory an approval wrote or confirmed
  reason          text,
  decided_by      text,
  decided_at      timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, id),
  UNIQUE (tenant_id, pool, content_hash),
  FOREIGN KEY (tenant_id, pool) REFERENCES memworker.agents (tenant_id, id) ON DELETE CASCADE,
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents (tenant_id, id) ON DELETE CASCADE,
  CHECK (starts_with(pool, 'pool~')),
  CHECK ((status = 'open') = (decided_at IS NULL))
);
CREATE INDEX pool_proposals_listing ON memworker.pool_proposals (tenant_id, pool, status, created_at);
CREATE INDEX pool_proposals_agent ON memworker.pool_proposals (tenant_id, agent_id);
-- erase: the rows naming any of the erased memories
CREATE INDEX pool_proposals_sources ON memworker.pool_proposals USING gin (sources);

ALTER TABLE memworker.pool_proposals ENABLE ROW LEVEL SECURITY;
ALTER TABLE memworker.pool_proposals FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memworker.pool_proposals USING (tenant_id = memworker.current_tenant())
  WITH CHECK (tenant_id = memworker.current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON memworker.pool_proposals TO memworker_app;
