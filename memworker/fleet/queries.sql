-- Administration within a tenant (memworker/fleet/admin.py, memworker/erase/agents.py,
-- memworker/erase/subjects.py): the agents and what they hold, a subject's holders, an
-- agent's erase.

-- name: agent_page
-- A page of the tenant's agents (pools aside: GET /v1/pools lists them) in id order, after
-- `after`; `reach` limits it to the agents a key names (NULL: all). Live memories count those
-- not superseded or expired; turns (the messages kept verbatim) apart from the rest. Last
-- activity is the newest of an episode received, a memory written, a session touched and a
-- consolidation pass.
SELECT a.id AS agent_id, a.created_at,
       (SELECT count(*) FROM memories m
        WHERE m.tenant_id = a.tenant_id AND m.agent_id = a.id AND m.kind <> 'turn'
          AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now()))::int AS memories,
       (SELECT count(*) FROM memories m
        WHERE m.tenant_id = a.tenant_id AND m.agent_id = a.id AND m.kind = 'turn'
          AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now()))::int AS turns,
       (SELECT count(*) FROM episodes e WHERE e.tenant_id = a.tenant_id AND e.agent_id = a.id)::int AS episodes,
       (SELECT count(*) FROM sessions s WHERE s.tenant_id = a.tenant_id AND s.agent_id = a.id)::int AS sessions,
       greatest(a.created_at, a.last_episode_at, a.last_pass_at,
                (SELECT max(m.created_at) FROM memories m WHERE m.tenant_id = a.tenant_id AND m.agent_id = a.id),
                (SELECT max(s.updated_at) FROM sessions s WHERE s.tenant_id = a.tenant_id AND s.agent_id = a.id)
       ) AS last_activity_at
FROM agents a
WHERE a.tenant_id = %(tenant_id)s AND NOT starts_with(a.id, 'pool~')
  AND (%(reach)s::text[] IS NULL OR a.id = ANY(%(reach)s::text[]))
  AND (%(after)s::text IS NULL OR a.id > %(after)s::text)
ORDER BY a.id
LIMIT %(limit)s;

-- name: agent_subjects
-- The subjects one agent holds anything of, in order, after `after`: its live memories (turns
-- apart), its episodes and its sessions of each, and when it last received or wrote one.
SELECT subject, sum(memories)::int AS memories, sum(turns)::int AS turns, sum(episodes)::int AS episodes,
       sum(sessions)::int AS sessions, max(last_at) AS last_activity_at
FROM (
  SELECT subject, count(*) FILTER (WHERE kind <> 'turn') AS memories, count(*) FILTER (WHERE kind = 'turn') AS turns,
         0 AS episodes, 0 AS sessions, max(created_at) AS last_at
  FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND subject IS NOT NULL
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
    AND (%(after)s::text IS NULL OR subject > %(after)s::text)
  GROUP BY subject
  UNION ALL
  SELECT subject, 0, 0, count(*), 0, max(created_at)
  FROM episodes
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND subject IS NOT NULL
    AND (%(after)s::text IS NULL OR subject > %(after)s::text)
  GROUP BY subject
  UNION ALL
  SELECT subject, 0, 0, 0, count(*), max(updated_at)
  FROM sessions
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND subject IS NOT NULL
    AND (%(after)s::text IS NULL OR subject > %(after)s::text)
  GROUP BY subject
) held
GROUP BY subject
ORDER BY subject
LIMIT %(limit)s;

-- name: subject_holders
-- The agents and pools of the tenant holding anything of a subject: a memory (live or kept
-- for history), an episode or a session of it. One probe per agent through the indexes that
-- lead with (tenant_id, agent_id), so the cost follows the fleet's size, not its memories'.
-- Agents first, then pools (an agent's erase takes its pool copies first), each in id order.
SELECT a.id FROM agents a
WHERE a.tenant_id = %(tenant_id)s
  AND (EXISTS (SELECT 1 FROM memories m
               WHERE m.tenant_id = a.tenant_id AND m.agent_id = a.id AND m.subject = %(subject)s)
       OR EXISTS (SELECT 1 FROM episodes e
                  WHERE e.tenant_id = a.tenant_id AND e.agent_id = a.id AND e.subject = %(subject)s)
       OR EXISTS (SELECT 1 FROM sessions s
                  WHERE s.tenant_id = a.tenant_id AND s.agent_id = a.id AND s.subject = %(subject)s))
ORDER BY starts_with(a.id, 'pool~'), a.id
LIMIT %(limit)s;

-- name: hold_episodes
-- The agent's episodes, held in id order before its row (as forget holds them): ingest stores
-- an episode's memories in a transaction that holds the episode's row and then checks the
-- agent's, so taking the agent's first could wait on an ingest that waits on the erase.
SELECT id FROM episodes WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s ORDER BY id FOR UPDATE;

-- name: hold_agent
-- The agent's row, held to the end of the erase: a writer that inserts a row of the agent
-- (an episode, a memory, a session) checks the row first (a key share the hold blocks), so
-- every writer in flight has committed before the erase counts, and none writes after it.
SELECT id FROM agents WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s FOR UPDATE;

-- name: agent_memory_ids
-- Every memory of the agent, live or retired: the sources of its pool copies and proposals.
SELECT id FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s;

-- name: agent_counts
-- What an agent's erase removes, counted per place before it goes.
SELECT
  (SELECT count(*) FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND kind <> 'turn')::int
    AS memories,
  (SELECT count(*) FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND kind = 'turn')::int
    AS turns,
  (SELECT count(*) FROM memory_terms WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int AS terms,
  (SELECT count(*) FROM memory_connections WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS connections,
  (SELECT count(*) FROM memory_reviews WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int AS reviews,
  (SELECT count(*) FROM memory_aliases WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int AS aliases,
  (SELECT count(*) FROM episodes WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int AS episodes,
  (SELECT count(*) FROM sessions WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int AS sessions,
  (SELECT count(*) FROM context_calls WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS context_calls,
  (SELECT count(*) FROM session_archives WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS archives,
  (SELECT count(*) FROM session_items WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS session_items,
  (SELECT count(*) FROM agent_profiles WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS profile_versions,
  (SELECT count(*) FROM consolidation_runs WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS consolidation_runs,
  (SELECT count(*) FROM retention_runs WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS retention_runs,
  (SELECT count(*) FROM pool_proposals WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s)::int
    AS proposals_made;

-- name: delete_webhook_deliveries
-- The agent's webhook deliveries, pending or past: their payloads quote its sessions.
DELETE FROM webhook_deliveries WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s;

-- name: delete_events
-- The agent's audit trail: its reasons may quote what the agent held.
DELETE FROM memory_events WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s;

-- name: delete_agent
-- The agent's row; everything else of it (memories with their postings, connections,
-- reviews and aliases; episodes; sessions with their context calls and archives; profiles;
-- runs; proposals) goes with it (ON DELETE CASCADE).
DELETE FROM agents WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;
