-- Keys ready for distribution by tenant (docs/scaling.md): every tenant table's primary key
-- and unique constraints include tenant_id, and the foreign keys between tenant tables carry
-- it, as Citus (or native hash partitioning by tenant) requires of co-located tables. Ids stay
-- globally unique (uuids and identities); only the constraints change, and row-level security
-- gives every app query tenant_id = current_tenant() for the new indexes. tenants, api_keys
-- (looked up by prefix before the tenant is known) and schema_migrations keep their keys: they
-- are the reference tables.

-- 1. the foreign keys that point at a single-column key go ...
ALTER TABLE memworker.agent_profiles DROP CONSTRAINT agent_profiles_run_id_fkey;
ALTER TABLE memworker.memories DROP CONSTRAINT memories_superseded_by_fkey;
ALTER TABLE memworker.memory_aliases DROP CONSTRAINT memory_aliases_memory_id_fkey;
ALTER TABLE memworker.memory_connections
  DROP CONSTRAINT memory_connections_from_id_fkey,
  DROP CONSTRAINT memory_connections_to_id_fkey,
  DROP CONSTRAINT memory_connections_insight_id_fkey;
ALTER TABLE memworker.memory_reviews
  DROP CONSTRAINT memory_reviews_memory_id_fkey,
  DROP CONSTRAINT memory_reviews_other_id_fkey;
ALTER TABLE memworker.memory_terms DROP CONSTRAINT memory_terms_memory_id_fkey;
ALTER TABLE memworker.webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_fkey;

-- 2. ... the keys take tenant_id first ...
ALTER TABLE memworker.consolidation_runs DROP CONSTRAINT consolidation_runs_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.context_calls DROP CONSTRAINT context_calls_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.episodes DROP CONSTRAINT episodes_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.memories DROP CONSTRAINT memories_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.memory_connections
  DROP CONSTRAINT memory_connections_pkey, ADD PRIMARY KEY (tenant_id, id),
  DROP CONSTRAINT memory_connections_from_id_to_id_relationship_key,
  ADD CONSTRAINT memory_connections_edge_key UNIQUE (tenant_id, from_id, to_id, relationship);
ALTER TABLE memworker.memory_events DROP CONSTRAINT memory_events_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.memory_reviews DROP CONSTRAINT memory_reviews_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.retention_runs DROP CONSTRAINT retention_runs_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE memworker.webhooks DROP CONSTRAINT webhooks_pkey, ADD PRIMARY KEY (tenant_id, id);

-- 3. ... and the foreign keys come back with it (SET NULL clears only the reference column).
ALTER TABLE memworker.agent_profiles ADD CONSTRAINT agent_profiles_run_id_fkey
  FOREIGN KEY (tenant_id, run_id) REFERENCES memworker.consolidation_runs (tenant_id, id) ON DELETE SET NULL (run_id);
ALTER TABLE memworker.memories ADD CONSTRAINT memories_superseded_by_fkey
  FOREIGN KEY (tenant_id, superseded_by) REFERENCES memworker.memories (tenant_id, id) ON DELETE SET NULL (superseded_by);
ALTER TABLE memworker.memory_aliases ADD CONSTRAINT memory_aliases_memory_id_fkey
  FOREIGN KEY (tenant_id, memory_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE memworker.memory_connections
  ADD CONSTRAINT memory_connections_from_id_fkey
    FOREIGN KEY (tenant_id, from_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE CASCADE,
  ADD CONSTRAINT memory_connections_to_id_fkey
    FOREIGN KEY (tenant_id, to_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE CASCADE,
  ADD CONSTRAINT memory_connections_insight_id_fkey
    FOREIGN KEY (tenant_id, insight_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE SET NULL (insight_id);
ALTER TABLE memworker.memory_reviews
  ADD CONSTRAINT memory_reviews_memory_id_fkey
    FOREIGN KEY (tenant_id, memory_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE CASCADE,
  ADD CONSTRAINT memory_reviews_other_id_fkey
    FOREIGN KEY (tenant_id, other_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE memworker.memory_terms ADD CONSTRAINT memory_terms_memory_id_fkey
  FOREIGN KEY (tenant_id, memory_id) REFERENCES memworker.memories (tenant_id, id) ON DELETE CASCADE;
ALTER TABLE memworker.webhook_deliveries ADD CONSTRAINT webhook_deliveries_webhook_id_fkey
  FOREIGN KEY (tenant_id, webhook_id) REFERENCES memworker.webhooks (tenant_id, id) ON DELETE CASCADE;
