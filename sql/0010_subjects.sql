-- Subjects: the person or entity a memory is about or was shared with (an end user, a
-- customer, a peer agent), within one agent. NULL is the agent's general knowledge; every
-- row written before subjects existed stays general. Governance (dedup, merge, supersede,
-- review, consolidation) pairs memories of one subject only, and recall for a subject
-- reads that subject's memories plus the general ones (docs/subjects.md).
-- The ids follow the agent-id alphabet. The checks are NOT VALID: existing rows are all
-- NULL, so they need no scan of the table under an exclusive lock.
ALTER TABLE memworker.memories ADD COLUMN subject text;
ALTER TABLE memworker.memories ADD CONSTRAINT memories_subject_check
  CHECK (subject ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$') NOT VALID;
ALTER TABLE memworker.episodes ADD COLUMN subject text;
ALTER TABLE memworker.episodes ADD CONSTRAINT episodes_subject_check
  CHECK (subject ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$') NOT VALID;
ALTER TABLE memworker.sessions ADD COLUMN subject text;
ALTER TABLE memworker.sessions ADD CONSTRAINT sessions_subject_check
  CHECK (subject ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$') NOT VALID;

-- A subject's memories and episodes (listing, profile, erase): only rows that have one.
CREATE INDEX memories_subject ON memworker.memories (tenant_id, agent_id, subject, created_at)
  WHERE subject IS NOT NULL;
CREATE INDEX episodes_subject ON memworker.episodes (tenant_id, agent_id, subject, created_at)
  WHERE subject IS NOT NULL;
