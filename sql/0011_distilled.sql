-- Sleep that distils: the semantic layer is durable, turns go once a summary carries them
-- (docs/lifecycle.md, "Layers").
-- carried_by: the sleep summary that carries this turn's message (set by the pass that wrote
-- it). A plain id, not a foreign key: the turn stays when its summary goes (merge, forget) and
-- then counts as carried by nothing again, which the rules read by looking the id up.
ALTER TABLE memworker.memories ADD COLUMN carried_by uuid;
CREATE INDEX memories_carried_by ON memworker.memories (tenant_id, carried_by) WHERE carried_by IS NOT NULL;
ALTER TABLE memworker.retention_runs ADD COLUMN forgotten_distilled integer NOT NULL DEFAULT 0;

-- The tables force row-level security even on their owner, who may not be a superuser: it is
-- lifted for this transaction only, so the updates below see every tenant's rows.
ALTER TABLE memworker.memories NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.agents NO FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.tenants NO FORCE ROW LEVEL SECURITY;

-- Existing rows follow the new tiers: reflected items and promoted ones (L1, L2) no longer
-- expire by a clock, unless the tenant or the agent set a TTL for that tier in its policy.
UPDATE memworker.memories m SET expires_at = NULL
FROM memworker.agents a JOIN memworker.tenants t ON t.id = a.tenant_id
WHERE a.tenant_id = m.tenant_id AND a.id = m.agent_id
  AND m.tier IN ('L1', 'L2') AND m.kind <> 'turn' AND m.expires_at IS NOT NULL AND m.valid_to IS NULL
  AND NOT (coalesce(t.policy, '{}'::jsonb) ? ('ttl_' || lower(m.tier) || '_hours'))
  AND NOT (coalesce(a.policy, '{}'::jsonb) ? ('ttl_' || lower(m.tier) || '_hours'));

-- Turns a pass consolidated before summaries existed are carried by nothing: they go back into
-- sleep's window, so the next passes distil them (else they would only go by the unused rule).
UPDATE memworker.memories SET consolidated_at = NULL
WHERE kind = 'turn' AND consolidated_at IS NOT NULL AND valid_to IS NULL;

ALTER TABLE memworker.memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.agents FORCE ROW LEVEL SECURITY;
ALTER TABLE memworker.tenants FORCE ROW LEVEL SECURITY;
