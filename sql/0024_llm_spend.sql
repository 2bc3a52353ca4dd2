-- A tenant's LLM tokens per UTC day (tokens in + out, reflection and sleep alike), the figure
-- its daily budget (policy llm_tokens_per_day) is checked against. Kept by triggers on the two
-- tables that record what each call cost, so no write path can forget to count.
-- A write outside the tenant's own transaction (none today) is not counted rather than failed:
-- the budget is a brake on spending, never a reason to lose a reflection or a pass.

CREATE TABLE memworker.llm_spend (
  tenant_id  uuid NOT NULL REFERENCES memworker.tenants(id) ON DELETE CASCADE,
  day        date NOT NULL,
  tokens     bigint NOT NULL DEFAULT 0 CHECK (tokens >= 0),
  PRIMARY KEY (tenant_id, day)
);

ALTER TABLE memworker.llm_spend ENABLE ROW LEVEL SECURITY;
ALTER TABLE memworker.llm_spend FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memworker.llm_spend USING (tenant_id = memworker.current_tenant())
  WITH CHECK (tenant_id = memworker.current_tenant());

GRANT SELECT, INSERT, UPDATE ON memworker.llm_spend TO memworker_app;

CREATE FUNCTION memworker.count_llm_spend() RETURNS trigger
LANGUAGE plpgsql SET search_path = memworker, pg_temp AS $$
DECLARE
  spent bigint := (NEW.tokens_in::bigint + NEW.tokens_out)
                  - CASE WHEN TG_OP = 'UPDATE' THEN OLD.tokens_in::bigint + OLD.tokens_out ELSE 0 END;
BEGIN
  IF spent > 0 AND NEW.tenant_id IS NOT DISTINCT FROM memworker.current_tenant() THEN
    INSERT INTO llm_spend AS s (tenant_id, day, tokens)
    VALUES (NEW.tenant_id, (now() AT TIME ZONE 'UTC')::date, spent)
    ON CONFLICT (tenant_id, day) DO UPDATE SET tokens = s.tokens + EXCLUDED.tokens;
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER count_llm_spend AFTER INSERT OR UPDATE OF tokens_in, tokens_out ON memworker.episodes
  FOR EACH ROW EXECUTE FUNCTION memworker.count_llm_spend();
CREATE TRIGGER count_llm_spend AFTER INSERT OR UPDATE OF tokens_in, tokens_out ON memworker.consolidation_runs
  FOR EACH ROW EXECUTE FUNCTION memworker.count_llm_spend();
