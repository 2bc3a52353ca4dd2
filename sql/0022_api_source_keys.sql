-- A direct memory write about a subject was keyed 'api:<agent>~<subject>/<idempotency key>',
-- which spells a pool's own key ('api:pool~<name>/<key>') when the agent is named 'pool' and
-- the subject is the pool's name: one could answer (404) or block the other's writes. Such a
-- write is now keyed 'api-subject:<agent>/<subject>/<key>' (memworker/api/routes/memories.py
-- source_key); this rewrites the rows stored the earlier way, read from each row's own agent
-- and subject, so a retry of an earlier write still answers with it. General writes
-- ('api:<agent>/<key>') keep their keys. Data only: the catalog is the same afterwards. The
-- table forces row-level security even on its owner; it is lifted for this transaction only,
-- to see every tenant.

ALTER TABLE memworker.memories NO FORCE ROW LEVEL SECURITY;

UPDATE memworker.memories
   SET source_key = 'api-subject:' || agent_id || '/' || subject || '/'
                    || substr(source_key, length('api:' || agent_id || '~' || subject || '/') + 1)
 WHERE subject IS NOT NULL
   AND starts_with(source_key, 'api:' || agent_id || '~' || subject || '/');

ALTER TABLE memworker.memories FORCE ROW LEVEL SECURITY;
