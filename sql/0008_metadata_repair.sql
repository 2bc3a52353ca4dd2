-- Issue 18: metadata was bounded only by the 8 MB body, and a few hundred levels of nesting
-- made every read of its agent answer 500. The API now refuses metadata deeper than 16 levels
-- (MEMWORKER_MAX_METADATA_DEPTH); this replaces what is already stored deeper than that with a
-- marker, so no stored row breaks a read. Data only: the catalog is the same afterwards.
--
-- Depth counts objects and arrays, the top one being level 1: a container at jsonpath level 16
-- or below ($ itself is level 0) means more than 16 levels. The tables force row-level
-- security even on their owner; it is lifted for this transaction only, to see every tenant.

ALTER TABLE memworker.memories NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.episodes NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.sessions NO FORCE ROW LEVEL SECURITY;

UPDATE memworker.memories
   SET metadata = '{"_repaired": "metadata exceeded depth 16"}'
 WHERE jsonb_path_exists(metadata, 'strict $.**{16 to last} ? (@.type() == "object" || @.type() == "array")');

UPDATE memworker.episodes
   SET metadata = '{"_repaired": "metadata exceeded depth 16"}'
 WHERE jsonb_path_exists(metadata, 'strict $.**{16 to last} ? (@.type() == "object" || @.type() == "array")');

UPDATE memworker.sessions
   SET metadata = '{"_repaired": "metadata exceeded depth 16"}'
 WHERE jsonb_path_exists(metadata, 'strict $.**{16 to last} ? (@.type() == "object" || @.type() == "array")');

ALTER TABLE memworker.memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.episodes FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.sessions FORCE ROW LEVEL SECURITY;
