"""Sleep: one consolidation pass per agent (its four steps, the topic conclusions, the
profile), and the sweep that finds agents due for one.

A pass is one transaction under the agent's advisory lock: everything it writes (metadata,
connections, the insight, conclusions, re-rated salience, the consolidated marks, the profile
version, the run report, the agent's gates) commits together or not at all. A pass that fails
leaves memory exactly as it was; its failure is recorded afterwards in a transaction of its
own, and the agent backs off. The pure steps live in memworker.sleep.synthesis and
memworker.sleep.profile; docs/consolidation.md explains the choices."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypedDict, cast
from uuid import UUID

import numpy as np
from psycopg.types.json import Jsonb

from memworker import errors, metrics
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.memories import writer
from memworker.models import llm as llm_mod
from memworker.models.embeddings import Embedder
from memworker.settings import Settings
from memworker.sleep import current, profile, subjects, summaries, synthesis
from memworker.sleep.synthesis import Connection, Item
from memworker.storage import db, sleep_db
from memworker.storage.db import Conn, Pool
from memworker.tenancy import service as tenancy

logger = logging.getLogger(__name__)

FLAG_AFTER = 3  # failures in a row before an agent is flagged for a human
MAX_BACKOFF_S = 300.0  # a failed pass is retried after min(interval, this)


class PassStatus(memories.Word):
    """Where a consolidation run is (consolidation_runs.status: sql/schema.sql checks these
    values): queued, running, done, skipped (with the reason) or failed."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


BUSY = "busy"  # a report's status, never a run's: the agent's lock was held, the run is queued again


class ReportJson(TypedDict):
    """A pass's report as JSON (Report's fields)."""

    run_id: str
    agent_id: str
    trigger: str
    status: str
    items_reviewed: int
    connections_made: int
    insights_written: int
    conclusions_written: int
    salience_rerated: int
    skipped_reason: str | None
    error: str | None
    llm_calls: int
    tokens_in: int
    tokens_out: int
    duration_ms: int
    steps: dict[str, str]
    rejected_connections: dict[str, int]
    insight_id: str | None
    conclusion_ids: list[str]
    profile_version: int | None
    profile_changes: dict[str, Any]
    flagged: bool
    summaries_written: int
    turns_distilled: int
    items_absorbed: int
    summary_ids: list[str]


@dataclass
class Report:
    """What one pass did; stored in consolidation_runs (columns plus the report JSON)."""

    run_id: str
    agent_id: str
    trigger: str = "manual"
    status: str = PassStatus.RUNNING  # a PassStatus, or BUSY
    items_reviewed: int = 0
    connections_made: int = 0
    insights_written: int = 0
    conclusions_written: int = 0
    salience_rerated: int = 0
    skipped_reason: str | None = None
    error: str | None = None
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    duration_ms: int = 0
    steps: dict[str, str] = field(default_factory=dict)  # step -> llm | rules | off | skipped: why
    rejected_connections: dict[str, int] = field(default_factory=dict)
    insight_id: str | None = None
    conclusion_ids: list[str] = field(default_factory=list)
    profile_version: int | None = None
    profile_changes: dict[str, Any] = field(default_factory=dict)
    flagged: bool = False
    summaries_written: int = 0  # sleep's distillation: summaries of the window's turns
    turns_distilled: int = 0  # turns a summary now carries (retention may let them go)
    items_absorbed: int = 0  # reflected items a summary says in full, merged into it
    summary_ids: list[str] = field(default_factory=list)

    def to_json(self) -> ReportJson:
        return cast(ReportJson, asdict(self))


def enabled(policy: Policy, settings: Settings) -> bool:
    """The policy's switch; unset, consolidation is on with the offline reflector and off when
    a paid LLM is configured (it must then be switched on explicitly)."""
    if policy.consolidation_enabled is not None:
        return policy.consolidation_enabled
    return settings.llm_base_url is None


class SweepDefaults(TypedDict):
    """The policy fields the sweep's SQL reads, as they are when nobody overrides them."""

    consolidation_enabled: bool
    consolidation_interval_minutes: int
    consolidation_sessions_gate: int
    consolidation_quiet_minutes: int
    consolidation_min_items: int


def sweep_defaults(settings: Settings) -> SweepDefaults:
    """The defaults the sweep's SQL falls back to when neither tenant nor agent overrides."""
    d = Policy()
    return SweepDefaults(
        consolidation_enabled=settings.llm_base_url is None,
        consolidation_interval_minutes=d.consolidation_interval_minutes,
        consolidation_sessions_gate=d.consolidation_sessions_gate,
        consolidation_quiet_minutes=d.consolidation_quiet_minutes,
        consolidation_min_items=d.consolidation_min_items,
    )


def backoff_s(policy: Policy) -> float:
    return min(policy.consolidation_interval_minutes * 60.0, MAX_BACKOFF_S)


# --- the sweep ------------------------------------------------------------------------------


@dataclass
class Sweep:
    window: datetime
    deferred: str | None = None  # why nothing was claimed this time
    claimed: list[tuple[UUID, str, UUID, str]] = field(default_factory=list)  # tenant, agent, run, trigger
    flagged_agents: int = 0


def sweep(pool: Pool, settings: Settings, *, window: datetime, ingest_backlog: int) -> Sweep:
    """Claim the agents due for a pass in this window (one queued run each). Defers when the
    ingest queue is longer than settings.consolidation_backlog_max: sleep never starves ingest."""
    result = Sweep(window)
    if ingest_backlog > settings.consolidation_backlog_max:
        result.deferred = f"ingest queue backed up ({ingest_backlog} > {settings.consolidation_backlog_max})"
        return result
    with db.system_tx(pool) as conn:
        result.claimed = sleep_db.claim_due_agents(
            conn,
            window=window,
            defaults=sweep_defaults(settings),
            lease_s=settings.consolidation_lease_s,
            limit=settings.consolidation_sweep_limit,
        )
        result.flagged_agents = sleep_db.flagged_count(conn, threshold=FLAG_AFTER)
    metrics.CONSOLIDATION_FLAGGED_AGENTS.set(result.flagged_agents)
    return result


def request_run(conn: Conn, *, tenant_id: UUID, agent_id: str, trigger: str, run_key: str | None = None) -> UUID:
    """A queued run for an explicit pass (API, CLI); the same run_key returns the same run."""
    key = run_key or f"{trigger}:{uuid.uuid4()}"
    run_id = sleep_db.run_insert(
        conn, tenant_id=tenant_id, agent_id=agent_id, run_key=key, trigger=trigger
    ) or sleep_db.run_by_key(conn, tenant_id=tenant_id, agent_id=agent_id, run_key=key)
    assert run_id is not None
    return run_id


# --- one pass -------------------------------------------------------------------------------


def run_pass(
    pool: Pool,
    embedder: Embedder,
    client: llm_mod.LLM | None,
    settings: Settings,
    *,
    tenant_id: UUID,
    agent_id: str,
    run_id: UUID,
    force: bool = False,
) -> Report:
    """Run the queued run run_id. Returns its report: done, skipped (with the reason), failed
    (memory unchanged, failure counted) or busy (another pass or a retention sweep holds the
    agent; nothing written, try again). A run that already finished returns its stored report.

    Raises Unavailable when Postgres cannot be reached (nothing can be recorded then)."""
    started = time.monotonic()
    with db.tenant_tx(pool, tenant_id) as conn:
        if sleep_db.run_start(conn, tenant_id=tenant_id, agent_id=agent_id, run_id=run_id) is None:
            return _stored_report(conn, tenant_id, agent_id, run_id)
    report = Report(str(run_id), agent_id)
    policy = Policy()
    try:
        with db.tenant_tx(pool, tenant_id) as conn:
            run_row = sleep_db.run_get(conn, tenant_id=tenant_id, agent_id=agent_id, run_id=run_id)
            assert run_row is not None
            report.trigger = run_row.trigger
            if not db.try_agent_lock(conn, tenant_id, agent_id):
                sleep_db.run_requeue(conn, tenant_id=tenant_id, run_id=run_id)
                report.status = BUSY
                metrics.CONSOLIDATION_PASSES.labels(BUSY).inc()
                return report
            policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
            if client is not None and tenancy.llm_budget(conn, tenant_id).paused:
                # the tenant's LLM tokens for the day are spent: this pass runs on the rules
                metrics.LLM_BUDGET_PAUSED.labels(str(tenant_id), "sleep").inc()
                client = None
            _Pass(
                conn,
                embedder,
                client,
                settings,
                policy,
                tenant_id,
                agent_id,
                run_id,
                report,
                force=force,
                started=started,
            ).run()
    except errors.Unavailable:
        raise
    except Exception as exc:  # the pass's edge: the transaction is rolled back; record why
        logger.exception("consolidation pass %s for agent %s failed", run_id, agent_id)
        report.status, report.error = PassStatus.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
        report.duration_ms = int((time.monotonic() - started) * 1000)
        _record_failure(pool, tenant_id, agent_id, run_id, report, policy)
    metrics.CONSOLIDATION_PASSES.labels(report.status).inc()
    metrics.CONSOLIDATION_SECONDS.observe(report.duration_ms / 1000)
    return report


def give_up(pool: Pool, *, tenant_id: UUID, agent_id: str, run_id: UUID, why: str) -> None:
    """Close a run that could not get the agent's lock after its retries."""
    report = Report(str(run_id), agent_id, status=PassStatus.SKIPPED, skipped_reason=why)
    with db.tenant_tx(pool, tenant_id) as conn:
        _finish(conn, tenant_id, run_id, report)


class _Pass:
    """The steps of one pass, inside the caller's transaction."""

    def __init__(
        self,
        conn: Conn,
        embedder: Embedder,
        client: llm_mod.LLM | None,
        settings: Settings,
        policy: Policy,
        tenant_id: UUID,
        agent_id: str,
        run_id: UUID,
        report: Report,
        *,
        force: bool,
        started: float,
    ) -> None:
        self.conn, self.embedder, self.client, self.settings, self.policy = conn, embedder, client, settings, policy
        self.tenant_id, self.agent_id, self.run_id, self.report = tenant_id, agent_id, run_id, report
        self.force, self.started = force, started
        self.ids: dict[str, Any] = {"tenant_id": tenant_id, "agent_id": agent_id}
        self.subject: str | None = None  # whose memories the pass is consolidating (None: general)
        self.general: list[UUID] | None = None  # the general memories consolidated and derived, if due

    def run(self) -> None:
        conn, r, p = self.conn, self.report, self.policy
        sleep_db.runs_supersede(conn, run_id=self.run_id, **self.ids)
        agent = sleep_db.agent_gates(conn, **self.ids)
        assert agent is not None
        if not (self.force or enabled(p, self.settings)):
            return self._skip("consolidation is disabled for this agent")
        window = [_item(row) for row in sleep_db.pass_window(conn, limit=p.consolidation_window_size, **self.ids)]
        # every subject that is due and the general memories, each on its own: what a pass
        # derives never mixes two people (memworker.sleep.subjects)
        groups = subjects.by_subject(window)
        due = [(subject, items) for subject, items in groups if len(items) >= p.consolidation_min_items]
        if not due:
            most = max((len(items) for _, items in groups), default=0)
            r.items_reviewed = most
            return self._skip(f"too few unconsolidated memories ({most} < {p.consolidation_min_items})")
        steps: list[tuple[str | None, dict[str, str]]] = []
        distil: list[Item] = []
        for subject, items in due:
            self.subject, r.steps = subject, {}
            r.items_reviewed += len(items)
            distil += self._consolidate(items, agent.last_consolidated_at)
            steps.append((subject, r.steps))
        self.subject, r.steps = None, subjects.merged_steps(steps)
        self._distil(distil)  # summaries are grouped by subject and episode there
        sleep_db.mark_consolidated(conn, ids=r.summary_ids, **self.ids)
        if self.general is not None:  # what this agent and another learnt alike goes to its pools (policy)
            # a subject's memory is never pooled (memworker.fleet.matches): the summaries may all go
            shared = pools.propose(conn, ids=self.general + [UUID(i) for i in r.summary_ids], policy=p, **self.ids)
            how = {"auto": "shared", "review": "proposed for review"}.get(p.pools_propose) if p.pools_write else None
            r.steps["pools"] = f"{shared} {how}" if how else "off"
        waiting = sleep_db.waiting(conn, limit=p.consolidation_min_items, **self.ids)
        backlog = waiting >= p.consolidation_min_items
        r.steps["backlog"] = "more memories wait: the next sweep takes the agent again" if backlog else "none"
        r.status = PassStatus.DONE
        self._close(consolidated=True, requested=backlog)
        metrics.CONSOLIDATION_ITEMS.labels("reviewed").inc(r.items_reviewed)
        metrics.CONSOLIDATION_ITEMS.labels("written").inc(r.insights_written + r.conclusions_written)

    def _consolidate(self, window: list[Item], last_pass_at: datetime | None) -> list[Item]:
        """One subject's memories (self.subject; None: the general ones): metadata, connections,
        the insight, conclusions, re-rating, the consolidated marks, pools and the profile for
        the general memories. Returns the memories sleep's distillation may summarise."""
        conn, r = self.conn, self.report
        window = self._metadata(window)
        standing = current.standing(conn, tenant_id=self.tenant_id, ids=[i.id for i in window])
        evidence = [i for i in window if i.id not in standing.outdated]  # the newer of a conflict wins
        r.steps["current"] = f"{len(standing.outdated)} outdated by a newer memory under review: not evidence"
        conns = self._connections(evidence)
        insight = self._insight(evidence, conns)
        conclusions = self._conclusions(evidence)
        if insight and insight[0] in {c[1] for c in conclusions}:  # said once, as the conclusion
            r.steps["insight"] = "skipped: it says what a conclusion of this pass says"
            insight = None
        texts = ([insight[0]] if insight else []) + [c[1] for c in conclusions]
        vectors: Any = self.embedder.embed(texts) if texts else []
        insight_id = None
        if insight:
            insight_id = self._write(
                insight[0],
                vectors[0],
                memories.Kind.INSIGHT,
                "insight",
                insight[1],
                insight[2],
                insight[3],
                summaries.sources(window, insight[3]["evidence"], insight[0] if insight[2] == "rules" else None),
            )
            r.insight_id = r.insight_id or str(insight_id)
            r.insights_written += 1
        made = sleep_db.insert_connections(
            conn,
            insight_id=insight_id,
            from_ids=[c.from_id for c in conns],
            to_ids=[c.to_id for c in conns],
            relationships=[c.relationship for c in conns],
            **self.ids,
        )
        r.connections_made += len(made)
        made_conns = [Connection(str(from_id), str(to_id), rel) for from_id, to_id, rel in made]
        written = len(r.conclusion_ids)
        self._write_conclusions(window, conclusions, vectors[len(texts) - len(conclusions) :])
        self._rerate(window, made_conns, last_pass_at)
        new_ids = ([str(insight_id)] if insight_id else []) + r.conclusion_ids[written:]
        sleep_db.mark_consolidated(conn, ids=[i.id for i in window] + new_ids, **self.ids)
        if self.subject is None:
            self.general = [UUID(i.id) for i in window] + [UUID(i) for i in new_ids]
            self._profile(evidence)  # the agent's profile is its general knowledge only
        else:
            r.steps["profile"] = f"not the agent's: subject {self.subject} (GET .../profile?subject=)"
        return [i for i in window if i.id not in standing.in_conflict]

    # --- steps ------------------------------------------------------------------------------

    def _metadata(self, window: list[Item]) -> list[Item]:
        if not self.policy.consolidation_extract_metadata:
            self.report.steps["metadata"] = "off"
            return window
        # Rules fill whatever the LLM did not give: they are free and deterministic, so a
        # failed LLM step costs the pass nothing but the better metadata.
        found: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self.report.steps["metadata"] = "rules"
        if self.client is not None:
            answer = self._ask("metadata", *synthesis.metadata_prompt(window))
            if answer is None:
                self.report.steps["metadata"] = f"rules (llm step {self.report.steps['metadata']})"
            else:
                try:
                    found = synthesis.parse_metadata(answer, window)
                    self.report.steps["metadata"] = "llm"
                except ValueError as exc:
                    self.report.steps["metadata"] = f"rules (llm step skipped: malformed answer: {exc})"
        out, changed = [], []
        for item in window:
            ents, tops = found.get(item.id) or synthesis.rule_metadata(item)
            if (ents, tops) != (item.entities, item.topics):
                changed.append({"id": item.id, "entities": list(ents), "topics": list(tops)})
                item = _replace(item, entities=ents, topics=tops)
            out.append(item)
        if changed:
            sleep_db.set_metadata(self.conn, rows=Jsonb(changed), **self.ids)
        return out

    def _connections(self, window: list[Item]) -> list[Connection]:
        p = self.policy
        if self.client is None:
            self.report.steps["connections"] = "rules"
            return synthesis.rule_connections(
                window, max_connections=p.consolidation_max_connections, min_similarity=p.consolidation_similarity
            )
        answer = self._ask("connections", *synthesis.connections_prompt(window, p.consolidation_max_connections))
        if answer is None:
            return []
        try:
            raw = llm_mod.parse_json(answer, want=list)
        except ValueError as exc:
            self.report.steps["connections"] = f"skipped: malformed answer: {exc}"
            return []
        conns, rejected = synthesis.valid_connections(raw, window, p.consolidation_max_connections)
        self.report.steps["connections"] = "llm"
        self.report.rejected_connections = dict(rejected)
        return conns

    def _insight(self, window: list[Item], conns: list[Connection]) -> tuple[str, float, str, dict[str, Any]] | None:
        if self.client is None:
            pattern = synthesis.shared_pattern(window, conns)
            if pattern is None:
                self.report.steps["insight"] = "skipped: no statement recurs (a shared name or topic is not one)"
                return None
            self.report.steps["insight"] = "rules"
            return (
                synthesis.template_insight(pattern, window),
                0.6,
                "rules",
                {"evidence": list(pattern.ids), "pattern": pattern.label},
            )
        answer = self._ask("insight", *synthesis.insight_prompt(window, conns))
        if answer is None:
            return None
        try:
            text = synthesis.parse_insight(answer)
        except ValueError as exc:
            self.report.steps["insight"] = f"skipped: {exc}"
            return None
        self.report.steps["insight"] = "llm"
        linked = sorted({c.from_id for c in conns} | {c.to_id for c in conns})
        return text, 0.7, "llm", {"evidence": linked or [i.id for i in window]}

    def _conclusions(self, window: list[Item]) -> list[tuple[synthesis.Group, str, float, str]]:
        groups = synthesis.topic_groups(window, min_items=self.policy.consolidation_conclusion_min_items)
        out = []
        notes = []
        for group in groups:
            if self.client is None:
                found = synthesis.extractive_conclusion(group, window)
                if found is None:
                    notes.append(f"{group.label}: none (no statement its memories make alike)")
                    continue
                text, confidence, ids = found
                out.append((replace(group, ids=ids), text, confidence, "rules"))
                continue
            answer = self._ask(f"conclusion:{group.label}", *synthesis.conclusion_prompt(group, window))
            if answer is None:
                continue
            try:
                text, confidence = synthesis.parse_conclusion(answer)
            except ValueError as exc:
                notes.append(f"{group.label}: skipped: malformed answer: {exc}")
                continue
            out.append((group, text, confidence, "llm"))
        self.report.steps["conclusions"] = (
            "; ".join([("llm" if self.client else "rules")] * bool(out) + notes)
            if groups
            else "none: no topic is shared by enough episodic memories"
        )
        return out

    def _distil(self, window: list[Item]) -> None:
        ask = None if self.client is None else (lambda system, user: self._ask("distil", system, user))
        done = summaries.distil_window(self.conn, self.embedder, ask, run_id=self.run_id, ids=self.ids, window=window)
        r = self.report
        r.steps["distil"] = done.how
        r.summary_ids, r.summaries_written = done.summary_ids, len(done.summary_ids)
        r.turns_distilled, r.items_absorbed = done.turns_distilled, done.items_absorbed

    def _profile(self, window: list[Item]) -> None:
        conn, p = self.conn, self.policy
        current = profile.load(conn, **self.ids)
        entry_ids = [e["memory_id"] for s in profile.SECTIONS for e in current["sections"].get(s, [])]
        rows = sleep_db.profile_sources(conn, ids=entry_ids, **self.ids) if entry_ids else []
        vectors = {str(r.id): _array(r.embedding) for r in rows}
        vectors.update({i.id: i.embedding for i in window if i.embedding is not None})
        unit = {k: v / (float((v @ v) ** 0.5) or 1.0) for k, v in vectors.items()}

        def similar(a: str, b: str) -> float:
            return float(unit[a] @ unit[b]) if a in unit and b in unit else 0.0

        now = datetime.now(UTC)
        doc, changes = profile.update(
            current,
            window,
            similar=similar,
            live_ids={str(r.id) for r in rows},
            now=now,
            min_confidence=p.consolidation_profile_min_confidence,
            stale_days=p.consolidation_profile_stale_days,
        )
        self.report.profile_changes = changes
        if current["version"] and profile.same_content(doc, current):
            self.report.steps["profile"] = f"unchanged (version {current['version']})"
            return
        doc["last_pass"] = changes
        self.report.profile_version = profile.save(conn, document=doc, run_id=self.run_id, now=now, **self.ids)
        self.report.steps["profile"] = f"version {self.report.profile_version}"

    # --- helpers ------------------------------------------------------------------------------

    def _ask(self, step: str, system: str, user: str) -> str | None:
        """One LLM call; a timeout or an error answer skips the step (recorded), never the pass."""
        assert self.client is not None
        self.report.llm_calls += 1
        try:
            done = self.client.complete(system, user)
        except (errors.TransientError, errors.PermanentError) as exc:
            self.report.steps[step] = f"skipped: {exc}"
            return None
        self.report.tokens_in += done.tokens_in
        self.report.tokens_out += done.tokens_out
        return done.text

    def _write_conclusions(
        self, window: list[Item], conclusions: list[tuple[synthesis.Group, str, float, str]], vectors: Any
    ) -> None:
        """Each topic group's conclusion as an L2 memory citing its evidence."""
        r = self.report
        for (group, text, confidence, how), vec in zip(conclusions, vectors, strict=True):
            cid = self._write(
                text,
                vec,
                memories.Kind.CONCLUSION,
                f"conclusion:{group.topic}",
                confidence,
                how,
                {"evidence": list(group.ids), "topic": group.label},
                summaries.sources(window, group.ids, text if how == "rules" else None),
            )
            r.conclusion_ids.append(str(cid))
        r.conclusions_written = len(r.conclusion_ids)

    def _rerate(self, window: list[Item], made_conns: list[Connection], since: datetime | None) -> None:
        """Salience moved by what the pass found connected and recalled since the last pass (policy)."""
        if not self.policy.consolidation_rerate:
            self.report.steps["rerate"] = "off"
            return
        bumps = synthesis.rerate(window, made_conns, since)
        old = {i.id: i.salience for i in window}
        rerated = sleep_db.rerate(self.conn, ids=list(bumps), bumps=[bumps[i] - old[i] for i in bumps], **self.ids)
        self.report.salience_rerated += len(rerated)

    def _write(
        self,
        text: str,
        vector: Any,
        kind: str,
        key: str,
        confidence: float,
        how: str,
        meta: dict[str, Any],
        sources: tuple[str, ...] = (),
    ) -> UUID:
        """An insight or conclusion, as a normal memory: the one recall path finds it. Its
        provenance names the run and the messages its evidence came from."""
        draft = memories.Draft(
            text=text,
            kind=memories.Kind(kind),
            tier=memories.Tier.L2,
            salience=synthesis.INSIGHT_SALIENCE,
            confidence=confidence,
            provenance=(f"consolidation:{self.run_id}", *sources),
            flags=memories.flags_for(text),
            trust=memories.Trust.CONSOLIDATION,
            metadata={"run_id": str(self.run_id), "by": how, **meta},
            # durable on purpose: insights and conclusions are never forgotten by decay
            expires_at=None,
            subject=self.subject,
        )
        # one run may consolidate several subjects: each one's insight and conclusions apart
        source_key = f"consolidation:{self.run_id}:{key}" + (f":subject:{self.subject}" if self.subject else "")
        done = writer.write(
            self.conn,
            tenant_id=self.tenant_id,
            owner=self.agent_id,
            entries=[writer.Entry(draft, vector, source_key)],
            reason=f"consolidation:{self.run_id}",
        )[0]
        mid, written = done.id, done.new
        if not written:  # cannot happen inside one run's transaction; fail loudly if it does
            raise errors.StorageError(f"consolidation memory {key} of run {self.run_id} already exists")
        return mid

    def _skip(self, why: str) -> None:
        self.report.status, self.report.skipped_reason = PassStatus.SKIPPED, why
        self._close(consolidated=False, requested=False)

    def _close(self, *, consolidated: bool, requested: bool) -> None:
        self.report.duration_ms = int((time.monotonic() - self.started) * 1000)
        sleep_db.pass_done(self.conn, consolidated=consolidated, requested=requested, **self.ids)
        _finish(self.conn, self.tenant_id, self.run_id, self.report)


def _record_failure(pool: Pool, tenant_id: UUID, agent_id: str, run_id: UUID, report: Report, policy: Policy) -> None:
    with db.tenant_tx(pool, tenant_id) as conn:
        failures = (
            sleep_db.pass_failed(
                conn, tenant_id=tenant_id, agent_id=agent_id, error=report.error, backoff_s=backoff_s(policy)
            )
            or 0
        )
        report.flagged = failures >= FLAG_AFTER
        _finish(conn, tenant_id, run_id, report)
    if failures == FLAG_AFTER:
        metrics.CONSOLIDATION_FLAGGED.inc()
    if report.flagged:
        logger.error(
            "consolidation for agent %s failed %d times in a row; flagged (last error: %s)",
            agent_id,
            failures,
            report.error,
        )


def _finish(conn: Conn, tenant_id: UUID, run_id: UUID, r: Report) -> None:
    sleep_db.run_finish(
        conn,
        tenant_id=tenant_id,
        run_id=run_id,
        status=r.status,
        items_reviewed=r.items_reviewed,
        connections_made=r.connections_made,
        insights_written=r.insights_written,
        conclusions_written=r.conclusions_written,
        salience_rerated=r.salience_rerated,
        skipped_reason=r.skipped_reason,
        error=r.error,
        llm_calls=r.llm_calls,
        tokens_in=r.tokens_in,
        tokens_out=r.tokens_out,
        duration_ms=r.duration_ms,
        report=r.to_json(),
    )


def _stored_report(conn: Conn, tenant_id: UUID, agent_id: str, run_id: UUID) -> Report:
    row = sleep_db.run_get(conn, tenant_id=tenant_id, agent_id=agent_id, run_id=run_id)
    if row is None:
        raise errors.NotFound("consolidation run not found")
    if row.report:
        known = {k: v for k, v in row.report.items() if k in Report.__dataclass_fields__}
        return Report(**known)
    return Report(str(run_id), agent_id, row.trigger, row.status, skipped_reason=row.skipped_reason)


def _item(row: sleep_db.WindowMemory) -> Item:
    return Item(
        id=str(row.id),
        text=row.text,
        kind=row.kind,
        tier=row.tier,
        salience=float(row.salience),
        confidence=float(row.confidence),
        created_at=row.created_at,
        access_count=row.access_count,
        last_access_at=row.last_access_at,
        entities=tuple(row.entities or ()),
        topics=tuple(row.topics or ()),
        flags=tuple(row.flags or ()),
        embedding=_array(row.embedding),
        provenance=tuple(row.provenance or ()),
        metadata=dict(row.metadata or {}),
        subject=row.subject,
        parts=row.parts,
    )


def _array(value: Any) -> Any:
    """A stored embedding as a numpy array (pgvector's loader may hand back a Vector)."""
    if value is None:
        return None
    return value.to_numpy() if hasattr(value, "to_numpy") else np.asarray(value, dtype=np.float32)


def _replace(item: Item, **changes: Any) -> Item:
    return replace(item, **changes)
