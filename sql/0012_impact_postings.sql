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
UPDATE memworker.memory_terms t SET impact = memworker.bm25_impact(t.tf, m.doc_len)
FROM memworker.memories m WHERE m.tenant_id = t.tenant_id AND m.id = t.memory_id;

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

-- Vector candidates for large agents: HNSW over live memories, scanned with pgvector's
-- iterative scans so a filter on one agent still yields enough rows.
CREATE INDEX memories_embedding_hnsw ON memworker.memories USING hnsw (embedding vector_cosine_ops)
    WHERE valid_to IS NULL;
