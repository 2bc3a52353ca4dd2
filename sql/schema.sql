-- The catalog sql/NNNN_*.sql produce on PostgreSQL 18: generated, do not edit.
-- Regenerate after adding a migration: python -m memworker.local.schema_snapshot > sql/schema.sql
-- (not a migration: the runner skips this file)

--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET transaction_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: memworker; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA memworker;

--
-- Name: vector; Type: EXTENSION; Schema: -; Owner: -
--

CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;

--
-- Name: EXTENSION vector; Type: COMMENT; Schema: -; Owner: -
--

COMMENT ON EXTENSION vector IS 'vector data type and ivfflat and hnsw access methods';

--
-- Name: authenticate(text); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.authenticate(p_prefix text) RETURNS TABLE(key_id uuid, tenant_id uuid, key_hash bytea, scopes text[], agent_ids text[], expires_at timestamp with time zone, revoked_at timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  SELECT id, tenant_id, key_hash, scopes, agent_ids, expires_at, revoked_at
  FROM memworker.api_keys WHERE prefix = p_prefix
$$;

--
-- Name: bm25_impact(integer, integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.bm25_impact(p_tf integer, p_dl integer) RETURNS real
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (p_tf * 2.2 / (p_tf + 1.2 * (0.25 + 0.75 * greatest(p_dl, 1) / 8.0)))::real $$;

--
-- Name: claim_due_agents(timestamp with time zone, jsonb, integer, integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.claim_due_agents(p_window timestamp with time zone, p_defaults jsonb, p_lease_s integer, p_limit integer) RETURNS TABLE(tenant_id uuid, agent_id text, run_id uuid, trigger text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  WITH cand AS (
    SELECT a.tenant_id, a.id AS agent_id, a.consolidation_requested AS requested,
           coalesce(a.last_pass_at, a.created_at) AS since, a.sessions_since_pass,
           (policy_value(a.policy, t.policy, p_defaults, 'consolidation_interval_minutes'))::numeric AS interval_min,
           (policy_value(a.policy, t.policy, p_defaults, 'consolidation_sessions_gate'))::numeric AS sessions_gate,
           (policy_value(a.policy, t.policy, p_defaults, 'consolidation_min_items'))::numeric::int AS min_items
    FROM agents a JOIN tenants t ON t.id = a.tenant_id
    WHERE (policy_value(a.policy, t.policy, p_defaults, 'consolidation_enabled'))::boolean
      AND (a.next_consolidation_at IS NULL OR a.next_consolidation_at <= p_window)
      AND (a.last_episode_at IS NULL OR a.last_episode_at <= p_window - make_interval(
             mins => (policy_value(a.policy, t.policy, p_defaults, 'consolidation_quiet_minutes'))::numeric::int))
  ), gated AS (
    SELECT c.*, CASE
      WHEN c.requested THEN 'requested'
      WHEN c.since <= p_window - make_interval(mins => c.interval_min::int) THEN 'time'
      WHEN greatest(c.sessions_since_pass,
                    (SELECT count(DISTINCT e.session_id) FROM episodes e
                     WHERE e.tenant_id = c.tenant_id AND e.agent_id = c.agent_id
                       AND e.created_at > c.since)) >= c.sessions_gate THEN 'sessions'
    END AS trigger
    FROM cand c
  ), due AS (
    SELECT g.tenant_id, g.agent_id, g.trigger FROM gated g
    WHERE g.trigger IS NOT NULL
      AND (g.requested OR (SELECT count(*) FROM (
             SELECT 1 FROM memories m
             WHERE m.tenant_id = g.tenant_id AND m.agent_id = g.agent_id AND m.consolidated_at IS NULL
               AND m.valid_to IS NULL AND (m.expires_at IS NULL OR m.expires_at > p_window)
             LIMIT g.min_items) w) >= g.min_items)
    ORDER BY g.since
    LIMIT p_limit
  ), runs AS (
    INSERT INTO consolidation_runs AS r (tenant_id, agent_id, run_key, trigger, status)
    SELECT d.tenant_id, d.agent_id,
           'beat:' || to_char(p_window AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), d.trigger, 'queued'
    FROM due d
    ON CONFLICT (tenant_id, agent_id, run_key) DO NOTHING
    RETURNING r.tenant_id, r.agent_id, r.id, r.trigger
  )
  -- Lease only the agents whose run is new: an agent whose window key is taken (a second
  -- sweep of the window, or a pass that finished within it) waits for the next window.
  -- A run whose lease loses to a concurrent sweep stays queued, unclaimed; the agent's
  -- next pass marks it superseded.
  UPDATE agents a SET next_consolidation_at = p_window + make_interval(secs => p_lease_s)
  FROM runs n
  WHERE a.tenant_id = n.tenant_id AND a.id = n.agent_id
    AND (a.next_consolidation_at IS NULL OR a.next_consolidation_at <= p_window)
  RETURNING n.tenant_id, n.agent_id, n.id, n.trigger
$$;

--
-- Name: consolidation_flagged_count(integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.consolidation_flagged_count(p_threshold integer) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  SELECT count(*) FROM agents WHERE consolidation_failures >= p_threshold
$$;

--
-- Name: count_llm_spend(); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.count_llm_spend() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
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

--
-- Name: current_tenant(); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.current_tenant() RETURNS uuid
    LANGUAGE sql STABLE
    AS $$
  SELECT nullif(current_setting('memworker.tenant_id', true), '')::uuid
$$;

--
-- Name: due_webhook_deliveries(timestamp with time zone, integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.due_webhook_deliveries(p_before timestamp with time zone, p_limit integer) RETURNS TABLE(tenant_id uuid, delivery_id uuid)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  SELECT d.tenant_id, d.id FROM memworker.webhook_deliveries d
  WHERE (d.status = 'pending' AND d.next_attempt_at < p_before)
     OR (d.status = 'sending' AND d.lease_until < now())
  ORDER BY d.next_attempt_at
  LIMIT p_limit
$$;

--
-- Name: memories_ann(); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.memories_ann() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  NEW.ann_pending := coalesce((SELECT a.ann FROM memworker.agents a
                               WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id), false);
  RETURN NEW;
END $$;

--
-- Name: memory_estimates(); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.memory_estimates() RETURNS TABLE(attribute text, value text, estimate double precision)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_catalog', 'pg_temp'
    AS $$
  SELECT s.attname::text, v.value, v.freq * greatest(c.reltuples, 0)
  FROM pg_stats s
  JOIN pg_class c ON c.relname = s.tablename
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname
  CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS v(value, freq)
  WHERE s.schemaname = 'memworker' AND s.tablename = 'memories' AND s.attname IN ('tier', 'kind')
$$;

--
-- Name: memory_terms_impact(); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.memory_terms_impact() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  NEW.impact := memworker.bm25_impact(NEW.tf, (SELECT m.doc_len FROM memworker.memories m
                                               WHERE m.tenant_id = NEW.tenant_id AND m.id = NEW.memory_id));
  RETURN NEW;
END $$;

--
-- Name: policy_value(jsonb, jsonb, jsonb, text); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.policy_value(p_agent jsonb, p_tenant jsonb, p_defaults jsonb, p_key text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE
    WHEN jsonb_typeof(p_agent -> p_key) = jsonb_typeof(p_defaults -> p_key) THEN p_agent -> p_key
    WHEN jsonb_typeof(p_tenant -> p_key) = jsonb_typeof(p_defaults -> p_key) THEN p_tenant -> p_key
    ELSE p_defaults -> p_key END
$$;

--
-- Name: prune_webhook_deliveries(timestamp with time zone); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.prune_webhook_deliveries(p_before timestamp with time zone) RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  WITH gone AS (
    DELETE FROM memworker.webhook_deliveries
    WHERE status IN ('delivered', 'failed') AND created_at < p_before
    RETURNING 1)
  SELECT count(*) FROM gone
$$;

--
-- Name: retention_due(timestamp with time zone, integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.retention_due(p_before timestamp with time zone, p_limit integer) RETURNS TABLE(tenant_id uuid, agent_id text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  SELECT a.tenant_id, a.id FROM memworker.agents a
  WHERE a.retention_at IS NULL OR a.retention_at < p_before
  ORDER BY a.retention_at NULLS FIRST, a.tenant_id, a.id
  LIMIT p_limit
$$;

--
-- Name: rumination_due(timestamp with time zone, timestamp with time zone, jsonb, integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.rumination_due(p_from timestamp with time zone, p_to timestamp with time zone, p_defaults jsonb, p_limit integer) RETURNS TABLE(tenant_id uuid, agent_id text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  SELECT DISTINCT a.tenant_id, a.id
  FROM memworker.session_archives s
  JOIN memworker.agents a ON a.tenant_id = s.tenant_id AND a.id = s.agent_id
  JOIN memworker.tenants t ON t.id = a.tenant_id
  WHERE s.created_at >= p_from AND s.created_at < p_to
    AND (memworker.policy_value(a.policy, t.policy, p_defaults, 'rumination_enabled'))::boolean
  ORDER BY a.tenant_id, a.id
  LIMIT p_limit
$$;

--
-- Name: stale_episodes(timestamp with time zone, integer); Type: FUNCTION; Schema: memworker; Owner: -
--

CREATE FUNCTION memworker.stale_episodes(p_queued_before timestamp with time zone, p_limit integer) RETURNS TABLE(tenant_id uuid, episode_id uuid)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'memworker', 'pg_temp'
    AS $$
  SELECT e.tenant_id, e.id FROM memworker.episodes e
  WHERE (e.status IN ('queued', 'failed') AND coalesce(e.enqueued_at, e.created_at) < p_queued_before)
     OR (e.status = 'processing' AND e.lease_until < now())
  ORDER BY e.created_at
  LIMIT p_limit
$$;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: agent_profiles; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.agent_profiles (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    version integer NOT NULL,
    document jsonb NOT NULL,
    run_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_profiles_version_check CHECK ((version > 0))
);

ALTER TABLE ONLY memworker.agent_profiles FORCE ROW LEVEL SECURITY;

--
-- Name: agents; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.agents (
    tenant_id uuid NOT NULL,
    id text NOT NULL,
    policy jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_episode_at timestamp with time zone,
    last_consolidated_at timestamp with time zone,
    sessions_since_pass integer DEFAULT 0 NOT NULL,
    consolidation_requested boolean DEFAULT false NOT NULL,
    consolidation_failures integer DEFAULT 0 NOT NULL,
    next_consolidation_at timestamp with time zone,
    last_pass_at timestamp with time zone,
    consolidation_last_error text,
    retention_at timestamp with time zone,
    retention_done_at timestamp with time zone,
    ann boolean DEFAULT false NOT NULL,
    ann_ready boolean DEFAULT false NOT NULL,
    retention_repair_clock timestamp with time zone,
    retention_repair_after uuid
);

ALTER TABLE ONLY memworker.agents FORCE ROW LEVEL SECURITY;

--
-- Name: api_keys; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.api_keys (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    prefix text NOT NULL,
    key_hash bytea NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    scopes text[] NOT NULL,
    agent_ids text[],
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone
);

ALTER TABLE ONLY memworker.api_keys FORCE ROW LEVEL SECURITY;

--
-- Name: consolidation_runs; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.consolidation_runs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    run_key text NOT NULL,
    trigger text NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    items_reviewed integer DEFAULT 0 NOT NULL,
    connections_made integer DEFAULT 0 NOT NULL,
    insights_written integer DEFAULT 0 NOT NULL,
    conclusions_written integer DEFAULT 0 NOT NULL,
    salience_rerated integer DEFAULT 0 NOT NULL,
    skipped_reason text,
    error text,
    llm_calls integer DEFAULT 0 NOT NULL,
    tokens_in integer DEFAULT 0 NOT NULL,
    tokens_out integer DEFAULT 0 NOT NULL,
    duration_ms integer,
    report jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT consolidation_runs_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'done'::text, 'skipped'::text, 'failed'::text])))
);

ALTER TABLE ONLY memworker.consolidation_runs FORCE ROW LEVEL SECURITY;

--
-- Name: context_calls; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.context_calls (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id text NOT NULL,
    query text NOT NULL,
    max_tokens integer NOT NULL,
    tokens integer NOT NULL,
    memory_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    dropped jsonb DEFAULT '{}'::jsonb NOT NULL,
    sections jsonb DEFAULT '{}'::jsonb NOT NULL,
    used real,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY memworker.context_calls FORCE ROW LEVEL SECURITY;

--
-- Name: episodes; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.episodes (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id text,
    idempotency_key text,
    content text NOT NULL,
    messages jsonb,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    occurred_at timestamp with time zone DEFAULT now() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    lease_until timestamp with time zone,
    enqueued_at timestamp with time zone,
    stored_at timestamp with time zone,
    memory_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    reflection jsonb,
    reflector text,
    llm_calls integer DEFAULT 0 NOT NULL,
    tokens_in integer DEFAULT 0 NOT NULL,
    tokens_out integer DEFAULT 0 NOT NULL,
    llm_ms integer DEFAULT 0 NOT NULL,
    subject text,
    CONSTRAINT episodes_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'processing'::text, 'stored'::text, 'failed'::text, 'dead'::text])))
);

ALTER TABLE ONLY memworker.episodes FORCE ROW LEVEL SECURITY;

--
-- Name: llm_spend; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.llm_spend (
    tenant_id uuid NOT NULL,
    day date NOT NULL,
    tokens bigint DEFAULT 0 NOT NULL,
    CONSTRAINT llm_spend_tokens_check CHECK ((tokens >= 0))
);

ALTER TABLE ONLY memworker.llm_spend FORCE ROW LEVEL SECURITY;

--
-- Name: memories; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.memories (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    text text NOT NULL,
    kind text DEFAULT 'fact'::text NOT NULL,
    tier text DEFAULT 'L1'::text NOT NULL,
    salience real DEFAULT 0.5 NOT NULL,
    confidence real DEFAULT 0.7 NOT NULL,
    access_count integer DEFAULT 0 NOT NULL,
    last_access_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    valid_from timestamp with time zone DEFAULT now() NOT NULL,
    valid_to timestamp with time zone,
    superseded_by uuid,
    consolidated_at timestamp with time zone,
    session_id text,
    entities text[] DEFAULT '{}'::text[] NOT NULL,
    topics text[] DEFAULT '{}'::text[] NOT NULL,
    provenance text[] DEFAULT '{}'::text[] NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    source_key text NOT NULL,
    content_hash text NOT NULL,
    trust text DEFAULT 'episode'::text NOT NULL,
    flags text[] DEFAULT '{}'::text[] NOT NULL,
    doc_len integer DEFAULT 0 NOT NULL,
    embedding public.vector(384) NOT NULL,
    confirmations integer DEFAULT 0 NOT NULL,
    confirmed_at timestamp with time zone,
    decayed_at timestamp with time zone,
    subject text,
    carried_by uuid,
    ann boolean DEFAULT false NOT NULL,
    ann_pending boolean DEFAULT false NOT NULL,
    parts integer DEFAULT 1 NOT NULL,
    CONSTRAINT memories_confidence_check CHECK (((confidence >= (0)::double precision) AND (confidence <= (1)::double precision))),
    CONSTRAINT memories_parts_check CHECK ((parts >= 1)),
    CONSTRAINT memories_salience_check CHECK (((salience >= (0)::double precision) AND (salience <= (1)::double precision))),
    CONSTRAINT memories_text_check CHECK (((length(text) >= 1) AND (length(text) <= 281))),
    CONSTRAINT memories_tier_check CHECK ((tier = ANY (ARRAY['L0'::text, 'L1'::text, 'L2'::text, 'L3'::text])))
)
WITH (fillfactor='90');

ALTER TABLE ONLY memworker.memories FORCE ROW LEVEL SECURITY;

--
-- Name: memory_aliases; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.memory_aliases (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    alias_id uuid NOT NULL,
    memory_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY memworker.memory_aliases FORCE ROW LEVEL SECURITY;

--
-- Name: memory_connections; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.memory_connections (
    id bigint NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    from_id uuid NOT NULL,
    to_id uuid NOT NULL,
    relationship text NOT NULL,
    insight_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT memory_connections_check CHECK ((from_id <> to_id))
);

ALTER TABLE ONLY memworker.memory_connections FORCE ROW LEVEL SECURITY;

--
-- Name: memory_connections_id_seq; Type: SEQUENCE; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_connections ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME memworker.memory_connections_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: memory_events; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.memory_events (
    id bigint NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    memory_id uuid,
    event text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    actor text DEFAULT 'system'::text NOT NULL,
    related_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY memworker.memory_events FORCE ROW LEVEL SECURITY;

--
-- Name: memory_events_id_seq; Type: SEQUENCE; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME memworker.memory_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: memory_reviews; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.memory_reviews (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    memory_id uuid NOT NULL,
    other_id uuid NOT NULL,
    reason text NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    resolution text,
    resolved_by text,
    resolved_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT memory_reviews_check CHECK ((memory_id <> other_id)),
    CONSTRAINT memory_reviews_status_check CHECK ((status = ANY (ARRAY['open'::text, 'resolved'::text])))
);

ALTER TABLE ONLY memworker.memory_reviews FORCE ROW LEVEL SECURITY;

--
-- Name: memory_terms; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.memory_terms (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    term text NOT NULL,
    memory_id uuid NOT NULL,
    tf integer NOT NULL,
    impact real NOT NULL,
    CONSTRAINT memory_terms_tf_check CHECK ((tf > 0))
);

ALTER TABLE ONLY memworker.memory_terms FORCE ROW LEVEL SECURITY;

--
-- Name: pool_proposals; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.pool_proposals (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    pool text NOT NULL,
    agent_id text NOT NULL,
    memory_id uuid NOT NULL,
    content_hash text NOT NULL,
    sources text[] NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    pool_memory_id uuid,
    reason text,
    decided_by text,
    decided_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT pool_proposals_check CHECK (((status = 'open'::text) = (decided_at IS NULL))),
    CONSTRAINT pool_proposals_pool_check CHECK (starts_with(pool, 'pool~'::text)),
    CONSTRAINT pool_proposals_sources_check CHECK (((cardinality(sources) >= 1) AND (cardinality(sources) <= 100))),
    CONSTRAINT pool_proposals_status_check CHECK ((status = ANY (ARRAY['open'::text, 'approved'::text, 'rejected'::text])))
);

ALTER TABLE ONLY memworker.pool_proposals FORCE ROW LEVEL SECURITY;

--
-- Name: retention_runs; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.retention_runs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    run_key text NOT NULL,
    trigger text NOT NULL,
    status text DEFAULT 'running'::text NOT NULL,
    clock timestamp with time zone NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    scanned integer DEFAULT 0 NOT NULL,
    expired integer DEFAULT 0 NOT NULL,
    forgotten_age integer DEFAULT 0 NOT NULL,
    forgotten_unused integer DEFAULT 0 NOT NULL,
    forgotten_cap integer DEFAULT 0 NOT NULL,
    decayed integer DEFAULT 0 NOT NULL,
    promoted integer DEFAULT 0 NOT NULL,
    merged integer DEFAULT 0 NOT NULL,
    superseded integer DEFAULT 0 NOT NULL,
    reviews integer DEFAULT 0 NOT NULL,
    batches integer DEFAULT 0 NOT NULL,
    duration_ms integer,
    skipped_reason text,
    error text,
    forgotten_distilled integer DEFAULT 0 NOT NULL,
    CONSTRAINT retention_runs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'done'::text, 'partial'::text, 'skipped'::text, 'failed'::text])))
);

ALTER TABLE ONLY memworker.retention_runs FORCE ROW LEVEL SECURITY;

--
-- Name: schema_migrations; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.schema_migrations (
    filename text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: session_archives; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.session_archives (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id text NOT NULL,
    version integer NOT NULL,
    format_version integer NOT NULL,
    data bytea NOT NULL,
    bytes integer NOT NULL,
    raw_bytes integer NOT NULL,
    sha256 text NOT NULL,
    counts jsonb DEFAULT '{}'::jsonb NOT NULL,
    episode_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    distill_episode_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT session_archives_version_check CHECK ((version > 0))
);
ALTER TABLE ONLY memworker.session_archives ALTER COLUMN data SET STORAGE EXTERNAL;

ALTER TABLE ONLY memworker.session_archives FORCE ROW LEVEL SECURITY;

--
-- Name: session_items; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.session_items (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    session_id text NOT NULL,
    "position" integer NOT NULL,
    item jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT session_items_position_check CHECK (("position" >= 0))
);

ALTER TABLE ONLY memworker.session_items FORCE ROW LEVEL SECURITY;

--
-- Name: sessions; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.sessions (
    tenant_id uuid NOT NULL,
    agent_id text NOT NULL,
    id text NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    working jsonb DEFAULT '{}'::jsonb NOT NULL,
    plan jsonb,
    revision integer DEFAULT 0 NOT NULL,
    window_tokens integer,
    log_tokens integer DEFAULT 0 NOT NULL,
    last_context_tokens integer DEFAULT 0 NOT NULL,
    reported_used real,
    flush_armed boolean DEFAULT true NOT NULL,
    flush_count integer DEFAULT 0 NOT NULL,
    flushed_at timestamp with time zone,
    flushed_revision integer DEFAULT 0 NOT NULL,
    last_flush_episode_id uuid,
    archive_count integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    archived_at timestamp with time zone,
    restored_at timestamp with time zone,
    subject text,
    CONSTRAINT sessions_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128))),
    CONSTRAINT sessions_status_check CHECK ((status = ANY (ARRAY['open'::text, 'archived'::text]))),
    CONSTRAINT sessions_window_tokens_check CHECK ((window_tokens > 0))
);

ALTER TABLE ONLY memworker.sessions FORCE ROW LEVEL SECURITY;

--
-- Name: tenants; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.tenants (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    policy jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenants_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200)))
);

ALTER TABLE ONLY memworker.tenants FORCE ROW LEVEL SECURITY;

--
-- Name: webhook_deliveries; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.webhook_deliveries (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    webhook_id uuid NOT NULL,
    event text NOT NULL,
    agent_id text NOT NULL,
    session_id text,
    payload jsonb NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_until timestamp with time zone,
    last_status integer,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    CONSTRAINT webhook_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'sending'::text, 'delivered'::text, 'failed'::text])))
);

ALTER TABLE ONLY memworker.webhook_deliveries FORCE ROW LEVEL SECURITY;

--
-- Name: webhooks; Type: TABLE; Schema: memworker; Owner: -
--

CREATE TABLE memworker.webhooks (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    tenant_id uuid NOT NULL,
    url text NOT NULL,
    secret text NOT NULL,
    events text[] NOT NULL,
    agent_ids text[],
    description text DEFAULT ''::text NOT NULL,
    active boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhooks_events_check CHECK (((cardinality(events) > 0) AND (events <@ ARRAY['pre_turn'::text, 'post_turn'::text, 'archive'::text]))),
    CONSTRAINT webhooks_url_check CHECK (((url ~ '^https?://'::text) AND (length(url) <= 2000)))
);

ALTER TABLE ONLY memworker.webhooks FORCE ROW LEVEL SECURITY;

--
-- Name: agent_profiles agent_profiles_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.agent_profiles
    ADD CONSTRAINT agent_profiles_pkey PRIMARY KEY (tenant_id, agent_id, version);

--
-- Name: agents agents_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.agents
    ADD CONSTRAINT agents_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

--
-- Name: api_keys api_keys_prefix_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.api_keys
    ADD CONSTRAINT api_keys_prefix_key UNIQUE (prefix);

--
-- Name: consolidation_runs consolidation_runs_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.consolidation_runs
    ADD CONSTRAINT consolidation_runs_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: consolidation_runs consolidation_runs_tenant_id_agent_id_run_key_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.consolidation_runs
    ADD CONSTRAINT consolidation_runs_tenant_id_agent_id_run_key_key UNIQUE (tenant_id, agent_id, run_key);

--
-- Name: context_calls context_calls_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.context_calls
    ADD CONSTRAINT context_calls_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: episodes episodes_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.episodes
    ADD CONSTRAINT episodes_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: episodes episodes_subject_check; Type: CHECK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE memworker.episodes
    ADD CONSTRAINT episodes_subject_check CHECK ((subject ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text)) NOT VALID;

--
-- Name: episodes episodes_tenant_id_agent_id_idempotency_key_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.episodes
    ADD CONSTRAINT episodes_tenant_id_agent_id_idempotency_key_key UNIQUE (tenant_id, agent_id, idempotency_key);

--
-- Name: llm_spend llm_spend_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.llm_spend
    ADD CONSTRAINT llm_spend_pkey PRIMARY KEY (tenant_id, day);

--
-- Name: memories memories_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memories
    ADD CONSTRAINT memories_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: memories memories_subject_check; Type: CHECK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memories
    ADD CONSTRAINT memories_subject_check CHECK ((subject ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text)) NOT VALID;

--
-- Name: memories memories_tenant_id_source_key_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memories
    ADD CONSTRAINT memories_tenant_id_source_key_key UNIQUE (tenant_id, source_key);

--
-- Name: memory_aliases memory_aliases_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_aliases
    ADD CONSTRAINT memory_aliases_pkey PRIMARY KEY (tenant_id, alias_id);

--
-- Name: memory_connections memory_connections_edge_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_connections
    ADD CONSTRAINT memory_connections_edge_key UNIQUE (tenant_id, from_id, to_id, relationship);

--
-- Name: memory_connections memory_connections_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_connections
    ADD CONSTRAINT memory_connections_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: memory_events memory_events_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_events
    ADD CONSTRAINT memory_events_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: memory_reviews memory_reviews_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_reviews
    ADD CONSTRAINT memory_reviews_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: memory_reviews memory_reviews_tenant_id_memory_id_other_id_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_reviews
    ADD CONSTRAINT memory_reviews_tenant_id_memory_id_other_id_key UNIQUE (tenant_id, memory_id, other_id);

--
-- Name: memory_terms memory_terms_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_terms
    ADD CONSTRAINT memory_terms_pkey PRIMARY KEY (tenant_id, agent_id, term, memory_id) INCLUDE (impact, tf);

--
-- Name: pool_proposals pool_proposals_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.pool_proposals
    ADD CONSTRAINT pool_proposals_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: pool_proposals pool_proposals_tenant_id_pool_content_hash_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.pool_proposals
    ADD CONSTRAINT pool_proposals_tenant_id_pool_content_hash_key UNIQUE (tenant_id, pool, content_hash);

--
-- Name: retention_runs retention_runs_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.retention_runs
    ADD CONSTRAINT retention_runs_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: retention_runs retention_runs_tenant_id_agent_id_run_key_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.retention_runs
    ADD CONSTRAINT retention_runs_tenant_id_agent_id_run_key_key UNIQUE (tenant_id, agent_id, run_key);

--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (filename);

--
-- Name: session_archives session_archives_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.session_archives
    ADD CONSTRAINT session_archives_pkey PRIMARY KEY (tenant_id, agent_id, session_id, version);

--
-- Name: session_items session_items_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.session_items
    ADD CONSTRAINT session_items_pkey PRIMARY KEY (tenant_id, agent_id, session_id, "position");

--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (tenant_id, agent_id, id);

--
-- Name: sessions sessions_subject_check; Type: CHECK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE memworker.sessions
    ADD CONSTRAINT sessions_subject_check CHECK ((subject ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'::text)) NOT VALID;

--
-- Name: tenants tenants_name_key; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.tenants
    ADD CONSTRAINT tenants_name_key UNIQUE (name);

--
-- Name: tenants tenants_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: webhooks webhooks_pkey; Type: CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.webhooks
    ADD CONSTRAINT webhooks_pkey PRIMARY KEY (tenant_id, id);

--
-- Name: agents_retention_at; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX agents_retention_at ON memworker.agents USING btree (retention_at NULLS FIRST);

--
-- Name: api_keys_tenant_id_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX api_keys_tenant_id_idx ON memworker.api_keys USING btree (tenant_id);

--
-- Name: consolidation_runs_agent; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX consolidation_runs_agent ON memworker.consolidation_runs USING btree (tenant_id, agent_id, created_at DESC);

--
-- Name: context_calls_session; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX context_calls_session ON memworker.context_calls USING btree (tenant_id, agent_id, session_id, created_at);

--
-- Name: episodes_open; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX episodes_open ON memworker.episodes USING btree (status, lease_until) WHERE (status = ANY (ARRAY['queued'::text, 'processing'::text, 'failed'::text]));

--
-- Name: episodes_queued; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX episodes_queued ON memworker.episodes USING btree (tenant_id, created_at) WHERE (status = 'queued'::text);

--
-- Name: episodes_subject; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX episodes_subject ON memworker.episodes USING btree (tenant_id, agent_id, subject, created_at) WHERE (subject IS NOT NULL);

--
-- Name: episodes_tenant_id_agent_id_created_at_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX episodes_tenant_id_agent_id_created_at_idx ON memworker.episodes USING btree (tenant_id, agent_id, created_at);

--
-- Name: memories_agent; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_agent ON memworker.memories USING btree (tenant_id, agent_id, created_at);

--
-- Name: memories_ann; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_ann ON memworker.memories USING hnsw (embedding public.vector_cosine_ops) WITH (m='32', ef_construction='128') WHERE (ann AND (valid_to IS NULL));

--
-- Name: memories_ann_pending; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_ann_pending ON memworker.memories USING btree (tenant_id, agent_id) WHERE (ann_pending AND (valid_to IS NULL));

--
-- Name: memories_carried_by; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_carried_by ON memworker.memories USING btree (tenant_id, carried_by) WHERE (carried_by IS NOT NULL);

--
-- Name: memories_expiry; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_expiry ON memworker.memories USING btree (tenant_id, agent_id, expires_at) WHERE (expires_at IS NOT NULL);

--
-- Name: memories_hash; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_hash ON memworker.memories USING btree (tenant_id, agent_id, content_hash);

--
-- Name: memories_session; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_session ON memworker.memories USING btree (tenant_id, agent_id, session_id);

--
-- Name: memories_subject; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_subject ON memworker.memories USING btree (tenant_id, agent_id, subject, created_at) WHERE (subject IS NOT NULL);

--
-- Name: memories_superseded_by; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_superseded_by ON memworker.memories USING btree (superseded_by) WHERE (superseded_by IS NOT NULL);

--
-- Name: memories_unconsolidated; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memories_unconsolidated ON memworker.memories USING btree (tenant_id, agent_id, created_at) WHERE (consolidated_at IS NULL);

--
-- Name: memory_aliases_survivor; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_aliases_survivor ON memworker.memory_aliases USING btree (memory_id);

--
-- Name: memory_connections_insight_id_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_connections_insight_id_idx ON memworker.memory_connections USING btree (insight_id);

--
-- Name: memory_connections_tenant_id_agent_id_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_connections_tenant_id_agent_id_idx ON memworker.memory_connections USING btree (tenant_id, agent_id);

--
-- Name: memory_connections_to_id_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_connections_to_id_idx ON memworker.memory_connections USING btree (to_id);

--
-- Name: memory_events_tenant_id_agent_id_memory_id_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_events_tenant_id_agent_id_memory_id_idx ON memworker.memory_events USING btree (tenant_id, agent_id, memory_id);

--
-- Name: memory_reviews_open; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_reviews_open ON memworker.memory_reviews USING btree (tenant_id, agent_id, status, created_at);

--
-- Name: memory_reviews_other; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_reviews_other ON memworker.memory_reviews USING btree (other_id);

--
-- Name: memory_terms_impact; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_terms_impact ON memworker.memory_terms USING btree (tenant_id, agent_id, term, impact DESC, memory_id);

--
-- Name: memory_terms_memory_id_idx; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX memory_terms_memory_id_idx ON memworker.memory_terms USING btree (memory_id);

--
-- Name: pool_proposals_agent; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX pool_proposals_agent ON memworker.pool_proposals USING btree (tenant_id, agent_id);

--
-- Name: pool_proposals_listing; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX pool_proposals_listing ON memworker.pool_proposals USING btree (tenant_id, pool, status, created_at);

--
-- Name: pool_proposals_sources; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX pool_proposals_sources ON memworker.pool_proposals USING gin (sources);

--
-- Name: retention_runs_recent; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX retention_runs_recent ON memworker.retention_runs USING btree (tenant_id, agent_id, started_at DESC);

--
-- Name: session_archives_created; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX session_archives_created ON memworker.session_archives USING btree (created_at);

--
-- Name: session_archives_episodes; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX session_archives_episodes ON memworker.session_archives USING gin (episode_ids);

--
-- Name: sessions_recent; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX sessions_recent ON memworker.sessions USING btree (tenant_id, agent_id, updated_at DESC);

--
-- Name: webhook_deliveries_done; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX webhook_deliveries_done ON memworker.webhook_deliveries USING btree (created_at) WHERE (status = ANY (ARRAY['delivered'::text, 'failed'::text]));

--
-- Name: webhook_deliveries_due; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX webhook_deliveries_due ON memworker.webhook_deliveries USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['pending'::text, 'sending'::text]));

--
-- Name: webhook_deliveries_hook; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX webhook_deliveries_hook ON memworker.webhook_deliveries USING btree (tenant_id, webhook_id, created_at DESC);

--
-- Name: webhook_deliveries_session; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX webhook_deliveries_session ON memworker.webhook_deliveries USING btree (tenant_id, agent_id, session_id);

--
-- Name: webhooks_tenant; Type: INDEX; Schema: memworker; Owner: -
--

CREATE INDEX webhooks_tenant ON memworker.webhooks USING btree (tenant_id);

--
-- Name: consolidation_runs count_llm_spend; Type: TRIGGER; Schema: memworker; Owner: -
--

CREATE TRIGGER count_llm_spend AFTER INSERT OR UPDATE OF tokens_in, tokens_out ON memworker.consolidation_runs FOR EACH ROW EXECUTE FUNCTION memworker.count_llm_spend();

--
-- Name: episodes count_llm_spend; Type: TRIGGER; Schema: memworker; Owner: -
--

CREATE TRIGGER count_llm_spend AFTER INSERT OR UPDATE OF tokens_in, tokens_out ON memworker.episodes FOR EACH ROW EXECUTE FUNCTION memworker.count_llm_spend();

--
-- Name: memories memories_ann; Type: TRIGGER; Schema: memworker; Owner: -
--

CREATE TRIGGER memories_ann BEFORE INSERT ON memworker.memories FOR EACH ROW WHEN ((NOT new.ann)) EXECUTE FUNCTION memworker.memories_ann();

--
-- Name: memory_terms memory_terms_impact; Type: TRIGGER; Schema: memworker; Owner: -
--

CREATE TRIGGER memory_terms_impact BEFORE INSERT ON memworker.memory_terms FOR EACH ROW WHEN ((new.impact IS NULL)) EXECUTE FUNCTION memworker.memory_terms_impact();

--
-- Name: agent_profiles agent_profiles_run_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.agent_profiles
    ADD CONSTRAINT agent_profiles_run_id_fkey FOREIGN KEY (tenant_id, run_id) REFERENCES memworker.consolidation_runs(tenant_id, id) ON DELETE SET NULL (run_id);

--
-- Name: agent_profiles agent_profiles_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.agent_profiles
    ADD CONSTRAINT agent_profiles_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: agents agents_tenant_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.agents
    ADD CONSTRAINT agents_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES memworker.tenants(id) ON DELETE CASCADE;

--
-- Name: api_keys api_keys_tenant_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.api_keys
    ADD CONSTRAINT api_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES memworker.tenants(id) ON DELETE CASCADE;

--
-- Name: consolidation_runs consolidation_runs_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.consolidation_runs
    ADD CONSTRAINT consolidation_runs_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: context_calls context_calls_tenant_id_agent_id_session_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.context_calls
    ADD CONSTRAINT context_calls_tenant_id_agent_id_session_id_fkey FOREIGN KEY (tenant_id, agent_id, session_id) REFERENCES memworker.sessions(tenant_id, agent_id, id) ON DELETE CASCADE;

--
-- Name: episodes episodes_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.episodes
    ADD CONSTRAINT episodes_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: llm_spend llm_spend_tenant_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.llm_spend
    ADD CONSTRAINT llm_spend_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES memworker.tenants(id) ON DELETE CASCADE;

--
-- Name: memories memories_superseded_by_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memories
    ADD CONSTRAINT memories_superseded_by_fkey FOREIGN KEY (tenant_id, superseded_by) REFERENCES memworker.memories(tenant_id, id) ON DELETE SET NULL (superseded_by);

--
-- Name: memories memories_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memories
    ADD CONSTRAINT memories_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: memory_aliases memory_aliases_memory_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_aliases
    ADD CONSTRAINT memory_aliases_memory_id_fkey FOREIGN KEY (tenant_id, memory_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE CASCADE;

--
-- Name: memory_connections memory_connections_from_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_connections
    ADD CONSTRAINT memory_connections_from_id_fkey FOREIGN KEY (tenant_id, from_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE CASCADE;

--
-- Name: memory_connections memory_connections_insight_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_connections
    ADD CONSTRAINT memory_connections_insight_id_fkey FOREIGN KEY (tenant_id, insight_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE SET NULL (insight_id);

--
-- Name: memory_connections memory_connections_to_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_connections
    ADD CONSTRAINT memory_connections_to_id_fkey FOREIGN KEY (tenant_id, to_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE CASCADE;

--
-- Name: memory_reviews memory_reviews_memory_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_reviews
    ADD CONSTRAINT memory_reviews_memory_id_fkey FOREIGN KEY (tenant_id, memory_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE CASCADE;

--
-- Name: memory_reviews memory_reviews_other_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_reviews
    ADD CONSTRAINT memory_reviews_other_id_fkey FOREIGN KEY (tenant_id, other_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE CASCADE;

--
-- Name: memory_terms memory_terms_memory_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.memory_terms
    ADD CONSTRAINT memory_terms_memory_id_fkey FOREIGN KEY (tenant_id, memory_id) REFERENCES memworker.memories(tenant_id, id) ON DELETE CASCADE;

--
-- Name: pool_proposals pool_proposals_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.pool_proposals
    ADD CONSTRAINT pool_proposals_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: pool_proposals pool_proposals_tenant_id_pool_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.pool_proposals
    ADD CONSTRAINT pool_proposals_tenant_id_pool_fkey FOREIGN KEY (tenant_id, pool) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: retention_runs retention_runs_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.retention_runs
    ADD CONSTRAINT retention_runs_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: session_archives session_archives_tenant_id_agent_id_session_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.session_archives
    ADD CONSTRAINT session_archives_tenant_id_agent_id_session_id_fkey FOREIGN KEY (tenant_id, agent_id, session_id) REFERENCES memworker.sessions(tenant_id, agent_id, id) ON DELETE CASCADE;

--
-- Name: session_items session_items_tenant_id_agent_id_session_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.session_items
    ADD CONSTRAINT session_items_tenant_id_agent_id_session_id_fkey FOREIGN KEY (tenant_id, agent_id, session_id) REFERENCES memworker.sessions(tenant_id, agent_id, id) ON DELETE CASCADE;

--
-- Name: sessions sessions_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.sessions
    ADD CONSTRAINT sessions_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES memworker.agents(tenant_id, id) ON DELETE CASCADE;

--
-- Name: webhook_deliveries webhook_deliveries_webhook_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_webhook_id_fkey FOREIGN KEY (tenant_id, webhook_id) REFERENCES memworker.webhooks(tenant_id, id) ON DELETE CASCADE;

--
-- Name: webhooks webhooks_tenant_id_fkey; Type: FK CONSTRAINT; Schema: memworker; Owner: -
--

ALTER TABLE ONLY memworker.webhooks
    ADD CONSTRAINT webhooks_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES memworker.tenants(id) ON DELETE CASCADE;

--
-- Name: agent_profiles; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.agent_profiles ENABLE ROW LEVEL SECURITY;

--
-- Name: agents; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.agents ENABLE ROW LEVEL SECURITY;

--
-- Name: api_keys; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.api_keys ENABLE ROW LEVEL SECURITY;

--
-- Name: consolidation_runs; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.consolidation_runs ENABLE ROW LEVEL SECURITY;

--
-- Name: context_calls; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.context_calls ENABLE ROW LEVEL SECURITY;

--
-- Name: episodes; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.episodes ENABLE ROW LEVEL SECURITY;

--
-- Name: llm_spend; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.llm_spend ENABLE ROW LEVEL SECURITY;

--
-- Name: memories; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memories ENABLE ROW LEVEL SECURITY;

--
-- Name: memory_aliases; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_aliases ENABLE ROW LEVEL SECURITY;

--
-- Name: memory_connections; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_connections ENABLE ROW LEVEL SECURITY;

--
-- Name: memory_events; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_events ENABLE ROW LEVEL SECURITY;

--
-- Name: memory_reviews; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_reviews ENABLE ROW LEVEL SECURITY;

--
-- Name: memory_terms; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.memory_terms ENABLE ROW LEVEL SECURITY;

--
-- Name: pool_proposals; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.pool_proposals ENABLE ROW LEVEL SECURITY;

--
-- Name: retention_runs; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.retention_runs ENABLE ROW LEVEL SECURITY;

--
-- Name: session_archives; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.session_archives ENABLE ROW LEVEL SECURITY;

--
-- Name: session_items; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.session_items ENABLE ROW LEVEL SECURITY;

--
-- Name: sessions; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.sessions ENABLE ROW LEVEL SECURITY;

--
-- Name: agent_profiles tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.agent_profiles USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: agents tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.agents USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: api_keys tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.api_keys USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: consolidation_runs tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.consolidation_runs USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: context_calls tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.context_calls USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: episodes tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.episodes USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: llm_spend tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.llm_spend USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: memories tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.memories USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: memory_aliases tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.memory_aliases USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: memory_connections tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.memory_connections USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: memory_events tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.memory_events USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: memory_reviews tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.memory_reviews USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: memory_terms tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.memory_terms USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: pool_proposals tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.pool_proposals USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: retention_runs tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.retention_runs USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: session_archives tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.session_archives USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: session_items tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.session_items USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: sessions tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.sessions USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: tenants tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.tenants USING ((id = memworker.current_tenant()));

--
-- Name: webhook_deliveries tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.webhook_deliveries USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: webhooks tenant_isolation; Type: POLICY; Schema: memworker; Owner: -
--

CREATE POLICY tenant_isolation ON memworker.webhooks USING ((tenant_id = memworker.current_tenant())) WITH CHECK ((tenant_id = memworker.current_tenant()));

--
-- Name: tenants; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.tenants ENABLE ROW LEVEL SECURITY;

--
-- Name: webhook_deliveries; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.webhook_deliveries ENABLE ROW LEVEL SECURITY;

--
-- Name: webhooks; Type: ROW SECURITY; Schema: memworker; Owner: -
--

ALTER TABLE memworker.webhooks ENABLE ROW LEVEL SECURITY;

--
-- Name: SCHEMA memworker; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA memworker TO memworker_app;

--
-- Name: FUNCTION authenticate(p_prefix text); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.authenticate(p_prefix text) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.authenticate(p_prefix text) TO memworker_app;

--
-- Name: FUNCTION claim_due_agents(p_window timestamp with time zone, p_defaults jsonb, p_lease_s integer, p_limit integer); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.claim_due_agents(p_window timestamp with time zone, p_defaults jsonb, p_lease_s integer, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.claim_due_agents(p_window timestamp with time zone, p_defaults jsonb, p_lease_s integer, p_limit integer) TO memworker_app;

--
-- Name: FUNCTION consolidation_flagged_count(p_threshold integer); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.consolidation_flagged_count(p_threshold integer) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.consolidation_flagged_count(p_threshold integer) TO memworker_app;

--
-- Name: FUNCTION due_webhook_deliveries(p_before timestamp with time zone, p_limit integer); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.due_webhook_deliveries(p_before timestamp with time zone, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.due_webhook_deliveries(p_before timestamp with time zone, p_limit integer) TO memworker_app;

--
-- Name: FUNCTION memory_estimates(); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.memory_estimates() FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.memory_estimates() TO memworker_app;

--
-- Name: FUNCTION prune_webhook_deliveries(p_before timestamp with time zone); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.prune_webhook_deliveries(p_before timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.prune_webhook_deliveries(p_before timestamp with time zone) TO memworker_app;

--
-- Name: FUNCTION retention_due(p_before timestamp with time zone, p_limit integer); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.retention_due(p_before timestamp with time zone, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.retention_due(p_before timestamp with time zone, p_limit integer) TO memworker_app;

--
-- Name: FUNCTION rumination_due(p_from timestamp with time zone, p_to timestamp with time zone, p_defaults jsonb, p_limit integer); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.rumination_due(p_from timestamp with time zone, p_to timestamp with time zone, p_defaults jsonb, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.rumination_due(p_from timestamp with time zone, p_to timestamp with time zone, p_defaults jsonb, p_limit integer) TO memworker_app;

--
-- Name: FUNCTION stale_episodes(p_queued_before timestamp with time zone, p_limit integer); Type: ACL; Schema: memworker; Owner: -
--

REVOKE ALL ON FUNCTION memworker.stale_episodes(p_queued_before timestamp with time zone, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION memworker.stale_episodes(p_queued_before timestamp with time zone, p_limit integer) TO memworker_app;

--
-- Name: TABLE agent_profiles; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.agent_profiles TO memworker_app;

--
-- Name: TABLE agents; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.agents TO memworker_app;

--
-- Name: TABLE api_keys; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.api_keys TO memworker_app;

--
-- Name: TABLE consolidation_runs; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.consolidation_runs TO memworker_app;

--
-- Name: TABLE context_calls; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.context_calls TO memworker_app;

--
-- Name: TABLE episodes; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.episodes TO memworker_app;

--
-- Name: TABLE llm_spend; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE memworker.llm_spend TO memworker_app;

--
-- Name: TABLE memories; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.memories TO memworker_app;

--
-- Name: TABLE memory_aliases; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.memory_aliases TO memworker_app;

--
-- Name: TABLE memory_connections; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.memory_connections TO memworker_app;

--
-- Name: SEQUENCE memory_connections_id_seq; Type: ACL; Schema: memworker; Owner: -
--

GRANT USAGE ON SEQUENCE memworker.memory_connections_id_seq TO memworker_app;

--
-- Name: TABLE memory_events; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.memory_events TO memworker_app;

--
-- Name: SEQUENCE memory_events_id_seq; Type: ACL; Schema: memworker; Owner: -
--

GRANT USAGE ON SEQUENCE memworker.memory_events_id_seq TO memworker_app;

--
-- Name: TABLE memory_reviews; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.memory_reviews TO memworker_app;

--
-- Name: TABLE memory_terms; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.memory_terms TO memworker_app;

--
-- Name: TABLE pool_proposals; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.pool_proposals TO memworker_app;

--
-- Name: TABLE retention_runs; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.retention_runs TO memworker_app;

--
-- Name: TABLE session_archives; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.session_archives TO memworker_app;

--
-- Name: TABLE session_items; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.session_items TO memworker_app;

--
-- Name: TABLE sessions; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.sessions TO memworker_app;

--
-- Name: TABLE tenants; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT ON TABLE memworker.tenants TO memworker_app;

--
-- Name: COLUMN tenants.policy; Type: ACL; Schema: memworker; Owner: -
--

GRANT UPDATE(policy) ON TABLE memworker.tenants TO memworker_app;

--
-- Name: TABLE webhook_deliveries; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.webhook_deliveries TO memworker_app;

--
-- Name: TABLE webhooks; Type: ACL; Schema: memworker; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE memworker.webhooks TO memworker_app;

--
-- PostgreSQL database dump complete
--
