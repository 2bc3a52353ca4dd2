-- Recall for large agents reads a bounded candidate set instead of every live memory
-- (memworker/recall.py, docs/scaling.md "Large agents").
--
-- Impact-ordered postings. BM25's per-term part, tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl /
-- avgdl)), depends on the posting alone but for avgdl; with avgdl fixed at a reference length
-- it orders a term's postings as BM25 will weigh them (within one tf, the shorter memory
-- first), so an index on (tenant, agent, term, impact DESC) yields each query term's best
-- postings first. The reference length only orders; recall scores the candidates with the
-- agent's own statistics.
CREATE FUNCTION memworker.bm25_impact(p_tf integer, p_dl integer) RETURNS real
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (p_tf * 2.2 / (p_tf + 1.2 * (0.25 + 0.75 * greatest(p_dl, 1) / 8.0)))::real $$;

ALTER TABLE memworker.memory_terms ADD COLUMN impact real;
-- Row-level security is forced even on the owner, who may not be a superuser: lifted for this
-- transaction only, so every tenant's postings get their impact before it becomes NOT NULL.
ALTER TABLE memworker.memory_terms NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.memories NO FORCE ROW LEVEL SECURITY;
UPDATE memworker.memory_terms t SET impact = memworker.bm25_impact(t.tf, m.doc_len)
FROM memworker.memories m WHERE m.tenant_id = t.tenant_id AND m.id = t.memory_id;
ALTER TABLE memworker.memory_terms FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.memories FORCE ROW LEVEL SECURITY;

-- A posting written without its impact (a bulk COPY, an older writer) gets it from its
-- memory's length; the app's own insert passes it and skips the lookup.
CREATE FUNCTION memworker.memory_terms_impact() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  NEW.impact := memworker.bm25_impact(NEW.tf, (SELECT m.doc_len FROM memworker.memories m
                                               WHERE m.tenant_id = NEW.tenant_id AND m.id = NEW.memory_id));
  RETURN NEW;
END $$;
CREATE TRIGGER memory_terms_impact BEFORE INSERT ON memworker.memory_terms
    FOR EACH ROW WHEN (NEW.impact IS NULL) EXECUTE FUNCTION memworker.memory_terms_impact();
ALTER TABLE memworker.memory_terms ALTER COLUMN impact SET NOT NULL;

CREATE INDEX memory_terms_impact ON memworker.memory_terms (tenant_id, agent_id, term, impact DESC, memory_id);

-- Vector candidates for large agents: HNSW, scanned with pgvector's iterative scans so a
-- filter on one agent still yields enough rows. Only large agents' rows are in it: an HNSW
-- insert costs about as much as the rest of a memory's write, which small agents (the exact
-- scan serves them) should not pay. agents.ann: the agent's new memories go into the index
-- (memories.ann, set by the trigger below); ann_ready: its older ones are in too, so recall
-- may take its vector candidates from the index (memworker/large_agents.py fills it).
ALTER TABLE memworker.agents ADD COLUMN ann boolean NOT NULL DEFAULT false;
ALTER TABLE memworker.agents ADD COLUMN ann_ready boolean NOT NULL DEFAULT false;
ALTER TABLE memworker.memories ADD COLUMN ann boolean NOT NULL DEFAULT false;

CREATE FUNCTION memworker.memories_ann() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  NEW.ann := coalesce((SELECT a.ann FROM memworker.agents a
                       WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id), false);
  RETURN NEW;
END $$;
CREATE TRIGGER memories_ann BEFORE INSERT ON memworker.memories
    FOR EACH ROW WHEN (NOT NEW.ann) EXECUTE FUNCTION memworker.memories_ann();

CREATE INDEX memories_ann ON memworker.memories USING hnsw (embedding vector_cosine_ops)
    WHERE ann AND valid_to IS NULL;
