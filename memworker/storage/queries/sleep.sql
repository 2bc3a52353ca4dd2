-- Sleep: consolidation passes, their runs, the agents' gates and profiles
-- (memworker/sleep/, sql/0002_consolidation.sql).

-- name: claim_due_agents
-- Across tenants: claim the agents due for a pass in this window (one queued run each).
SELECT tenant_id, agent_id, run_id, trigger
FROM claim_due_agents(%(window)s, %(defaults)s, %(lease_s)s, %(limit)s);

-- name: flagged_count
-- Across tenants: agents whose passes failed `threshold` times or more in a row.
SELECT consolidation_flagged_count(%(threshold)s)::int AS n;

-- name: run_insert
INSERT INTO consolidation_runs (tenant_id, agent_id, run_key, trigger, status)
VALUES (%(tenant_id)s, %(agent_id)s, %(run_key)s, %(trigger)s, 'queued')
ON CONFLICT (tenant_id, agent_id, run_key) DO NOTHING
RETURNING id;

-- name: run_by_key
SELECT id FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND run_key = %(run_key)s;

-- name: run_start
-- Visible as 'running' while the pass's own transaction is open; a crashed pass leaves it
-- 'running', and its redelivered task runs it again.
UPDATE consolidation_runs SET status = 'running', started_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(run_id)s
  AND status IN ('queued', 'running')
RETURNING id;

-- name: run_requeue
-- The agent was busy: back to queued until the task's retry.
UPDATE consolidation_runs SET status = 'queued'
WHERE tenant_id = %(tenant_id)s AND id = %(run_id)s AND status = 'running';

-- fragment: run_columns
-- A run's columns as run_get and runs_list answer them (sleep_db.Run).
  id, agent_id, run_key, trigger, status, created_at, started_at, finished_at, items_reviewed,
  connections_made, insights_written, conclusions_written, salience_rerated, skipped_reason,
  error, llm_calls, tokens_in, tokens_out, duration_ms, report

-- name: run_get
SELECT
-- include: run_columns
FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(run_id)s;

-- name: run_finish
UPDATE consolidation_runs
SET status = %(status)s, finished_at = now(), items_reviewed = %(items_reviewed)s,
    connections_made = %(connections_made)s, insights_written = %(insights_written)s,
    conclusions_written = %(conclusions_written)s, salience_rerated = %(salience_rerated)s,
    skipped_reason = %(skipped_reason)s, error = %(error)s, llm_calls = %(llm_calls)s,
    tokens_in = %(tokens_in)s, tokens_out = %(tokens_out)s, duration_ms = %(duration_ms)s,
    report = %(report)s
WHERE tenant_id = %(tenant_id)s AND id = %(run_id)s;

-- name: runs_supersede
-- Older queued runs of the agent never need to run once a newer one does.
UPDATE consolidation_runs
SET status = 'skipped', finished_at = now(), skipped_reason = 'superseded by run ' || %(run_id)s::text
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND status = 'queued'
  AND id <> %(run_id)s AND created_at <= (SELECT created_at FROM consolidation_runs WHERE id = %(run_id)s);

-- name: runs_list
-- Newest first.
SELECT
-- include: run_columns
FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
ORDER BY created_at DESC, id DESC LIMIT %(limit)s;

-- fragment: gate_columns
-- An agent's consolidation gates as agent_gates and gates answer them (sleep_db.AgentGates).
  id AS agent_id, policy, created_at, last_episode_at, last_consolidated_at, last_pass_at,
  sessions_since_pass, consolidation_requested, consolidation_failures,
  consolidation_last_error, next_consolidation_at

-- name: agent_gates
SELECT
-- include: gate_columns
FROM agents
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: gates
-- The tenant's agents (the console's agent list too); agent_ids: only those (NULL: all).
SELECT
-- include: gate_columns
FROM agents
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_ids)s::text[] IS NULL OR id = ANY(%(agent_ids)s::text[]))
ORDER BY id;

-- fragment: window_columns
-- A memory as a pass reads it (sleep_db.WindowMemory).
  id, text, kind, tier, salience, confidence, created_at, access_count, last_access_at,
  entities, topics, flags, embedding, provenance, metadata, subject, parts

-- name: pass_window
-- The pass's window: the agent's oldest live memories not yet consolidated (a pass's own
-- insights, conclusions and summaries are born consolidated). Rows written together (one
-- ingest transaction) come by episode and message order, so a window holds whole stretches
-- of a conversation for the summaries rather than a scatter of messages.
SELECT
-- include: window_columns
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND consolidated_at IS NULL
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at, split_part(provenance[1], '#', 1),
         nullif(substring(provenance[1] FROM '#m([0-9]+)'), '')::int, source_key, id
LIMIT %(limit)s;

-- name: waiting
SELECT count(*) AS n FROM (
  SELECT 1 FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND consolidated_at IS NULL
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
  LIMIT %(limit)s) w;

-- name: set_metadata
UPDATE memories m
SET entities = ARRAY(SELECT jsonb_array_elements_text(x.entities)),
    topics = ARRAY(SELECT jsonb_array_elements_text(x.topics)), updated_at = now()
FROM jsonb_to_recordset(%(rows)s) AS x(id uuid, entities jsonb, topics jsonb)
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = x.id;

-- name: insert_connections
INSERT INTO memory_connections (tenant_id, agent_id, from_id, to_id, relationship, insight_id)
SELECT %(tenant_id)s, %(agent_id)s, c.from_id, c.to_id, c.relationship, %(insight_id)s
FROM unnest(%(from_ids)s::uuid[], %(to_ids)s::uuid[], %(relationships)s::text[]) AS c(from_id, to_id, relationship)
ON CONFLICT (tenant_id, from_id, to_id, relationship) DO NOTHING
RETURNING from_id, to_id, relationship;

-- name: rerate
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

-- name: mark_consolidated
UPDATE memories SET consolidated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND consolidated_at IS NULL;

-- name: pass_done
UPDATE agents
SET last_pass_at = now(),
    last_consolidated_at = CASE WHEN %(consolidated)s THEN now() ELSE last_consolidated_at END,
    sessions_since_pass = 0, consolidation_requested = %(requested)s, consolidation_failures = 0,
    consolidation_last_error = NULL, next_consolidation_at = NULL
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: pass_failed
UPDATE agents
SET consolidation_failures = consolidation_failures + 1, consolidation_last_error = %(error)s,
    next_consolidation_at = now() + make_interval(secs => %(backoff_s)s)
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s
RETURNING consolidation_failures;

-- name: request_pass
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

-- name: profile
-- The agent's profile document with its version in it: the given version (NULL: the latest).
SELECT document || jsonb_build_object('version', version) FROM agent_profiles
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(version)s::int IS NULL OR version = %(version)s::int)
ORDER BY version DESC LIMIT 1;

-- name: profile_insert
INSERT INTO agent_profiles (tenant_id, agent_id, version, document, run_id)
VALUES (%(tenant_id)s, %(agent_id)s, %(version)s, %(document)s, %(run_id)s);

-- name: profile_prune_versions
DELETE FROM agent_profiles
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND version < %(below)s;

-- name: profile_sources
-- The profile entries' memories that are still live, with their embeddings (to tell which
-- entries talk about the same thing).
SELECT
-- include: window_columns
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now());


-- name: derived_of
-- The live memories sleep derived from one memory (older_id), which a supersede of it makes
-- stale: insights and conclusions whose evidence (metadata.evidence: the memory ids they were
-- built from) names it, and summaries naming one of the episode messages it came from (they
-- say in their words what it said). Only memories written after it can be built from it, so
-- the scan of the agent starts at its created_at (memories_agent).
WITH older AS MATERIALIZED (
  SELECT created_at, provenance FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(older_id)s
), said AS MATERIALIZED (  -- its (episode, message) pairs: 'episode:<id>#m1,2' names messages 1 and 2
  SELECT split_part(p.entry, '#', 1) AS episode, msg
  FROM older o CROSS JOIN LATERAL unnest(o.provenance) AS p(entry)
  CROSS JOIN LATERAL unnest(string_to_array(split_part(p.entry, '#m', 2), ',')) AS msg
  WHERE p.entry LIKE 'episode:%%#m%%'
)
SELECT m.id, m.kind,
       ARRAY(SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(m.metadata -> 'evidence') = 'array'
                                                   THEN m.metadata -> 'evidence' ELSE '[]'::jsonb END)) AS evidence
FROM older o JOIN memories m
  ON m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.created_at >= o.created_at
WHERE m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
  AND ((m.kind IN ('insight', 'conclusion') AND m.metadata -> 'evidence' ? %(older_id)s::text)
       OR (m.kind = 'summary' AND EXISTS (
             SELECT 1 FROM unnest(m.provenance) AS q(entry)
             CROSS JOIN LATERAL unnest(string_to_array(split_part(q.entry, '#m', 2), ',')) AS qm
             JOIN said s ON s.episode = split_part(q.entry, '#', 1) AND s.msg = qm
             WHERE q.entry LIKE 'episode:%%#m%%')))
ORDER BY m.created_at, m.id
FOR UPDATE OF m;

-- name: derived_retire
-- Stale derived memories out of recall (valid_to), as their evidence was: kept for history as
-- long as the superseded memory is (its expires_at, set by the supersede), no superseded_by
-- (a newer statement of a fact is not a newer version of what was concluded from it).
UPDATE memories m
SET valid_to = %(now)s, updated_at = %(now)s,
    expires_at = (SELECT o.expires_at FROM memories o WHERE o.tenant_id = %(tenant_id)s AND o.id = %(older_id)s)
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = ANY(%(ids)s::uuid[])
  AND m.valid_to IS NULL
RETURNING m.id;

-- name: derived_mark
-- A summary that said what a superseded memory said keeps its place (it is a dated record of
-- the conversation and carries its turns) and names what changed: metadata.outdated gains
-- {"memory_id", "superseded_by", "at"}.
UPDATE memories m
SET metadata = jsonb_set(m.metadata, '{outdated}', coalesce(m.metadata -> 'outdated', '[]'::jsonb) || %(mark)s),
    updated_at = %(now)s
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = ANY(%(ids)s::uuid[])
RETURNING m.id;

-- name: derived_requeue
-- Live evidence back into sleep's window (consolidated_at NULL), so the next pass builds
-- again from what is true now; turns stay out: they were distilled once already.
UPDATE memories
SET consolidated_at = NULL
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND valid_to IS NULL AND kind NOT IN ('turn', 'insight', 'conclusion', 'summary')
  AND consolidated_at IS NOT NULL
RETURNING id;

-- name: profile_live
-- Which of the profile entries' memories are still live (ids only): what the context packer
-- may show as the agent's profile until the next pass rebuilds it.
SELECT id FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: superseded_sources
-- Of the given message sources ('episode:<id>#m<i>'), those whose reflected items have all
-- been superseded: what was said there is no longer true, so no summary restates it. Items
-- are written in their turns' transaction, so the turns' time range bounds the lookup to an
-- index range of the agent's memories.
SELECT p FROM memories m CROSS JOIN LATERAL unnest(m.provenance) AS p
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
  AND m.created_at BETWEEN %(since)s AND %(until)s
  AND m.kind <> 'turn' AND m.superseded_by IS NOT NULL AND p = ANY(%(sources)s::text[])
EXCEPT
SELECT p FROM memories m CROSS JOIN LATERAL unnest(m.provenance) AS p
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
  AND m.created_at BETWEEN %(since)s AND %(until)s
  AND m.kind <> 'turn' AND m.valid_to IS NULL AND p = ANY(%(sources)s::text[]);
