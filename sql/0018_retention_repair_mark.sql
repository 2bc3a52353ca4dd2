-- The retention sweep checks a bounded number of the memories written or changed since its
-- last complete pass for merges and contradictions per run (memworker/lifecycle/retention.py):
-- a pass left unfinished by one run goes on in the next from where it stopped, so a sweep's
-- time does not grow with how much was written at once (a bulk import, a long pause).
ALTER TABLE memworker.agents
  ADD COLUMN retention_repair_clock timestamptz,  -- the clock of the run that began the unfinished pass
  ADD COLUMN retention_repair_after uuid;         -- the last memory id that pass checked
