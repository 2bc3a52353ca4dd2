-- Lifecycle: retention sweep, promotion, merge, supersede, review, forget, policy
-- (memworker/lifecycle/, sql/0003_lifecycle.sql).
-- The clock is always a parameter (now), never the SQL now(): tests move it.

-- name: now
SELECT now() AS now;

-- name: resolve_alias
SELECT memory_id FROM memory_aliases
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND alias_id = %(memory_id)s;

-- name: lock_memory
SELECT id, tier, kind, confidence, salience, access_count, confirmations, expires_at, valid_to, provenance
FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s FOR UPDATE;

-- name: confirm
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
RETURNING id, tier, kind, confidence, salience, access_count, confirmations, expires_at, valid_to, provenance;

-- name: set_tier
UPDATE memories SET tier = %(tier)s, expires_at = %(expires_at)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(memory_id)s
RETURNING *;

-- name: supersede
-- Retired, not deleted: out of recall (valid_to), kept for history until expires_at.
UPDATE memories
SET valid_to = %(now)s, superseded_by = %(newer_id)s, expires_at = %(keep_until)s, updated_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(older_id)s AND valid_to IS NULL
RETURNING id;

-- name: supersede_turns
-- The turns a superseded memory was reflected from, retired with it when it said most of
-- what they said and no live item of theirs remains: what was said stays in the history, but
-- recall no longer serves a changed fact through the sentence that stated it. A turn of a
-- long message (more in it than the memory, or other live items) stays.
UPDATE memories t
SET valid_to = %(now)s, superseded_by = %(newer_id)s, expires_at = %(keep_until)s, updated_at = %(now)s
FROM memories o
WHERE o.tenant_id = %(tenant_id)s AND o.id = %(older_id)s
  AND t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s
  AND t.created_at = o.created_at AND t.kind = 'turn' AND t.valid_to IS NULL
  AND t.provenance[1] = ANY(o.provenance) AND 2 * length(o.text) + 32 >= length(t.text)  -- 32: "user (date): "
  AND NOT EXISTS (SELECT 1 FROM memories x
                  WHERE x.tenant_id = %(tenant_id)s AND x.agent_id = %(agent_id)s
                    AND x.created_at = o.created_at AND x.kind <> 'turn' AND x.valid_to IS NULL
                    AND t.provenance[1] = ANY(x.provenance))
RETURNING t.id;

-- name: add_review
INSERT INTO memory_reviews (tenant_id, agent_id, memory_id, other_id, reason, created_at)
SELECT %(tenant_id)s, %(agent_id)s, %(memory_id)s, %(other_id)s, %(reason)s, %(now)s
WHERE NOT EXISTS (SELECT 1 FROM memory_reviews r
                  WHERE r.tenant_id = %(tenant_id)s AND r.memory_id = %(other_id)s
                    AND r.other_id = %(memory_id)s)
ON CONFLICT (tenant_id, memory_id, other_id) DO NOTHING
RETURNING id;

-- fragment: review
-- A review with both memories' text and state (memory_*: the newer, other_*: the older).
r.id, r.memory_id, r.other_id, r.reason, r.status, r.resolution, r.resolved_by,
       r.resolved_at, r.created_at,
       a.text AS memory_text, a.tier AS memory_tier, a.confidence AS memory_confidence,
       a.created_at AS memory_created_at, a.valid_to AS memory_valid_to,
       b.text AS other_text, b.tier AS other_tier, b.confidence AS other_confidence,
       b.created_at AS other_created_at, b.valid_to AS other_valid_to
FROM memory_reviews r
JOIN memories a ON a.id = r.memory_id
JOIN memories b ON b.id = r.other_id

-- name: reviews
SELECT
-- include: review
WHERE r.tenant_id = %(tenant_id)s AND r.agent_id = %(agent_id)s
  AND (%(status)s::text IS NULL OR r.status = %(status)s)
ORDER BY r.created_at, r.id
LIMIT %(limit)s;

-- name: lock_review
SELECT
-- include: review
WHERE r.tenant_id = %(tenant_id)s AND r.agent_id = %(agent_id)s AND r.id = %(review_id)s
FOR UPDATE OF r;

-- name: resolve_review
UPDATE memory_reviews
SET status = 'resolved', resolution = %(resolution)s, resolved_by = %(actor)s, resolved_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(review_id)s
RETURNING id;

-- name: history
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

-- name: aliases_of
SELECT alias_id FROM memory_aliases
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND memory_id = ANY(%(ids)s::uuid[]);

-- name: events
-- The audit trail of some memories (ids and reasons only, never text).
SELECT id, memory_id, event, reason, actor, related_ids, created_at FROM memory_events
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (memory_id = ANY(%(ids)s::uuid[]) OR related_ids && %(ids)s::uuid[])
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: insert_events
-- Many audit rows in one statement: one per id, each with its own reason.
INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, related_ids, created_at)
SELECT %(tenant_id)s, %(agent_id)s, e.id::uuid, %(event)s, e.reason, %(actor)s,
       CASE WHEN e.related IS NULL THEN '{}'::uuid[] ELSE ARRAY[e.related::uuid] END, %(now)s
FROM unnest(%(ids)s::text[], %(reasons)s::text[], %(related)s::text[]) AS e(id, reason, related);

-- name: merge_into
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

-- name: merge_finish
-- After merge_into: the merged-away memory's links, the insights and versions that
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

-- name: set_agent_policy
UPDATE agents SET policy = %(policy)s WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s
RETURNING policy;

-- name: set_tenant_policy
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
-- With the live rows each cap counts (retention_forget_cap, retention_forget_semantic_cap),
-- in the same scan: an agent under a cap skips that cap's ranking of all its rows. The
-- episodic cap counts messages: a split message by its first part (the one with postings).
SELECT a.retention_done_at, a.retention_repair_clock AS repair_clock, a.retention_repair_after AS repair_after,
       coalesce(c.live, 0) AS live, coalesce(c.episodic, 0) AS episodic, coalesce(c.semantic, 0) AS semantic
FROM agents a
CROSS JOIN (
  SELECT count(*) AS live,
         count(*) FILTER (WHERE m.tier = ANY(%(tiers)s::text[]) AND m.kind <> ALL(%(protected)s::text[])
                            AND NOT (m.kind = 'turn' AND m.parts > 1 AND m.doc_len = 0)) AS episodic,
         count(*) FILTER (WHERE m.tier = 'L1' AND m.kind <> ALL(%(protected)s::text[]) AND m.kind <> 'turn') AS semantic
  FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.valid_to IS NULL
    AND (m.expires_at IS NULL OR m.expires_at > %(now)s)) c
WHERE a.tenant_id = %(tenant_id)s AND a.id = %(agent_id)s;

-- name: retention_finish
UPDATE retention_runs
SET status = %(status)s, finished_at = now(), scanned = %(scanned)s, expired = %(expired)s,
    forgotten_age = %(forgotten_age)s, forgotten_unused = %(forgotten_unused)s,
    forgotten_cap = %(forgotten_cap)s, forgotten_distilled = %(forgotten_distilled)s,
    decayed = %(decayed)s, promoted = %(promoted)s,
    merged = %(merged)s, superseded = %(superseded)s, reviews = %(reviews)s, batches = %(batches)s,
    duration_ms = %(duration_ms)s, skipped_reason = %(skipped_reason)s, error = %(error)s
WHERE tenant_id = %(tenant_id)s AND id = %(run_id)s;

-- name: retention_stamp
-- done_at: what the next run's merge and contradiction pass starts after (the clock of the run
-- that began the pass just finished), or NULL while that pass is unfinished. A finished pass
-- counts even when a later phase of its run stopped short: its decisions are committed.
UPDATE agents
SET retention_at = %(now)s,
    retention_done_at = coalesce(%(done_at)s::timestamptz, retention_done_at)
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: retention_repair_mark
-- Where an unfinished merge and contradiction pass goes on (both NULL once it is finished).
UPDATE agents SET retention_repair_clock = %(clock)s, retention_repair_after = %(after)s
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

-- fragment: forget_doomed
-- The end of every forgetting rule: delete the rows of the caller's `doomed` CTE (already
-- locked), log each as forgotten with the rule's reason, and count them.
gone AS (
  DELETE FROM memories m USING doomed d WHERE m.id = d.id RETURNING m.id
), logged AS (
  INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, created_at)
  SELECT %(tenant_id)s, %(agent_id)s, g.id, 'forgotten', %(reason)s, %(actor)s, %(now)s FROM gone g
  RETURNING 1
)
SELECT count(*) AS n FROM gone;

-- name: retention_forget_age
-- Episodic scratch items older than decay_days (since written or last confirmed)
-- that were never recalled. The semantic layer (L1-L3) is not episodic. Turns go by their own
-- rule (retention_forget_distilled): by what a summary carries, not by their recall count.
WITH doomed AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND tier = ANY(%(tiers)s::text[]) AND kind <> ALL(%(protected)s::text[]) AND kind <> 'turn'
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
    AND access_count = 0 AND greatest(created_at, confirmed_at) < %(cutoff)s
  ORDER BY created_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED
),
-- include: forget_doomed

-- name: retention_forget_unused
-- Episodic items (turns a summary does not carry included) not recalled, confirmed
-- or written for unused_days. The semantic layer leaves by supersede, merge, forget or its cap.
WITH doomed AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND tier = ANY(%(tiers)s::text[]) AND kind <> ALL(%(protected)s::text[])
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
    AND greatest(created_at, confirmed_at, last_access_at) < %(cutoff)s
  ORDER BY created_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED
),
-- include: forget_doomed

-- name: retention_forget_cap
-- The episodic cap: rank live episodic items by value: what no summary carries first (it exists
-- nowhere else), then recalls, then freshness; drop those past the cap, lowest ranked first.
-- It counts messages: the parts of a split message (turns of one provenance, parts > 1) are one
-- message, ranked by their best part, and go together (a long answer of 12 parts is one
-- message, not 12 of the cap's places); any other row is one of its own.
WITH counted AS (
  SELECT m.id, CASE WHEN m.kind = 'turn' AND m.parts > 1 THEN m.provenance[1] ELSE m.id::text END AS message,
         (s.id IS NOT NULL) AS carried, m.access_count, greatest(m.created_at, m.confirmed_at) AS fresh
  FROM memories m
  LEFT JOIN memories s ON s.tenant_id = m.tenant_id AND s.id = m.carried_by AND s.valid_to IS NULL
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
    AND m.tier = ANY(%(tiers)s::text[]) AND m.kind <> ALL(%(protected)s::text[])
    AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
), ranked AS (
  SELECT message, row_number() OVER (
           ORDER BY bool_and(carried), max(access_count) DESC, max(fresh) DESC, message
         ) AS rank
  FROM counted GROUP BY message
), doomed AS (
  SELECT m.id FROM memories m JOIN counted c ON c.id = m.id JOIN ranked r ON r.message = c.message
  WHERE r.rank > %(cap)s ORDER BY r.rank DESC, m.id LIMIT %(batch)s FOR UPDATE OF m SKIP LOCKED
),
-- include: forget_doomed

-- name: retention_forget_distilled
-- Forgetting by value: a turn whose message a live sleep summary carries (carried_by, set by the
-- pass that wrote the summary) goes distilled_keep_days after it was distilled, whatever its
-- recall count: the summary answers for it. A turn no summary carries is not touched here.
WITH doomed AS (
  SELECT m.id FROM memories m
  JOIN memories s ON s.tenant_id = m.tenant_id AND s.id = m.carried_by
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.kind = 'turn'
    AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
    AND s.valid_to IS NULL AND (s.expires_at IS NULL OR s.expires_at > %(now)s)
    AND greatest(m.created_at, m.consolidated_at) < %(cutoff)s
  ORDER BY m.created_at LIMIT %(batch)s FOR UPDATE OF m SKIP LOCKED
),
-- include: forget_doomed

-- name: retention_forget_semantic_cap
-- The semantic layer's only size bound: live L1 items past max_semantic, ranked by value
-- (evidence: confirmations and recalls, then confidence x salience, then freshness); the least
-- valuable go first. L2 (promoted by evidence), L3, insights and conclusions are not counted.
WITH ranked AS (
  SELECT id, row_number() OVER (
           ORDER BY confirmations + access_count DESC, confidence * salience DESC,
                    greatest(created_at, confirmed_at) DESC, id
         ) AS rank
  FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND tier = 'L1'
    AND kind <> ALL(%(protected)s::text[]) AND kind <> 'turn'
    AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
), doomed AS (
  SELECT m.id FROM memories m JOIN ranked r ON r.id = m.id
  WHERE r.rank > %(cap)s ORDER BY r.rank DESC LIMIT %(batch)s FOR UPDATE OF m SKIP LOCKED
),
-- include: forget_doomed

-- name: retention_decay
-- One keyset batch of slow decay (lifecycle.decayed): never-recalled episodic items lose
-- salience once salience_decay_after_days old; confidence halves per
-- confidence_half_life_days without new evidence. decayed_at makes it incremental, so two
-- sweeps at the same clock decay once; rows are rewritten at most once per step_days.
-- The batch holds only rows due for a rewrite (the test is in the scan, not after it), so a
-- sweep whose rows were all decayed within the step is one statement, not one per batch of
-- the whole agent.
WITH calc AS (
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
  FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id > %(after)s
    AND m.tier <> 'L3' AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
), batch AS (
  SELECT id, s_days, c_days FROM calc
  WHERE s_days >= %(step_days)s OR c_days >= %(step_days)s
  ORDER BY id LIMIT %(batch)s
), upd AS (
  UPDATE memories m
  SET salience = CASE WHEN c.s_days > 0 THEN m.salience * power(0.5, c.s_days / %(s_half)s::float8)
                      ELSE m.salience END,
      confidence = CASE WHEN c.c_days > 0
                        THEN greatest(least(m.confidence, %(c_floor)s::float8),
                                      m.confidence * power(0.5, c.c_days / %(c_half)s::float8))
                        ELSE m.confidence END,
      decayed_at = %(now)s
  FROM batch c
  WHERE m.id = c.id
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
-- ones merge and contradiction checks look at (turns record what was said: never merged).
SELECT id FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id > %(after)s
  AND valid_to IS NULL AND (expires_at IS NULL OR expires_at > %(now)s)
  AND greatest(created_at, updated_at) > %(since)s AND kind <> 'turn'
ORDER BY id LIMIT %(batch)s;

-- name: memory_pairs
-- Candidate pairs for the merge and contradiction rules (which then judge each pair in
-- full), for just-written memories (governance.check_new) and for the sweep's batches of
-- fresh ones. Both rules need two memories to share most of their words, so each given
-- memory is probed through its few rarest terms: the other memory must have a third of them,
-- and the two must share at least half the terms of the shorter one. Probing by rare terms
-- keeps the cost linear in the agent's size: a common term would pair every memory with
-- every other. A vocabulary of a few dozen words has no rare terms, so each probe reads at
-- most per_term postings, a term's document frequency is counted only up to df_cap (enough
-- to rank rare against common), and each given memory keeps its max_pairs best candidates
-- (most probes shared): the cost per given memory is bounded whatever the vocabulary.
-- The per-term lookups are sub-selects per distinct term of the batch (ARRAY(...) and a
-- scalar count, which the planner cannot flatten into joins) with the index key (tenant,
-- agent, term) bound, so they stay index probes even when the table's statistics are stale
-- (a fresh database growing fast); read once per batch, not once per memory and term, the
-- postings are then joined in memory (a sweep batch of 500 memories over a 40-word vocabulary
-- shares its 40 terms' postings instead of reading 3,000 postings lists). The plain joins
-- that came before were faster in bulk (a 60-agent retention bench: first sweep 28.8 s with
-- them, 45.4 s with per-row probes) but, planned on a freshly ingested agent before ANALYZE,
-- ran 100 s to 10 min for one sweep batch; probes run in milliseconds either way.
-- Only memories of the same subject (or both general) are ever paired, so the subject is kept
-- before the caps: an agent with many subjects holds many near-identical statements about
-- different people, and those would otherwise fill the per-term postings and the max_pairs
-- candidates ahead of the one statement of the memory's own subject. A memory with a subject
-- is therefore probed twice per term: the term's first per_term postings, and the subject's
-- newest per_term memories checked for the term (the memories_subject index, then one
-- posting lookup each); both bounded, so the cost per memory stays flat.
WITH mine AS (
  SELECT t.memory_id, t.term, m.subject FROM memory_terms t
  JOIN memories m ON m.tenant_id = t.tenant_id AND m.id = t.memory_id
  WHERE t.memory_id = ANY(%(ids)s::uuid[]) AND t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s
    AND m.id = ANY(%(ids)s::uuid[])  -- key lookups, never a scan of the agent's memories
), df AS MATERIALIZED (
  SELECT d.term, (SELECT count(*) FROM (
                    SELECT 1 FROM memory_terms t
                    WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = d.term
                    LIMIT %(df_cap)s) x) AS df
  FROM (SELECT DISTINCT term FROM mine) d
), rare AS MATERIALIZED (
  SELECT memory_id, term, subject, least(n, %(probe_terms)s) AS probes FROM (
    SELECT m.memory_id, m.term, m.subject,
           row_number() OVER (PARTITION BY m.memory_id ORDER BY d.df, m.term) AS r,
           count(*) OVER (PARTITION BY m.memory_id) AS n
    FROM mine m JOIN df d USING (term)) x
  WHERE r <= %(probe_terms)s
), posts AS MATERIALIZED (
  SELECT p.term, ARRAY(SELECT t.memory_id FROM memory_terms t
                       WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = p.term
                       ORDER BY t.memory_id LIMIT %(per_term)s + 1) AS ids
  FROM (SELECT DISTINCT term FROM rare) p
), posted AS (
  SELECT p.term, u.b, u.i FROM posts p CROSS JOIN unnest(p.ids) WITH ORDINALITY AS u(b, i)
), probes AS (
  SELECT r.memory_id, r.term, r.subject, r.probes, p.ids,
         coalesce(array_position(p.ids, r.memory_id) <= %(per_term)s, false) AS inside
  FROM rare r JOIN posts p USING (term)
), hits AS MATERIALIZED (
  SELECT a, subject, b, count(*) AS shared FROM (
    SELECT r.memory_id AS a, r.subject, o.b, r.probes
    FROM probes r JOIN posted o ON o.term = r.term
    WHERE o.b <> r.memory_id AND (o.i <= %(per_term)s OR r.inside)
    UNION ALL
    SELECT r.memory_id, r.subject, s.id, r.probes
    FROM probes r CROSS JOIN LATERAL (
      SELECT s.id FROM memories s
      WHERE s.tenant_id = %(tenant_id)s AND s.agent_id = %(agent_id)s
        AND s.subject IS NOT NULL AND s.subject = r.subject
      ORDER BY s.created_at DESC LIMIT %(per_term)s) s
    WHERE r.subject IS NOT NULL AND s.id <> r.memory_id
      AND NOT (s.id = ANY(r.ids[1:%(per_term)s]) OR (r.inside AND s.id IS NOT DISTINCT FROM r.ids[%(per_term)s + 1]))
      AND (SELECT true FROM memory_terms t
           WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = r.term
             AND t.memory_id = s.id)) x
  GROUP BY a, subject, b
  HAVING count(*) * 3 >= max(probes)
), live AS MATERIALIZED (
  -- the subject and liveness filters come before the max_pairs cap, so other subjects' and
  -- retired memories never take the places of the memory's own subject's live ones; looked
  -- up once per distinct candidate (by key), not once per hit
  SELECT m.id, m.subject FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.id = ANY(ARRAY(SELECT DISTINCT b FROM hits))
    AND m.kind <> 'turn' AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
), cand AS (
  SELECT a, b FROM (
    SELECT h.a, h.b, row_number() OVER (PARTITION BY h.a ORDER BY h.shared DESC, h.b) AS r
    FROM hits h JOIN live l ON l.id = h.b AND l.subject IS NOT DISTINCT FROM h.subject) x
  WHERE r <= %(max_pairs)s
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
  AND mb.valid_to IS NULL AND (mb.expires_at IS NULL OR mb.expires_at > %(now)s)
  AND ma.kind <> 'turn' AND mb.kind <> 'turn'  -- turns record what was said: never merged
  -- one subject's memories are never merged with, superseded by or reviewed against another
  -- subject's, nor the agent's general ones (NULL) with a subject's
  AND ma.subject IS NOT DISTINCT FROM mb.subject;

-- name: update_candidates
-- The live memories a just-written one may change, said in other words than memory_pairs'
-- (which needs most words shared): for each given memory, the nearest of its subject's live
-- memories of the given kinds among those sharing one of its two rarest terms ("We use
-- Datadog for monitoring" / "Monitoring moved over to Grafana" share one), and among the
-- subject's (or the agent's general) `recent` newest memories, where a change often shares no
-- word at all ("Our email provider is Mailchimp" / "Newsletters go out through Buttondown").
-- Every read is bounded and done once per batch (each term's document frequency and postings,
-- each subject's newest memories), and a memory is compared with at most
-- probe_terms x per_term + recent others, so the cost per memory stays flat whatever the
-- agent's size and however large the batch.
WITH mine AS MATERIALIZED (
  SELECT m.id, m.subject, m.embedding FROM memories m
  WHERE m.tenant_id = %(tenant_id)s AND m.id = ANY(%(ids)s::uuid[])
), mine_terms AS MATERIALIZED (
  SELECT t.memory_id, t.term FROM memory_terms t
  WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.memory_id = ANY(%(ids)s::uuid[])
), df AS MATERIALIZED (
  SELECT d.term, (SELECT count(*) FROM (
                    SELECT 1 FROM memory_terms o
                    WHERE o.tenant_id = %(tenant_id)s AND o.agent_id = %(agent_id)s AND o.term = d.term
                    LIMIT %(df_cap)s) c) AS df
  FROM (SELECT DISTINCT term FROM mine_terms) d
), probes AS MATERIALIZED (
  SELECT memory_id, term FROM (
    SELECT m.memory_id, m.term, row_number() OVER (PARTITION BY m.memory_id ORDER BY d.df, m.term) AS r
    FROM mine_terms m JOIN df d USING (term) WHERE d.df > 1) x
  WHERE r <= %(probe_terms)s
), posts AS MATERIALIZED (
  SELECT p.term, ARRAY(SELECT t.memory_id FROM memory_terms t
                       WHERE t.tenant_id = %(tenant_id)s AND t.agent_id = %(agent_id)s AND t.term = p.term
                       LIMIT %(per_term)s) AS ids
  FROM (SELECT DISTINCT term FROM probes) p
), recent AS MATERIALIZED (
  SELECT s.subject, r.id FROM (SELECT DISTINCT subject FROM mine) s CROSS JOIN LATERAL (
    SELECT x.id FROM memories x
    WHERE x.tenant_id = %(tenant_id)s AND x.agent_id = %(agent_id)s AND x.subject IS NOT DISTINCT FROM s.subject
      AND x.valid_to IS NULL AND x.kind = ANY(%(kinds)s::text[])
    ORDER BY x.created_at DESC LIMIT %(recent)s) r
), near AS MATERIALIZED (
  SELECT DISTINCT a, b FROM (
    SELECT pr.memory_id AS a, u.b FROM probes pr JOIN posts po USING (term) CROSS JOIN LATERAL unnest(po.ids) AS u(b)
    UNION ALL
    SELECT me.id, r.id FROM mine me JOIN recent r ON r.subject IS NOT DISTINCT FROM me.subject) x
  WHERE a <> b
), scored AS (
  SELECT n.a, n.b, me.embedding <=> m.embedding AS distance
  FROM near n
  JOIN mine me ON me.id = n.a
  JOIN memories m ON m.tenant_id = %(tenant_id)s AND m.id = n.b
  WHERE m.agent_id = %(agent_id)s
    AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
    AND m.kind = ANY(%(kinds)s::text[]) AND m.subject IS NOT DISTINCT FROM me.subject
)
SELECT a, b, 1 - distance AS cosine FROM (
  SELECT s.*, row_number() OVER (PARTITION BY s.a ORDER BY s.distance, s.b) AS r FROM scored s
  WHERE 1 - s.distance >= %(min_cosine)s) x
WHERE r <= %(k)s;

-- name: retention_facts
-- With who said each one: the speaker of the turn it was reflected from (written in the same
-- transaction, so an index range of the agent's memories at that instant).
SELECT m.id, m.text, m.kind, m.tier, m.confidence, m.access_count, m.created_at,
       (SELECT t.metadata->>'speaker' FROM memories t
        WHERE t.tenant_id = m.tenant_id AND t.agent_id = m.agent_id AND t.created_at = m.created_at
          AND t.kind = 'turn' AND t.provenance[1] = ANY(m.provenance)
        LIMIT 1) AS speaker
FROM memories m
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.id = ANY(%(ids)s::uuid[])
  AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > %(now)s);

-- name: forget_match
-- The memories a forget request names: by source (an exact provenance entry, or the episode
-- behind 'episode:<id>#m...'), by id, by session, by subject (its own, and everything of the
-- sessions held with it), or everything written before a time.
SELECT id, kind, provenance FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND ((%(provenance)s::text IS NOT NULL AND EXISTS (
          SELECT 1 FROM unnest(provenance) p
          WHERE p = %(provenance)s OR starts_with(p, %(provenance)s || '#')))
       OR id = ANY(%(memory_ids)s::uuid[])
       OR (%(session_id)s::text IS NOT NULL AND session_id = %(session_id)s)
       OR (%(before)s::timestamptz IS NOT NULL AND created_at < %(before)s)
       OR (%(subject)s::text IS NOT NULL AND (subject = %(subject)s OR session_id IN (
             SELECT s.id FROM sessions s
             WHERE s.tenant_id = %(tenant_id)s AND s.agent_id = %(agent_id)s AND s.subject = %(subject)s)))
       OR EXISTS (SELECT 1 FROM unnest(provenance) p WHERE split_part(p, '#', 1) = ANY(%(sources)s::text[])));

-- name: forget_match_episodes
-- The episodes a request names, held (FOR UPDATE) before forget searches what they left:
-- ingest stores an episode's memories in a transaction that holds the episode's row, so once
-- this returns, an ingest of one of them has committed (and forget's next statements see
-- what it wrote) or will find the episode gone and write nothing.
SELECT id FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (id = ANY(%(episode_ids)s::uuid[])
       OR (%(session_id)s::text IS NOT NULL AND session_id = %(session_id)s)
       OR (%(before)s::timestamptz IS NOT NULL AND created_at < %(before)s)
       OR (%(subject)s::text IS NOT NULL AND (subject = %(subject)s OR session_id IN (
             SELECT s.id FROM sessions s
             WHERE s.tenant_id = %(tenant_id)s AND s.agent_id = %(agent_id)s AND s.subject = %(subject)s))))
ORDER BY id
FOR UPDATE;

-- name: forget_lock_episodes
-- The same hold on more episodes forget erases (those its memories came from, copies),
-- found after its first search.
SELECT id FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
ORDER BY id
FOR UPDATE;

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
RETURNING id, kind, provenance;

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

-- name: forget_turns
-- The turns (messages kept verbatim) of erased episodes: the episode's own text.
SELECT id, kind, provenance FROM memories
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND kind = 'turn'
  AND EXISTS (SELECT 1 FROM unnest(provenance) p WHERE split_part(p, '#', 1) = ANY(%(sources)s::text[]));

-- name: forget_episode_texts
-- What erased episodes said (content, each string of their messages; none empty): the
-- needles of forget's copy search.
SELECT t.text FROM episodes e
CROSS JOIN LATERAL (SELECT e.content UNION ALL
                    SELECT v #>> '{}' FROM jsonb_path_query(e.messages, 'strict $.**') v
                    WHERE jsonb_typeof(v) = 'string') t(text)
WHERE e.tenant_id = %(tenant_id)s AND e.agent_id = %(agent_id)s AND e.id = ANY(%(ids)s::uuid[])
  AND t.text <> '';

-- name: forget_memory_copies
-- Memories, live or retired (histories show retired ones), whose text, entities, topics or
-- metadata hold a needle (lower-cased by the caller), and the other parts of a split message
-- one of them is part of (the same provenance): a split message's first part is indexed for
-- BM25 with the whole message's words, so a part whose own text lacks the needle still answers
-- to it, and the message goes whole.
WITH hit AS (
  SELECT id, kind, provenance FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id <> ALL(%(exclude)s::uuid[])
    AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n
                WHERE strpos(lower(concat_ws(' ', text, array_to_string(entities, ' '), array_to_string(topics, ' '),
                                             metadata::text)), n) > 0)
)
SELECT id, kind, provenance FROM hit
UNION
SELECT m.id, m.kind, m.provenance FROM memories m
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s AND m.kind = 'turn'
  AND m.id <> ALL(%(exclude)s::uuid[])
  AND m.provenance && (SELECT array_agg(p) FROM hit, unnest(hit.provenance) p WHERE hit.kind = 'turn');

-- name: forget_episode_copies
-- Episodes whose content, messages or metadata hold a needle (lower-cased by the caller).
SELECT e.id FROM episodes e
WHERE e.tenant_id = %(tenant_id)s AND e.agent_id = %(agent_id)s AND e.id <> ALL(%(exclude)s::uuid[])
  AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n
              WHERE strpos(lower(e.content), n) > 0
                 OR EXISTS (SELECT 1 FROM jsonb_path_query(coalesce(e.messages, '[]') || jsonb_build_array(e.metadata),
                                                           'strict $.**') v
                            WHERE jsonb_typeof(v) = 'string' AND strpos(lower(v #>> '{}'), n) > 0));

-- name: forget_scrub_events
-- Audit rows keep their ids; a reason that quotes a needle loses its text.
WITH hit AS (
  UPDATE memory_events SET reason = '[forgotten]'
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n WHERE strpos(lower(reason), n) > 0)
  RETURNING 1
), reviews AS (
  UPDATE memory_reviews SET reason = '[forgotten]',
         resolution = CASE WHEN resolution IS NULL THEN NULL ELSE '[forgotten]' END
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
    AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n
                WHERE strpos(lower(reason), n) > 0 OR strpos(lower(coalesce(resolution, '')), n) > 0)
  RETURNING 1
)
SELECT (SELECT count(*) FROM hit) AS events, (SELECT count(*) FROM reviews) AS reviews;

