"""Lifecycle operations on one agent's memories, the I/O side of memworker.domain.rules:
confirmation and promotion, supersede or review when a memory is written, merge, the
history of a memory, the review list, and policy overrides. Every change writes a
memory_events row (ids, reason, actor; never text). The caller owns the transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict
from uuid import UUID

from memworker import errors
from memworker.domain import memories, rules
from memworker.domain.policy import Policy
from memworker.lifecycle import derived
from memworker.lifecycle import queries as lifecycle_db
from memworker.storage import core_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy


class ReviewStatus(memories.Word):
    """A review on the list (memory_reviews.status: sql/schema.sql checks these values)."""

    OPEN = "open"
    RESOLVED = "resolved"


class ReviewSide(TypedDict):
    """One memory of a review: the newer or the older."""

    id: UUID
    text: str
    tier: str
    confidence: float
    created_at: datetime
    live: bool


class ReviewItem(TypedDict):
    """A contradiction on the review list, with both memories."""

    id: UUID
    reason: str
    status: str  # a ReviewStatus
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    created_at: datetime
    newer: ReviewSide
    older: ReviewSide


class Resolved(TypedDict):
    """A settled review: the memory kept ('both', or its id) and the one superseded (None: none)."""

    id: str
    status: str
    kept: str
    superseded: str | None


class VersionRow(TypedDict):
    """A memory of a supersede chain; depth < 0 older, 0 the one asked about, > 0 newer."""

    id: UUID
    text: str
    kind: str
    tier: str
    confidence: float
    salience: float
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: UUID | None
    expires_at: datetime | None
    provenance: list[str]
    depth: int
    current: bool


class EventRow(TypedDict):
    """An audit row (ids and reasons, never text)."""

    id: int
    memory_id: UUID | None
    event: str
    reason: str
    actor: str
    related_ids: list[UUID]
    created_at: datetime


class HistoryOf(TypedDict):
    """The supersede chain through a memory, oldest first, and the audit events of its versions."""

    memory_id: UUID  # the id asked for, a merged-away one resolved to its survivor
    asked: UUID
    versions: list[VersionRow]
    events: list[EventRow]


class PolicyView(TypedDict):
    """The overrides at one level and the effective policy (an agent's: the tenant's overrides too)."""

    overrides: dict[str, Any]
    effective: dict[str, Any]
    tenant_overrides: NotRequired[dict[str, Any]]


PROBE_TERMS = 6  # a memory's rarest terms, through which merge/contradiction candidates are found
PAIRS_PER_MEMORY = 12  # the most candidates one memory is judged against (most probes shared first)
UPDATE_NEIGHBOURS = 8  # ... and the nearest ones sharing a rare term, for a change said in other words
UPDATE_MIN_COSINE = 0.15  # below this two statements are about different things whatever words they share
UPDATE_RECENT = 300  # ... and the nearest among the subject's newest memories, sharing a word or not
UPDATE_PROBE_TERMS = 2  # a memory's rarest terms probed for them ...
UPDATE_POSTINGS = 64  # ... each through at most this many postings: 2 x 64 + 300 compared per memory


def pairs(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID], now: datetime) -> list[lifecycle_db.Pair]:
    """Merge and contradiction candidates for the given memories (lifecycle/queries.sql:
    memory_pairs), with the bounds that keep their cost per memory flat."""
    return lifecycle_db.memory_pairs(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        ids=ids,
        probe_terms=PROBE_TERMS,
        now=now,
        per_term=store.CANDIDATE_POSTINGS,
        df_cap=store.DF_CAP,
        max_pairs=PAIRS_PER_MEMORY,
    )


def clock(conn: Conn) -> datetime:
    """The database's clock for this transaction (the same instant as its now())."""
    return lifecycle_db.now(conn)


def ttl_until(policy: Policy, tier: str, now: datetime) -> datetime | None:
    hours = policy.ttl_hours(tier)
    return None if hours is None else now + timedelta(hours=hours)


def resolve(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> UUID:
    """The id a memory goes by now: a merged-away id resolves to its survivor."""
    survivor = lifecycle_db.resolve_alias(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return survivor or memory_id


# --- confirmation and promotion ----------------------------------------------------------------


def confirm(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    confidence: float,
    source: str,
    policy: Policy,
    now: datetime | None = None,
) -> None:
    """A later episode said the same thing: the memory gains a source, salience and
    confidence (rules.grow_confidence), its TTL starts again, and enough confirmed
    confidence promotes L1 to L2."""
    now = now or clock(conn)
    row = lifecycle_db.lock_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    if row is None:
        raise errors.NotFound("memory not found")
    # Another item of an episode already among the sources is not new evidence; and L3's
    # confidence changes only by an explicit call.
    episode = source.split("#", 1)[0]
    fresh = all(p.split("#", 1)[0] != episode for p in row.provenance)
    grown = (
        rules.grow_confidence(float(row.confidence), confidence, policy.confidence_growth)
        if fresh and row.tier != memories.Tier.L3
        else float(row.confidence)
    )
    out = lifecycle_db.confirm(
        conn,
        tenant_id=tenant_id,
        memory_id=memory_id,
        confidence=grown,
        source=source,
        now=now,
        renew_to=ttl_until(policy, row.tier, now),
        count=int(fresh),
    )
    assert out is not None
    store.event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        event="strengthened",
        reason=f"confirmed by {source.split('#')[0]}",
    )
    reason = rules.promotion_reason(
        tier=out.tier,
        access_count=out.access_count,
        confirmations=out.confirmations,
        confidence=float(out.confidence),
        connected=False,
        policy=policy,
    )
    if reason:
        promote(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            memory_id=memory_id,
            tier=memories.Tier.L2,
            reason=reason,
            actor="system",
            policy=policy,
            now=now,
        )


def promote(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    tier: str,
    reason: str,
    actor: str,
    policy: Policy,
    now: datetime | None = None,
) -> memories.Memory:
    """Move a live memory up to `tier`; its TTL becomes that tier's, from now.

    Raises NotFound, or InvalidInput when it is retired or the tier is not higher."""
    now = now or clock(conn)
    current = store.get_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    if current.valid_to is not None or (current.expires_at is not None and current.expires_at <= now):
        raise errors.InvalidInput("only a live memory can be promoted (this one is superseded or expired)")
    if tier not in rules.TIER_RANK or rules.TIER_RANK[tier] <= rules.TIER_RANK[current.tier]:
        raise errors.InvalidInput(f"tier: the memory is {current.tier}; promotion must go to a higher tier")
    promoted = lifecycle_db.set_tier(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        tier=tier,
        expires_at=ttl_until(policy, tier, now),
        now=now,
    )
    assert promoted is not None
    store.event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        event="promoted",
        reason=f"{current.tier} -> {tier}: {reason}",
        actor=actor,
    )
    return promoted


# --- supersede and review --------------------------------------------------------------------------


def check_new(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    written: Sequence[tuple[UUID, memories.Draft]],
    policy: Policy,
    actor: str,
    now: datetime | None = None,
    decided: Collection[tuple[UUID, UUID]] = frozenset(),
) -> list[rules.Verdict]:
    """Compare just-written memories (their postings already stored) with the live memories
    that share their rarest terms: an older one a new memory contradicts with enough
    confidence is superseded; an unresolvable contradiction goes to the review list. Returns
    what was decided. One candidate query for the whole list (a batch write pays one round
    trip, not one per memory), and index lookups only, so it stays cheap on a large agent.
    Within the list, a memory is judged against the ones written before it, as if they had
    been checked one at a time. decided: (new, old) pairs an LLM has already judged (ingest's
    reflector): the rules leave them as it decided."""
    stateful = [(mid, d) for mid, d in written if d.kind in rules.CHANGING_KINDS]
    if not stateful:
        return []
    now = now or clock(conn)
    order = {mid: i for i, (mid, _) in enumerate(written)}
    ids = [mid for mid, _ in stateful]
    found = _candidates(conn, tenant_id=tenant_id, agent_id=agent_id, ids=ids, now=now)
    # a later memory of the same list is not "older": it gets its own turn as the newer one
    found = [p for p in found if order.get(p.b, -1) < order[p.a]]
    rows = (
        lifecycle_db.retention_facts(
            conn, tenant_id=tenant_id, agent_id=agent_id, now=now, ids=list({p.b for p in found} | set(ids))
        )
        if found
        else []
    )
    olds = {r.id: fact(r) for r in rows}
    verdicts = []
    for mid, draft in stateful:
        new = olds.get(mid) or rules.Fact(str(mid), draft.text, draft.kind, draft.tier, draft.confidence, now)
        for old in (olds[p.b] for p in found if p.a == mid and p.b in olds and (mid, p.b) not in decided):
            verdict = rules.judge(old, new, policy)
            if verdict is None:
                continue
            if verdict.action == "supersede":
                if not supersede(
                    conn,
                    tenant_id=tenant_id,
                    agent_id=agent_id,
                    older_id=UUID(old.id),
                    newer_id=mid,
                    reason=verdict.reason,
                    actor=actor,
                    policy=policy,
                    now=now,
                ):
                    continue
            else:
                add_review(
                    conn,
                    tenant_id=tenant_id,
                    agent_id=agent_id,
                    newer_id=mid,
                    older_id=UUID(old.id),
                    reason=verdict.reason,
                    now=now,
                )
            verdicts.append(verdict)
    return verdicts


def _candidates(
    conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID], now: datetime
) -> list[lifecycle_db.Pair]:
    """The live memories each given one may change: those sharing most of its rarest terms
    (merge's candidates), then its nearest of the subject said in other words."""
    found = pairs(conn, tenant_id=tenant_id, agent_id=agent_id, ids=ids, now=now)
    known = {(p.a, p.b) for p in found}
    return found + [
        p
        for p in lifecycle_db.update_candidates(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            ids=ids,
            now=now,
            kinds=list(rules.CHANGING_KINDS),
            probe_terms=UPDATE_PROBE_TERMS,
            per_term=UPDATE_POSTINGS,
            df_cap=store.DF_CAP,
            min_cosine=UPDATE_MIN_COSINE,
            k=UPDATE_NEIGHBOURS,
            recent=UPDATE_RECENT,
        )
        if (p.a, p.b) not in known
    ]


def fact(row: lifecycle_db.FactRow) -> rules.Fact:
    return rules.Fact(
        str(row.id),
        row.text,
        row.kind,
        row.tier,
        float(row.confidence),
        row.created_at,
        int(row.access_count or 0),
        row.speaker,
    )


def supersede(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    older_id: UUID,
    newer_id: UUID,
    reason: str,
    actor: str,
    policy: Policy,
    now: datetime,
) -> bool:
    """Retire the older memory in favour of the newer: out of recall, kept for history for
    superseded_keep_days. False when it was no longer live."""
    keep = None if policy.superseded_keep_days is None else now + timedelta(days=policy.superseded_keep_days)
    retired = lifecycle_db.supersede(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        older_id=older_id,
        newer_id=newer_id,
        keep_until=keep,
        now=now,
    )
    if retired is None:
        return False
    lifecycle_db.supersede_turns(
        conn, tenant_id=tenant_id, agent_id=agent_id, older_id=older_id, newer_id=newer_id, keep_until=keep, now=now
    )
    store.event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=older_id,
        event="superseded",
        reason=reason,
        actor=actor,
        related_ids=[newer_id],
    )
    # the newer memory's own history names what it replaced
    store.event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=newer_id,
        event="supersedes",
        reason=reason,
        actor=actor,
        related_ids=[older_id],
    )
    derived.on_superseded(conn, tenant_id=tenant_id, agent_id=agent_id, older_id=older_id, newer_id=newer_id, now=now)
    return True


def add_review(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    newer_id: UUID,
    older_id: UUID,
    reason: str,
    now: datetime,
) -> bool:
    """Put a contradiction on the review list (once per pair). True when it is new."""
    return (
        lifecycle_db.add_review(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            memory_id=newer_id,
            other_id=older_id,
            reason=reason,
            now=now,
        )
        is not None
    )


def reviews(conn: Conn, *, tenant_id: UUID, agent_id: str, status: str | None, limit: int) -> list[ReviewItem]:
    rows = lifecycle_db.reviews(conn, tenant_id=tenant_id, agent_id=agent_id, status=status, limit=limit)
    return [
        ReviewItem(
            id=r.id,
            reason=r.reason,
            status=r.status,
            resolution=r.resolution,
            resolved_by=r.resolved_by,
            resolved_at=r.resolved_at,
            created_at=r.created_at,
            newer=ReviewSide(
                id=r.memory_id,
                text=r.memory_text,
                tier=r.memory_tier,
                confidence=round(float(r.memory_confidence), 4),
                created_at=r.memory_created_at,
                live=r.memory_valid_to is None,
            ),
            older=ReviewSide(
                id=r.other_id,
                text=r.other_text,
                tier=r.other_tier,
                confidence=round(float(r.other_confidence), 4),
                created_at=r.other_created_at,
                live=r.other_valid_to is None,
            ),
        )
        for r in rows
    ]


def resolve_review(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    review_id: UUID,
    keep: str,
    reason: str,
    actor: str,
    may_change_l3: bool,
    policy: Policy,
    now: datetime | None = None,
) -> Resolved:
    """Settle a review: keep 'both' (not a contradiction after all), or keep one memory and
    supersede the other by it. Raises NotFound, InvalidInput, or Forbidden for retiring an
    L3 memory without the admin scope."""
    now = now or clock(conn)
    row = lifecycle_db.lock_review(conn, tenant_id=tenant_id, agent_id=agent_id, review_id=review_id)
    if row is None:
        raise errors.NotFound("review not found")
    if row.status != ReviewStatus.OPEN:
        raise errors.InvalidInput("this review is already resolved")
    sides = {str(row.memory_id): row.memory_tier, str(row.other_id): row.other_tier}
    superseded = None
    if keep == "both":
        resolution = "kept both"
    elif keep in sides:
        loser = next(i for i in sides if i != keep)
        if sides[loser] == memories.Tier.L3 and not may_change_l3:
            raise errors.Forbidden("retiring an L3 memory needs the 'admin' scope")
        if supersede(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            older_id=UUID(loser),
            newer_id=UUID(keep),
            reason=f"review {review_id}: {reason}".strip(": "),
            actor=actor,
            policy=policy,
            now=now,
        ):
            superseded = loser
        resolution = f"kept {keep}"
    else:
        raise errors.InvalidInput("keep: give 'both' or the id of one of the two memories under review")
    lifecycle_db.resolve_review(
        conn,
        tenant_id=tenant_id,
        review_id=review_id,
        resolution=f"{resolution}: {reason}" if reason else resolution,
        actor=actor,
        now=now,
    )
    return Resolved(id=str(review_id), status=ReviewStatus.RESOLVED, kept=keep, superseded=superseded)


# --- merge -----------------------------------------------------------------------------------------


def merge(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    survivor_id: UUID,
    other_id: UUID,
    reason: str,
    actor: str,
    now: datetime,
) -> bool:
    """Fold a near-duplicate into its survivor (union of provenance, the higher salience
    and confidence, both recall counts), move its links over, and leave an alias so its id
    resolves to the survivor. False when either is no longer live."""
    ids: dict[str, Any] = dict(tenant_id=tenant_id, agent_id=agent_id, survivor=survivor_id, other=other_id, now=now)
    if lifecycle_db.merge_into(conn, **ids) is None:
        return False
    lifecycle_db.merge_finish(conn, **ids, reason=reason, actor=actor)
    return True


# --- history ----------------------------------------------------------------------------------------


def history(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> HistoryOf:
    """The supersede chain through a memory, oldest first, with the audit events of every
    version and of the ids merged into them. Raises NotFound."""
    asked = memory_id
    memory_id = resolve(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    chain = lifecycle_db.history(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    if not chain:
        raise errors.NotFound("memory not found")
    ids = [r.id for r in chain]
    ids += lifecycle_db.aliases_of(conn, tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    events = lifecycle_db.events(conn, tenant_id=tenant_id, agent_id=agent_id, ids=ids, limit=500)
    return HistoryOf(
        memory_id=memory_id,
        asked=asked,
        versions=[
            VersionRow(
                id=r.id,
                text=r.text,
                kind=r.kind,
                tier=r.tier,
                confidence=round(float(r.confidence), 4),
                salience=round(float(r.salience), 4),
                created_at=r.created_at,
                valid_from=r.valid_from,
                valid_to=r.valid_to,
                superseded_by=r.superseded_by,
                expires_at=r.expires_at,
                provenance=r.provenance,
                depth=r.depth,
                current=r.valid_to is None,
            )
            for r in chain
        ],
        events=[
            EventRow(
                id=e.id,
                memory_id=e.memory_id,
                event=e.event,
                reason=e.reason,
                actor=e.actor,
                related_ids=e.related_ids,
                created_at=e.created_at,
            )
            for e in events
        ],
    )


# --- policy -----------------------------------------------------------------------------------------


def get_policy(conn: Conn, *, tenant_id: UUID, agent_id: str | None) -> PolicyView:
    """The overrides at this level and the effective policy. Raises NotFound for an unknown agent."""
    row = core_db.policies(conn, tenant_id=tenant_id, agent_id=agent_id)
    if row is None or (agent_id is not None and row.agent_policy is None):
        raise errors.NotFound("agent not found")
    layers = [row.tenant_policy] + ([row.agent_policy] if row.agent_policy is not None else [])
    out = PolicyView(overrides=layers[-1], effective=Policy.resolve(*layers).to_json())
    if agent_id is not None:
        out["tenant_overrides"] = row.tenant_policy
    return out


def put_policy(conn: Conn, *, tenant_id: UUID, agent_id: str | None, overrides: dict[str, Any]) -> PolicyView:
    """Replace the overrides of the tenant (agent_id None) or of one agent (created on first
    use). Raises InvalidInput naming the bad field; nothing is written then."""
    row = core_db.policies(conn, tenant_id=tenant_id, agent_id=agent_id)
    tenant_layer = row.tenant_policy if row else {}
    effective = Policy.resolve(tenant_layer, overrides) if agent_id is not None else Policy.resolve(overrides)
    clean = {k: effective.to_json()[k] for k in overrides}
    if agent_id is None:
        lifecycle_db.set_tenant_policy(conn, tenant_id=tenant_id, policy=clean)
    else:
        tenancy.ensure_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
        lifecycle_db.set_agent_policy(conn, tenant_id=tenant_id, agent_id=agent_id, policy=clean)
    return get_policy(conn, tenant_id=tenant_id, agent_id=agent_id)
