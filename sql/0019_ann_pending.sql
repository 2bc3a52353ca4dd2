-- Large agents' HNSW index off the write path (memworker/storage/large_agents.py,
-- docs/scaling.md "Large agents").
--
-- A denser graph: with pgvector's default (m 16, ef_construction 64) a scan that entered the
-- wrong cluster of near-equal vectors (texts that share their terms) stayed there, and no
-- wider scan found the query's own; m 32 / ef_construction 128 finds it (bench/agent_size.py).
-- Its inserts cost about twice as much, so a write no longer inserts into it: a large
-- agent's new memory is stored pending (ann_pending), recall scans the agent's pending rows
-- exactly next to the index, and large_agents.index moves them into the index in batches.
ALTER TABLE memworker.memories ADD COLUMN ann_pending boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION memworker.memories_ann() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  NEW.ann_pending := coalesce((SELECT a.ann FROM memworker.agents a
                               WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id), false);
  RETURN NEW;
END $$;

-- Only large agents' rows that wait for the index: small agents' writes never touch it.
CREATE INDEX memories_ann_pending ON memworker.memories (tenant_id, agent_id)
    WHERE ann_pending AND valid_to IS NULL;

DROP INDEX memworker.memories_ann;
CREATE INDEX memories_ann ON memworker.memories USING hnsw (embedding vector_cosine_ops)
    WITH (m = 32, ef_construction = 128) WHERE ann AND valid_to IS NULL;

-- A large agent's lexical candidates score each pooled memory by its postings of every query
-- term, one probe of the primary key per term and memory, and recall over its bounded
-- candidates reads their postings the same way: with the impact and the term frequency in
-- the key's index, index-only reads, not a heap fetch per posting (at 100,000 memories about
-- 1,300 of them per recall; docs/scaling.md, "Large agents").
ALTER TABLE memworker.memory_terms DROP CONSTRAINT memory_terms_pkey;
ALTER TABLE memworker.memory_terms ADD CONSTRAINT memory_terms_pkey
    PRIMARY KEY (tenant_id, agent_id, term, memory_id) INCLUDE (impact, tf);
