-- Sleep (consolidation), issue 5: per-agent pass gates, queued runs, versioned agent
-- profiles, and the narrow cross-tenant claim the beat sweep uses. Reuses 0001's
-- memory_connections, consolidation_runs and the agents' gate columns.

-- When any pass last ran (done or skipped): the time gate counts from here. last_consolidated_at
-- (0001) moves only when a window was consolidated; re-rating reads "recalled since" from it.
ALTER TABLE memworker.agents
  ADD COLUMN last_pass_at timestamptz,
  ADD COLUMN consolidation_last_error text;

-- A run row exists before its pass starts (POST .../consolidate answers with its id; the sweep
-- claims agents by inserting one per (agent, window)), so 'queued' joins the states.
ALTER TABLE memworker.consolidation_runs DROP CONSTRAINT consolidation_runs_status_check;
ALTER TABLE memworker.consolidation_runs ADD CONSTRAINT consolidation_runs_status_check
  CHECK (status IN ('queued', 'running', 'done', 'skipped', 'failed'));
ALTER TABLE memworker.consolidation_runs ALTER COLUMN status SET DEFAULT 'queued';
ALTER TABLE memworker.consolidation_runs ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX consolidation_runs_agent ON memworker.consolidation_runs (tenant_id, agent_id, created_at DESC);

-- The window scan: an agent's not-yet-consolidated memories, oldest first.
CREATE INDEX memories_unconsolidated ON memworker.memories (tenant_id, agent_id, created_at)
  WHERE consolidated_at IS NULL;

-- Seed 001's profile document (preferences, project state, lessons, decisions, errors), one
-- row per version; a pass writes version n+1 in its own transaction, so a save is atomic and
-- two writers of the same version collide on the primary key instead of overwriting.
CREATE TABLE memworker.agent_profiles (
  tenant_id   uuid NOT NULL,
  agent_id    text NOT NULL,
  version     integer NOT NULL CHECK (version > 0),
  document    jsonb NOT NULL,
  run_id      uuid REFERENCES memworker.consolidation_runs(id) ON DELETE SET NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, agent_id, version),
  FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE
);

ALTER TABLE memworker.agent_profiles ENABLE ROW LEVEL SECURITY;
ALTER TABLE memworker.agent_profiles FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memworker.agent_profiles
  USING (tenant_id = memworker.current_tenant()) WITH CHECK (tenant_id = memworker.current_tenant());
GRANT SELECT, INSERT, UPDATE, DELETE ON memworker.agent_profiles TO memworker_app;

-- One policy value: the agent's override, else the tenant's, else the default, and only when
-- its JSON type matches the default's (a malformed override cannot break the sweep).
CREATE FUNCTION memworker.policy_value(p_agent jsonb, p_tenant jsonb, p_defaults jsonb, p_key text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN jsonb_typeof(p_agent -> p_key) = jsonb_typeof(p_defaults -> p_key) THEN p_agent -> p_key
    WHEN jsonb_typeof(p_tenant -> p_key) = jsonb_typeof(p_defaults -> p_key) THEN p_tenant -> p_key
    ELSE p_defaults -> p_key END
$$;

-- The beat sweep: claim the agents due for a pass in the window p_window, across tenants.
-- Due = enabled, not backing off or leased, quiet (no episode for quiet minutes), and one
-- gate open: requested, interval elapsed since the last pass, or >= sessions_gate sessions
-- since it (the larger of the counter and the distinct session ids of episodes since). Unless
-- requested, at least min_items memories must wait. A claim inserts a queued run keyed by
-- (agent, window), so a second sweep of the same window claims nothing, and leases the agent
-- for p_lease_s (compare-and-set: a concurrent sweep of another window skips it).
CREATE FUNCTION memworker.claim_due_agents(p_window timestamptz, p_defaults jsonb,
                                           p_lease_s integer, p_limit integer)
RETURNS TABLE (tenant_id uuid, agent_id text, run_id uuid, trigger text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  WITH cand AS (
    SELECT a.tenant_id, a.id AS agent_id, a.consolidation_requested AS requested,
           coalesce(a.last_pass_at, a.created_at) AS since, a.sessions_since_pass,
           (policy_value(a.policy, t.policy, p_defaults, 'consolidation_interval_minutes'))::numeric AS interval_min,
           (policy_value(a.policy, t.policy, p_defaults, 'consolidation_sessions_gate'))::numeric AS sessions_gate,
           (policy_value(a.policy, t.policy, p_defaults, 'consolidation_min_items'))::numeric::int AS min_items
    FROM agents a JOIN tenants t ON t.id = a.tenant_id
    WHERE (policy_value(a.policy, t.policy, p_defaults, 'consolidation_enabled'))::boolean
      AND (a.next_consolidation_at IS NULL OR a.next_consolidation_at <= p_window)
      AND (a.last_episode_at IS NULL OR a.last_episode_at <= p_window - make_interval(
             mins => (policy_value(a.policy, t.policy, p_defaults, 'consolidation_quiet_minutes'))::numeric::int))
  ), gated AS (
    SELECT c.*, CASE
      WHEN c.requested THEN 'requested'
      WHEN c.since <= p_window - make_interval(mins => c.interval_min::int) THEN 'time'
      WHEN greatest(c.sessions_since_pass,
                    (SELECT count(DISTINCT e.session_id) FROM episodes e
                     WHERE e.tenant_id = c.tenant_id AND e.agent_id = c.agent_id
                       AND e.created_at > c.since)) >= c.sessions_gate THEN 'sessions'
    END AS trigger
    FROM cand c
  ), due AS (
    SELECT g.tenant_id, g.agent_id, g.trigger FROM gated g
    WHERE g.trigger IS NOT NULL
      AND (g.requested OR (SELECT count(*) FROM (
             SELECT 1 FROM memories m
             WHERE m.tenant_id = g.tenant_id AND m.agent_id = g.agent_id AND m.consolidated_at IS NULL
               AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > p_window)
             LIMIT g.min_items) w) >= g.min_items)
    ORDER BY g.since
    LIMIT p_limit
  ), runs AS (
    INSERT INTO consolidation_runs AS r (tenant_id, agent_id, run_key, trigger, status)
    SELECT d.tenant_id, d.agent_id,
           'beat:' || to_char(p_window AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), d.trigger, 'queued'
    FROM due d
    ON CONFLICT (tenant_id, agent_id, run_key) DO NOTHING
    RETURNING r.tenant_id, r.agent_id, r.id, r.trigger
  )
  -- Lease only the agents whose run is new: an agent whose window key is taken (a second
  -- sweep of the window, or a pass that finished within it) waits for the next window.
  -- A run whose lease loses to a concurrent sweep stays queued, unclaimed; the agent's
  -- next pass marks it superseded.
  UPDATE agents a SET next_consolidation_at = p_window + make_interval(secs => p_lease_s)
  FROM runs n
  WHERE a.tenant_id = n.tenant_id AND a.id = n.agent_id
    AND (a.next_consolidation_at IS NULL OR a.next_consolidation_at <= p_window)
  RETURNING n.tenant_id, n.agent_id, n.id, n.trigger
$$;

-- Agents whose last three or more passes failed in a row (the flagged gauge).
CREATE FUNCTION memworker.consolidation_flagged_count(p_threshold integer)
RETURNS bigint LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_temp AS $$
  SELECT count(*) FROM agents WHERE consolidation_failures >= p_threshold
$$;

REVOKE ALL ON FUNCTION memworker.claim_due_agents(timestamptz, jsonb, integer, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION memworker.consolidation_flagged_count(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memworker.claim_due_agents(timestamptz, jsonb, integer, integer) TO memworker_app;
GRANT EXECUTE ON FUNCTION memworker.consolidation_flagged_count(integer) TO memworker_app;
