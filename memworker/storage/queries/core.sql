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
RETURNING id, prefix, name, scopes, agent_ids, created_at, expires_at, revoked_at;

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
SELECT EXISTS (SELECT FROM agents WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s);

-- name: touch_agent
UPDATE agents SET last_episode_at = now() WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: insert_episode
-- enqueued_at is stamped here, not after publishing: a later UPDATE would lock the row just
-- when a fast worker tries to claim it (SKIP LOCKED) and strand it until the reconciler.
INSERT INTO episodes (tenant_id, agent_id, session_id, idempotency_key, content, messages,
                      metadata, occurred_at, enqueued_at, subject)
VALUES (%(tenant_id)s, %(agent_id)s, %(session_id)s, %(idempotency_key)s, %(content)s,
        %(messages)s, %(metadata)s, coalesce(%(occurred_at)s, now()), now(), %(subject)s)
ON CONFLICT (tenant_id, agent_id, idempotency_key) DO NOTHING
RETURNING id;

-- name: episode_by_key
-- The episode a used idempotency key names, with what makes it that episode (its subject and
-- content), which a caller's repeat must match.
SELECT id, status, subject, content FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND idempotency_key = %(idempotency_key)s;

-- name: mark_enqueued
UPDATE episodes SET enqueued_at = now() WHERE tenant_id = %(tenant_id)s AND id = ANY(%(ids)s);

-- name: queued_backlog
-- A tenant's queued episodes, counted up to cap (the episodes_queued index): how deep its
-- backlog is when new episodes are accepted, for the priority of their queue messages.
SELECT count(*) AS n FROM (
  SELECT 1 FROM episodes WHERE tenant_id = %(tenant_id)s AND status = 'queued' LIMIT %(cap)s) q;

-- name: get_episode
SELECT id, agent_id, session_id, status, attempts, last_error, memory_ids, reflector, llm_calls,
       tokens_in, tokens_out, llm_ms, created_at, stored_at, occurred_at, metadata
FROM episodes WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(episode_id)s;

-- name: list_episodes
SELECT id, agent_id, session_id, status, attempts, last_error, memory_ids, created_at, stored_at
FROM episodes
WHERE tenant_id = %(tenant_id)s
  AND (%(agent_id)s::text IS NULL OR agent_id = %(agent_id)s)
  AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))  -- an agent-limited key
  AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY created_at DESC LIMIT %(limit)s;

-- name: claim_episodes
-- Take the named episodes, plus other queued ones of the tenant up to the batch size, so
-- one worker reflects and embeds several at once. Their own queue messages then find them
-- claimed or stored and do nothing. attempts doubles as the claim token. Only the columns
-- every row can give back: the payload is read per claim afterwards (claimed_episodes), so
-- a row that fails to read costs its own attempt and nobody else's.
-- The pick is a materialised CTE, not an IN (subquery): a plan that rescans a LIMIT ...
-- SKIP LOCKED subquery finds the rows it just updated no longer queued and takes the next
-- ones, claiming the whole backlog in one statement.
WITH picked AS MATERIALIZED (
  SELECT c.id FROM episodes c
  WHERE c.tenant_id = %(tenant_id)s
    AND ((c.id = ANY(%(ids)s) AND (c.status IN ('queued', 'failed')
                                   OR (c.status = 'processing' AND c.lease_until < now())))
         OR (c.status = 'queued' AND %(opportunistic)s))
  ORDER BY (c.id = ANY(%(ids)s)) DESC, c.created_at
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED)
UPDATE episodes e
SET status = 'processing', attempts = e.attempts + 1,
    lease_until = now() + make_interval(secs => %(lease_s)s)
FROM picked
WHERE e.tenant_id = %(tenant_id)s AND e.id = picked.id
RETURNING e.id, e.agent_id, e.attempts;

-- name: claimed_episodes
-- The payload of episodes just claimed (claim_episodes).
SELECT id, agent_id, session_id, content, messages, metadata, attempts, reflection, occurred_at, subject
FROM episodes WHERE tenant_id = %(tenant_id)s AND id = ANY(%(ids)s);

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
  AND (%(agent_ids)s::text[] IS NULL OR agent_id = ANY(%(agent_ids)s::text[]))  -- an agent-limited key
GROUP BY agent_id ORDER BY agent_id;

-- name: llm_spent_today
-- The tenant's LLM tokens (in + out) this UTC day, as the count_llm_spend triggers keep them.
SELECT coalesce(
  (SELECT tokens FROM llm_spend WHERE tenant_id = %(tenant_id)s AND day = (now() AT TIME ZONE 'UTC')::date), 0
)::bigint;

-- name: insert_memory
INSERT INTO memories (tenant_id, agent_id, text, kind, tier, salience, confidence, expires_at,
                      session_id, entities, topics, provenance, metadata, source_key,
                      content_hash, trust, flags, doc_len, embedding, subject, parts)
VALUES (%(tenant_id)s, %(agent_id)s, %(text)s, %(kind)s, %(tier)s, %(salience)s, %(confidence)s,
        %(expires_at)s, %(session_id)s, %(entities)s, %(topics)s, %(provenance)s, %(metadata)s,
        %(source_key)s, %(content_hash)s, %(trust)s, %(flags)s, %(doc_len)s, %(embedding)s, %(subject)s,
        %(parts)s)
ON CONFLICT (tenant_id, source_key) DO NOTHING
RETURNING id;

-- name: memory_by_source_key
SELECT id FROM memories WHERE tenant_id = %(tenant_id)s AND source_key = %(source_key)s;

-- name: insert_terms
-- impact: the posting's BM25 weight at a reference length (sql/0012), given here so the
-- trigger that fills it for other writers does not look the memory up.
INSERT INTO memory_terms (tenant_id, agent_id, memory_id, term, tf, impact)
SELECT %(tenant_id)s, %(agent_id)s, %(memory_id)s, t.term, t.tf, bm25_impact(t.tf, %(doc_len)s)
FROM unnest(%(terms)s::text[], %(tfs)s::int[]) AS t(term, tf);

-- name: delete_terms
DELETE FROM memory_terms WHERE memory_id = %(memory_id)s;

-- name: insert_event
INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, related_ids)
VALUES (%(tenant_id)s, %(agent_id)s, %(memory_id)s, %(event)s, %(reason)s, %(actor)s, %(related_ids)s);

-- name: find_duplicate
-- The closest live memory of the agent: an exact text match, else the nearest vector among
-- the memories that share one of the text's rarest terms. A duplicate must share most words
-- (memories.says_the_same), so it shares one of those; probing a few terms, each through at
-- most per_term postings (their document frequency counted up to df_cap), bounds the cost
-- per write whatever the agent's size or vocabulary: a scan of every vector grew with the agent.
-- Turns (the episodic layer) are what was said, not facts: an item is never folded into one.
-- Only the same subject's (NULL: the general ones'): one customer's statement never
-- confirms another's, nor a subject's the agent's general knowledge.
WITH probes AS (
  SELECT q.term FROM unnest(%(terms)s::text[]) AS q(term)
  CROSS JOIN LATERAL (SELECT count(*) AS df FROM (
    SELECT 1 FROM memory_terms t
    WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = q.term
    LIMIT %(df_cap)s) x) d
  WHERE d.df > 0  -- a term no memory has finds nothing
  ORDER BY d.df, q.term LIMIT %(probe_terms)s
), near AS (
  SELECT DISTINCT p.memory_id AS id FROM probes CROSS JOIN LATERAL (
    SELECT t.memory_id FROM memory_terms t
    WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = probes.term
    LIMIT %(per_term)s) p
)
(SELECT id, text, 1.0::float8 AS similarity FROM memories
 WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND content_hash = %(content_hash)s
   AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now()) AND kind <> 'turn'
   AND subject IS NOT DISTINCT FROM %(subject)s::text
 LIMIT 1)
UNION ALL
(SELECT m.id, m.text, 1 - (m.embedding <=> %(embedding)s) AS similarity
 FROM near JOIN memories m ON m.tenant_id = %(tenant_id)s AND m.id = near.id
 WHERE m.agent_id = %(agent_id)s
   AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now()) AND m.kind <> 'turn'
   AND m.subject IS NOT DISTINCT FROM %(subject)s::text
 ORDER BY m.embedding <=> %(embedding)s, m.id LIMIT 1)
ORDER BY similarity DESC LIMIT 1;

-- name: get_memory
SELECT * FROM memories WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s;

-- name: list_memories
SELECT * FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(tier)s::text IS NULL OR tier = %(tier)s)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(session_id)s::text IS NULL OR session_id = %(session_id)s)
  AND (%(subject)s::text IS NULL OR subject = %(subject)s)  -- one subject's (listing: no general ones)
  AND (%(metadata)s::jsonb IS NULL OR metadata @> %(metadata)s::jsonb)  -- containment, as recall's filter
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

-- fragment: recall_live
-- The narrow per-row set recall reads (its FROM; the caller's WHERE picks the rows): each
-- memory's filter verdict (`wanted`), its distance to the query and the priors' inputs.
  SELECT m.id, m.doc_len, m.parts, m.salience, m.access_count, m.created_at,
         (m.tier = ANY(%(tiers)s::text[])  -- a parameter's first cast types it: one is enough
          AND (%(kinds)s::text[] IS NULL OR m.kind = ANY(%(kinds)s))
          AND (%(since)s::timestamptz IS NULL OR m.created_at >= %(since)s)
          AND (%(until)s::timestamptz IS NULL OR m.created_at < %(until)s)
          AND (%(metadata)s::jsonb IS NULL OR m.metadata @> %(metadata)s)
          AND NOT (%(hide_flagged)s AND 'instruction' = ANY(m.flags))) AS wanted,
         m.embedding <=> %(qvec)s::vector AS distance
  FROM memories m

-- fragment: recall_fusion
-- BM25 per memory from its postings of the query terms (`postings`: tf, its memory's length
-- dl and filter verdict, the term's document frequency df; `stats`: n and avgdl), the
-- candidates (BM25's and the vector's best, wanted rows only), their two signals
-- min-max normalised over the candidates that are relevant at all, fused by weight,
-- plus the priors; one text for `recall`, `recall_bounded` and `recall_agents`, so their
-- scores agree.
bm25 AS MATERIALIZED (
  SELECT p.id, bool_or(p.wanted) AS wanted,  -- one verdict per memory: every row of an id has it
         -- k1 = 1.2, b = 0.75: tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), folded
         -- (the statement stays under psycopg's 4 KB cache: tests/unit/test_storage_typed.py)
         sum(ln(1 + (s.n - p.df + 0.5) / (p.df + 0.5))
             * p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.dl / s.avgdl))) AS score
  FROM postings p, stats s
  GROUP BY p.id
), candidates AS (
  (SELECT id FROM bm25 WHERE wanted ORDER BY score DESC, id LIMIT %(candidates)s)
  UNION
  -- a split message is a vector candidate by its first part (the others index no text and
  -- carry its vector: memworker/domain/episodic.py)
  (SELECT id FROM live WHERE wanted AND (doc_len > 0 OR parts = 1) ORDER BY distance, id LIMIT %(candidates)s)
), signals AS (
  SELECT l.id, l.parts, l.salience, l.access_count, l.created_at, coalesce(b.score, 0) AS bm25,
         1 - l.distance AS vector
  FROM candidates c JOIN live l ON l.id = c.id LEFT JOIN bm25 b ON b.id = c.id
), relevant AS (
  SELECT s.* FROM signals s WHERE s.bm25 > 0 OR s.vector >= %(vector_floor)s
), ranges AS (
  SELECT max(bm25) AS bmax, min(vector) AS vmin, max(vector) AS vmax FROM relevant
), scored AS (
  SELECT r.*,
         CASE WHEN g.bmax > 0 THEN r.bm25 / g.bmax ELSE 0 END AS bm25_norm,
         CASE WHEN g.vmax > g.vmin THEN (r.vector - g.vmin) / (g.vmax - g.vmin) ELSE 1 END AS vector_norm,
         1.0 / (1.0 + extract(epoch FROM now() - r.created_at) / 2592000.0) AS freshness  -- 30 days
  FROM relevant r, ranges g
), fused AS (
  SELECT s.*,
         -- a long message (n parts) repeats the words and topic of the short one it answers:
         -- lowered by ln(n / 2), counted beyond two parts (about 560 characters, an ordinary
         -- chat message), so only long messages pay it (domain/policy.py)
         %(w_bm25)s * s.bm25_norm + %(w_vector)s * s.vector_norm
           - %(w_parts)s * ln(greatest(s.parts / 2.0, 1)) AS fused,
         %(w_prior)s * (s.salience + least(0.1 * s.access_count, 1.0) + s.freshness) AS prior
  FROM scored s
)

-- fragment: recall_tail
-- What follows the fusion in `recall` and `recall_bounded`, one text so they agree: the
-- ranked pool, the collapse of memories whose source messages a better-ranked one names, the
-- top k and the hits' wide columns.
, ranked AS MATERIALIZED (  -- room for the hits that collapse (below)
  SELECT f.*, f.fused + f.prior AS score, row_number() OVER (ORDER BY f.fused + f.prior DESC, f.id) AS rank
  FROM fused f ORDER BY f.fused + f.prior DESC, f.id LIMIT %(pool)s
), sources AS MATERIALIZED (
  -- The (episode, message) pairs each ranked memory's provenance names: 'episode:<id>#m1,2'
  -- names messages 1 and 2, 'episode:<id>' the whole episode ('*').
  SELECT r.id, r.rank, split_part(p.entry, '#', 1) AS episode, msg
  FROM ranked r JOIN memories m ON m.id = r.id
  CROSS JOIN LATERAL unnest(m.provenance) AS p(entry)
  CROSS JOIN LATERAL unnest(CASE WHEN p.entry LIKE '%%#m%%' THEN string_to_array(split_part(p.entry, '#m', 2), ',')
                                 ELSE ARRAY['*'] END) AS msg
  WHERE p.entry LIKE 'episode:%%'
), covering AS (
  -- Each source pair's best-ranked other memory that names it too (or its whole episode).
  SELECT s.id, o.id AS by_id, o.rank AS by_rank
  FROM sources s LEFT JOIN LATERAL (
    SELECT o.id, o.rank FROM sources o
    WHERE o.rank < s.rank AND o.episode = s.episode AND (o.msg = s.msg OR o.msg = '*')
    ORDER BY o.rank LIMIT 1) o ON true
), collapsed AS (
  -- A memory all of whose source messages a better-ranked memory names adds nothing to the
  -- top k: an item and the turn it came from take one slot. The union of better-ranked
  -- memories' messages equals that of the ones kept (a collapsed one adds none), so this
  -- needs no recursion. Memories without episode provenance never collapse.
  SELECT c.id, (array_agg(c.by_id ORDER BY c.by_rank))[1] AS into_id  -- the best-ranked coverer
  FROM covering c WHERE %(collapse)s
  GROUP BY c.id HAVING bool_and(c.by_id IS NOT NULL)
), top AS (
  SELECT r.* FROM ranked r WHERE r.id NOT IN (SELECT id FROM collapsed)
  ORDER BY r.score DESC, r.id LIMIT %(k)s
)
SELECT m.id, m.text, m.kind, m.tier, m.created_at, m.metadata, m.provenance, m.flags, m.trust, m.subject,
       top.salience, top.access_count, top.score, top.bm25, top.vector, top.fused, top.prior, top.freshness,
       (SELECT array_agg(c.id ORDER BY c.id) FROM collapsed c WHERE c.into_id = top.id) AS collapsed
FROM top JOIN memories m ON m.id = top.id
ORDER BY top.score DESC, top.id;

-- name: recall
-- Hybrid recall in one statement. BM25 (Lucene IDF, k1 = 1.2, b = 0.75) over the agent's
-- live memories, exact cosine top-k over the same rows, both min-max normalised over the
-- union of candidates and fused by weight, plus the priors (salience, recency) scaled down to break
-- near-ties. A read only: the caller counts the hits as accessed (recall.hybrid.serve).
-- One pass over the agent's rows computes everything per row (the filters, the distance,
-- the priors' inputs) into a narrow materialised set; wide columns are read for the k hits.
-- Each posting carries its term's document frequency (a window, not a second pass) and its
-- memory's filter verdict, so BM25's candidates need no join back to live. Ties are broken
-- by id at every cut, never by the rows' physical order.
WITH live AS MATERIALIZED (
-- include: recall_live
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
    -- live memories only; `retired` (an audit's include_superseded) adds the superseded ones
    -- still kept for history (their expires_at ends that window); recall_related marks them
    AND (m.valid_to IS NULL OR %(retired)s) AND (m.expires_at IS NULL OR m.expires_at > now())
    -- subjects: the asked subject's memories and the general ones, never another subject's
    -- (no subject asked: the general ones only); BM25's statistics are over these rows too
    AND (m.subject IS NULL OR m.subject = %(subject)s::text)
), stats AS MATERIALIZED (  -- once, not once per posting row; documents are the rows with postings
  SELECT count(*) FILTER (WHERE doc_len > 0)::float8 AS n,
         coalesce(avg(doc_len) FILTER (WHERE doc_len > 0), 0)::float8 AS avgdl FROM live
), postings AS MATERIALIZED (
  SELECT t.memory_id AS id, t.tf::float8 AS tf, l.doc_len::float8 AS dl, l.wanted,
         count(*) OVER (PARTITION BY t.term)::float8 AS df
  FROM memory_terms t JOIN live l ON l.id = t.memory_id
  WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = ANY(%(terms)s::text[])
),
-- include: recall_fusion
-- include: recall_tail

-- name: recall_related
-- The hits' standing with other memories, one statement for all of them (ids): each open
-- review between a hit and another live memory (two live statements in conflict,
-- governance.add_review; a review whose other side has been superseded since is no conflict
-- any more); with `replaced_since` each memory a hit superseded at or after that time (its
-- recent history; NULL: none); with `audit` each hit that is itself retired (an audit's
-- include_superseded). A row is the hit, the other memory with its text and kind, how they
-- relate ('conflict', 'superseded' or 'retired'), whether the hit is the newer statement of
-- the two (a review's memory_id is its newer side: two written in one transaction share
-- created_at), and both valid_from, so the caller ranks the newer of a conflict first and
-- says what came before. A 'retired' row's other is what superseded the hit (NULL: a memory
-- sleep derived from a superseded one, lifecycle/derived.py) and its other_valid_from the
-- hit's valid_to: the recall statement itself stays under psycopg's 4 KB conversion cache.
SELECT x.memory_id, x.other_id, 'conflict' AS relation, o.text AS other_text, o.kind AS other_kind,
       x.memory_id = r.memory_id AS newer, h.valid_from, o.valid_from AS other_valid_from
FROM memory_reviews r
CROSS JOIN LATERAL (VALUES (r.memory_id, r.other_id), (r.other_id, r.memory_id)) AS x(memory_id, other_id)
JOIN memories h ON h.tenant_id = r.tenant_id AND h.id = x.memory_id
JOIN memories o ON o.tenant_id = r.tenant_id AND o.id = x.other_id
WHERE r.tenant_id = %(tenant_id)s AND r.status = 'open'
  AND (r.memory_id = ANY(%(ids)s::uuid[]) OR r.other_id = ANY(%(ids)s::uuid[]))
  AND x.memory_id = ANY(%(ids)s::uuid[])
  AND h.valid_to IS NULL AND o.valid_to IS NULL AND (o.expires_at IS NULL OR o.expires_at > now())
UNION ALL
SELECT o.superseded_by, o.id, 'superseded', o.text, o.kind, true, h.valid_from, o.valid_from
FROM memories o JOIN memories h ON h.tenant_id = o.tenant_id AND h.id = o.superseded_by
WHERE %(replaced_since)s::timestamptz IS NOT NULL
  AND o.tenant_id = %(tenant_id)s AND o.superseded_by = ANY(%(ids)s::uuid[])
  AND o.valid_to >= %(replaced_since)s::timestamptz
UNION ALL
SELECT h.id, h.superseded_by, 'retired', '', h.kind, false, h.valid_from, h.valid_to
FROM memories h
WHERE %(audit)s AND h.tenant_id = %(tenant_id)s AND h.id = ANY(%(ids)s::uuid[]) AND h.valid_to IS NOT NULL
ORDER BY 1, 3, 8 DESC, 2;

-- name: access_apply
-- The access bumps of recalls (queued in Redis, storage/bumps.py), one
-- batch of one tenant: n recalls of a memory add n. `at` is the batch's own time and becomes
-- last_access_at: a batch applied a second time (its drain died before it could say it was
-- done) finds the rows it counted already at `at` and leaves them alone.
UPDATE memories m SET access_count = m.access_count + x.n, last_access_at = %(at)s
FROM unnest(%(ids)s::uuid[], %(counts)s::int[]) AS x(id, n)
WHERE m.tenant_id = %(tenant_id)s AND m.id = x.id
  AND (m.last_access_at IS NULL OR m.last_access_at < %(at)s);

-- name: recall_bounded
-- A large agent's recall in one statement, bounded whatever its size: the candidates, then
-- `recall`'s scoring of them with the agent's own BM25 statistics (n, avgdl; dfs: each term's
-- document frequency over the agent, in the order of terms) and `recall`'s tail.
-- Lexical: the rarest query terms' postings in full while their document frequencies add up
-- to at most `budget` (the pool), and the first `per_term` postings of each other term by
-- impact (the impact index yields them best first). Each pooled memory is scored by the
-- idf-weighted impacts of its postings of every query term: the rare terms' are those read,
-- the others' one index-only probe of the primary key per term and memory; the best
-- `lexical` are kept. The pool holds the exact BM25 top `lexical` whenever a memory without a
-- rare term cannot reach it, which is when the other terms' largest weights add up to less
-- than the pool's `lexical`-th score (impact is BM25's weight at a reference length,
-- sql/0012, near the agent's own average).
-- Vector: the nearest live memories from the HNSW index (the caller turns on pgvector's
-- iterative scan, so the agent filter still yields `candidates` rows), and the nearest of
-- the agent's memories the index has not taken in yet (ann_pending, sql/0019), by an exact
-- scan of those.
-- Every posting of a query term of a pooled memory was read on the way (the primary key
-- carries tf), so BM25 takes the candidates' postings from there; only the vector
-- candidates outside the pool are probed.
WITH w AS MATERIALIZED (
  SELECT q.term, q.df, ln(1 + (%(n)s::float8 - q.df + 0.5) / (q.df + 0.5)) AS idf,
         sum(q.df) OVER (ORDER BY q.df, q.term) <= %(budget)s AS rare
  FROM unnest(%(terms)s::text[], %(dfs)s::float8[]) AS q(term, df) WHERE q.df > 0
), pool AS MATERIALIZED (
  SELECT w.rare, w.df, p.memory_id, p.tf, w.idf * p.impact AS weight FROM w CROSS JOIN LATERAL (
    SELECT t.memory_id, t.tf, t.impact FROM memory_terms t  -- a rare term: all its postings
    WHERE w.rare AND t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = w.term
    UNION ALL
    (SELECT t.memory_id, NULL, t.impact FROM memory_terms t  -- another: its best by impact
     WHERE NOT w.rare AND t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = w.term
     ORDER BY t.impact DESC, t.memory_id LIMIT %(per_term)s)) p
), weights AS MATERIALIZED (  -- every query term's posting of each pooled memory
  SELECT p.memory_id, p.df, p.tf, p.weight FROM pool p WHERE p.rare
  UNION ALL
  SELECT t.memory_id, w.df, t.tf, w.idf * t.impact FROM w CROSS JOIN LATERAL (
    SELECT t.memory_id, t.tf, t.impact FROM memory_terms t
    WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = w.term
      AND t.memory_id = ANY(ARRAY(SELECT DISTINCT memory_id FROM pool))) t
  WHERE NOT w.rare
), lexical AS (
  SELECT x.memory_id AS id FROM weights x
  GROUP BY x.memory_id
  ORDER BY sum(x.weight) DESC, x.memory_id LIMIT %(lexical)s
), nearest AS (
  (SELECT m.id FROM memories m
   WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.ann AND m.valid_to IS NULL
     AND (m.doc_len > 0 OR m.parts = 1)  -- as recall's vector candidates: a split message's first part
   ORDER BY m.embedding <=> %(qvec)s::vector LIMIT %(ann)s)
  UNION ALL
  (SELECT m.id FROM memories m
   WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.ann_pending AND m.valid_to IS NULL
     AND (m.doc_len > 0 OR m.parts = 1)
   ORDER BY m.embedding <=> %(qvec)s::vector LIMIT %(ann)s)
), live AS MATERIALIZED (
-- include: recall_live
  WHERE m.tenant_id = %(tenant_id)s AND m.id = ANY(ARRAY(SELECT id FROM lexical UNION SELECT id FROM nearest))
    AND m.agent_id = %(agent_id)s
    AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
    AND (m.subject IS NULL OR m.subject = %(subject)s::text)  -- as in `recall`
), stats AS MATERIALIZED (
  SELECT %(n)s::float8 AS n, %(avgdl)s::float8 AS avgdl
), postings AS MATERIALIZED (
  SELECT x.memory_id AS id, x.tf::float8 AS tf, l.doc_len::float8 AS dl, l.wanted, x.df
  FROM weights x JOIN live l ON l.id = x.memory_id
  UNION ALL
  SELECT t.memory_id, t.tf::float8, l.doc_len::float8, l.wanted, w.df
  FROM live l CROSS JOIN w JOIN memory_terms t
    ON t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = w.term AND t.memory_id = l.id
  WHERE l.id NOT IN (SELECT memory_id FROM pool)
),
-- include: recall_fusion
-- include: recall_tail

-- name: recall_bounded_setup
-- The first of a large agent's bounded recall, in its transaction, one round trip: pgvector's
-- iterative index scan for recall_bounded (an HNSW scan filtered to one agent goes on until
-- it has the rows asked for, not ef_search rows before the filter) and its breadth; the
-- statement's generic plan (every access path of recall_bounded is fixed by its shape, so a
-- plan made once per connection serves every call: a custom plan cost 2-3 ms of planning a
-- call, and the server's own choice stays custom, as a generic plan's cost for the HNSW scan
-- under a LIMIT parameter is estimated at a tenth of the agent); and the document frequency
-- over the agent of each term in terms (those the caller has not counted lately; in their
-- order): an index-only count on the impact index of the agent's postings of that term
-- (superseded and expired memories still count until their postings go).
SELECT ARRAY(SELECT (SELECT count(*) FROM memory_terms t
                     WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = q.term)::float8
             FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, ord) ORDER BY q.ord) AS dfs,
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', %(ef_search)s::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: recall_stats
-- The statistics BM25 needs over a whole agent (recall's live rows), and whether the HNSW
-- index holds it: with its size, whether recall takes the bounded path (recall/hybrid.py;
-- recall/stats.py keeps it per process for a minute).
SELECT count(*)::int AS rows,
       count(*) FILTER (WHERE m.doc_len > 0)::int AS n,  -- documents: the rows with postings, as in `recall`
       coalesce(avg(m.doc_len) FILTER (WHERE m.doc_len > 0), 0)::float8 AS avgdl,
       coalesce((SELECT a.ann_ready FROM agents a WHERE a.tenant_id = %(tenant_id)s AND a.id = %(agent_id)s),
                false) AS ann_ready
FROM memories m
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
  AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
  AND (m.subject IS NULL OR m.subject = %(subject)s::text);

-- name: ann_enable
-- The agent's new memories are stored pending for the HNSW index from now on (sql/0019:
-- memories_ann); returns whether its older ones are in already.
UPDATE agents SET ann = true WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s
RETURNING ann_ready;

-- name: ann_fill
-- One batch of the agent's live memories written before ann_enable, into the index; a split
-- message by its first part only (the others carry its vector and are no vector candidates).
UPDATE memories SET ann = true, ann_pending = false
WHERE tenant_id = %(tenant_id)s AND id IN (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND NOT ann AND valid_to IS NULL
    AND (doc_len > 0 OR parts = 1)
  LIMIT %(batch)s);

-- name: ann_flush
-- One batch of the memories written since (ann_pending: stored off the index), into it; the
-- other parts of a split message leave the pending set without entering the index.
UPDATE memories SET ann = (doc_len > 0 OR parts = 1), ann_pending = false
WHERE tenant_id = %(tenant_id)s AND id IN (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND ann_pending AND valid_to IS NULL
  LIMIT %(batch)s);

-- name: ann_ready
UPDATE agents SET ann_ready = true WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: recall_agents
-- One ranked list over several agents' live memories (a supervisor's or operator's recall):
-- the same signals and fusion as `recall`, with BM25's statistics (document count, average
-- length, each term's document frequency) computed over the union of the agents' memories,
-- and the cosine and BM25 ranges normalised over the union's candidates, so scores from two
-- agents are on one scale. A subject filter as in `recall`. It reads, never bumps access
-- counts (an operator's look is not the agent's use), and does not collapse items into
-- their turns. One text is one hit: copies with the same content_hash (normalised words,
-- memworker/domain/memories.py) and subject take the slot of their best-ranked copy, which names
-- every wanted live copy among the agents (holder_agents, holder_ids: best-ranked first,
-- then those outside the ranked pool by agent). `pool` (k per agent) leaves room for k texts
-- however many agents hold each one.
WITH live AS MATERIALIZED (
-- include: recall_live
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = ANY(%(agent_ids)s::text[])
    AND (m.valid_to IS NULL OR %(retired)s) AND (m.expires_at IS NULL OR m.expires_at > now())  -- as in `recall`
    AND (m.subject IS NULL OR m.subject = %(subject)s::text)
), stats AS MATERIALIZED (  -- documents are the rows with postings, as in `recall`
  SELECT count(*) FILTER (WHERE doc_len > 0)::float8 AS n,
         coalesce(avg(doc_len) FILTER (WHERE doc_len > 0), 0)::float8 AS avgdl FROM live
), postings AS MATERIALIZED (
  SELECT t.memory_id AS id, t.tf::float8 AS tf, l.doc_len::float8 AS dl, l.wanted,
         count(*) OVER (PARTITION BY t.term)::float8 AS df
  FROM memory_terms t JOIN live l ON l.id = t.memory_id
  WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = ANY(%(agent_ids)s::text[]) AND t.term = ANY(%(terms)s::text[])
),
-- include: recall_fusion
, ranked AS MATERIALIZED (
  SELECT f.*, f.fused + f.prior AS score, m.agent_id, m.content_hash, m.subject
  FROM (SELECT * FROM fused ORDER BY fused + prior DESC, id LIMIT %(pool)s) f JOIN memories m ON m.id = f.id
), top AS (
  SELECT t.* FROM (
    SELECT DISTINCT ON (r.content_hash, r.subject) r.* FROM ranked r
    ORDER BY r.content_hash, r.subject, r.score DESC, r.agent_id, r.id) t
  ORDER BY t.score DESC, t.id LIMIT %(k)s
), copies AS MATERIALIZED (  -- the top texts' live copies among the agents, found by their hash
  SELECT t.id AS hit, h.id, h.agent_id
  FROM top t JOIN memories h
    ON h.tenant_id = %(tenant_id)s AND h.agent_id = ANY(%(agent_ids)s::text[])
   AND h.content_hash = t.content_hash AND h.subject IS NOT DISTINCT FROM t.subject
), holders AS (  -- those the query's filters want, in the hit's order
  SELECT c.hit, array_agg(c.agent_id ORDER BY r.score DESC NULLS LAST, c.agent_id, c.id) AS holder_agents,
         array_agg(c.id ORDER BY r.score DESC NULLS LAST, c.agent_id, c.id) AS holder_ids
  FROM copies c JOIN live l ON l.id = c.id AND l.wanted LEFT JOIN ranked r ON r.id = c.id
  GROUP BY c.hit
)
SELECT m.id, m.agent_id, m.text, m.kind, m.tier, m.created_at, m.metadata, m.provenance, m.flags, m.trust,
       m.subject, top.salience, top.access_count, top.score, top.bm25, top.vector, top.fused, top.prior,
       top.freshness, NULL::uuid[] AS collapsed, h.holder_agents, h.holder_ids
FROM top JOIN memories m ON m.id = top.id JOIN holders h ON h.hit = top.id
ORDER BY top.score DESC, top.id;

-- name: pool_source
-- An agent's live memory as a pool copy needs it (its vector and its message's part count included).
SELECT id, text, kind, tier, salience, confidence, entities, topics, provenance, metadata, flags, subject,
       embedding, parts
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: pool_list
-- The tenant's pools: rows of agents whose id is 'pool~<name>' (no agent id can hold '~').
SELECT a.id AS owner, a.created_at,
       (SELECT count(*) FROM memories m
        WHERE m.tenant_id = a.tenant_id AND m.agent_id = a.id AND m.valid_to IS NULL)::int AS memories
FROM agents a
WHERE a.tenant_id = %(tenant_id)s AND starts_with(a.id, 'pool~')
ORDER BY a.id;

-- name: pool_forget_copies
-- Pool memories copied from (or confirmed by) the given agent memories: forgetting those
-- reaches their copies.
DELETE FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = ANY(%(owners)s::text[]) AND provenance && %(sources)s::text[]
RETURNING id;

-- name: pool_examined
-- Of the given memories of an agent (a sleep pass's window and what it derived), those a
-- pool may take: general (a subject's memory is about one person and is never pooled), live,
-- of the proposed kinds; at most `limit`, newest first (what the pass derived comes last).
SELECT id, text, kind, content_hash, embedding FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  AND subject IS NULL AND kind = ANY(%(kinds)s::text[])
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at DESC, id
LIMIT %(limit)s;

-- name: pool_candidates
-- The memories of other agents of the tenant that may say what one memory says: general,
-- live, of its kind family, at cosine >= min_similarity; at most per_peer from each of the
-- max_peers most recently active agents. As find_duplicate, a statement that says the same
-- shares most of its words, so each peer is probed through its rarest postings of the
-- memory's terms (probe_terms terms, per_term postings each, document frequencies counted up
-- to df_cap) before any vector is compared: the cost per memory is bounded whatever the size
-- of the fleet's agents. The caller confirms each candidate by its words (rules.confirms).
WITH peers AS (
  SELECT a.id FROM agents a
  WHERE a.tenant_id = %(tenant_id)s AND a.id <> %(agent_id)s AND NOT starts_with(a.id, 'pool~')
  ORDER BY greatest(a.last_episode_at, a.last_pass_at, a.created_at) DESC, a.id
  LIMIT %(max_peers)s
)
SELECT p.id AS other_agent, o.id AS other_id, o.text, o.similarity
FROM peers p CROSS JOIN LATERAL (
  SELECT x.id, x.text, 1 - (x.embedding <=> %(embedding)s) AS similarity
  FROM (
    SELECT DISTINCT t.memory_id FROM (
      SELECT q.term FROM unnest(%(terms)s::text[]) AS q(term)
      CROSS JOIN LATERAL (SELECT count(*) AS df FROM (
        SELECT 1 FROM memory_terms c
        WHERE c.tenant_id = %(tenant_id)s AND c.agent_id = p.id AND c.term = q.term
        LIMIT %(df_cap)s) y) d
      WHERE d.df > 0  -- a term the peer never used finds nothing
      ORDER BY d.df, q.term LIMIT %(probe_terms)s) pr
    CROSS JOIN LATERAL (
      SELECT c.memory_id FROM memory_terms c
      WHERE c.tenant_id = %(tenant_id)s AND c.agent_id = p.id AND c.term = pr.term
      LIMIT %(per_term)s) t
  ) near
  JOIN memories x ON x.tenant_id = %(tenant_id)s AND x.id = near.memory_id
  WHERE x.agent_id = p.id AND x.subject IS NULL AND x.kind = ANY(%(kinds)s::text[])
    AND x.valid_to IS NULL AND (x.expires_at IS NULL OR x.expires_at > now())
    AND x.embedding <=> %(embedding)s <= 1 - %(min_similarity)s
  ORDER BY x.embedding <=> %(embedding)s, x.id
  LIMIT %(per_peer)s) o
ORDER BY o.similarity DESC, p.id, o.id;

-- name: nearest_live
-- The agent's live memories of one subject (NULL: the general ones) nearest an episode's
-- vector, of the given kinds: what an LLM reflector is shown to decide updates. An agent in
-- the HNSW index (past EXACT_MAX, agents.ann) is not scanned: its candidates are the memories
-- sharing one of the episode's rarest terms, probed as find_duplicate does, so the cost per
-- episode stays bounded; a smaller agent gets the exact scan recall's exact statement makes.
-- Each branch sits behind a one-time filter, so only one of them runs.
WITH agent AS (
  SELECT coalesce((SELECT a.ann FROM agents a
                   WHERE a.tenant_id = %(tenant_id)s AND a.id = %(agent_id)s), false) AS ann
), probes AS (
  SELECT q.term FROM unnest(%(terms)s::text[]) AS q(term)
  CROSS JOIN LATERAL (SELECT count(*) AS df FROM (
    SELECT 1 FROM memory_terms t
    WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = q.term
    LIMIT %(df_cap)s) x) d
  WHERE d.df > 0 AND (SELECT ann FROM agent)
  ORDER BY d.df, q.term LIMIT %(probe_terms)s
), near AS (
  SELECT DISTINCT p.memory_id AS id FROM probes CROSS JOIN LATERAL (
    SELECT t.memory_id FROM memory_terms t
    WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = probes.term
    LIMIT %(per_term)s) p
)
(SELECT m.id, m.text, m.kind FROM memories m
 WHERE NOT (SELECT ann FROM agent)
   AND m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
   AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
   AND m.kind = ANY(%(kinds)s::text[]) AND m.subject IS NOT DISTINCT FROM %(subject)s::text
 ORDER BY m.embedding <=> %(embedding)s, m.id LIMIT %(k)s)
UNION ALL
(SELECT m.id, m.text, m.kind FROM near JOIN memories m ON m.tenant_id = %(tenant_id)s AND m.id = near.id
 WHERE m.agent_id = %(agent_id)s
   AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > now())
   AND m.kind = ANY(%(kinds)s::text[]) AND m.subject IS NOT DISTINCT FROM %(subject)s::text
 ORDER BY m.embedding <=> %(embedding)s, m.id LIMIT %(k)s);
