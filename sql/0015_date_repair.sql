-- Dates were bounded only by Python's datetime in the request's own offset: a value in range
-- there could be out of range in UTC (0001-01-01T00:00:00+14:00 is in year 0), and then no
-- Python process could read its row back (a worker's claim, a GET: 500). The API now takes
-- datetimes in [1900-01-01, 9000-01-01) UTC only (docs/input_limits.md); this brings what is
-- stored into that range. Data only: the catalog is the same afterwards.
--
-- An episode's occurred_at out of range becomes its created_at (when it was received); a
-- memory's expires_at before 1900 becomes 1900-01-01 (it has expired either way), from 9000
-- on NULL (it never expires either way). An episode that went dead on such a date can be
-- replayed. The tables force row-level security even on their owner; it is lifted for this
-- transaction only, to see every tenant.

ALTER TABLE memworker.memories NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.episodes NO FORCE ROW LEVEL SECURITY;

UPDATE memworker.episodes
   SET occurred_at = created_at
 WHERE occurred_at < '1900-01-01 00:00:00+00' OR occurred_at >= '9000-01-01 00:00:00+00';

UPDATE memworker.memories
   SET expires_at = CASE WHEN expires_at < '1900-01-01 00:00:00+00' THEN timestamptz '1900-01-01 00:00:00+00' END
 WHERE expires_at < '1900-01-01 00:00:00+00' OR expires_at >= '9000-01-01 00:00:00+00';

ALTER TABLE memworker.memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.episodes FORCE ROW LEVEL SECURITY;
