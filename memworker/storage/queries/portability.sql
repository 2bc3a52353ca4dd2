-- Export and import (docs/export.md). Export reads in keyset pages, so an agent of any size
-- streams in bounded memory; a restore writes each page of lines with one statement per table.

-- fragment: portable_memory_columns
m.id, m.agent_id, m.text, m.kind, m.tier, m.salience, m.confidence, m.access_count, m.last_access_at,
m.created_at, m.updated_at, m.expires_at, m.valid_from, m.valid_to, m.superseded_by, m.consolidated_at,
m.session_id, m.entities, m.topics, m.provenance, m.metadata, m.source_key, m.trust, m.flags,
m.confirmations, m.confirmed_at, m.decayed_at, m.subject, m.carried_by, m.parts, m.doc_len,
CASE WHEN %(embeddings)s THEN m.embedding END AS embedding

-- name: export_memories
-- One page of an agent's memories (every kind, tier and state), oldest first; after the
-- (created_at, id) of the previous page's last row. subject NULL: all of them.
SELECT
-- include: portable_memory_columns
FROM memories m
WHERE m.tenant_id = %(tenant_id)s AND m.agent_id = %(agent_id)s
  AND (%(subject)s::text IS NULL OR m.subject = %(subject)s::text)
  AND (%(after_created)s::timestamptz IS NULL OR (m.created_at, m.id) > (%(after_created)s::timestamptz, %(after_id)s::uuid))
ORDER BY m.created_at, m.id
LIMIT %(limit)s;

-- name: export_terms
-- The BM25 postings of memories whose index is not their own text (a split message's turns
-- index the whole message: memworker/domain/episodic.py).
SELECT memory_id, array_agg(term ORDER BY term) AS terms, array_agg(tf ORDER BY term) AS tfs
FROM memory_terms WHERE tenant_id = %(tenant_id)s AND memory_id = ANY(%(memory_ids)s::uuid[])
GROUP BY memory_id;

-- name: export_events
-- The history of a page's memories, oldest first.
SELECT memory_id, event, reason, actor, related_ids, created_at FROM memory_events
WHERE tenant_id = %(tenant_id)s AND memory_id = ANY(%(memory_ids)s::uuid[])
ORDER BY id;

-- name: export_connections
SELECT id, from_id, to_id, relationship, insight_id, created_at FROM memory_connections
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s AND id > %(after_id)s
ORDER BY id LIMIT %(limit)s;

-- name: export_aliases
SELECT alias_id, memory_id, created_at FROM memory_aliases
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(after_id)s::uuid IS NULL OR alias_id > %(after_id)s::uuid)
ORDER BY alias_id LIMIT %(limit)s;

-- name: export_reviews
SELECT id, memory_id, other_id, reason, status, resolution, resolved_by, resolved_at, created_at
FROM memory_reviews
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(after_id)s::uuid IS NULL OR id > %(after_id)s::uuid)
ORDER BY id LIMIT %(limit)s;

-- name: export_episodes
SELECT id, agent_id, session_id, idempotency_key, content, messages, metadata, occurred_at, created_at,
       status, attempts, last_error, stored_at, memory_ids, reflection, reflector, subject
FROM episodes
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(after_created)s::timestamptz IS NULL OR (created_at, id) > (%(after_created)s::timestamptz, %(after_id)s::uuid))
ORDER BY created_at, id
LIMIT %(limit)s;

-- name: export_sessions
SELECT agent_id, id, status, metadata, working, plan, revision, window_tokens, log_tokens,
       last_context_tokens, reported_used, flush_armed, flush_count, flushed_at, flushed_revision,
       last_flush_episode_id, archive_count, created_at, updated_at, archived_at, restored_at, subject
FROM sessions
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(after_id)s::text IS NULL OR id > %(after_id)s::text)
ORDER BY id LIMIT %(limit)s;

-- name: export_session_items
-- The items of the agent's sessions (of one subject's sessions unless NULL), in keyset pages
-- on (session, position).
SELECT i.agent_id, i.session_id, i.position, i.item, i.created_at
FROM session_items i
JOIN sessions s ON s.tenant_id = i.tenant_id AND s.agent_id = i.agent_id AND s.id = i.session_id
WHERE i.tenant_id = %(tenant_id)s AND i.agent_id = %(agent_id)s
  AND (%(subject)s::text IS NULL OR s.subject = %(subject)s::text)
  AND (i.session_id, i.position) > (%(after_session)s::text, %(after_position)s::int)
ORDER BY i.session_id, i.position LIMIT %(limit)s;

-- name: export_profiles
SELECT version, document, created_at FROM agent_profiles
WHERE tenant_id = %(tenant_id)s AND agent_id = %(agent_id)s
ORDER BY version;

-- name: agent_policy
SELECT policy FROM agents WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;

-- name: subject_agents
-- The agents (pools included) holding anything of one subject, in id order.
SELECT a.id FROM agents a
WHERE a.tenant_id = %(tenant_id)s AND (
  EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = a.tenant_id AND m.agent_id = a.id AND m.subject = %(subject)s)
  OR EXISTS (SELECT 1 FROM episodes e WHERE e.tenant_id = a.tenant_id AND e.agent_id = a.id AND e.subject = %(subject)s)
  OR EXISTS (SELECT 1 FROM sessions s WHERE s.tenant_id = a.tenant_id AND s.agent_id = a.id AND s.subject = %(subject)s))
ORDER BY a.id;

-- name: restore_memories
-- A page of exported memories written as they were (no dedup, no governance: a restore).
-- rows: a jsonb array of objects, n their 1-based place, matched to embeddings[n].
-- superseded_by is set afterwards (restore_supersedes): the newer memory may come later.
-- A row whose id or source key is already there (the same file again) is skipped.
INSERT INTO memories (id, tenant_id, agent_id, text, kind, tier, salience, confidence, access_count,
                      last_access_at, created_at, updated_at, expires_at, valid_from, valid_to,
                      consolidated_at, session_id, entities, topics, provenance, metadata, source_key,
                      content_hash, trust, flags, doc_len, embedding, confirmations, confirmed_at,
                      decayed_at, subject, carried_by, parts)
SELECT r.id, %(tenant_id)s, %(agent_id)s, r.text, r.kind, r.tier, r.salience, r.confidence, r.access_count,
       r.last_access_at, r.created_at, r.updated_at, r.expires_at, r.valid_from, r.valid_to,
       r.consolidated_at, r.session_id, r.entities, r.topics, r.provenance, r.metadata, r.source_key,
       r.content_hash, r.trust, r.flags, r.doc_len, e.embedding, r.confirmations, r.confirmed_at,
       r.decayed_at, r.subject, r.carried_by, r.parts
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(
       n int, id uuid, text text, kind text, tier text, salience real, confidence real, access_count int,
       last_access_at timestamptz, created_at timestamptz, updated_at timestamptz, expires_at timestamptz,
       valid_from timestamptz, valid_to timestamptz, consolidated_at timestamptz, session_id text,
       entities text[], topics text[], provenance text[], metadata jsonb, source_key text, content_hash text,
       trust text, flags text[], doc_len int, confirmations int, confirmed_at timestamptz,
       decayed_at timestamptz, subject text, carried_by uuid, parts int)
JOIN unnest(%(embeddings)s::vector[]) WITH ORDINALITY AS e(embedding, n) ON e.n = r.n
ON CONFLICT DO NOTHING
RETURNING id;

-- name: restore_terms
-- BM25 postings of restored memories: flat arrays, one entry per (memory, term).
INSERT INTO memory_terms (tenant_id, agent_id, memory_id, term, tf, impact)
SELECT %(tenant_id)s, %(agent_id)s, t.memory_id, t.term, t.tf, bm25_impact(t.tf, t.doc_len)
FROM unnest(%(memory_ids)s::uuid[], %(terms)s::text[], %(tfs)s::int[], %(doc_lens)s::int[])
  AS t(memory_id, term, tf, doc_len);

-- name: restore_events
INSERT INTO memory_events (tenant_id, agent_id, memory_id, event, reason, actor, related_ids, created_at)
SELECT %(tenant_id)s, %(agent_id)s, r.memory_id, r.event, r.reason, r.actor, r.related_ids, r.created_at
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(memory_id uuid, event text, reason text, actor text,
                                               related_ids uuid[], created_at timestamptz);

-- name: restore_supersedes
-- The superseded_by links of restored memories, once every memory of the file is in; a link to
-- a memory the file did not hold (a subject's export) is left out.
UPDATE memories m SET superseded_by = u.newer
FROM unnest(%(ids)s::uuid[], %(newer)s::uuid[]) AS u(id, newer)
WHERE m.tenant_id = %(tenant_id)s AND m.id = u.id
  AND EXISTS (SELECT 1 FROM memories n WHERE n.tenant_id = %(tenant_id)s AND n.id = u.newer);

-- name: restore_connections
INSERT INTO memory_connections (tenant_id, agent_id, from_id, to_id, relationship, insight_id, created_at)
SELECT %(tenant_id)s, %(agent_id)s, r.from_id, r.to_id, r.relationship,
       (SELECT i.id FROM memories i WHERE i.tenant_id = %(tenant_id)s AND i.id = r.insight_id), r.created_at
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(from_id uuid, to_id uuid, relationship text, insight_id uuid,
                                               created_at timestamptz)
WHERE EXISTS (SELECT 1 FROM memories f WHERE f.tenant_id = %(tenant_id)s AND f.id = r.from_id)
  AND EXISTS (SELECT 1 FROM memories t WHERE t.tenant_id = %(tenant_id)s AND t.id = r.to_id)
ON CONFLICT DO NOTHING;

-- name: restore_aliases
INSERT INTO memory_aliases (tenant_id, agent_id, alias_id, memory_id, created_at)
SELECT %(tenant_id)s, %(agent_id)s, r.alias_id, r.memory_id, r.created_at
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(alias_id uuid, memory_id uuid, created_at timestamptz)
WHERE EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = %(tenant_id)s AND m.id = r.memory_id)
ON CONFLICT DO NOTHING;

-- name: restore_reviews
INSERT INTO memory_reviews (id, tenant_id, agent_id, memory_id, other_id, reason, status, resolution,
                            resolved_by, resolved_at, created_at)
SELECT r.id, %(tenant_id)s, %(agent_id)s, r.memory_id, r.other_id, r.reason, r.status, r.resolution,
       r.resolved_by, r.resolved_at, r.created_at
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id uuid, memory_id uuid, other_id uuid, reason text, status text,
                                               resolution text, resolved_by text, resolved_at timestamptz,
                                               created_at timestamptz)
WHERE EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = %(tenant_id)s AND m.id = r.memory_id)
  AND EXISTS (SELECT 1 FROM memories o WHERE o.tenant_id = %(tenant_id)s AND o.id = r.other_id)
ON CONFLICT DO NOTHING;

-- name: restore_episodes
-- Episodes with their status as exported; one a worker held ('processing') comes back queued.
INSERT INTO episodes (id, tenant_id, agent_id, session_id, idempotency_key, content, messages, metadata,
                      occurred_at, created_at, status, attempts, last_error, stored_at, memory_ids,
                      reflection, reflector, subject)
SELECT r.id, %(tenant_id)s, %(agent_id)s, r.session_id, r.idempotency_key, r.content, r.messages, r.metadata,
       r.occurred_at, r.created_at, CASE WHEN r.status = 'processing' THEN 'queued' ELSE r.status END,
       r.attempts, r.last_error, r.stored_at, r.memory_ids, r.reflection, r.reflector, r.subject
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id uuid, session_id text, idempotency_key text, content text,
       messages jsonb, metadata jsonb, occurred_at timestamptz, created_at timestamptz, status text,
       attempts int, last_error text, stored_at timestamptz, memory_ids uuid[], reflection jsonb,
       reflector text, subject text)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: restore_sessions
INSERT INTO sessions (tenant_id, agent_id, id, status, metadata, working, plan, revision, window_tokens,
                      log_tokens, last_context_tokens, reported_used, flush_armed, flush_count, flushed_at,
                      flushed_revision, last_flush_episode_id, archive_count, created_at, updated_at,
                      archived_at, restored_at, subject)
SELECT %(tenant_id)s, %(agent_id)s, r.id, r.status, r.metadata, r.working, r.plan, r.revision, r.window_tokens,
       r.log_tokens, r.last_context_tokens, r.reported_used, r.flush_armed, r.flush_count, r.flushed_at,
       r.flushed_revision, r.last_flush_episode_id, r.archive_count, r.created_at, r.updated_at,
       r.archived_at, r.restored_at, r.subject
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(id text, status text, metadata jsonb, working jsonb, plan jsonb,
       revision int, window_tokens int, log_tokens int, last_context_tokens int, reported_used real,
       flush_armed boolean, flush_count int, flushed_at timestamptz, flushed_revision int,
       last_flush_episode_id uuid, archive_count int, created_at timestamptz, updated_at timestamptz,
       archived_at timestamptz, restored_at timestamptz, subject text)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: restore_session_items
-- An item whose place is taken already (the same file again, or the target's own item) is
-- kept as it is.
INSERT INTO session_items (tenant_id, agent_id, session_id, position, item, created_at)
SELECT %(tenant_id)s, %(agent_id)s, r.session_id, r.position, r.item, r.created_at
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(session_id text, position int, item jsonb, created_at timestamptz)
ON CONFLICT DO NOTHING
RETURNING position;

-- name: restore_profiles
INSERT INTO agent_profiles (tenant_id, agent_id, version, document, created_at)
SELECT %(tenant_id)s, %(agent_id)s, r.version, r.document, r.created_at
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(version int, document jsonb, created_at timestamptz)
ON CONFLICT DO NOTHING
RETURNING version;

-- name: merge_agent_policy
-- The exported overrides over the target agent's own (the file's keys win).
UPDATE agents SET policy = policy || %(policy)s::jsonb
WHERE tenant_id = %(tenant_id)s AND id = %(agent_id)s;
