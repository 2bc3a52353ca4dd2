-- Every query memworker runs, by name. Loaded by store.py; parameters are %(name)s.
-- Tenant rows are also guarded by row-level security; the explicit tenant_id filters
-- keep plans on the tenant-leading indexes.

-- name: create_tenant
INSERT INTO tenants (name) VALUES (%(name)s) RETURNING id, name, created_at;

-- name: tenant_by_name
SELECT id, name, created_at FROM tenants WHERE name = %(name)s;

-- name: list_tenants
SELECT t.id, t.name, t.created_at FROM tenants t ORDER BY t.created_at;

-- name: insert_api_key
INSERT INTO api_keys (tenant_id, prefix, key_hash, name, scopes, agent_ids, expires_at)
VALUES (%(tenant_id)s, %(prefix)s, %(key_hash)s, %(name)s, %(scopes)s, %(agent_ids)s, %(expires_at)s)
RETURNING id, prefix, name, scopes, agent_ids, created_at, expires_at;

-- name: list_api_keys
SELECT id, prefix, name, scopes, agent_ids, created_at, expires_at, revoked_at
FROM api_keys WHERE tenant_id = %(tenant_id)s ORDER BY created_at;

-- name: revoke_api_key
UPDATE api_keys SET revoked_at = now()
WHERE tenant_id = %(tenant_id)s AND prefix = %(prefix)s AND revoked_at IS NULL RETURNING id;

-- name: authenticate
SELECT key_id, tenant_id, key_hash, scopes, agent_ids, expires_at, revoked_at
FROM authenticate(%(prefix)s);

-- name: policies
-- The tenant's and the agent's policy overrides in one trip; agent_policy is NULL when the
-- agent does not exist.
SELECT t.policy AS tenant_policy, a.policy AS agent_policy
FROM tenants t LEFT JOIN agents a ON a.tenant_id = t.id AND a.id = %(agent_id)s
WHERE t.id = %(tenant_id)s;

-- name: ensure_agent
INSERT INTO agents (tenant_id, id) VALUES (%(tenant_id)s, %(agent_id)s)
ON CONFLICT (tenant_id, id) DO NOTHING;

-- name: agent_exists
SELECT 1 FROM agents WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: touch_agent
UPDATE agents SET last_episode_at = now() WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: insert_episode
-- enqueued_at is stamped here, not after publishing: a later UPDATE would lock the row just
-- when a fast worker tries to claim it (SKIP LOCKED) and strand it until the reconciler.
INSERT INTO episodes (tenant_id, agent_id, session_id, idempotency_key, content, messages,
                      metadata, occurred_at, enqueued_at)
VALUES (%(tenant_id)s, %(agent_id)s, %(session_id)s, %(idempotency_key)s, %(content)s,
        %(messages)s, %(metadata)s, coalesce(%(occurred_at)s, now()), now())
ON CONFLICT (tenant_id, agent_id, idempotency_key) DO NOTHING
RETURNING id;

-- name: episode_by_key
SELECT id, status FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND idempotency_key = %(idempotency_key)s;

-- name: mark_enqueued
UPDATE episodes SET enqueued_at = now() WHERE tenant_id = %(tenant_id)s AND id = ANY(%(ids)s);

-- name: get_episode
SELECT id, agent_id, session_id, status, attempts, last_error, memory_ids, reflector, llm_calls,
       tokens_in, tokens_out, llm_ms, created_at, stored_at, occurred_at, metadata
FROM episodes WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(episode_id)s;

-- name: list_episodes
SELECT id, agent_id, session_id, status, attempts, last_error, memory_ids, created_at, stored_at
FROM episodes
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s)
  AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY created_at DESC LIMIT %(limit)s;

-- name: claim_episodes
-- Take the named episodes, plus other queued ones of the tenant up to the batch size, so
-- one worker reflects and embeds several at once. Their own queue messages then find them
-- claimed or stored and do nothing. attempts doubles as the claim token.
UPDATE episodes e
SET status = 'processing', attempts = e.attempts + 1,
    lease_until = now() + make_interval(secs => %(lease_s)s)
WHERE e.id IN (
  SELECT c.id FROM episodes c
  WHERE c.tenant_id = %(tenant_id)s
    AND ((c.id = ANY(%(ids)s) AND (c.status IN ('queued', 'failed')
                                   OR (c.status = 'processing' AND c.lease_until < now())))
         OR (c.status = 'queued' AND %(opportunistic)s))
  ORDER BY (c.id = ANY(%(ids)s)) DESC, c.created_at
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED)
RETURNING e.id, e.agent_id, e.session_id, e.content, e.messages, e.metadata, e.attempts, e.reflection;

-- name: lock_claimed_episode
SELECT status, attempts FROM episodes
WHERE tenant_id = %(tenant_id)s AND id = %(episode_id)s FOR UPDATE;

-- name: save_reflection
UPDATE episodes SET reflection = %(reflection)s, llm_calls = llm_calls + %(llm_calls)s,
       tokens_in = tokens_in + %(tokens_in)s, tokens_out = tokens_out + %(tokens_out)s,
       llm_ms = llm_ms + %(llm_ms)s
WHERE tenant_id = %(tenant_id)s AND id = %(episode_id)s AND status = 'processing'
  AND attempts = %(attempts)s;

-- name: finish_episode
UPDATE episodes
SET status = 'stored', stored_at = now(), lease_until = NULL, last_error = NULL,
    memory_ids = %(memory_ids)s, reflector = %(reflector)s, llm_calls = llm_calls + %(llm_calls)s,
    tokens_in = tokens_in + %(tokens_in)s, tokens_out = tokens_out + %(tokens_out)s,
    llm_ms = llm_ms + %(llm_ms)s
WHERE tenant_id = %(tenant_id)s AND id = %(episode_id)s;

-- name: fail_episode
-- Only the current claim may record a failure; 'dead' once attempts reach the cap.
UPDATE episodes
SET status = CASE WHEN attempts >= %(max_attempts)s THEN 'dead' ELSE 'failed' END,
    last_error = %(error)s, lease_until = NULL, enqueued_at = now()
WHERE tenant_id = %(tenant_id)s AND id = %(episode_id)s AND status = 'processing'
  AND attempts = %(attempts)s
RETURNING status;

-- name: replay_episode
UPDATE episodes SET status = 'queued', attempts = 0, last_error = NULL, lease_until = NULL
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(episode_id)s
  AND status IN ('dead', 'failed')
RETURNING id;

-- name: stale_episodes
SELECT tenant_id, episode_id FROM stale_episodes(now() - make_interval(secs => %(older_than_s)s), %(limit)s);

-- name: usage
SELECT agent_id, count(*) AS episodes, sum(llm_calls) AS llm_calls, sum(tokens_in) AS tokens_in,
       sum(tokens_out) AS tokens_out, sum(llm_ms) AS llm_ms,
       count(*) FILTER (WHERE status = 'stored') AS stored,
       count(*) FILTER (WHERE status = 'dead') AS dead
FROM episodes WHERE tenant_id = %(tenant_id)s
  AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s)
GROUP BY agent_id ORDER BY agent_id;

-- name: insert_memory
INSERT INTO memories (tenant_id, agent_id, text, kind, tier, salience, confidence, expires_at,
                      session_id, entities, topics, provenance, metadata, source_key,
                      content_hash, trust, flags, doc_len, embedding)
VALUES (%(tenant_id)s, %(agent_id)s, %(text)s, %(kind)s, %(tier)s, %(salience)s, %(confidence)s,
        %(expires_at)s, %(session_id)s, %(entities)s, %(topics)s, %(provenance)s, %(metadata)s,
        %(source_key)s, %(content_hash)s, %(trust)s, %(flags)s, %(doc_len)s, %(embedding)s)
ON CONFLICT (tenant_id, source_key) DO NOTHING
RETURNING id;

-- name: memory_by_source_key
SELECT id FROM memories WHERE tenant_id = %(tenant_id)s AND source_key = %(source_key)s;

-- name: insert_terms
INSERT INTO memory_terms (tenant_id, agent_id, memory_id, term, tf)
SELECT %(tenant_id)s, %(agent_id)s, %(memory_id)s, t.term, t.tf
FROM unnest(%(terms)s::text[], %(tfs)s::int[]) AS t(term, tf);

-- name: delete_terms
DELETE FROM memory_terms WHERE memory_id = %(memory_id)s;

-- name: insert_event
INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, related_ids)
VALUES (%(tenant_id)s, %(agent_id)s, %(memory_id)s, %(event)s, %(reason)s, %(actor)s, %(related_ids)s);

-- name: find_duplicate
-- The closest live memory of the agent: an exact text match, else the nearest vector.
(SELECT id, text, 1.0::float8 AS similarity FROM memories
 WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND content_hash = %(content_hash)s
   AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
 LIMIT 1)
UNION ALL
(SELECT id, text, 1 - (embedding <=> %(embedding)s) AS similarity FROM memories
 WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
   AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
 ORDER BY embedding <=> %(embedding)s LIMIT 1)
ORDER BY similarity DESC LIMIT 1;

-- name: get_memory
SELECT * FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s;

-- name: list_memories
SELECT * FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(tier)s::text IS NULL OR tier = %(tier)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(session_id)s::text IS NULL OR session_id = %(session_id)s)
  AND (%(include_inactive)s OR (valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())))
  AND (%(after_created)s::timestamptz IS NULL
       OR (created_at, id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: update_memory
UPDATE memories
SET text = coalesce(%(text)s, text), kind = coalesce(%(kind)s, kind), tier = coalesce(%(tier)s, tier),
    salience = coalesce(%(salience)s, salience), confidence = coalesce(%(confidence)s, confidence),
    metadata = coalesce(%(metadata)s, metadata), expires_at = CASE WHEN %(set_expires)s THEN %(expires_at)s ELSE expires_at END,
    content_hash = coalesce(%(content_hash)s, content_hash), doc_len = coalesce(%(doc_len)s, doc_len),
    embedding = coalesce(%(embedding)s, embedding), flags = coalesce(%(flags)s, flags), updated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s
RETURNING *;

-- name: delete_memory
DELETE FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s
RETURNING id;

-- name: recall
-- Hybrid recall in one statement. BM25 (Lucene IDF, k1 = 1.2, b = 0.75) over the agent's
-- live memories, exact cosine top-k over the same rows, both min-max normalised over the
-- union of candidates and fused by weight, plus seed 000's priors scaled down to break
-- near-ties. The hits' access counters are bumped in the same statement.
-- One pass over the agent's rows computes everything per row (the filters, the distance,
-- the priors' inputs) into a narrow materialised set; wide columns are read for the k hits.
-- Each posting carries its term's document frequency (a window, not a second pass) and its
-- memory's filter verdict, so BM25's candidates need no join back to live. Ties are broken
-- by id at every cut, never by the rows' physical order.
WITH live AS MATERIALIZED (
  SELECT m.id, m.doc_len, m.salience, m.access_count, m.created_at,
         (m.tier = ANY(%(tiers)s::text[])
          AND (%(kinds)s::text[] IS NULL OR m.kind = ANY(%(kinds)s::text[]))
          AND (%(since)s::timestamptz IS NULL OR m.created_at >= %(since)s::timestamptz)
          AND (%(until)s::timestamptz IS NULL OR m.created_at < %(until)s::timestamptz)
          AND (%(metadata)s::jsonb IS NULL OR m.metadata @> %(metadata)s::jsonb)
          AND NOT (%(hide_flagged)s AND 'instruction' = ANY(m.flags))) AS wanted,
         m.embedding <=> %(qvec)s::vector AS distance
  FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
    AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
), stats AS MATERIALIZED (  -- once, not once per posting row
  SELECT count(*)::float8 AS n, coalesce(avg(doc_len), 0)::float8 AS avgdl FROM live
), postings AS MATERIALIZED (
  SELECT t.memory_id AS id, t.tf::float8 AS tf, l.doc_len::float8 AS dl, l.wanted,
         count(*) OVER (PARTITION BY t.term)::float8 AS df
  FROM memory_terms t JOIN live l ON l.id = t.memory_id
  WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = ANY(%(terms)s::text[])
), bm25 AS MATERIALIZED (
  SELECT p.id, bool_or(p.wanted) AS wanted,  -- one verdict per memory: every row of an id has it
         sum(ln(1 + (s.n - p.df + 0.5) / (p.df + 0.5))
             * p.tf * (1.2 + 1) / (p.tf + 1.2 * (1 - 0.75 + 0.75 * p.dl / s.avgdl))) AS score
  FROM postings p CROSS JOIN stats s
  GROUP BY p.id
), candidates AS (
  (SELECT id FROM bm25 WHERE wanted ORDER BY score DESC, id LIMIT %(candidates)s)
  UNION
  (SELECT id FROM live WHERE wanted ORDER BY distance, id LIMIT %(candidates)s)
), signals AS (
  SELECT l.id, l.salience, l.access_count, l.created_at, coalesce(b.score, 0) AS bm25, 1 - l.distance AS vector
  FROM candidates c JOIN live l ON l.id = c.id LEFT JOIN bm25 b ON b.id = c.id
), relevant AS (
  SELECT s.* FROM signals s WHERE s.bm25 > 0 OR s.vector >= %(vector_floor)s
), ranges AS (
  SELECT max(bm25) AS bmax, min(vector) AS vmin, max(vector) AS vmax FROM relevant
), scored AS (
  SELECT r.*,
         CASE WHEN g.bmax > 0 THEN r.bm25 / g.bmax ELSE 0 END AS bm25_norm,
         CASE WHEN g.vmax > g.vmin THEN (r.vector - g.vmin) / (g.vmax - g.vmin) ELSE 1 END AS vector_norm,
         1.0 / (1.0 + extract(epoch FROM now() - r.created_at) / 86400.0 / 30.0) AS freshness
  FROM relevant r CROSS JOIN ranges g
), fused AS (
  SELECT s.*,
         %(w_bm25)s * s.bm25_norm + %(w_vector)s * s.vector_norm AS fused,
         %(w_prior)s * (s.salience + least(0.1 * s.access_count, 1.0) + s.freshness) AS prior
  FROM scored s
), top AS (
  SELECT f.*, f.fused + f.prior AS score FROM fused f ORDER BY f.fused + f.prior DESC, f.id LIMIT %(k)s
), bump AS (
  UPDATE memories m SET access_count = m.access_count + 1, last_access_at = now()
  FROM top WHERE %(bump)s AND m.id = top.id
  RETURNING m.id
)
SELECT m.id, m.text, m.kind, m.tier, m.created_at, m.metadata, m.provenance, m.flags, m.trust,
       top.salience, top.access_count, top.score, top.bm25, top.vector, top.fused, top.prior, top.freshness
FROM top JOIN memories m ON m.id = top.id
ORDER BY top.score DESC, top.id;

-- ---------------------------------------------------------------------------------------
-- Sleep: consolidation passes, their runs, the agents' gates and profiles (issue 5,
-- memworker/consolidation.py, memworker/profile.py, sql/0002_consolidation.sql).

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
-- insights and conclusions are born consolidated).
SELECT id, text, kind, tier, salience, confidence, created_at, access_count, last_access_at,
       entities, topics, flags, embedding
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND consolidated_at IS NULL
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at, id
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
ON CONFLICT (from_id, to_id, relationship) DO NOTHING
RETURNING from_id, to_id, relationship;

-- name: consolidation_rerate
-- Bumps, never absolute values: monotonic even against a concurrent strengthen, capped at 1.
UPDATE memories m SET salience = least(1.0, m.salience + x.bump), updated_at = now()
FROM unnest(%(ids)s::uuid[], %(bumps)s::float8[]) AS x(id, bump)
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = x.id AND x.bump > 0
RETURNING m.id;

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

-- ---------------------------------------------------------------------------------------
-- Lifecycle: retention sweep, promotion, merge, supersede, review, forget, policy (issue 6,
-- memworker/lifecycle.py, governance.py, retention.py, forget.py, sql/0003_lifecycle.sql).
-- The clock is always a parameter (now), never the SQL now(): tests move it.

-- name: lifecycle_now
SELECT now() AS now;

-- name: lifecycle_resolve_alias
SELECT memory_id FROM memory_aliases
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND alias_id = %(memory_id)s;

-- name: lifecycle_lock_memory
SELECT id, tier, kind, confidence, salience, access_count, confirmations, expires_at, valid_to, provenance
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s FOR UPDATE;

-- name: lifecycle_confirm
-- A later episode said the same thing: one more source, a little more salient, the grown
-- confidence (computed by lifecycle.grow_confidence), and the TTL renewed from now.
UPDATE memories
SET salience = least(1.0, salience + 0.05), confidence = %(confidence)s,
    provenance = CASE WHEN %(source)s = ANY(provenance) THEN provenance
                      ELSE provenance || %(source)s::text END,
    confirmations = confirmations + %(count)s, confirmed_at = %(now)s,
    expires_at = CASE WHEN expires_at IS NULL THEN NULL
                      ELSE greatest(expires_at, %(renew_to)s::timestamptz) END,
    updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(memory_id)s
RETURNING id, tier, confidence, access_count, confirmations;

-- name: lifecycle_set_tier
UPDATE memories SET tier = %(tier)s, expires_at = %(expires_at)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s
RETURNING *;

-- name: lifecycle_supersede
-- Retired, not deleted: out of recall (valid_to), kept for history until expires_at.
UPDATE memories
SET valid_to = %(now)s, superseded_by = %(newer_id)s, expires_at = %(keep_until)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(older_id)s AND valid_to IS NULL
RETURNING id;

-- name: lifecycle_add_review
INSERT INTO memory_reviews (tenant_id, agent_id, memory_id, other_id, reason, created_at)
SELECT %(tenant_id)s, %(agent_id)s, %(memory_id)s, %(other_id)s, %(reason)s, %(now)s
WHERE NOT EXISTS (SELECT 1 FROM memory_reviews r
                  WHERE r.tenant_id = %(tenant_id)s AND r.memory_id = %(other_id)s
                    AND r.other_id = %(memory_id)s)
ON CONFLICT (tenant_id, memory_id, other_id) DO NOTHING
RETURNING id;

-- name: lifecycle_reviews
SELECT r.id, r.memory_id, r.other_id, r.reason, r.status, r.resolution, r.resolved_by,
       r.resolved_at, r.created_at,
       a.text AS memory_text, a.tier AS memory_tier, a.confidence AS memory_confidence,
       a.created_at AS memory_created_at, a.valid_to AS memory_valid_to,
       b.text AS other_text, b.tier AS other_tier, b.confidence AS other_confidence,
       b.created_at AS other_created_at, b.valid_to AS other_valid_to
FROM memory_reviews r
JOIN memories a ON a.id = r.memory_id
JOIN memories b ON b.id = r.other_id
WHERE r.tenant_id = %(tenant_id)s AND r.agent_id = %(agent_id)s
  AND (%(status)s::text IS NULL OR r.status = %(status)s)
ORDER BY r.created_at, r.id
LIMIT %(limit)s;

-- name: lifecycle_lock_review
SELECT r.id, r.memory_id, r.other_id, r.status, a.tier AS memory_tier, b.tier AS other_tier
FROM memory_reviews r
JOIN memories a ON a.id = r.memory_id
JOIN memories b ON b.id = r.other_id
WHERE r.tenant_id = %(tenant_id)s AND r.agent_id = %(agent_id)s AND r.id = %(review_id)s
FOR UPDATE OF r;

-- name: lifecycle_resolve_review
UPDATE memory_reviews
SET status = 'resolved', resolution = %(resolution)s, resolved_by = %(actor)s, resolved_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(review_id)s
RETURNING id;

-- name: lifecycle_history
-- The supersede chain through one memory: every older version it retired (recursively) and
-- every newer one that retired it; depth < 0 is older, 0 the memory itself, > 0 newer.
WITH RECURSIVE older AS (
  SELECT m.id, 0 AS depth FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = %(memory_id)s
  UNION
  SELECT m.id, o.depth - 1 FROM memories m JOIN older o ON m.superseded_by = o.id
  WHERE m.tenant_id = %(tenant_id)s AND o.depth > -100
), newer AS (
  SELECT m.id, m.superseded_by, 0 AS depth FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = %(memory_id)s
  UNION
  SELECT m.id, m.superseded_by, n.depth + 1 FROM memories m JOIN newer n ON m.id = n.superseded_by
  WHERE m.tenant_id = %(tenant_id)s AND n.depth < 100
), chain AS (
  SELECT id, depth FROM older UNION SELECT id, depth FROM newer
)
SELECT m.id, m.text, m.kind, m.tier, m.confidence, m.salience, m.created_at, m.valid_from,
       m.valid_to, m.superseded_by, m.expires_at, m.provenance, c.depth
FROM chain c JOIN memories m ON m.id = c.id
ORDER BY c.depth, m.created_at, m.id;

-- name: lifecycle_aliases_of
SELECT alias_id FROM memory_aliases
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND memory_id = ANY(%(ids)s::uuid[]);

-- name: lifecycle_events
-- The audit trail of some memories (ids and reasons only, never text).
SELECT id, memory_id, event, reason, actor, related_ids, created_at FROM memory_events
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (memory_id = ANY(%(ids)s::uuid[]) OR related_ids && %(ids)s::uuid[])
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: lifecycle_insert_events
-- Many audit rows in one statement: one per id, each with its own reason.
INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, related_ids, created_at)
SELECT %(tenant_id)s, %(agent_id)s, e.id::uuid, %(event)s, e.reason, %(actor)s,
       CASE WHEN e.related IS NULL THEN '{}'::uuid[] ELSE ARRAY[e.related::uuid] END, %(now)s
FROM unnest(%(ids)s::text[], %(reasons)s::text[], %(related)s::text[]) AS e(id, reason, related);

-- name: lifecycle_merge_into
-- The survivor takes the union of both memories' provenance, entities, topics and flags,
-- the higher salience, confidence and tier, both access counts, and one more confirmation.
UPDATE memories s
SET provenance = s.provenance || ARRAY(SELECT p FROM unnest(o.provenance) p WHERE p <> ALL(s.provenance)),
    entities = s.entities || ARRAY(SELECT p FROM unnest(o.entities) p WHERE p <> ALL(s.entities)),
    topics = s.topics || ARRAY(SELECT p FROM unnest(o.topics) p WHERE p <> ALL(s.topics)),
    flags = s.flags || ARRAY(SELECT p FROM unnest(o.flags) p WHERE p <> ALL(s.flags)),
    salience = greatest(s.salience, o.salience), confidence = greatest(s.confidence, o.confidence),
    tier = CASE WHEN array_position(ARRAY['L0','L1','L2','L3'], o.tier)
                     > array_position(ARRAY['L0','L1','L2','L3'], s.tier) THEN o.tier ELSE s.tier END,
    expires_at = CASE WHEN s.expires_at IS NULL OR o.expires_at IS NULL THEN NULL
                      ELSE greatest(s.expires_at, o.expires_at) END,
    access_count = s.access_count + o.access_count,
    last_access_at = greatest(s.last_access_at, o.last_access_at),
    confirmations = s.confirmations + o.confirmations + 1,
    confirmed_at = greatest(s.confirmed_at, o.confirmed_at, o.created_at),
    metadata = o.metadata || s.metadata, session_id = coalesce(s.session_id, o.session_id),
    updated_at = %(now)s
FROM memories o
WHERE s.tenant_id = %(tenant_id)s AND s.agent_id = %(agent_id)s AND s.id = %(survivor)s
  AND o.tenant_id = %(tenant_id)s AND o.agent_id = %(agent_id)s AND o.id = %(other)s
  AND s.valid_to IS NULL AND o.valid_to IS NULL
RETURNING s.id;

-- name: lifecycle_merge_finish
-- After lifecycle_merge_into: the merged-away memory's links, the insights and versions that
-- point at it, and its aliases move to the survivor (a link that would duplicate one the
-- survivor has, or tie it to itself, goes with the row instead); its id becomes an alias;
-- the row goes (postings cascade) with a 'merged' event. One statement, one round trip.
WITH links_from AS (
  UPDATE memory_connections c SET from_id = %(survivor)s
  WHERE c.tenant_id = %(tenant_id)s AND c.from_id = %(other)s AND c.to_id <> %(survivor)s
    AND NOT EXISTS (SELECT 1 FROM memory_connections x WHERE x.from_id = %(survivor)s
                    AND x.to_id = c.to_id AND x.relationship = c.relationship)
  RETURNING 1
), links_to AS (
  UPDATE memory_connections c SET to_id = %(survivor)s
  WHERE c.tenant_id = %(tenant_id)s AND c.to_id = %(other)s AND c.from_id <> %(survivor)s
    AND NOT EXISTS (SELECT 1 FROM memory_connections x WHERE x.to_id = %(survivor)s
                    AND x.from_id = c.from_id AND x.relationship = c.relationship)
  RETURNING 1
), insights AS (
  UPDATE memory_connections SET insight_id = %(survivor)s
  WHERE tenant_id = %(tenant_id)s AND insight_id = %(other)s AND from_id <> %(other)s AND to_id <> %(other)s
  RETURNING 1
), versions AS (
  UPDATE memories SET superseded_by = %(survivor)s
  WHERE tenant_id = %(tenant_id)s AND superseded_by = %(other)s AND id <> %(survivor)s RETURNING 1
), aliases AS (
  UPDATE memory_aliases SET memory_id = %(survivor)s
  WHERE tenant_id = %(tenant_id)s AND memory_id = %(other)s RETURNING 1
), alias AS (
  INSERT INTO memory_aliases (tenant_id, agent_id, alias_id, memory_id, created_at)
  VALUES (%(tenant_id)s, %(agent_id)s, %(other)s, %(survivor)s, %(now)s)
  ON CONFLICT (tenant_id, alias_id) DO UPDATE SET memory_id = EXCLUDED.memory_id
  RETURNING 1
), gone AS (
  DELETE FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(other)s
  RETURNING id
), logged AS (
  INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, related_ids, created_at)
  SELECT %(tenant_id)s, %(agent_id)s, g.id, 'merged', %(reason)s, %(actor)s, ARRAY[%(survivor)s::uuid], %(now)s
  FROM gone g RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: lifecycle_set_agent_policy
UPDATE agents SET policy = %(policy)s WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s
RETURNING policy;

-- name: lifecycle_set_tenant_policy
UPDATE tenants SET policy = %(policy)s WHERE id = %(tenant_id)s RETURNING policy;

-- name: retention_due
SELECT tenant_id, agent_id FROM retention_due(%(before)s, %(limit)s);

-- name: retention_start
-- A run key already used returns nothing (a beat window fired twice), except with resume:
-- the redelivered task of a sweep whose worker died takes over its run, still 'running'.
INSERT INTO retention_runs (tenant_id, agent_id, run_key, trigger, clock)
VALUES (%(tenant_id)s, %(agent_id)s, %(run_key)s, %(trigger)s, %(now)s)
ON CONFLICT (tenant_id, agent_id, run_key) DO UPDATE SET started_at = now()
  WHERE %(resume)s AND retention_runs.status = 'running'
RETURNING id;

-- name: retention_state
SELECT a.retention_done_at,
       (SELECT count(*) FROM memories m
        WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.valid_to IS NULL
          AND (m.expires_at IS NULL OR m.expires_at > %(now)s)) AS live
FROM agents a WHERE a.tenant_id = %(tenant_id)s AND a.id = %(agent_id)s;

-- name: retention_finish
UPDATE retention_runs
SET status = %(status)s, finished_at = now(), scanned = %(scanned)s, expired = %(expired)s,
    forgotten_age = %(forgotten_age)s, forgotten_unused = %(forgotten_unused)s,
    forgotten_cap = %(forgotten_cap)s, decayed = %(decayed)s, promoted = %(promoted)s,
    merged = %(merged)s, superseded = %(superseded)s, reviews = %(reviews)s, batches = %(batches)s,
    duration_ms = %(duration_ms)s, skipped_reason = %(skipped_reason)s, error = %(error)s
WHERE tenant_id = %(tenant_id)s AND id = %(run_id)s;

-- name: retention_stamp
UPDATE agents
SET retention_at = %(now)s,
    retention_done_at = CASE WHEN %(done)s THEN %(now)s ELSE retention_done_at END
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: retention_runs
SELECT * FROM retention_runs
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
ORDER BY started_at DESC, id DESC LIMIT %(limit)s;

-- name: retention_purge_expired
-- TTL: expired rows (and retired versions past their history window) are deleted with their
-- postings and links (cascade), one 'expired' event each.
WITH doomed AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND expires_at <= %(now)s
  ORDER BY expires_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM memories m USING doomed d WHERE m.id = d.id RETURNING m.id, m.tier, m.valid_to
), logged AS (
  INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, created_at)
  SELECT %(tenant_id)s, %(agent_id)s, g.id, 'expired',
         CASE WHEN g.valid_to IS NOT NULL THEN 'superseded version past its history window'
              ELSE 'ttl of ' || g.tier END, %(actor)s, %(now)s
  FROM gone g RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: retention_forget_age
-- Seed 002: episodic items older than decay_days (since written or last confirmed) that were
-- never recalled. Insights, conclusions, L2 and L3 are not episodic.
WITH doomed AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND tier = ANY(%(tiers)s::text[]) AND kind <> ALL(%(protected)s::text[])
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
    AND access_count = 0 AND greatest(created_at, confirmed_at) < %(cutoff)s
  ORDER BY created_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM memories m USING doomed d WHERE m.id = d.id RETURNING m.id
), logged AS (
  INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, created_at)
  SELECT %(tenant_id)s, %(agent_id)s, g.id, 'forgotten', %(reason)s, %(actor)s, %(now)s FROM gone g
  RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: retention_forget_unused
-- Seed 001: not recalled, confirmed or written for unused_days. Everything but L3 and the
-- protected kinds.
WITH doomed AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND tier <> 'L3' AND kind <> ALL(%(protected)s::text[])
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
    AND greatest(created_at, confirmed_at, last_access_at) < %(cutoff)s
  ORDER BY created_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM memories m USING doomed d WHERE m.id = d.id RETURNING m.id
), logged AS (
  INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, created_at)
  SELECT %(tenant_id)s, %(agent_id)s, g.id, 'forgotten', %(reason)s, %(actor)s, %(now)s FROM gone g
  RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: retention_forget_cap
-- Seed 002's cap: rank live episodic items by recalls, then freshness; drop those past the
-- cap, lowest ranked first.
WITH ranked AS (
  SELECT id, row_number() OVER (ORDER BY access_count DESC, greatest(created_at, confirmed_at) DESC, id) AS rank
  FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND tier = ANY(%(tiers)s::text[]) AND kind <> ALL(%(protected)s::text[])
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
), doomed AS (
  SELECT m.id FROM memories m JOIN ranked r ON r.id = m.id
  WHERE r.rank > %(cap)s ORDER BY r.rank DESC LIMIT %(batch)s FOR UPDATE OF m SKIP LOCKED
), gone AS (
  DELETE FROM memories m USING doomed d WHERE m.id = d.id RETURNING m.id
), logged AS (
  INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, created_at)
  SELECT %(tenant_id)s, %(agent_id)s, g.id, 'forgotten', %(reason)s, %(actor)s, %(now)s FROM gone g
  RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: retention_decay
-- One keyset batch of slow decay (lifecycle.decayed): never-recalled episodic items lose
-- salience once salience_decay_after_days old; confidence halves per
-- confidence_half_life_days without new evidence. decayed_at makes it incremental, so two
-- sweeps at the same clock decay once; rows are rewritten at most once per step_days.
WITH batch AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id > %(after)s
    AND tier <> 'L3' AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
  ORDER BY id LIMIT %(batch)s
), calc AS (
  SELECT m.id,
         CASE WHEN %(s_half)s::float8 IS NULL OR %(s_after)s::float8 IS NULL OR m.access_count > 0
                   OR m.tier NOT IN ('L0', 'L1') OR m.kind = ANY(%(protected)s::text[]) THEN 0
              ELSE greatest(0, extract(epoch FROM %(now)s::timestamptz - greatest(
                     m.decayed_at, m.created_at + make_interval(secs => %(s_after)s::float8 * 86400))) / 86400)
         END AS s_days,
         CASE WHEN %(c_half)s::float8 IS NULL THEN 0
              ELSE greatest(0, extract(epoch FROM %(now)s::timestamptz
                                       - greatest(m.decayed_at, m.created_at, m.confirmed_at)) / 86400)
         END AS c_days
  FROM memories m JOIN batch b ON b.id = m.id
), upd AS (
  UPDATE memories m
  SET salience = CASE WHEN c.s_days > 0 THEN m.salience * power(0.5, c.s_days / %(s_half)s::float8)
                      ELSE m.salience END,
      confidence = CASE WHEN c.c_days > 0
                        THEN greatest(least(m.confidence, %(c_floor)s::float8),
                                      m.confidence * power(0.5, c.c_days / %(c_half)s::float8))
                        ELSE m.confidence END,
      decayed_at = %(now)s
  FROM calc c
  WHERE m.id = c.id AND (c.s_days >= %(step_days)s OR c.c_days >= %(step_days)s)
  RETURNING m.id
)
SELECT (SELECT id FROM batch ORDER BY id DESC LIMIT 1) AS last_id,
       (SELECT count(*) FROM batch) AS seen, (SELECT count(*) FROM upd) AS n;

-- name: retention_promote_candidates
SELECT m.id, m.tier, m.access_count, m.confirmations, m.confidence,
       (EXISTS (SELECT 1 FROM memory_connections c WHERE c.from_id = m.id)
        OR EXISTS (SELECT 1 FROM memory_connections c WHERE c.to_id = m.id)) AS connected
FROM memories m
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.tier = 'L1' AND m.id > %(after)s
  AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
  AND (m.access_count >= %(min_recalls)s
       OR (m.confirmations > 0 AND m.confidence >= %(min_confidence)s)
       OR EXISTS (SELECT 1 FROM memory_connections c WHERE c.from_id = m.id)
       OR EXISTS (SELECT 1 FROM memory_connections c WHERE c.to_id = m.id))
ORDER BY m.id
LIMIT %(batch)s;

-- name: retention_promote
UPDATE memories SET tier = 'L2', expires_at = %(expires_at)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[]) AND tier = 'L1'
RETURNING id;

-- name: retention_fresh
-- A keyset batch of the memories written or changed since the last complete sweep: the
-- ones merge and contradiction checks look at.
SELECT id FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id > %(after)s
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
  AND greatest(created_at, updated_at) > %(since)s
ORDER BY id LIMIT %(batch)s;

-- name: retention_pairs
-- Candidate pairs for the merge and contradiction rules (which then judge each pair in
-- full). Both rules need two memories to share most of their words, so each given memory is
-- probed through its few rarest terms: the other memory must have a third of them, and the
-- two must share at least half the terms of the shorter one. Probing by rare terms keeps the
-- cost linear in the agent's size: a common term would pair every memory with every other.
WITH mine AS (
  SELECT t.memory_id, t.term FROM memory_terms t
  WHERE t.memory_id = ANY(%(ids)s::uuid[]) AND t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s
), df AS (
  SELECT t.term, count(*) AS df FROM memory_terms t
  WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term IN (SELECT term FROM mine)
  GROUP BY t.term
), rare AS (
  SELECT memory_id, term, least(n, %(probe_terms)s) AS probes FROM (
    SELECT m.memory_id, m.term,
           row_number() OVER (PARTITION BY m.memory_id ORDER BY d.df, m.term) AS r,
           count(*) OVER (PARTITION BY m.memory_id) AS n
    FROM mine m JOIN df d USING (term)) x
  WHERE r <= %(probe_terms)s
), cand AS (
  SELECT r.memory_id AS a, t.memory_id AS b
  FROM rare r
  JOIN memory_terms t ON t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s
                     AND t.term = r.term AND t.memory_id <> r.memory_id
  GROUP BY r.memory_id, t.memory_id
  HAVING count(*) * 3 >= max(r.probes)
), bags AS (
  SELECT t.memory_id, array_agg(t.term) AS terms FROM memory_terms t
  WHERE t.memory_id = ANY(ARRAY(SELECT a FROM cand UNION SELECT b FROM cand))
  GROUP BY t.memory_id
)
SELECT c.a, c.b, 1 - (ma.embedding <=> mb.embedding) AS cosine
FROM cand c
JOIN bags ba ON ba.memory_id = c.a
JOIN bags bb ON bb.memory_id = c.b
JOIN memories ma ON ma.id = c.a
JOIN memories mb ON mb.id = c.b
WHERE 2 * (SELECT count(*) FROM unnest(ba.terms) x WHERE x = ANY(bb.terms))
        >= least(cardinality(ba.terms), cardinality(bb.terms))
  AND mb.valid_to IS NULL AND (mb.expires_at IS NULL OR mb.expires_at > %(now)s);

-- name: new_memory_pairs
-- retention_pairs for a few just-written memories (governance.check_new, at write time).
-- The per-term lookups are sub-selects per row (ARRAY(...) and a scalar count, which the
-- planner cannot flatten into joins) with the index key (tenant, agent, term) bound, so they
-- stay index probes even when the table's statistics are stale (a fresh database growing
-- fast): retention_pairs' joins, planned by a planner that believed "1 row", scanned the
-- agent's every posting once per term (184 ms a call during an ingest run, against 3-15 ms).
-- For the sweep's batches of hundreds of memories the joins are faster (a 60-agent
-- retention bench: first sweep 28.8 s with them, 45.4 s with these probes).
WITH mine AS (
  SELECT t.memory_id, t.term FROM memory_terms t
  WHERE t.memory_id = ANY(%(ids)s::uuid[]) AND t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s
), df AS (
  SELECT d.term, (SELECT count(*) FROM memory_terms t
                  WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = d.term) AS df
  FROM (SELECT DISTINCT term FROM mine) d
), rare AS (
  SELECT memory_id, term, least(n, %(probe_terms)s) AS probes FROM (
    SELECT m.memory_id, m.term,
           row_number() OVER (PARTITION BY m.memory_id ORDER BY d.df, m.term) AS r,
           count(*) OVER (PARTITION BY m.memory_id) AS n
    FROM mine m JOIN df d USING (term)) x
  WHERE r <= %(probe_terms)s
), cand AS (
  SELECT r.memory_id AS a, o.b
  FROM rare r
  CROSS JOIN unnest(ARRAY(SELECT t.memory_id FROM memory_terms t
                          WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = r.term
                            AND t.memory_id <> r.memory_id)) AS o(b)
  GROUP BY r.memory_id, o.b
  HAVING count(*) * 3 >= max(r.probes)
), bags AS (
  SELECT t.memory_id, array_agg(t.term) AS terms FROM memory_terms t
  WHERE t.memory_id = ANY(ARRAY(SELECT a FROM cand UNION SELECT b FROM cand))
  GROUP BY t.memory_id
)
SELECT c.a, c.b, 1 - (ma.embedding <=> mb.embedding) AS cosine
FROM cand c
JOIN bags ba ON ba.memory_id = c.a
JOIN bags bb ON bb.memory_id = c.b
JOIN memories ma ON ma.id = c.a
JOIN memories mb ON mb.id = c.b
WHERE 2 * (SELECT count(*) FROM unnest(ba.terms) x WHERE x = ANY(bb.terms))
        >= least(cardinality(ba.terms), cardinality(bb.terms))
  AND mb.valid_to IS NULL AND (mb.expires_at IS NULL OR mb.expires_at > %(now)s);

-- name: retention_facts
SELECT id, text, kind, tier, confidence, access_count, created_at FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s);

-- name: forget_match
-- The memories a forget request names: by source (an exact provenance entry, or the episode
-- behind 'episode:<id>#m...'), by id, by session, or everything written before a time.
SELECT id, kind, provenance FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND ((%(provenance)s::text IS NOT NULL AND EXISTS (
          SELECT 1 FROM unnest(provenance) p
          WHERE p = %(provenance)s OR starts_with(p, %(provenance)s || '#')))
       OR id = ANY(%(memory_ids)s::uuid[])
       OR (%(session_id)s::text IS NOT NULL AND session_id = %(session_id)s)
       OR (%(before)s::timestamptz IS NOT NULL AND created_at < %(before)s)
       OR EXISTS (SELECT 1 FROM unnest(provenance) p WHERE split_part(p, '#', 1) = ANY(%(sources)s::text[])));

-- name: forget_match_episodes
SELECT id FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (id = ANY(%(episode_ids)s::uuid[])
       OR (%(session_id)s::text IS NOT NULL AND session_id = %(session_id)s)
       OR (%(before)s::timestamptz IS NOT NULL AND created_at < %(before)s));

-- name: forget_derived
-- Insights and conclusions whose evidence includes a forgotten memory: linked through the
-- connections consolidation wrote for them, or listed in their metadata's evidence.
SELECT d.id, d.kind, d.provenance FROM memories d
WHERE d.tenant_id = %(tenant_id)s AND d.agent_id = %(agent_id)s
  AND d.kind = ANY(%(kinds)s::text[]) AND d.id <> ALL(%(ids)s::uuid[])
  AND (EXISTS (SELECT 1 FROM memory_connections c
               WHERE c.insight_id = d.id AND (c.from_id = ANY(%(ids)s::uuid[]) OR c.to_id = ANY(%(ids)s::uuid[])))
       OR (jsonb_typeof(d.metadata -> 'evidence') = 'array'
           AND d.metadata -> 'evidence' ?| %(id_texts)s::text[]));

-- name: forget_rederive
-- The evidence that survives a removed insight goes back into consolidation's window, so
-- the next pass derives a new one from what remains.
UPDATE memories SET consolidated_at = NULL
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id <> ALL(%(forgotten)s::uuid[])
  AND id IN (SELECT from_id FROM memory_connections WHERE insight_id = ANY(%(derived)s::uuid[])
             UNION SELECT to_id FROM memory_connections WHERE insight_id = ANY(%(derived)s::uuid[]))
RETURNING id;

-- name: forget_texts
SELECT text FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[]);

-- name: forget_counts
SELECT (SELECT count(*) FROM memory_terms WHERE memory_id = ANY(%(ids)s::uuid[])) AS terms,
       (SELECT count(*) FROM memory_connections
        WHERE tenant_id = %(tenant_id)s
          AND (from_id = ANY(%(ids)s::uuid[]) OR to_id = ANY(%(ids)s::uuid[]))) AS connections,
       (SELECT count(*) FROM memory_aliases WHERE memory_id = ANY(%(ids)s::uuid[])) AS aliases;

-- name: forget_delete_memories
DELETE FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
RETURNING id;

-- name: forget_delete_episodes
DELETE FROM episodes WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
RETURNING id;

-- name: forget_profiles
-- Profile versions that cite a forgotten memory (by id or by its text) go too.
DELETE FROM agent_profiles p
WHERE p.tenant_id = %(tenant_id)s AND p.agent_id = %(agent_id)s
  AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n
              WHERE strpos(lower(p.document::text), lower(n)) > 0)
RETURNING p.version;

-- ---------------------------------------------------------------------------------------
-- Sessions: working memory, plans, context calls, archives, webhooks, rumination (issue 7,
-- memworker/sessions.py, context.py, archive.py, hooks.py, rumination.py;
-- sql/0004_sessions.sql).

-- name: session_insert
INSERT INTO sessions (tenant_id, agent_id, id, metadata, working, window_tokens, revision)
VALUES (%(tenant_id)s, %(agent_id)s, %(session_id)s, %(metadata)s, %(working)s, %(window_tokens)s, %(revision)s)
ON CONFLICT (tenant_id, agent_id, id) DO NOTHING
RETURNING *;

-- name: session_get
SELECT * FROM sessions WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: session_lock
SELECT * FROM sessions WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s
FOR UPDATE;

-- name: session_list
SELECT * FROM sessions
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY updated_at DESC, id LIMIT %(limit)s;

-- name: session_save_working
UPDATE sessions SET working = %(working)s, revision = %(revision)s, updated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s
RETURNING *;

-- name: session_set_working
-- Reference counts only: no new revision (nothing the agent wrote changed).
UPDATE sessions SET working = %(working)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: session_save_plan
UPDATE sessions SET plan = %(plan)s, revision = %(revision)s, updated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s
RETURNING *;

-- name: session_record_use
UPDATE sessions
SET last_context_tokens = coalesce(%(context_tokens)s, last_context_tokens),
    reported_used = coalesce(%(reported)s, reported_used),
    window_tokens = coalesce(%(window_tokens)s, window_tokens),
    flush_armed = %(armed)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: session_flushed
UPDATE sessions
SET flush_armed = false, flush_count = flush_count + 1, flushed_at = now(),
    flushed_revision = %(revision)s, log_tokens = 0,
    last_flush_episode_id = coalesce(%(episode_id)s, last_flush_episode_id)
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: session_log_tokens
-- The post-turn hook: a stored episode of an open session grows its transcript estimate.
UPDATE sessions SET log_tokens = log_tokens + %(tokens)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s AND status = 'open';

-- name: session_archived
UPDATE sessions
SET status = 'archived', archived_at = now(), updated_at = now(), archive_count = %(version)s,
    working = '{}', plan = NULL
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: session_restore
UPDATE sessions
SET status = 'open', restored_at = now(), updated_at = now(), metadata = %(metadata)s,
    working = %(working)s, plan = %(plan)s, revision = %(revision)s, window_tokens = %(window_tokens)s,
    log_tokens = %(log_tokens)s, last_context_tokens = %(last_context_tokens)s,
    reported_used = %(reported_used)s, flush_armed = %(flush_armed)s, flush_count = %(flush_count)s,
    flushed_at = %(flushed_at)s, flushed_revision = %(flushed_revision)s,
    last_flush_episode_id = %(last_flush_episode_id)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: session_episodes
SELECT id, content, messages, metadata, idempotency_key, status, memory_ids, occurred_at, created_at, stored_at
FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
ORDER BY created_at, id;

-- name: episodes_present
SELECT count(*) AS n FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[]);

-- name: session_forget_counts
SELECT (SELECT count(*) FROM context_calls
        WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s) AS calls,
       (SELECT count(*) FROM session_archives
        WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s) AS archives;

-- name: session_forget_deliveries
DELETE FROM webhook_deliveries
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s;

-- name: session_forget
-- Context calls and archives go with it (ON DELETE CASCADE).
DELETE FROM sessions WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: context_call_insert
INSERT INTO context_calls (tenant_id, agent_id, session_id, query, max_tokens, tokens, memory_ids,
                           dropped, sections, used)
VALUES (%(tenant_id)s, %(agent_id)s, %(session_id)s, %(query)s, %(max_tokens)s, %(tokens)s,
        %(memory_ids)s::uuid[], %(dropped)s, %(sections)s, %(used)s)
RETURNING id;

-- name: context_call_restore
INSERT INTO context_calls (id, tenant_id, agent_id, session_id, query, max_tokens, tokens, memory_ids,
                           dropped, sections, used, created_at)
VALUES (%(id)s, %(tenant_id)s, %(agent_id)s, %(session_id)s, %(query)s, %(max_tokens)s, %(tokens)s,
        %(memory_ids)s::uuid[], %(dropped)s, %(sections)s, %(used)s, %(created_at)s)
ON CONFLICT (id) DO NOTHING;

-- name: context_calls_of_session
SELECT id, query, max_tokens, tokens, memory_ids, dropped, sections, used, created_at FROM context_calls
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
ORDER BY created_at, id;

-- name: context_calls_recent
SELECT id, query, max_tokens, tokens, memory_ids, dropped, sections, used, created_at FROM context_calls
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
ORDER BY created_at DESC, id DESC LIMIT %(limit)s;

-- name: context_calls_delete
DELETE FROM context_calls
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s;

-- name: context_pinned_memories
-- The live memories a session pinned as candidates (text looked up now: a forgotten or
-- expired one is simply absent).
SELECT id, text, kind, tier, confidence, created_at, flags FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
  AND NOT (%(hide_flagged)s AND 'instruction' = ANY(flags));

-- name: context_bump_access
UPDATE memories SET access_count = access_count + 1, last_access_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[]);

-- name: archive_insert
INSERT INTO session_archives (tenant_id, agent_id, session_id, version, format_version, data, bytes,
                              raw_bytes, sha256, counts, episode_ids, distill_episode_id)
VALUES (%(tenant_id)s, %(agent_id)s, %(session_id)s, %(version)s, %(format_version)s, %(data)s, %(bytes)s,
        %(raw_bytes)s, %(sha256)s, %(counts)s, %(episode_ids)s::uuid[], %(distill_episode_id)s)
RETURNING session_id, version, format_version, bytes, raw_bytes, sha256, counts, distill_episode_id, created_at;

-- name: archive_get
SELECT * FROM session_archives
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
  AND version = %(version)s;

-- name: archive_list
SELECT session_id, version, format_version, bytes, raw_bytes, sha256, counts, distill_episode_id, created_at
FROM session_archives
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
ORDER BY version;

-- name: archives_with_episodes
SELECT session_id, version, data FROM session_archives
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND episode_ids && %(ids)s::uuid[];

-- name: archive_rewrite
UPDATE session_archives
SET data = %(data)s, bytes = %(bytes)s, raw_bytes = %(raw_bytes)s, sha256 = %(sha256)s, counts = %(counts)s,
    episode_ids = %(episode_ids)s::uuid[]
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
  AND version = %(version)s;

-- name: archives_in_window
SELECT session_id, version, data FROM session_archives
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND created_at >= %(start)s AND created_at < %(end)s
ORDER BY created_at, session_id, version;

-- name: rumination_due
SELECT tenant_id, agent_id FROM rumination_due(%(start)s, %(end)s, %(defaults)s, %(limit)s);

-- name: webhook_insert
INSERT INTO webhooks (tenant_id, url, secret, events, agent_ids, description)
VALUES (%(tenant_id)s, %(url)s, %(secret)s, %(events)s, %(agent_ids)s, %(description)s)
RETURNING *;

-- name: webhook_list
SELECT * FROM webhooks WHERE tenant_id = %(tenant_id)s ORDER BY created_at, id;

-- name: webhook_get
SELECT * FROM webhooks WHERE tenant_id = %(tenant_id)s AND id = %(webhook_id)s;

-- name: webhook_delete
DELETE FROM webhooks WHERE tenant_id = %(tenant_id)s AND id = %(webhook_id)s RETURNING id;

-- name: webhook_emit
-- The outbox: one pending delivery per active webhook of the tenant that wants the event.
INSERT INTO webhook_deliveries (tenant_id, webhook_id, event, agent_id, session_id, payload)
SELECT w.tenant_id, w.id, %(event)s, %(agent_id)s, %(session_id)s, %(payload)s
FROM webhooks w
WHERE w.tenant_id = %(tenant_id)s AND w.active AND %(event)s = ANY(w.events)
  AND (w.agent_ids IS NULL OR %(agent_id)s = ANY(w.agent_ids))
RETURNING id;

-- name: webhook_deliveries
SELECT id, webhook_id, event, agent_id, session_id, status, attempts, next_attempt_at, last_status,
       last_error, created_at, delivered_at
FROM webhook_deliveries
WHERE tenant_id = %(tenant_id)s AND webhook_id = %(webhook_id)s
ORDER BY created_at DESC, id DESC LIMIT %(limit)s;

-- name: delivery_claim
-- Compare-and-set: pending and due (a second of slack for an early timer), or stuck past a
-- dead sender's lease. attempts counts this try.
WITH claimed AS (
  UPDATE webhook_deliveries d
  SET status = 'sending', attempts = d.attempts + 1, lease_until = now() + make_interval(secs => %(lease_s)s)
  WHERE d.tenant_id = %(tenant_id)s AND d.id = %(delivery_id)s
    AND ((d.status = 'pending' AND d.next_attempt_at <= now() + interval '1 second')
         OR (d.status = 'sending' AND d.lease_until < now()))
  RETURNING d.*
)
SELECT c.*, w.url, w.secret FROM claimed c JOIN webhooks w ON w.id = c.webhook_id;

-- name: delivery_record
UPDATE webhook_deliveries
SET status = %(status)s, lease_until = NULL, last_status = %(last_status)s, last_error = %(last_error)s,
    next_attempt_at = now() + make_interval(secs => %(retry_in_s)s),
    delivered_at = CASE WHEN %(status)s = 'delivered' THEN now() END
WHERE tenant_id = %(tenant_id)s AND id = %(delivery_id)s AND status = 'sending' AND attempts = %(attempts)s;

-- name: due_webhook_deliveries
SELECT tenant_id, delivery_id FROM due_webhook_deliveries(%(before)s, %(limit)s);

-- name: prune_webhook_deliveries
SELECT prune_webhook_deliveries(%(before)s) AS n;
