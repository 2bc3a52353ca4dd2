-- Recall bumps access_count and last_access_at on every hit. Neither column is indexed, so
-- the update can be HOT (no new entry in any of the table's eight indexes) when the row's
-- page has room for the new version. Loaded full (fillfactor 100), 65 % of the bumps in
-- bench/recall_latency.py were not HOT; with 10 % of each page kept free, 98 % are.
-- Applies to pages written from now on; VACUUM FULL (or pg_repack) rewrites older ones.
ALTER TABLE memworker.memories SET (fillfactor = 90);
