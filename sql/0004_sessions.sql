-- Sessions (issue 7, seeds 004 and 001; docs/sessions.md): per-session working memory and
-- execution plan, the context-call log, compressed versioned archives, and tenant webhooks
-- with their delivery outbox. Everything session-scoped is keyed by
-- (tenant_id, agent_id, session_id) so one DELETE of the session row (cascading) forgets it.

CREATE TABLE memworker.sessions (
  tenant_id              uuid NOT NULL,
  agent_id               text NOT NULL,
  id                     text NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
  status                 text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'archived')),
  metadata               jsonb NOT NULL DEFAULT '{}',
  working                jsonb NOT NULL DEFAULT '{}',  -- goal, intent, bounded items (memworker/sessions.py)
  plan                   jsonb,                        -- milestones and steps; NULL: no plan
  revision               integer NOT NULL DEFAULT 0,   -- bumped by every working or plan change
  window_tokens          integer CHECK (window_tokens > 0), -- the client model's context window
  log_tokens             integer NOT NULL DEFAULT 0,   -- transcript tokens stored since the last flush
  last_context_tokens    integer NOT NULL DEFAULT 0,   -- size of the last context built
  reported_used          real,                         -- the client's last reported use (0..1)
  flush_armed            boolean NOT NULL DEFAULT true, -- false after a flush until use drops again
  flush_count            integer NOT NULL DEFAULT 0,
  flushed_at             timestamptz,
  flushed_revision       integer NOT NULL DEFAULT 0,   -- working/plan revision the last flush covered
  last_flush_episode_id  uuid,
  archive_count          integer NOT NULL DEFAULT 0,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  archived_at            timestamptz,
  restored_at            timestamptz,
  PRIMARY KEY (tenant_id, agent_id, id),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX sessions_recent ON memworker.sessions (tenant_id, agent_id, updated_at DESC);

-- One row per context call made for a session (sessionless calls are not logged). Memory
-- ids only, never memory text: a forgotten memory leaves nothing readable here.
CREATE TABLE memworker.context_calls (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id           uuid NOT NULL,
  agent_id            text NOT NULL,
  session_id          text NOT NULL,
  query               text NOT NULL,
  max_tokens          integer NOT NULL,
  tokens              integer NOT NULL,
  memory_ids          uuid[] NOT NULL DEFAULT '{}',
  dropped             jsonb NOT NULL DEFAULT '{}',   -- items left out per section
  sections            jsonb NOT NULL DEFAULT '{}',   -- tokens per section
  used                real,                          -- context use (reported or estimated) at the call
  created_at          timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (tenant_id, agent_id, session_id) REFERENCES memworker.sessions(tenant_id, agent_id, id)
    ON DELETE CASCADE
);
CREATE INDEX context_calls_session ON memworker.context_calls (tenant_id, agent_id, session_id, created_at);

-- Archives: gzip-compressed JSONL snapshots, numbered per session (a restored session can
-- be archived again), with the format version of their content.
CREATE TABLE memworker.session_archives (
  tenant_id           uuid NOT NULL,
  agent_id            text NOT NULL,
  session_id          text NOT NULL,
  version             integer NOT NULL CHECK (version > 0),  -- 1, 2, ... per session
  format_version      integer NOT NULL,
  data                bytea NOT NULL,                 -- gzip(JSONL)
  bytes               integer NOT NULL,               -- compressed size
  raw_bytes           integer NOT NULL,               -- JSONL size
  sha256              text NOT NULL,                  -- of the JSONL
  counts              jsonb NOT NULL DEFAULT '{}',
  episode_ids         uuid[] NOT NULL DEFAULT '{}',   -- episodes copied in (for forget)
  distill_episode_id  uuid,                           -- the summary episode the archive wrote
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, agent_id, session_id, version),
  FOREIGN KEY (tenant_id, agent_id, session_id) REFERENCES memworker.sessions(tenant_id, agent_id, id)
    ON DELETE CASCADE
);
-- Already gzip: store out of line without a second compression attempt.
ALTER TABLE memworker.session_archives ALTER COLUMN data SET STORAGE EXTERNAL;
-- Rumination's daily window scan runs across tenants (SECURITY DEFINER below), by time.
CREATE INDEX session_archives_created ON memworker.session_archives (created_at);
CREATE INDEX session_archives_episodes ON memworker.session_archives USING gin (episode_ids);

-- Tenant webhooks. The secret is kept (it signs every delivery) and shown once at creation.
CREATE TABLE memworker.webhooks (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id    uuid NOT NULL REFERENCES memworker.tenants(id) ON DELETE CASCADE,
  url          text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2000),
  secret       text NOT NULL,
  events       text[] NOT NULL CHECK (cardinality(events) > 0
                                      AND events <@ ARRAY['pre_turn', 'post_turn', 'archive']),
  agent_ids    text[],                                -- NULL: every agent of the tenant
  description  text NOT NULL DEFAULT '',
  active       boolean NOT NULL DEFAULT true,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_tenant ON memworker.webhooks (tenant_id);

-- The outbox: a delivery row is written in the transaction of the event it reports, then a
-- worker sends it (at least once; receivers dedupe on the delivery id).
CREATE TABLE memworker.webhook_deliveries (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL,
  webhook_id       uuid NOT NULL REFERENCES memworker.webhooks(id) ON DELETE CASCADE,
  event            text NOT NULL,
  agent_id         text NOT NULL,
  session_id       text,
  payload          jsonb NOT NULL,
  status           text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'sending', 'delivered', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  lease_until      timestamptz,
  last_status      integer,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz
);
CREATE INDEX webhook_deliveries_hook ON memworker.webhook_deliveries (tenant_id, webhook_id, created_at DESC);
CREATE INDEX webhook_deliveries_session ON memworker.webhook_deliveries (tenant_id, agent_id, session_id);
-- The sweep's scan for due and stuck deliveries, across tenants.
CREATE INDEX webhook_deliveries_due ON memworker.webhook_deliveries (next_attempt_at)
  WHERE status IN ('pending', 'sending');
-- ... and the prune of finished ones.
CREATE INDEX webhook_deliveries_done ON memworker.webhook_deliveries (created_at)
  WHERE status IN ('delivered', 'failed');

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['sessions', 'context_calls', 'session_archives', 'webhooks',
                           'webhook_deliveries'] LOOP
    EXECUTE format('ALTER TABLE memworker.%I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE memworker.%I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant_isolation ON memworker.%I USING (tenant_id = memworker.current_tenant()) '
                   'WITH CHECK (tenant_id = memworker.current_tenant())', t);
  END LOOP;
END $$;

-- Deliveries due (pending and past their time) or stuck (a sender's lease ran out): the
-- sweep re-sends them when their queue message was lost. Ids only.
CREATE FUNCTION memworker.due_webhook_deliveries(p_before timestamptz, p_limit integer)
RETURNS TABLE (tenant_id uuid, delivery_id uuid)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  SELECT d.tenant_id, d.id FROM memworker.webhook_deliveries d
  WHERE (d.status = 'pending' AND d.next_attempt_at < p_before)
     OR (d.status = 'sending' AND d.lease_until < now())
  ORDER BY d.next_attempt_at
  LIMIT p_limit
$$;

-- Finished deliveries older than p_before are deleted (the outbox is not an archive).
CREATE FUNCTION memworker.prune_webhook_deliveries(p_before timestamptz)
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  WITH gone AS (
    DELETE FROM memworker.webhook_deliveries
    WHERE status IN ('delivered', 'failed') AND created_at < p_before
    RETURNING 1)
  SELECT count(*) FROM gone
$$;

-- Rumination: agents with sessions archived in [p_from, p_to) whose effective policy has
-- rumination_enabled (agent override, else tenant override, else p_defaults). Ids only.
CREATE FUNCTION memworker.rumination_due(p_from timestamptz, p_to timestamptz, p_defaults jsonb,
                                         p_limit integer)
RETURNS TABLE (tenant_id uuid, agent_id text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  SELECT DISTINCT a.tenant_id, a.id
  FROM memworker.session_archives s
  JOIN memworker.agents a ON a.tenant_id = s.tenant_id AND a.id = s.agent_id
  JOIN memworker.tenants t ON t.id = a.tenant_id
  WHERE s.created_at >= p_from AND s.created_at < p_to
    AND (memworker.policy_value(a.policy, t.policy, p_defaults, 'rumination_enabled'))::boolean
  ORDER BY a.tenant_id, a.id
  LIMIT p_limit
$$;

REVOKE ALL ON FUNCTION memworker.due_webhook_deliveries(timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION memworker.prune_webhook_deliveries(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION memworker.rumination_due(timestamptz, timestamptz, jsonb, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memworker.due_webhook_deliveries(timestamptz, integer) TO memworker_app;
GRANT EXECUTE ON FUNCTION memworker.prune_webhook_deliveries(timestamptz) TO memworker_app;
GRANT EXECUTE ON FUNCTION memworker.rumination_due(timestamptz, timestamptz, jsonb, integer) TO memworker_app;

GRANT SELECT, INSERT, UPDATE, DELETE ON memworker.sessions, memworker.context_calls,
  memworker.session_archives, memworker.webhooks, memworker.webhook_deliveries TO memworker_app;
