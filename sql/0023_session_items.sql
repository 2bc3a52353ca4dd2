-- Session items (docs/sessions.md, "Session items"): a session's raw conversation log as an
-- agent framework keeps it (the OpenAI Agents SDK's Session items), whole and in order. Not
-- memories: never recalled, packed into a context, distilled, decayed or retained; they go
-- with their session (ON DELETE CASCADE: a session's forget, a subject's, an agent's erase).
-- position orders them: an append takes the places after the last one under the session's
-- row lock, so concurrent appenders never share one.

CREATE TABLE memworker.session_items (
  tenant_id   uuid NOT NULL,
  agent_id    text NOT NULL,
  session_id  text NOT NULL,
  position    integer NOT NULL CHECK (position >= 0),
  item        jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, agent_id, session_id, position),
  FOREIGN KEY (tenant_id, agent_id, session_id) REFERENCES memworker.sessions(tenant_id, agent_id, id)
    ON DELETE CASCADE
);

ALTER TABLE memworker.session_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE memworker.session_items FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memworker.session_items USING (tenant_id = memworker.current_tenant())
  WITH CHECK (tenant_id = memworker.current_tenant());

GRANT SELECT, INSERT, UPDATE, DELETE ON memworker.session_items TO memworker_app;
