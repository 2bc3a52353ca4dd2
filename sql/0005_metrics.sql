-- Fleet-wide gauges for /metrics, read without scanning: memories per tier and kind from the
-- planner's statistics (kept fresh by autovacuum's ANALYZE), so a scrape costs microseconds
-- even with hundreds of millions of rows. Estimates, not counts.
CREATE FUNCTION memworker.memory_estimates()
RETURNS TABLE (attribute text, value text, estimate double precision)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = memworker, pg_catalog, pg_temp AS $$
  SELECT s.attname::text, v.value, v.freq * greatest(c.reltuples, 0)
  FROM pg_stats s
  JOIN pg_class c ON c.relname = s.tablename
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname
  CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS v(value, freq)
  WHERE s.schemaname = 'memworker' AND s.tablename = 'memories' AND s.attname IN ('tier', 'kind')
$$;
REVOKE ALL ON FUNCTION memworker.memory_estimates() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memworker.memory_estimates() TO memworker_app;
