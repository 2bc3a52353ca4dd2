-- Sleep: consolidation passes, their runs, the agents' gates and profiles
-- (memworker/sleep/, sql/0002_consolidation.sql).

-- name: claim_due_agents
SELECT tenant_id, agent_id, run_id, trigger
FROM claim_due_agents(%(window)s, %(defaults)s, %(lease_s)s, %(limit)s);

-- name: consolidation_flagged_count
SELECT consolidation_flagged_count(%(threshold)s) AS n;

-- name: consolidation_run_insert
INSERT INTO consolidation_runs (tenant_id, agent_id, run_key, trigger, status)
VALUES (%(tenant_id)s, %(agent_id)s, %(run_key)s, %(trigger)s, 'queued')
ON CONFLICT (tenant_id, agent_id, run_key) DO NOTHING
RETURNING id;

-- name: consolidation_run_by_key
SELECT id FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND run_key = %(run_key)s;

-- name: consolidation_run_start
-- Visible as 'running' while the pass's own transaction is open; a crashed pass leaves it
-- 'running', and its redelivered task runs it again.
UPDATE consolidation_runs SET status = 'running', started_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(run_id)s
  AND status IN ('queued', 'running')
RETURNING id;

-- name: consolidation_run_requeue
-- The agent was busy: back to queued until the task's retry.
UPDATE consolidation_runs SET status = 'queued'
WHERE tenant_id = %(tenant_id)s AND id = %(run_id)s AND status = 'running';

-- name: consolidation_run_get
SELECT * FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(run_id)s;

-- name: consolidation_run_finish
UPDATE consolidation_runs
SET status = %(status)s, finished_at = now(), items_reviewed = %(items_reviewed)s,
    connections_made = %(connections_made)s, insights_written = %(insights_written)s,
    conclusions_written = %(conclusions_written)s, salience_rerated = %(salience_rerated)s,
    skipped_reason = %(skipped_reason)s, error = %(error)s, llm_calls = %(llm_calls)s,
    tokens_in = %(tokens_in)s, tokens_out = %(tokens_out)s, duration_ms = %(duration_ms)s,
    report = %(report)s
WHERE tenant_id = %(tenant_id)s AND id = %(run_id)s;

-- name: consolidation_runs_supersede
-- Older queued runs of the agent never need to run once a newer one does.
UPDATE consolidation_runs
SET status = 'skipped', finished_at = now(), skipped_reason = 'superseded by run ' || %(run_id)s::text
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND status = 'queued'
  AND id <> %(run_id)s AND created_at <= (SELECT created_at FROM consolidation_runs WHERE id = %(run_id)s);

-- name: consolidation_runs_list
SELECT id, agent_id, run_key, trigger, status, created_at, started_at, finished_at, items_reviewed,
       connections_made, insights_written, conclusions_written, salience_rerated, skipped_reason,
       error, llm_calls, tokens_in, tokens_out, duration_ms, report
FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
ORDER BY created_at DESC, id DESC LIMIT %(limit)s;

-- name: consolidation_agent
SELECT id AS agent_id, policy, created_at, last_episode_at, last_consolidated_at, last_pass_at,
       sessions_since_pass, consolidation_requested, consolidation_failures,
       consolidation_last_error, next_consolidation_at
FROM agents WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: consolidation_agents
SELECT id AS agent_id, policy, created_at, last_episode_at, last_consolidated_at, last_pass_at,
       sessions_since_pass, consolidation_requested, consolidation_failures,
       consolidation_last_error, next_consolidation_at
FROM agents WHERE tenant_id = %(tenant_id)s ORDER BY id;

-- name: consolidation_window
-- The pass's window: the agent's oldest live memories not yet consolidated (a pass's own
-- insights, conclusions and summaries are born consolidated). Rows written together (one
-- ingest transaction) come by episode and message order, so a window holds whole stretches
-- of a conversation for the summaries rather than a scatter of messages.
SELECT id, text, kind, tier, salience, confidence, created_at, access_count, last_access_at,
       entities, topics, flags, embedding, provenance, metadata, subject
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND consolidated_at IS NULL
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at, split_part(provenance[1], '#', 1),
         nullif(substring(provenance[1] FROM '#m([0-9]+)'), '')::int, source_key, id
LIMIT %(limit)s;

-- name: consolidation_waiting
SELECT count(*) AS n FROM (
  SELECT 1 FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND consolidated_at IS NULL
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
  LIMIT %(limit)s) w;

-- name: consolidation_set_metadata
UPDATE memories m
SET entities = ARRAY(SELECT jsonb_array_elements_text(x.entities)),
    topics = ARRAY(SELECT jsonb_array_elements_text(x.topics)), updated_at = now()
FROM jsonb_to_recordset(%(rows)s) AS x(id uuid, entities jsonb, topics jsonb)
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = x.id;

-- name: consolidation_insert_connections
INSERT INTO memory_connections (tenant_id, agent_id, from_id, to_id, relationship, insight_id)
SELECT %(tenant_id)s, %(agent_id)s, c.from_id, c.to_id, c.relationship, %(insight_id)s
FROM unnest(%(from_ids)s::uuid[], %(to_ids)s::uuid[], %(relationships)s::text[]) AS c(from_id, to_id, relationship)
ON CONFLICT (tenant_id, from_id, to_id, relationship) DO NOTHING
RETURNING from_id, to_id, relationship;

-- name: consolidation_rerate
-- Bumps, never absolute values: monotonic even against a concurrent strengthen, capped at 1.
UPDATE memories m SET salience = least(1.0, m.salience + x.bump), updated_at = now()
FROM unnest(%(ids)s::uuid[], %(bumps)s::float8[]) AS x(id, bump)
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = x.id AND x.bump > 0
RETURNING m.id;

-- name: distil_carry
-- The turns a summary carries point at it (retention's forgetting by value reads this).
UPDATE memories m SET carried_by = x.summary_id
FROM unnest(%(turn_ids)s::uuid[], %(summary_ids)s::uuid[]) AS x(turn_id, summary_id)
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = x.turn_id AND m.kind = 'turn';

-- name: consolidation_mark
UPDATE memories SET consolidated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND consolidated_at IS NULL;

-- name: consolidation_agent_done
UPDATE agents
SET last_pass_at = now(),
    last_consolidated_at = CASE WHEN %(consolidated)s THEN now() ELSE last_consolidated_at END,
    sessions_since_pass = 0, consolidation_requested = %(requested)s, consolidation_failures = 0,
    consolidation_last_error = NULL, next_consolidation_at = NULL
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: consolidation_agent_failed
UPDATE agents
SET consolidation_failures = consolidation_failures + 1, consolidation_last_error = %(error)s,
    next_consolidation_at = now() + make_interval(secs => %(backoff_s)s)
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s
RETURNING consolidation_failures;

-- name: consolidation_request
UPDATE agents SET consolidation_requested = true
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: session_ended
UPDATE agents SET sessions_since_pass = sessions_since_pass + 1
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: set_agent_policy_field
-- One field of the agent's policy overrides; NULL removes it (back to the tenant's or default).
UPDATE agents
SET policy = CASE WHEN %(value)s::jsonb IS NULL THEN policy - %(field)s
                  ELSE jsonb_set(policy, ARRAY[%(field)s], %(value)s::jsonb) END
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s
RETURNING policy;

-- name: set_tenant_policy_field
UPDATE tenants
SET policy = CASE WHEN %(value)s::jsonb IS NULL THEN policy - %(field)s
                  ELSE jsonb_set(policy, ARRAY[%(field)s], %(value)s::jsonb) END
WHERE id = %(tenant_id)s
RETURNING policy;

-- name: profile_latest
SELECT version, document FROM agent_profiles
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s ORDER BY version DESC LIMIT 1;

-- name: profile_version
SELECT version, document FROM agent_profiles
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND version = %(version)s;

-- name: profile_insert
INSERT INTO agent_profiles (tenant_id, agent_id, version, document, run_id)
VALUES (%(tenant_id)s, %(agent_id)s, %(version)s, %(document)s, %(run_id)s);

-- name: profile_prune_versions
DELETE FROM agent_profiles
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND version < %(below)s;

-- name: profile_sources
-- The profile entries' memories that are still live, with their embeddings (to tell which
-- entries talk about the same thing).
SELECT id, embedding FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now());

