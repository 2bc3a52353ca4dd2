-- Lifecycle governance (issue 6): retention reports, the review list of contradictions,
-- merged-away ids that resolve to their survivor, and the bookkeeping columns the rules
-- need. See docs/lifecycle.md.

-- Evidence and decay bookkeeping on memories.
ALTER TABLE memworker.memories
  ADD COLUMN confirmations integer NOT NULL DEFAULT 0,  -- later episodes that said the same
  ADD COLUMN confirmed_at  timestamptz,                 -- the latest of them
  ADD COLUMN decayed_at    timestamptz;                 -- salience/confidence decayed up to here

-- Deleting a memory sets superseded_by NULL on the rows it superseded; without an index
-- every delete (purge, forget, merge) would scan the whole table for them.
CREATE INDEX memories_superseded_by ON memworker.memories (superseded_by)
  WHERE superseded_by IS NOT NULL;
-- The purge of expired rows, per agent.
CREATE INDEX memories_expiry ON memworker.memories (tenant_id, agent_id, expires_at)
  WHERE expires_at IS NOT NULL;

-- When retention last looked at the agent (any outcome), and the clock of its last
-- complete sweep (merge and contradiction checks look at what changed since then).
ALTER TABLE memworker.agents
  ADD COLUMN retention_at      timestamptz,
  ADD COLUMN retention_done_at timestamptz;
CREATE INDEX agents_retention_at ON memworker.agents (retention_at NULLS FIRST);

-- One row per retention sweep of one agent: the queryable report.
CREATE TABLE memworker.retention_runs (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id         uuid NOT NULL,
  agent_id          text NOT NULL,
  run_key           text NOT NULL,        -- 'beat:<window>' makes a double-fired beat harmless
  trigger           text NOT NULL,        -- beat | api | cli
  status            text NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'done', 'partial', 'skipped', 'failed')),
  clock             timestamptz NOT NULL, -- the "now" the rules were judged at
  started_at        timestamptz NOT NULL DEFAULT now(),
  finished_at       timestamptz,
  scanned           integer NOT NULL DEFAULT 0,  -- live memories of the agent at the start
  expired           integer NOT NULL DEFAULT 0,
  forgotten_age     integer NOT NULL DEFAULT 0,  -- old and never recalled (seed 002)
  forgotten_unused  integer NOT NULL DEFAULT 0,  -- not accessed for unused_days (seed 001)
  forgotten_cap     integer NOT NULL DEFAULT 0,  -- over max_episodic
  decayed           integer NOT NULL DEFAULT 0,
  promoted          integer NOT NULL DEFAULT 0,
  merged            integer NOT NULL DEFAULT 0,
  superseded        integer NOT NULL DEFAULT 0,
  reviews           integer NOT NULL DEFAULT 0,
  batches           integer NOT NULL DEFAULT 0,
  duration_ms       integer,
  skipped_reason    text,
  error             text,
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE,
  UNIQUE (tenant_id, agent_id, run_key)
);
CREATE INDEX retention_runs_recent ON memworker.retention_runs (tenant_id, agent_id, started_at DESC);

-- Contradictions the validate/repair rules could not resolve on their own.
CREATE TABLE memworker.memory_reviews (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    uuid NOT NULL,
  agent_id     text NOT NULL,
  memory_id    uuid NOT NULL REFERENCES memworker.memories(id) ON DELETE CASCADE, -- the newer
  other_id     uuid NOT NULL REFERENCES memworker.memories(id) ON DELETE CASCADE, -- the older
  reason       text NOT NULL,
  status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
  resolution   text,
  resolved_by  text,
  resolved_at  timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  CHECK (memory_id <> other_id),
  UNIQUE (tenant_id, memory_id, other_id)
);
CREATE INDEX memory_reviews_open ON memworker.memory_reviews (tenant_id, agent_id, status, created_at);
CREATE INDEX memory_reviews_other ON memworker.memory_reviews (other_id);

-- A merged-away id and the survivor it resolves to (the row itself is gone).
CREATE TABLE memworker.memory_aliases (
  tenant_id   uuid NOT NULL,
  agent_id    text NOT NULL,
  alias_id    uuid NOT NULL,
  memory_id   uuid NOT NULL REFERENCES memworker.memories(id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, alias_id)
);
CREATE INDEX memory_aliases_survivor ON memworker.memory_aliases (memory_id);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['retention_runs', 'memory_reviews', 'memory_aliases'] LOOP
    EXECUTE format('ALTER TABLE memworker.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE memworker.%I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant_isolation ON memworker.%I USING (tenant_id = memworker.current_tenant()) '
                   'WITH CHECK (tenant_id = memworker.current_tenant())', t);
  END LOOP;
END $$;

-- Agents whose retention sweep is due: not looked at since p_before. Runs as the owner
-- so beat can list agents across tenants; it returns ids only.
CREATE FUNCTION memworker.retention_due(p_before timestamptz, p_limit integer)
RETURNS TABLE (tenant_id uuid, agent_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  SELECT a.tenant_id, a.id FROM memworker.agents a
  WHERE a.retention_at IS NULL OR a.retention_at < p_before
  ORDER BY a.retention_at NULLS FIRST, a.tenant_id, a.id
  LIMIT p_limit
$$;
REVOKE ALL ON FUNCTION memworker.retention_due(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memworker.retention_due(timestamptz, integer) TO memworker_app;

GRANT SELECT, INSERT, UPDATE, DELETE ON memworker.retention_runs, memworker.memory_reviews,
  memworker.memory_aliases TO memworker_app;
-- Tenant policy defaults are written through the API (PUT /v1/policy): that column only.
GRANT UPDATE (policy) ON memworker.tenants TO memworker_app;
