-- Sessions: working memory, plans, context calls, archives, webhooks, rumination
-- (memworker/sessions/, memworker/sessions/context.py, memworker/sessions/rumination.py; sql/0004_sessions.sql).

-- name: insert
INSERT INTO sessions (tenant_id, agent_id, id, metadata, working, window_tokens, revision, subject)
VALUES (%(tenant_id)s, %(agent_id)s, %(session_id)s, %(metadata)s, %(working)s, %(window_tokens)s, %(revision)s,
        %(subject)s)
ON CONFLICT (tenant_id, agent_id, id) DO NOTHING
RETURNING *;

-- name: get
SELECT * FROM sessions WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: get_locked
SELECT * FROM sessions WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s
FOR UPDATE;

-- name: recent
SELECT * FROM sessions
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(status)s::text IS NULL OR status = %(status)s)
ORDER BY updated_at DESC, id LIMIT %(limit)s;

-- name: save_working
UPDATE sessions SET working = %(working)s, revision = %(revision)s, updated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s
RETURNING *;

-- name: set_working
-- Reference counts only: no new revision (nothing the agent wrote changed).
UPDATE sessions SET working = %(working)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: save_plan
UPDATE sessions SET plan = %(plan)s, revision = %(revision)s, updated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s
RETURNING *;

-- name: record_use
UPDATE sessions
SET last_context_tokens = coalesce(%(context_tokens)s, last_context_tokens),
    reported_used = coalesce(%(reported)s, reported_used),
    window_tokens = coalesce(%(window_tokens)s, window_tokens),
    flush_armed = %(armed)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: mark_flushed
UPDATE sessions
SET flush_armed = false, flush_count = flush_count + 1, flushed_at = now(),
    flushed_revision = %(revision)s, log_tokens = 0,
    last_flush_episode_id = coalesce(%(episode_id)s, last_flush_episode_id)
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: add_log_tokens
-- The post-turn hook: a stored episode of an open session grows its transcript estimate.
UPDATE sessions SET log_tokens = log_tokens + %(tokens)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s AND status = 'open';

-- name: mark_archived
UPDATE sessions
SET status = 'archived', archived_at = now(), updated_at = now(), archive_count = %(version)s,
    working = '{}', plan = NULL
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: restore
UPDATE sessions
SET status = 'open', restored_at = now(), updated_at = now(), metadata = %(metadata)s,
    working = %(working)s, plan = %(plan)s, revision = %(revision)s, window_tokens = %(window_tokens)s,
    log_tokens = %(log_tokens)s, last_context_tokens = %(last_context_tokens)s,
    reported_used = %(reported_used)s, flush_armed = %(flush_armed)s, flush_count = %(flush_count)s,
    flushed_at = %(flushed_at)s, flushed_revision = %(flushed_revision)s,
    last_flush_episode_id = %(last_flush_episode_id)s
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: episodes
SELECT id, content, messages, metadata, idempotency_key, status, memory_ids, occurred_at, created_at, stored_at
FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
ORDER BY created_at, id;

-- name: episodes_present
SELECT count(*) AS n FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[]);

-- name: cascade_counts
SELECT (SELECT count(*) FROM context_calls
        WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s) AS calls,
       (SELECT count(*) FROM session_archives
        WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s) AS archives,
       (SELECT count(*) FROM session_items
        WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s) AS items;

-- name: delete_deliveries
DELETE FROM webhook_deliveries
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s;

-- name: delete
-- Context calls, archives and items go with it (ON DELETE CASCADE).
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
ON CONFLICT (tenant_id, id) DO NOTHING;

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
-- Best effort, as recall's bump: a row another transaction holds misses this increment
-- (SKIP LOCKED) rather than wait, so concurrent bumps of overlapping rows cannot deadlock.
WITH mine AS (
  SELECT id FROM memories
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = ANY(%(ids)s::uuid[])
  FOR UPDATE SKIP LOCKED
)
UPDATE memories m SET access_count = m.access_count + 1, last_access_at = now()
FROM mine WHERE m.tenant_id = %(tenant_id)s AND m.id = mine.id;

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

-- fragment: archive_info
-- An archive without its data: what listings show (after a SELECT).
session_id, version, format_version, bytes, raw_bytes, sha256, counts, distill_episode_id, created_at
FROM session_archives

-- name: archive_list
SELECT
-- include: archive_info
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
ORDER BY version;

-- name: archives_with_episodes
SELECT
-- include: archive_info
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND episode_ids && %(ids)s::uuid[];

-- name: archive_rewrite
UPDATE session_archives
SET data = %(data)s, bytes = %(bytes)s, raw_bytes = %(raw_bytes)s, sha256 = %(sha256)s, counts = %(counts)s,
    episode_ids = %(episode_ids)s::uuid[]
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
  AND version = %(version)s;

-- name: of_subject
SELECT id FROM sessions
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND subject = %(subject)s ORDER BY id;

-- name: with_text
-- Sessions whose working memory, plan or metadata hold a needle (lower-cased by the caller)
-- in any string, locked for forget's rewrite.
SELECT * FROM sessions s
WHERE s.tenant_id = %(tenant_id)s AND s.agent_id = %(agent_id)s
  AND EXISTS (SELECT 1 FROM jsonb_path_query(jsonb_build_array(s.working, s.plan, s.metadata), 'strict $.**') v
              WHERE jsonb_typeof(v) = 'string'
                AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n WHERE strpos(lower(v #>> '{}'), n) > 0))
ORDER BY s.id
FOR UPDATE;

-- name: save_scrubbed
-- Forget's rewrite: a new revision, so a client holding the old one re-reads.
UPDATE sessions SET working = %(working)s, plan = %(plan)s, metadata = %(metadata)s,
                    revision = revision + 1, updated_at = now()
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id = %(session_id)s;

-- name: context_calls_scrub
-- Logged context calls whose query holds a needle go (the query is the row's only text).
DELETE FROM context_calls c
WHERE c.tenant_id = %(tenant_id)s AND c.agent_id = %(agent_id)s
  AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n WHERE strpos(lower(c.query), n) > 0);

-- name: deliveries_with_text
SELECT d.id, d.payload FROM webhook_deliveries d
WHERE d.tenant_id = %(tenant_id)s AND d.agent_id = %(agent_id)s
  AND EXISTS (SELECT 1 FROM jsonb_path_query(d.payload, 'strict $.**') v
              WHERE jsonb_typeof(v) = 'string'
                AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n WHERE strpos(lower(v #>> '{}'), n) > 0))
FOR UPDATE;

-- name: delivery_scrubbed
UPDATE webhook_deliveries SET payload = %(payload)s WHERE tenant_id = %(tenant_id)s AND id = %(delivery_id)s;

-- name: archive_keys
-- Every archive of the agent, without its data (forget reads them one at a time).
SELECT
-- include: archive_info
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s ORDER BY session_id, version;

-- name: archives_in_window
SELECT * FROM session_archives
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

-- name: items_append
-- A batch of a session's items, in order, at the places after its last one. The caller holds
-- the session's row lock (session.load_open), so concurrent appenders take distinct places.
INSERT INTO session_items (tenant_id, agent_id, session_id, position, item)
SELECT %(tenant_id)s, %(agent_id)s, %(session_id)s,
       (coalesce((SELECT max(i.position) + 1 FROM session_items i
                  WHERE i.tenant_id = %(tenant_id)s AND i.agent_id = %(agent_id)s
                    AND i.session_id = %(session_id)s), 0) + e.n - 1)::integer,
       e.item
FROM jsonb_array_elements(%(items)s) WITH ORDINALITY AS e(item, n)
RETURNING position;

-- name: items_list
-- The session's last `limit` items (every item for NULL), in order.
SELECT position, item, created_at FROM (
  SELECT position, item, created_at FROM session_items
  WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
  ORDER BY position DESC LIMIT %(limit)s
) last ORDER BY position;

-- name: items_pop
-- The session's last item, deleted (under the session's row lock).
DELETE FROM session_items
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s
  AND position = (SELECT max(i.position) FROM session_items i
                  WHERE i.tenant_id = %(tenant_id)s AND i.agent_id = %(agent_id)s
                    AND i.session_id = %(session_id)s)
RETURNING position, item, created_at;

-- name: items_clear
DELETE FROM session_items
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND session_id = %(session_id)s;

-- name: items_scrub
-- Forget: the agent's session items holding a needle (lower-cased by the caller) in any string
-- go whole (an item is the framework's record of one message or call: it is not rewritten).
DELETE FROM session_items i
WHERE i.tenant_id = %(tenant_id)s AND i.agent_id = %(agent_id)s
  AND EXISTS (SELECT 1 FROM jsonb_path_query(i.item, 'strict $.**') v
              WHERE jsonb_typeof(v) = 'string'
                AND EXISTS (SELECT 1 FROM unnest(%(needles)s::text[]) n WHERE strpos(lower(v #>> '{}'), n) > 0));
