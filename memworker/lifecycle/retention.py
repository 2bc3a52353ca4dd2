"""The retention sweep of one agent: purge expired memories,
merge near-duplicates and retire contradicted facts (validate/repair), promote L1 -> L2 by
evidence, forget turns a sleep summary carries, old never-recalled scratch items, long-unused
episodic items and whatever is over the per-agent caps, and decay salience and confidence
slowly. The semantic layer (L1-L3) is never forgotten by a clock; insights, conclusions and
L3 never by decay or cap (docs/lifecycle.md, "Layers").

Every step works in batches of policy.retention_batch rows, each its own short transaction
holding the agent's advisory lock (db.try_agent_lock, shared with consolidation), so no
lock is held for long and a pass never overlaps another rewrite of the same agent. The
clock is a parameter: a test can sweep "30 days later". The report is a retention_runs row."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict, cast
from uuid import UUID

from memworker.domain import memories, rules
from memworker.domain.policy import Policy
from memworker.lifecycle import governance
from memworker.lifecycle import queries as lifecycle_db
from memworker.storage import db, large_agents
from memworker.storage.db import Conn, Pool
from memworker.tenancy import service as tenancy

logger = logging.getLogger(__name__)

ACTOR = "retention"
DECAY_STEP_DAYS = 1.0  # a row's salience/confidence is rewritten at most once a day
# The most fresh memories one run checks for merges and contradictions: past it the pass goes
# on in the next run (agents.retention_repair_*), so a run stays seconds long after a bulk write.
REPAIR_PER_RUN = 2_000
_NIL = UUID(int=0)
COUNTS = (
    "scanned",
    "expired",
    "forgotten_age",
    "forgotten_unused",
    "forgotten_cap",
    "forgotten_distilled",
    "decayed",
    "promoted",
    "merged",
    "superseded",
    "reviews",
    "batches",
)


class SweepStatus(memories.Word):
    """Where a retention sweep is (retention_runs.status: sql/schema.sql checks these values):
    running, done, partial (the agent stayed locked: the next run resumes), skipped (retention
    is off in the policy) or failed."""

    RUNNING = "running"
    DONE = "done"
    PARTIAL = "partial"
    SKIPPED = "skipped"
    FAILED = "failed"


DUPLICATE = "duplicate"  # a report's status, never a run's: its run key was used before, nothing ran


class ReportJson(TypedDict):
    """A sweep's report as JSON (its clock ISO 8601)."""

    agent_id: str
    run_id: str | None
    status: str
    clock: str | None
    scanned: int
    expired: int
    forgotten_age: int
    forgotten_unused: int
    forgotten_cap: int
    forgotten_distilled: int
    decayed: int
    promoted: int
    merged: int
    superseded: int
    reviews: int
    batches: int
    duration_ms: int
    skipped_reason: str | None
    error: str | None
    phase_ms: dict[str, int]


class RunRow(TypedDict):
    """A stored sweep report (a retention_runs row), in its columns' order."""

    id: UUID
    tenant_id: UUID
    agent_id: str
    run_key: str
    trigger: str
    status: str
    clock: datetime
    started_at: datetime
    finished_at: datetime | None
    scanned: int
    expired: int
    forgotten_age: int
    forgotten_unused: int
    forgotten_cap: int
    decayed: int
    promoted: int
    merged: int
    superseded: int
    reviews: int
    batches: int
    duration_ms: int | None
    skipped_reason: str | None
    error: str | None
    forgotten_distilled: int


@dataclass
class Report:
    """What one sweep did; stored as its retention_runs row."""

    agent_id: str
    run_id: str | None = None
    status: str = SweepStatus.RUNNING  # a SweepStatus, or DUPLICATE
    clock: datetime | None = None
    scanned: int = 0
    expired: int = 0
    forgotten_age: int = 0
    forgotten_unused: int = 0
    forgotten_cap: int = 0
    forgotten_distilled: int = 0
    decayed: int = 0
    promoted: int = 0
    merged: int = 0
    superseded: int = 0
    reviews: int = 0
    batches: int = 0
    duration_ms: int = 0
    skipped_reason: str | None = None
    error: str | None = None
    phase_ms: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> int:
        return (
            self.expired
            + self.forgotten_age
            + self.forgotten_unused
            + self.forgotten_cap
            + self.forgotten_distilled
            + self.decayed
            + self.promoted
            + self.merged
            + self.superseded
        )

    def to_json(self) -> ReportJson:
        out = asdict(self)
        out["clock"] = self.clock.isoformat() if self.clock else None
        return cast(ReportJson, out)


class _Busy(Exception):
    """The agent's lock stayed taken (consolidation or another sweep) for lock_wait_s."""


def sweep_agent(
    pool: Pool,
    *,
    tenant_id: UUID,
    agent_id: str,
    now: datetime | None = None,
    run_key: str | None = None,
    trigger: str = "api",
    lock_wait_s: float = 5.0,
    resume: bool = False,
) -> Report:
    """Run one retention sweep of the agent at clock `now` (default: the database's).

    A run_key already used (a beat window fired twice) does nothing: status 'duplicate'.
    With resume (the task was redelivered: its worker died mid-sweep) a run of that key
    still 'running' is taken over and swept again; every batch is idempotent, so the
    batches the dead worker committed are simply found done. Raises NotFound for an
    unknown agent."""
    started = time.perf_counter()
    report = Report(agent_id)
    with db.tenant_tx(pool, tenant_id) as conn:
        tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
        report.clock = now = now or governance.clock(conn)
        run_id = lifecycle_db.retention_start(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            run_key=run_key or f"{trigger}:{uuid.uuid4()}",
            trigger=trigger,
            now=now,
            resume=resume,
        )
        if run_id is None:
            report.status = DUPLICATE
            return report
        report.run_id = str(run_id)
        policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id)
        state = lifecycle_db.retention_state(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            now=now,
            tiers=list(rules.EPISODIC_TIERS),
            protected=list(rules.PROTECTED_KINDS),
        )
        assert state is not None
    report.scanned = state.live
    sweep = _Sweep(pool, tenant_id, agent_id, policy, now, report, lock_wait_s)
    try:
        if not policy.retention_enabled:
            report.status, report.skipped_reason = SweepStatus.SKIPPED, "retention_enabled is false in the policy"
        else:
            sweep.run(state)
            report.status = SweepStatus.DONE
    except _Busy:
        report.status = SweepStatus.PARTIAL
        report.skipped_reason = "the agent stayed locked (consolidation or another sweep); the next run resumes"
    except Exception as exc:  # recorded on the run row, then raised: the failure is never silent
        report.status, report.error = SweepStatus.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
        _finish(pool, tenant_id, report, started, sweep.done_at)
        raise
    _finish(pool, tenant_id, report, started, sweep.done_at)
    logger.info(
        "retention %s/%s: %s, %d changed of %d",
        tenant_id,
        agent_id,
        report.status,
        report.changed,
        report.scanned,
        extra={"action": "retention", "tenant_id": str(tenant_id)},
    )
    return report


def _finish(pool: Pool, tenant_id: UUID, report: Report, started: float, done_at: datetime | None) -> None:
    """Record the run; done_at: the clock the next merge and contradiction pass starts after
    (None while the pass is unfinished)."""
    report.duration_ms = int((time.perf_counter() - started) * 1000)
    assert report.clock is not None  # set before the sweep starts
    with db.tenant_tx(pool, tenant_id) as conn:
        lifecycle_db.retention_finish(
            conn,
            tenant_id=tenant_id,
            run_id=report.run_id,
            status=report.status,
            duration_ms=report.duration_ms,
            skipped_reason=report.skipped_reason,
            error=report.error,
            **{k: getattr(report, k) for k in COUNTS},
        )
        lifecycle_db.retention_stamp(
            conn,
            tenant_id=tenant_id,
            agent_id=report.agent_id,
            now=report.clock,
            done_at=done_at,
        )


class _Sweep:
    def __init__(
        self,
        pool: Pool,
        tenant_id: UUID,
        agent_id: str,
        policy: Policy,
        now: datetime,
        report: Report,
        lock_wait_s: float,
    ) -> None:
        self.pool, self.tenant_id, self.agent_id = pool, tenant_id, agent_id
        self.policy, self.now, self.report, self.lock_wait_s = policy, now, report, lock_wait_s
        self.ids: dict[str, Any] = dict(tenant_id=tenant_id, agent_id=agent_id)
        # the parameters every batched delete (_drain) takes
        self.base: dict[str, Any] = dict(**self.ids, now=now, actor=ACTOR, batch=policy.retention_batch)
        self.done_at: datetime | None = None  # set when the merge and contradiction pass finishes

    def run(self, state: lifecycle_db.RetentionState) -> None:
        p = self.policy
        protected = list(rules.PROTECTED_KINDS)
        episodic = list(rules.EPISODIC_TIERS)
        self._phase("expire", lambda: self._drain(lifecycle_db.retention_purge_expired, "expired"))
        self._phase("repair", lambda: self._repair(state))
        self._phase("promote", self._promote)
        if (age := p.decay_days) is not None:
            self._phase(
                "forget_age",
                lambda: self._drain(
                    lifecycle_db.retention_forget_age,
                    "forgotten_age",
                    tiers=episodic,
                    protected=protected,
                    cutoff=self.now - timedelta(days=age),
                    reason=f"older than {age:g} days and never recalled",
                ),
            )
        if (kept := p.distilled_keep_days) is not None:
            self._phase(
                "forget_distilled",
                lambda: self._drain(
                    lifecycle_db.retention_forget_distilled,
                    "forgotten_distilled",
                    cutoff=self.now - timedelta(days=kept),
                    reason=f"distilled into a sleep summary more than {kept:g} days ago",
                ),
            )
        if (unused := p.unused_days) is not None:
            self._phase(
                "forget_unused",
                lambda: self._drain(
                    lifecycle_db.retention_forget_unused,
                    "forgotten_unused",
                    tiers=episodic,
                    protected=protected,
                    cutoff=self.now - timedelta(days=unused),
                    reason=f"not used for {unused:g} days",
                ),
            )
        # the counts are from the sweep's start, and the steps before only remove rows: an agent
        # under a cap skips ranking all its rows for it (a row written meanwhile waits a tick)
        if state.episodic > p.max_episodic:
            self._phase(
                "forget_cap",
                lambda: self._drain(
                    lifecycle_db.retention_forget_cap,
                    "forgotten_cap",
                    tiers=episodic,
                    protected=protected,
                    cap=p.max_episodic,
                    reason=f"over the cap of {p.max_episodic} episodic memories (distilled, least recalled, oldest)",
                ),
            )
        if state.semantic > p.max_semantic:
            self._phase(
                "forget_semantic_cap",
                lambda: self._drain(
                    lifecycle_db.retention_forget_semantic_cap,
                    "forgotten_cap",
                    protected=protected,
                    cap=p.max_semantic,
                    reason=f"over the cap of {p.max_semantic} semantic memories (least evidence and value)",
                ),
            )
        self._phase("decay", self._decay)
        # an agent past recall's exact-scan size goes into the HNSW index; each later sweep moves the
        # memories written since (stored pending, off the write path) into it (storage/large_agents.py)
        self._phase(
            "index",
            lambda: large_agents.index_if_large(
                self.pool, tenant_id=self.tenant_id, agent_id=self.agent_id, live=self.report.scanned
            ),
        )

    def _phase(self, name: str, step: Callable[[], object]) -> None:
        started = time.perf_counter()
        step()
        self.report.phase_ms[name] = int((time.perf_counter() - started) * 1000)

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """A transaction of the sweep: none of its statements may run past the policy's
        retention_statement_timeout_s (a cancelled one fails the run, which the next resumes)."""
        with db.tenant_tx(self.pool, self.tenant_id) as conn:
            db.statement_timeout(conn, self.policy.retention_statement_timeout_s)
            yield conn

    @contextmanager
    def _locked(self) -> Iterator[Conn]:
        """One short transaction holding the agent's advisory lock; waits for it a while."""
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            with self._tx() as conn:
                if db.try_agent_lock(conn, self.tenant_id, self.agent_id):
                    self.report.batches += 1
                    yield conn
                    return
            if time.monotonic() >= deadline:
                raise _Busy()
            time.sleep(0.05)

    def _drain(self, delete: Callable[..., int], counter: str, **params: Any) -> None:
        """Repeat a batched delete (a lifecycle_db.retention_* function taking self.base and
        params, returning how many went) until a batch comes back short."""
        while True:
            with self._locked() as conn:
                n = delete(conn, **self.base, **params)
            setattr(self.report, counter, getattr(self.report, counter) + n)
            if n < self.policy.retention_batch:
                return

    def _promote(self) -> None:
        after = _NIL
        while True:
            with self._locked() as conn:
                rows = lifecycle_db.retention_promote_candidates(
                    conn,
                    **self.ids,
                    after=after,
                    now=self.now,
                    min_recalls=self.policy.promote_min_recalls,
                    min_confidence=self.policy.promote_min_confidence,
                    batch=self.policy.retention_batch,
                )
                reasons = {}
                for r in rows:
                    why = rules.promotion_reason(
                        tier=r.tier,
                        access_count=r.access_count,
                        confirmations=r.confirmations,
                        confidence=float(r.confidence),
                        connected=r.connected,
                        policy=self.policy,
                    )
                    if why:
                        reasons[str(r.id)] = f"L1 -> L2: {why}"
                if reasons:
                    done = lifecycle_db.retention_promote(
                        conn,
                        **self.ids,
                        ids=list(reasons),
                        expires_at=governance.ttl_until(self.policy, memories.Tier.L2, self.now),
                        now=self.now,
                    )
                    ids = [str(d) for d in done]
                    self._events(conn, "promoted", ids, [reasons[i] for i in ids])
                    self.report.promoted += len(ids)
            if len(rows) < self.policy.retention_batch:
                return
            after = rows[-1].id

    def _repair(self, state: lifecycle_db.RetentionState) -> None:
        """Merge and contradiction checks for what changed since the last complete pass, at most
        REPAIR_PER_RUN memories a run: an unfinished pass records where it stopped and the
        clock it began at, and the next run goes on from there. Only a finished pass moves the
        mark on, to the clock it began at, so what changed while it ran is checked next."""
        since = state.retention_done_at or datetime.min.replace(tzinfo=self.now.tzinfo)
        began = state.repair_clock or self.now
        after = state.repair_after or _NIL
        checked = 0
        while True:
            want = min(self.policy.retention_batch, REPAIR_PER_RUN - checked)
            with self._tx() as conn:  # reads only: no lock needed
                fresh = lifecycle_db.retention_fresh(
                    conn, **self.ids, after=after, now=self.now, since=since, batch=want
                )
                pairs = governance.pairs(conn, **self.ids, ids=fresh, now=self.now) if fresh else []
                ids = {p.a for p in pairs} | {p.b for p in pairs}
                facts = (
                    {
                        str(r.id): governance.fact(r)
                        for r in lifecycle_db.retention_facts(conn, **self.ids, ids=list(ids), now=self.now)
                    }
                    if ids
                    else {}
                )
            decided = rules.plan([rules.Pair(str(p.a), str(p.b), p.cosine) for p in pairs], facts, self.policy)
            if decided.supersede or decided.review or decided.merge:
                with self._locked() as conn:
                    self._apply(conn, decided)
            checked += len(fresh)
            if len(fresh) < want:
                if state.repair_clock is not None:
                    self._repair_mark(None, None)
                self.done_at = began
                return
            after = fresh[-1]
            if checked >= REPAIR_PER_RUN:
                self._repair_mark(began, after)
                return

    def _repair_mark(self, clock: datetime | None, after: UUID | None) -> None:
        with self._tx() as conn:
            lifecycle_db.retention_repair_mark(conn, **self.ids, clock=clock, after=after)

    def _apply(self, conn: Conn, decided: rules.Plan) -> None:
        t, a, now = self.tenant_id, self.agent_id, self.now
        for v in decided.supersede:
            if governance.supersede(
                conn,
                tenant_id=t,
                agent_id=a,
                older_id=UUID(v.older.id),
                newer_id=UUID(v.newer.id),
                reason=v.reason,
                actor=ACTOR,
                policy=self.policy,
                now=now,
            ):
                self.report.superseded += 1
        for v in decided.review:
            if governance.add_review(
                conn,
                tenant_id=t,
                agent_id=a,
                newer_id=UUID(v.newer.id),
                older_id=UUID(v.older.id),
                reason=v.reason,
                now=now,
            ):
                self.report.reviews += 1
        for keep, away, cosine in decided.merge:
            if governance.merge(
                conn,
                tenant_id=t,
                agent_id=a,
                survivor_id=UUID(keep.id),
                other_id=UUID(away.id),
                reason=f"near-duplicate of {keep.id} (cosine {cosine:.3f})",
                actor=ACTOR,
                now=now,
            ):
                self.report.merged += 1

    def _decay(self) -> None:
        p = self.policy
        if p.confidence_half_life_days is None and (
            p.salience_half_life_days is None or p.salience_decay_after_days is None
        ):
            return
        after = _NIL
        while True:
            with self._locked() as conn:
                decayed = lifecycle_db.retention_decay(
                    conn,
                    **self.ids,
                    after=after,
                    now=self.now,
                    batch=p.retention_batch,
                    protected=list(rules.PROTECTED_KINDS),
                    s_half=p.salience_half_life_days,
                    s_after=p.salience_decay_after_days,
                    c_half=p.confidence_half_life_days,
                    c_floor=p.confidence_floor,
                    step_days=DECAY_STEP_DAYS,
                )
            self.report.decayed += decayed.n
            if decayed.seen < p.retention_batch or decayed.last_id is None:
                return
            after = decayed.last_id

    def _events(self, conn: Conn, event: str, ids: list[str], reasons: list[str]) -> None:
        lifecycle_db.insert_events(
            conn,
            **self.ids,
            event=event,
            actor=ACTOR,
            now=self.now,
            ids=ids,
            reasons=reasons,
            related=[None] * len(ids),
        )


def runs(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int = 20) -> list[RunRow]:
    """The agent's latest retention reports, newest first. Raises NotFound for an unknown agent."""
    tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    found = lifecycle_db.retention_runs(conn, tenant_id=tenant_id, agent_id=agent_id, limit=limit)
    return [cast(RunRow, asdict(r)) for r in found]


def due(pool: Pool, *, before: datetime, limit: int = 10_000) -> list[tuple[UUID, str]]:
    """Agents (across tenants) not swept since `before`, least recently swept first."""
    with db.system_tx(pool) as conn:
        return [(r.tenant_id, r.agent_id) for r in lifecycle_db.retention_due(conn, before=before, limit=limit)]


def window(now: datetime, every_s: float) -> datetime:
    """The start of the beat window `now` falls in: every fire in it gets the same run key."""
    epoch = now.timestamp()
    return datetime.fromtimestamp(epoch - epoch % every_s, tz=now.tzinfo)
