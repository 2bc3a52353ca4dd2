-- memworker schema, version 1. Applied by `memworker migrate` (or psql alone) as the owner role.
-- Every tenant-owned table carries tenant_id NOT NULL, leads its indexes with it, and is
-- protected by row-level security keyed on the per-transaction setting memworker.tenant_id.

CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS memworker;

-- The application role owns nothing and cannot bypass RLS. Deployments GRANT it to their
-- login role; the embedded stack logs in as it directly.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'memworker_app') THEN
    CREATE ROLE memworker_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
  END IF;
END $$;

CREATE FUNCTION memworker.current_tenant() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT nullif(current_setting('memworker.tenant_id', true), '')::uuid
$$;

CREATE TABLE memworker.tenants (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
  policy      jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memworker.api_keys (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id   uuid NOT NULL REFERENCES memworker.tenants(id) ON DELETE CASCADE,
  prefix      text NOT NULL UNIQUE,          -- shown in listings; the secret part is never stored
  key_hash    bytea NOT NULL,                -- sha256 of the whole key
  name        text NOT NULL DEFAULT '',
  scopes      text[] NOT NULL,
  agent_ids   text[],                        -- NULL: every agent of the tenant
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz,
  revoked_at  timestamptz
);
CREATE INDEX ON memworker.api_keys (tenant_id);

CREATE TABLE memworker.agents (
  tenant_id               uuid NOT NULL REFERENCES memworker.tenants(id) ON DELETE CASCADE,
  id                      text NOT NULL,
  policy                  jsonb NOT NULL DEFAULT '{}',
  created_at              timestamptz NOT NULL DEFAULT now(),
  last_episode_at         timestamptz,
  last_consolidated_at    timestamptz,
  sessions_since_pass     integer NOT NULL DEFAULT 0,
  consolidation_requested boolean NOT NULL DEFAULT false,
  consolidation_failures  integer NOT NULL DEFAULT 0,
  next_consolidation_at   timestamptz,
  PRIMARY KEY (tenant_id, id)
);

CREATE TABLE memworker.episodes (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL,
  agent_id         text NOT NULL,
  session_id       text,
  idempotency_key  text,
  content          text NOT NULL,           -- the raw episode; memories point back here
  messages         jsonb,                   -- [{role, content}] when given as messages
  metadata         jsonb NOT NULL DEFAULT '{}',
  occurred_at      timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now(),
  status           text NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'processing', 'stored', 'failed', 'dead')),
  attempts         integer NOT NULL DEFAULT 0,
  last_error       text,
  lease_until      timestamptz,             -- a 'processing' claim expires here
  enqueued_at      timestamptz,
  stored_at        timestamptz,
  memory_ids       uuid[] NOT NULL DEFAULT '{}',
  reflection       jsonb,                   -- a paid LLM answer, kept so a retry does not pay again
  reflector        text,                    -- 'offline' | 'openai:<model>' | 'offline (llm failed: <why>)'
  llm_calls        integer NOT NULL DEFAULT 0,
  tokens_in        integer NOT NULL DEFAULT 0,
  tokens_out       integer NOT NULL DEFAULT 0,
  llm_ms           integer NOT NULL DEFAULT 0,
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE,
  UNIQUE (tenant_id, agent_id, idempotency_key)
);
CREATE INDEX ON memworker.episodes (tenant_id, agent_id, created_at);
CREATE INDEX episodes_open ON memworker.episodes (status, lease_until)
  WHERE status IN ('queued', 'processing', 'failed');

CREATE TABLE memworker.memories (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL,
  agent_id         text NOT NULL,
  text             text NOT NULL CHECK (length(text) BETWEEN 1 AND 281),
  kind             text NOT NULL DEFAULT 'fact',
  tier             text NOT NULL DEFAULT 'L1' CHECK (tier IN ('L0', 'L1', 'L2', 'L3')),
  salience         real NOT NULL DEFAULT 0.5 CHECK (salience BETWEEN 0 AND 1),
  confidence       real NOT NULL DEFAULT 0.7 CHECK (confidence BETWEEN 0 AND 1),
  access_count     integer NOT NULL DEFAULT 0,
  last_access_at   timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz,
  valid_from       timestamptz NOT NULL DEFAULT now(),
  valid_to         timestamptz,             -- set when superseded or retired: out of recall
  superseded_by    uuid REFERENCES memworker.memories(id) ON DELETE SET NULL,
  consolidated_at  timestamptz,
  session_id       text,
  entities         text[] NOT NULL DEFAULT '{}',
  topics           text[] NOT NULL DEFAULT '{}',
  provenance       text[] NOT NULL DEFAULT '{}', -- 'episode:<id>', 'episode:<id>#m0,2', 'consolidation:<run>', 'api'
  metadata         jsonb NOT NULL DEFAULT '{}',
  source_key       text NOT NULL,           -- idempotency: one row per (episode, item) or request
  content_hash     text NOT NULL,           -- sha256 of normalised text, for exact dedup
  trust            text NOT NULL DEFAULT 'episode', -- source: episode, api, consolidation
  flags            text[] NOT NULL DEFAULT '{}',
  doc_len          integer NOT NULL DEFAULT 0, -- BM25 document length in tokens
  embedding        vector(384) NOT NULL,
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE,
  UNIQUE (tenant_id, source_key)
);
-- The per-agent scan behind BM25 statistics and exact vector search.
CREATE INDEX memories_agent ON memworker.memories (tenant_id, agent_id, created_at);
CREATE INDEX memories_hash ON memworker.memories (tenant_id, agent_id, content_hash);
CREATE INDEX memories_session ON memworker.memories (tenant_id, agent_id, session_id);

-- BM25 postings: one row per (memory, term), maintained with the memory's text.
CREATE TABLE memworker.memory_terms (
  tenant_id  uuid NOT NULL,
  agent_id   text NOT NULL,
  term       text NOT NULL,
  memory_id  uuid NOT NULL REFERENCES memworker.memories(id) ON DELETE CASCADE,
  tf         integer NOT NULL CHECK (tf > 0),
  PRIMARY KEY (tenant_id, agent_id, term, memory_id)
);
CREATE INDEX ON memworker.memory_terms (memory_id);

CREATE TABLE memworker.memory_connections (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id     uuid NOT NULL,
  agent_id      text NOT NULL,
  from_id       uuid NOT NULL REFERENCES memworker.memories(id) ON DELETE CASCADE,
  to_id         uuid NOT NULL REFERENCES memworker.memories(id) ON DELETE CASCADE,
  relationship  text NOT NULL,
  insight_id    uuid REFERENCES memworker.memories(id) ON DELETE SET NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CHECK (from_id <> to_id),
  UNIQUE (from_id, to_id, relationship)
);
CREATE INDEX ON memworker.memory_connections (tenant_id, agent_id);
CREATE INDEX ON memworker.memory_connections (to_id);
CREATE INDEX ON memworker.memory_connections (insight_id);

CREATE TABLE memworker.consolidation_runs (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id            uuid NOT NULL,
  agent_id             text NOT NULL,
  run_key              text NOT NULL,       -- makes a double-fired pass harmless
  trigger              text NOT NULL,
  status               text NOT NULL DEFAULT 'running'
                       CHECK (status IN ('running', 'done', 'skipped', 'failed')),
  started_at           timestamptz NOT NULL DEFAULT now(),
  finished_at          timestamptz,
  items_reviewed       integer NOT NULL DEFAULT 0,
  connections_made     integer NOT NULL DEFAULT 0,
  insights_written     integer NOT NULL DEFAULT 0,
  conclusions_written  integer NOT NULL DEFAULT 0,
  salience_rerated     integer NOT NULL DEFAULT 0,
  skipped_reason       text,
  error                text,
  llm_calls            integer NOT NULL DEFAULT 0,
  tokens_in            integer NOT NULL DEFAULT 0,
  tokens_out           integer NOT NULL DEFAULT 0,
  duration_ms          integer,
  report               jsonb NOT NULL DEFAULT '{}',
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE,
  UNIQUE (tenant_id, agent_id, run_key)
);

-- Audit: ids and reasons, never memory text.
CREATE TABLE memworker.memory_events (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id    uuid NOT NULL,
  agent_id     text NOT NULL,
  memory_id    uuid,
  event        text NOT NULL,   -- created, strengthened, merged, superseded, promoted, expired, forgotten, updated
  reason       text NOT NULL DEFAULT '',
  actor        text NOT NULL DEFAULT 'system',
  related_ids  uuid[] NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON memworker.memory_events (tenant_id, agent_id, memory_id);

-- Row-level security: a transaction sees only the tenant it set; with none set, nothing.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['api_keys', 'agents', 'episodes', 'memories', 'memory_terms',
                           'memory_connections', 'consolidation_runs', 'memory_events'] LOOP
    EXECUTE format('ALTER TABLE memworker.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE memworker.%I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant_isolation ON memworker.%I USING (tenant_id = memworker.current_tenant()) '
                   'WITH CHECK (tenant_id = memworker.current_tenant())', t);
  END LOOP;
END $$;
ALTER TABLE memworker.tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE memworker.tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memworker.tenants USING (id = memworker.current_tenant());

-- The few cross-tenant lookups the service needs run as the owner, narrowly.
CREATE FUNCTION memworker.authenticate(p_prefix text)
RETURNS TABLE (key_id uuid, tenant_id uuid, key_hash bytea, scopes text[], agent_ids text[],
               expires_at timestamptz, revoked_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  SELECT id, tenant_id, key_hash, scopes, agent_ids, expires_at, revoked_at
  FROM memworker.api_keys WHERE prefix = p_prefix
$$;

-- Episodes whose queue message may be lost: queued and never picked up, or whose claim expired.
CREATE FUNCTION memworker.stale_episodes(p_queued_before timestamptz, p_limit integer)
RETURNS TABLE (tenant_id uuid, episode_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  SELECT e.tenant_id, e.id FROM memworker.episodes e
  WHERE (e.status IN ('queued', 'failed') AND coalesce(e.enqueued_at, e.created_at) < p_queued_before)
     OR (e.status = 'processing' AND e.lease_until < now())
  ORDER BY e.created_at
  LIMIT p_limit
$$;

REVOKE ALL ON FUNCTION memworker.authenticate(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION memworker.stale_episodes(timestamptz, integer) FROM PUBLIC;
GRANT USAGE ON SCHEMA memworker TO memworker_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON memworker.api_keys, memworker.agents, memworker.episodes,
  memworker.memories, memworker.memory_terms, memworker.memory_connections,
  memworker.consolidation_runs, memworker.memory_events TO memworker_app;
GRANT SELECT ON memworker.tenants TO memworker_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA memworker TO memworker_app;
GRANT EXECUTE ON FUNCTION memworker.authenticate(text) TO memworker_app;
GRANT EXECUTE ON FUNCTION memworker.stale_episodes(timestamptz, integer) TO memworker_app;
