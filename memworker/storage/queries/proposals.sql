-- Pool proposals (sql/0016_pool_proposals.sql, memworker/fleet/proposals.py): facts a sleep
-- pass found that several agents learnt independently, waiting for review before a pool
-- takes them.

-- name: upsert
-- Propose a fact to a pool, or add these sources to its open proposal. A decided proposal
-- (approved or rejected) is left as it is: a fact is not proposed again once decided. A row
-- comes back only when this call created the proposal or added a source to it: true when it
-- created it.
INSERT INTO pool_proposals AS p (tenant_id, pool, agent_id, memory_id, content_hash, sources)
VALUES (%(tenant_id)s, %(pool)s, %(agent_id)s, %(memory_id)s, %(content_hash)s, %(sources)s::text[])
ON CONFLICT (tenant_id, pool, content_hash) DO UPDATE
SET sources = (p.sources || ARRAY(SELECT s FROM unnest(EXCLUDED.sources) s WHERE s <> ALL(p.sources)))[1:100],
    updated_at = now()
WHERE p.status = 'open' AND NOT p.sources @> EXCLUDED.sources AND cardinality(p.sources) < 100
RETURNING (p.xmax = 0) AS created;

-- name: find
-- A pool's proposals, oldest first, with the proposing memory's text while it exists.
-- agent_ids: the agents a limited key reaches (NULL: every agent).
SELECT p.id, p.pool, p.agent_id, p.memory_id, p.sources, p.status, p.pool_memory_id, p.reason,
       p.decided_by, p.decided_at, p.created_at, p.updated_at,
       m.text, m.kind, (m.id IS NOT NULL AND m.valid_to IS NULL) AS live
FROM pool_proposals p
LEFT JOIN memories m ON m.tenant_id = p.tenant_id AND m.agent_id = p.agent_id AND m.id = p.memory_id
WHERE p.tenant_id = %(tenant_id)s AND p.pool = %(pool)s
  AND (%(status)s::text IS NULL OR p.status = %(status)s::text)
  AND (%(agent_ids)s::text[] IS NULL OR p.agent_id = ANY(%(agent_ids)s::text[]))
ORDER BY p.created_at, p.id
LIMIT %(limit)s;

-- name: lock_for_decision
-- One proposal of the pool, locked until the deciding transaction ends.
SELECT p.id, p.pool, p.agent_id, p.memory_id, p.sources, p.status, p.pool_memory_id, p.reason,
       p.decided_by, p.decided_at, p.created_at, p.updated_at,
       m.text, m.kind, (m.id IS NOT NULL AND m.valid_to IS NULL) AS live
FROM pool_proposals p
LEFT JOIN memories m ON m.tenant_id = p.tenant_id AND m.agent_id = p.agent_id AND m.id = p.memory_id
WHERE p.tenant_id = %(tenant_id)s AND p.pool = %(pool)s AND p.id = %(proposal_id)s
FOR UPDATE OF p;

-- name: decide
-- Settle an open proposal: approved (with the pool memory it wrote or confirmed) or rejected.
UPDATE pool_proposals
SET status = %(status)s, pool_memory_id = %(pool_memory_id)s, reason = %(reason)s,
    decided_by = %(actor)s, decided_at = now(), updated_at = now()
WHERE tenant_id = %(tenant_id)s AND id = %(proposal_id)s AND status = 'open';

-- name: match
-- The pool's proposals (any status) that may already hold a fact: those naming one of
-- sources (the memories found to say it) or keyed by its content_hash (`linked`), then the
-- `near` nearest by their proposing memory's vector at cosine >= min_similarity, which the
-- caller confirms by their words. The nearest are searched among the pool's proposals only:
-- each one waits for, or took, a person's decision, so they stay few.
(SELECT p.id, p.status, m.text, 1.0::float8 AS similarity, true AS linked
 FROM pool_proposals p
 LEFT JOIN memories m ON m.tenant_id = p.tenant_id AND m.agent_id = p.agent_id AND m.id = p.memory_id
 WHERE p.tenant_id = %(tenant_id)s AND p.pool = %(pool)s
   AND (p.sources && %(sources)s::text[] OR p.content_hash = %(content_hash)s)
 ORDER BY p.created_at, p.id LIMIT %(near)s)
UNION ALL
(SELECT p.id, p.status, m.text, 1 - (m.embedding <=> %(embedding)s) AS similarity, false AS linked
 FROM pool_proposals p
 JOIN memories m ON m.tenant_id = p.tenant_id AND m.agent_id = p.agent_id AND m.id = p.memory_id
 WHERE p.tenant_id = %(tenant_id)s AND p.pool = %(pool)s
   AND m.embedding <=> %(embedding)s <= 1 - %(min_similarity)s
 ORDER BY m.embedding <=> %(embedding)s, p.id LIMIT %(near)s);

-- name: add_sources
-- Add these sources to an open proposal of the same fact (up to 100 sources). 1 when a
-- source was added, else 0.
UPDATE pool_proposals AS p
SET sources = (p.sources || ARRAY(SELECT s FROM unnest(%(sources)s::text[]) s WHERE s <> ALL(p.sources)))[1:100],
    updated_at = now()
WHERE p.tenant_id = %(tenant_id)s AND p.id = %(proposal_id)s AND p.status = 'open'
  AND NOT p.sources @> %(sources)s::text[] AND cardinality(p.sources) < 100;

-- name: forget_sources
-- Every proposal (any status) naming one of these memories as a source: erasing a memory
-- leaves no proposal of its text, nor the decision taken on it.
DELETE FROM pool_proposals
WHERE tenant_id = %(tenant_id)s AND sources && %(sources)s::text[]
RETURNING id;
