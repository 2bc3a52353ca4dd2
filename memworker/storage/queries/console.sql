-- The operator's console (memworker/api/console) and /metrics: read-only overviews the JSON
-- routes do not need. Every query but memory_estimates filters by tenant (row-level security
-- applies as well) and, for a key limited to some agents, by %(agent_ids)s (NULL: all the
-- tenant's agents). The agent list is sleep.sql's gates.

-- name: memory_counts
-- Live memories (not superseded, not expired) per agent, tier and kind.
SELECT agent_id, tier, kind, count(*)::int AS n
FROM memories
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
GROUP BY agent_id, tier, kind
ORDER BY agent_id, tier, kind;

-- name: agent_memories
-- One agent's memories, newest first, by tier, kind and flag; superseded and expired ones
-- only when asked for (the console shows what replaced them).
SELECT * FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(tier)s::text IS NULL OR tier = %(tier)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(flag)s::text IS NULL OR %(flag)s = ANY(flags))
  AND (%(subject)s::text IS NULL OR subject = %(subject)s)
  AND (%(include_inactive)s OR (valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: episode_counts
SELECT agent_id, status, count(*)::int AS n
FROM episodes
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))
GROUP BY agent_id, status
ORDER BY agent_id, status;

-- name: episode_source
-- What an episode said: the provenance a memory points back to (core_db.ClaimedEpisode's row).
SELECT id, agent_id, session_id, content, messages, metadata, attempts, reflection, occurred_at, subject
FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(episode_id)s;

-- name: episode_minutes
-- Episodes accepted and stored per minute since %(since)s; accepted_kept leaves out the ones
-- that have since gone dead (the schema keeps no time of death, so the backlog the console
-- rebuilds from these counts leaves dead letters out altogether).
WITH recent AS MATERIALIZED (
  SELECT created_at, stored_at, status FROM episodes
  WHERE tenant_id = %(tenant_id)s
    AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))
    AND (created_at >= %(since)s OR stored_at >= %(since)s)
)
SELECT minute, sum(accepted)::int AS accepted, sum(kept)::int AS accepted_kept, sum(stored)::int AS stored
FROM (
  SELECT date_trunc('minute', created_at) AS minute, 1 AS accepted, (status <> 'dead')::int AS kept, 0 AS stored
  FROM recent WHERE created_at >= %(since)s
  UNION ALL
  SELECT date_trunc('minute', stored_at), 0, 0, 1 FROM recent WHERE stored_at >= %(since)s
) per_episode
GROUP BY minute
ORDER BY minute;

-- name: open_episodes
-- Episodes waiting to be stored now (queued, being processed, or failed and due a retry).
SELECT count(*)::int AS n FROM episodes
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))
  AND status IN ('queued', 'processing', 'failed');

-- name: consolidation_usage
-- LLM use of consolidation passes per agent (ingest's is on the episodes: core.sql usage).
SELECT agent_id, count(*)::int AS runs, coalesce(sum(llm_calls), 0)::bigint AS llm_calls,
       coalesce(sum(tokens_in), 0)::bigint AS tokens_in, coalesce(sum(tokens_out), 0)::bigint AS tokens_out
FROM consolidation_runs
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))
GROUP BY agent_id
ORDER BY agent_id;

-- name: memory_estimates
-- Across tenants (a SECURITY DEFINER function): the planner's estimate of the memories per
-- value of the columns the fleet metrics break down by.
SELECT attribute, value, estimate FROM memory_estimates();
