-- The HNSW index of large agents' memories (sql/0012: memories_ann) rebuilt as a denser graph.
-- Agent memories are clustered: texts that share their terms lie in tight groups of near-equal
-- vectors, and a graph built with pgvector's defaults (m 16, ef_construction 64) links such
-- groups so thinly that a scan entering the wrong one never reaches the right one, whatever
-- ef_search (bench/agent_size.py, 100,000 memories: 0.78 of the exact vector top 60 found at
-- ef_search 400 or 1,000, none at all for some queries). With 32 links per node, built with a
-- 128-wide beam, the same scan finds 0.98 of it. The index holds only large agents' rows, so
-- the cost (a write into a large agent about 20 ms dearer on a loaded 2-core machine, a bulk
-- build about three times as long) falls on the agents that need it.
DROP INDEX memworker.memories_ann;
CREATE INDEX memories_ann ON memworker.memories USING hnsw (embedding vector_cosine_ops)
    WITH (m = 32, ef_construction = 128) WHERE ann AND valid_to IS NULL;
