-- Fair ingest (issue 18, 3b): the API reads a tenant's queued backlog (capped) in the accept
-- transaction to choose the priority of its queue messages (docs/episodes.md, "Fair ingest").
-- Only queued rows are in this index, so the count stays a short range scan of one tenant's
-- queued episodes however many stored ones the tenant has or other tenants have queued.
CREATE INDEX episodes_queued ON memworker.episodes (tenant_id, created_at) WHERE status = 'queued';
