"""The right to be forgotten: POST /v1/agents/{agent_id}/forget with exactly one of
provenance, memory_ids, session_id, subject or before. One erase: what it names goes from
every place the API, the console, webhooks and a later archive can return text from.

What goes, in one transaction (so the receipt is exactly what happened):
- the memories the request names, with their embeddings (a column of the row), BM25
  postings, connections, reviews and aliases (all cascade on delete);
- the raw episodes: those the request names (the episode of an 'episode:<id>' provenance,
  the session's, the subject's, those received before the time) and every episode a
  forgotten memory came from, since they hold its text verbatim;
- memories derived from those episodes (a session's, a subject's or a time range's), and
  the turns of every erased episode (its messages kept verbatim: keeping them would keep
  the episode readable), unless the request says keep_turns;
- copies: memories (live or retired: a history shows retired ones) and episodes elsewhere
  in the agent that hold the erased text or an identifier from it (needles.py states the
  rule). Copies arise without any link back: a session flush or archive summary restates
  the working memory, a sleep summary restates turns. One round: a copy's own text does
  not widen the search;
- insights and conclusions whose evidence includes a forgotten memory, recursively. They
  are removed, not rewritten: their text may repeat what was forgotten, and an LLM rewrite
  could keep it. The evidence that remains goes back into consolidation's window
  (consolidated_at cleared) so the next pass derives new ones from what is left;
- profile versions that cite a forgotten memory by id or by text;
- pool memories copied from (or confirmed by) an erased memory (memworker/fleet/pools.py);
- proposals to a pool naming an erased memory as a source, open or decided;
- sessions: a forget by session deletes that session (working memory, plan, context-call
  log, archives, webhook deliveries); by subject, every session of the subject. In every
  other session of the agent the erased text is taken out: working-memory lines and goal,
  plan titles, outputs and notes, metadata strings, logged context calls (their query),
  pending and recent webhook payloads, and every archive (rewritten, so a restore and a
  new archive cannot bring it back);
- audit reasons and review reasons that quote it become '[forgotten]'.

What ingest has in flight goes too: the episodes to erase are held (row locks) before the
search for what they left, which is repeated until it finds no episode not yet held
(_settle), so an ingest of one of them has committed before the search or stores nothing.
An ingest of another episode confirming a forgotten memory after that search shows in the
deleted row's provenance: the erase is undone to a savepoint and planned again (_Overtaken).
So is an erase Postgres chose to end a deadlock (or a serialization failure): the episodes
are held in two batches (named ones, then those found), each in id order, so a forget can
close a wait-for cycle with another writer. Every search of a plan, across all re-plans,
counts against one budget (MAX_PLAN_SEARCHES); past it nothing is erased (503).

Audit rows stay: they carry ids and reasons, never text. The receipt names no erased text:
only ids and counts per place."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict
from uuid import UUID

from psycopg.errors import DeadlockDetected, SerializationFailure

from memworker import errors
from memworker.domain import memories, rules
from memworker.fleet import pools
from memworker.lifecycle import governance, needles
from memworker.lifecycle import queries as lifecycle_db
from memworker.sessions import archive, session
from memworker.storage import db, sessions_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

MAX_IDS = 1_000
MAX_DERIVED_ROUNDS = 5  # insights of insights: a handful of levels at most
LOCK_WAIT_S = 30.0
# Searches of one forget's plan, over every re-plan (new episodes to hold, an overtaking
# ingest, a deadlock): a forget needs 1 or 2, each re-plan usually 2 more.
MAX_PLAN_SEARCHES = 8
SELECTORS = ("provenance", "memory_ids", "session_id", "subject", "before")
_MOVING = (
    "the agent's episodes kept changing, or were held by other writers, while they were being erased;"
    " nothing was erased; retry shortly"
)


class Ids(TypedDict):
    """What one place lost: how many, and their ids."""

    count: int
    ids: list[str]


class TurnsErased(Ids):
    policy: str  # erased with their episode | kept (keep_turns)


class DerivedErased(Ids):
    policy: str
    requeued_evidence: int  # memories left whose insights went: consolidated again


class EpisodesErased(Ids):
    copies: int  # of them, episodes holding a copy of the erased text


class SessionsErased(TypedDict):
    """Whole sessions deleted (by session or by subject), their counts summed."""

    ids: list[str]
    count: int
    context_calls: int
    archives: int
    items: int
    webhook_deliveries: int


class Scrubbed(TypedDict):
    """The erased text taken out of what stays, counted per place."""

    needles: int
    sessions: int
    working_texts: int
    plan_texts: int
    metadata_texts: int
    context_calls: int
    session_items: int
    webhook_deliveries: int
    archives: int
    archive_episodes: int
    archive_context_calls: int
    archive_items: int
    archive_texts: int
    events: int
    reviews: int


class Receipt(TypedDict):
    """A forget's receipt: ids and counts per place the text was erased from, never text."""

    agent_id: str
    request: str
    at: str
    memories: Ids
    turns: TurnsErased
    copies: Ids
    pool_copies: Ids  # shared into the tenant's pools (memworker/fleet/pools.py)
    pool_proposals: Ids  # proposed to a pool, open or decided
    derived: DerivedErased
    episodes: EpisodesErased
    embeddings: int
    terms: int
    connections: int
    aliases: int
    profile_versions: int
    sessions: SessionsErased
    scrubbed: Scrubbed
    not_found: list[str]


@dataclass(frozen=True)
class Request:
    """Exactly one of the five selectors; keep_turns keeps the turns of erased episodes."""

    provenance: str | None = None
    memory_ids: tuple[UUID, ...] | None = None
    session_id: str | None = None
    before: datetime | None = None
    subject: str | None = None
    keep_turns: bool = False

    def validate(self) -> None:
        given = [k for k in SELECTORS if getattr(self, k) is not None]
        if len(given) != 1:
            raise errors.InvalidInput("give exactly one of provenance, memory_ids, session_id, subject or before")
        if self.provenance is not None and not self.provenance.strip():
            raise errors.InvalidInput("provenance must not be blank")
        if self.memory_ids is not None and not 1 <= len(self.memory_ids) <= MAX_IDS:
            raise errors.InvalidInput(f"memory_ids: give 1 to {MAX_IDS} ids")
        if self.before is not None and self.before.tzinfo is None:
            raise errors.InvalidInput("before: give a timestamp with a time zone")
        if self.subject is not None and not memories.SUBJECT.fullmatch(self.subject):
            raise errors.InvalidInput("subject: 1-128 letters, digits and . _ : @ -, starting with a letter or digit")

    def describe(self) -> str:
        if self.provenance is not None:
            return f"provenance={self.provenance}"
        if self.memory_ids is not None:
            return f"memory_ids ({len(self.memory_ids)})"
        if self.session_id is not None:
            return f"session_id={self.session_id}"
        if self.subject is not None:
            return f"subject={self.subject}"
        assert self.before is not None
        return f"before={self.before.isoformat()}"


def episode_of(source: str) -> UUID | None:
    """The episode id behind a provenance entry 'episode:<id>' or 'episode:<id>#m0,2'."""
    if not source.startswith("episode:"):
        return None
    try:
        return UUID(source[len("episode:") :].split("#", 1)[0])
    except ValueError:
        return None


@dataclass
class _Plan:
    """What one request erases, found before anything is deleted. named: the episodes the
    request names, held from the plan's first statement (forget_match_episodes)."""

    named: set[UUID]
    forgotten: set[UUID]
    episodes: set[UUID]
    turns: set[UUID]
    found: needles.Needles
    copies: set[UUID]
    copy_episodes: set[UUID]
    derived: set[UUID]
    sessions: list[str]


def forget(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    request: Request,
    actor: str,
    now: datetime | None = None,
) -> Receipt:
    """Erase what the request names (see the module docstring) and return the receipt.

    Raises NotFound for an unknown agent, InvalidInput for a bad request, Unavailable when
    the agent stays locked by a consolidation pass for LOCK_WAIT_S, or when ingest keeps
    changing what the request erases (or deadlocks keep ending the erase) past
    MAX_PLAN_SEARCHES searches of its plan (nothing is erased then)."""
    request.validate()
    tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    _lock(conn, tenant_id, agent_id)
    now = now or governance.clock(conn)
    base: dict[str, Any] = dict(tenant_id=tenant_id, agent_id=agent_id)
    ids = list(request.memory_ids or ())
    resolved = [governance.resolve(conn, **base, memory_id=i) for i in ids]
    searches = _Budget(MAX_PLAN_SEARCHES)
    while searches.left:
        # a savepoint: an erase overtaken by an ingest, or ended by Postgres to break a deadlock
        # (its row locks go with it), is undone, then planned again
        try:
            with conn.transaction():
                return _erase(conn, base, request, actor, now, ids, resolved, searches)
        except (_Overtaken, DeadlockDetected, SerializationFailure):
            continue
    raise errors.Unavailable(_MOVING)


@dataclass
class _Budget:
    """The searches of its plan a forget may still make, shared by every re-plan."""

    left: int

    def take(self) -> bool:
        """Spend one search; False when none is left."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


class _Overtaken(Exception):
    """An ingest confirmed a memory being forgotten after the plan was found: the episode it
    stored is one the memory came from, so the plan no longer names all of them."""


def _erase(
    conn: Conn,
    base: dict[str, Any],
    request: Request,
    actor: str,
    now: datetime,
    ids: list[UUID],
    resolved: list[UUID],
    searches: _Budget,
) -> Receipt:
    """Carry out the request's plan; the receipt. _Overtaken when a forgotten memory, as
    deleted, came from an episode the plan does not erase."""
    tenant_id, agent_id = base["tenant_id"], base["agent_id"]
    plan = _settle(conn, base, request, resolved, searches)
    # episodes before any memory row: ingest locks its episode, then the memories it confirms,
    # so taking memory rows first could wait on an ingest that waits on us
    erased = lifecycle_db.forget_delete_episodes(conn, **base, ids=list(plan.episodes | plan.copy_episodes))
    everything = list(plan.forgotten | plan.turns | plan.copies | plan.derived)
    # Profile entries may quote a memory rather than cite its id; very short texts would
    # match anything, so only quotes of some length count.
    texts = [t for t in lifecycle_db.forget_texts(conn, **base, ids=everything) if len(t) >= needles.MIN_TEXT]
    counts = lifecycle_db.forget_counts(conn, tenant_id=tenant_id, ids=everything)
    rederive = lifecycle_db.forget_rederive(conn, **base, forgotten=everything, derived=list(plan.derived))
    profile_needles = [str(i) for i in everything] + texts + list(plan.found.terms)
    profiles = lifecycle_db.forget_profiles(conn, **base, needles=profile_needles) if profile_needles else []
    # a memory's row is deleted as it is when any ingest confirming it (and so adding its
    # episode to the provenance) has committed: that episode must be in the plan too
    gone = lifecycle_db.forget_delete_memories(conn, **base, ids=everything)
    if any(e not in plan.episodes for r in gone if r.id in plan.forgotten for e in map(episode_of, r.provenance) if e):
        raise _Overtaken
    deleted = {r.id for r in gone}
    pooled = pools.forget_copies(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=sorted(deleted))
    proposed = pools.forget_proposals(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=sorted(deleted))
    gone_sessions = _forget_sessions(conn, base, plan.sessions)
    scrubbed = _scrub(conn, base, plan.found, erased)
    _audit(conn, base, request, actor, now, plan, sorted(deleted), erased)
    return Receipt(
        agent_id=agent_id,
        request=request.describe(),
        at=now.isoformat(),
        memories=_ids(plan.forgotten & deleted),
        turns=TurnsErased(
            **_ids(plan.turns & deleted),
            policy="kept (keep_turns)" if request.keep_turns else "erased with their episode",
        ),
        copies=_ids(plan.copies & deleted),
        pool_copies=_ids(set(pooled)),
        pool_proposals=_ids(set(proposed)),
        derived=DerivedErased(
            **_ids(plan.derived & deleted),
            policy="removed; their remaining evidence is re-queued for consolidation",
            requeued_evidence=len(rederive),
        ),
        episodes=EpisodesErased(**_ids(set(erased)), copies=len(plan.copy_episodes & set(erased))),
        embeddings=len(deleted),
        terms=counts.terms,
        connections=counts.connections,
        aliases=counts.aliases,
        profile_versions=len(profiles),
        sessions=gone_sessions,
        scrubbed=scrubbed,
        not_found=sorted(str(i) for i, r in zip(ids, resolved, strict=True) if r not in plan.forgotten),
    )


def _ids(ids: set[UUID]) -> Ids:
    return Ids(count=len(ids), ids=sorted(str(i) for i in ids))


def _settle(conn: Conn, base: dict[str, Any], request: Request, resolved: list[UUID], searches: _Budget) -> _Plan:
    """The plan, found while every episode it erases is held. Ingest writes an episode's
    memories and turns in a transaction that holds the episode's row; a search made before
    forget holds that row misses what such a transaction commits afterwards. So the plan is
    found again after each hold on episodes it erases that were not held when it was
    found, until a search finds no new one: then an ingest of any of them has committed
    before the search (which saw its writes) or waits for this transaction and finds its
    episode gone. Unavailable when the plan keeps moving (ingest writing faster than it
    settles) until the searches are spent; nothing is changed then."""
    held: set[UUID] = set()
    while searches.take():
        plan = _find(conn, base, request, resolved)
        held |= plan.named
        wanted = plan.episodes | plan.copy_episodes
        if wanted <= held:
            return plan
        lifecycle_db.forget_lock_episodes(conn, **base, ids=sorted(wanted - held))
        held |= wanted  # an id without a row has no ingest to wait for
    raise errors.Unavailable(_MOVING)


def _find(conn: Conn, base: dict[str, Any], request: Request, resolved: list[UUID]) -> _Plan:
    """Everything the request erases: named memories and episodes, their turns, copies of
    their text, and what was derived from all of it."""
    named_episode = episode_of(request.provenance) if request.provenance else None
    named = set(
        lifecycle_db.forget_match_episodes(
            conn,
            **base,
            session_id=request.session_id,
            before=request.before,
            episode_ids=[named_episode] if named_episode else [],
            subject=request.subject,
        )
    )
    episode_ids = set(named)
    matched = lifecycle_db.forget_match(
        conn,
        **base,
        provenance=request.provenance,
        memory_ids=resolved or None,
        session_id=request.session_id,
        before=request.before,
        sources=[f"episode:{e}" for e in episode_ids],
        subject=request.subject,
    )
    forgotten = {r.id for r in matched}
    for r in matched:  # the episodes they came from hold their text
        episode_ids |= {e for e in map(episode_of, r.provenance) if e is not None}
    siblings = lifecycle_db.forget_turns(conn, **base, sources=[f"episode:{e}" for e in episode_ids])
    turns = {r.id for r in siblings} - forgotten
    kept_turns = turns if request.keep_turns else set()
    turns = turns - kept_turns
    said = lifecycle_db.forget_texts(conn, **base, ids=list(forgotten | turns))
    found = needles.Needles.of(said + lifecycle_db.forget_episode_texts(conn, **base, ids=list(episode_ids)))
    copies: set[UUID] = set()
    copy_episodes: set[UUID] = set()
    if found:
        terms = list(found.terms)
        exclude = list(forgotten | turns | kept_turns)
        copies = {r.id for r in lifecycle_db.forget_memory_copies(conn, **base, needles=terms, exclude=exclude)}
        copy_episodes = set(lifecycle_db.forget_episode_copies(conn, **base, needles=terms, exclude=list(episode_ids)))
    sessions = [request.session_id] if request.session_id else []
    if request.subject is not None:
        sessions = sessions_db.of_subject(conn, **base, subject=request.subject)
    derived = _derived(conn, base, forgotten | turns | copies)
    return _Plan(named, forgotten, episode_ids, turns, found, copies, copy_episodes, derived, sessions)


def _derived(conn: Conn, base: dict[str, Any], gone: set[UUID]) -> set[UUID]:
    derived: set[UUID] = set()
    frontier = set(gone)
    for _ in range(MAX_DERIVED_ROUNDS):
        if not frontier:
            break
        rows = lifecycle_db.forget_derived(
            conn,
            **base,
            kinds=list(rules.DERIVED_KINDS),
            ids=list(gone | derived),
            id_texts=[str(i) for i in frontier],
        )
        frontier = {r.id for r in rows} - derived - gone
        derived |= frontier
    return derived


def _forget_sessions(conn: Conn, base: dict[str, Any], session_ids: list[str]) -> SessionsErased:
    """Delete whole sessions (session.forget_session); their counts summed."""
    out = SessionsErased(ids=sorted(session_ids), count=0, context_calls=0, archives=0, items=0, webhook_deliveries=0)
    for sid in session_ids:
        gone = session.forget_session(conn, **base, session_id=sid)
        out["count"] += gone["sessions"]
        out["context_calls"] += gone["context_calls"]
        out["archives"] += gone["archives"]
        out["items"] += gone["items"]
        out["webhook_deliveries"] += gone["webhook_deliveries"]
    return out


def _scrub(conn: Conn, base: dict[str, Any], found: needles.Needles, erased: list[UUID]) -> Scrubbed:
    """Take the erased text out of what stays: sessions, context calls, session items,
    webhook payloads, archives, audit and review reasons. Counts per place."""
    sessions = session.scrub_sessions(conn, **base, found=found)
    archives = archive.scrub_archives(conn, **base, episode_ids=erased, found=found)
    audit = lifecycle_db.forget_scrub_events(conn, **base, needles=list(found.terms)) if found else None
    return Scrubbed(
        needles=len(found.terms),
        sessions=sessions["sessions"],
        working_texts=sessions["working"],
        plan_texts=sessions["plan"],
        metadata_texts=sessions["metadata"],
        context_calls=sessions["context_calls"],
        session_items=sessions["items"],
        webhook_deliveries=sessions["webhook_deliveries"],
        archives=archives["archives"],
        archive_episodes=archives["episodes"],
        archive_context_calls=archives["context_calls"],
        archive_items=archives["items"],
        archive_texts=archives["texts"],
        events=audit.events if audit else 0,
        reviews=audit.reviews if audit else 0,
    )


def _audit(
    conn: Conn,
    base: dict[str, Any],
    request: Request,
    actor: str,
    now: datetime,
    plan: _Plan,
    deleted: list[UUID],
    erased: list[UUID],
) -> None:
    why = f"right to be forgotten: {request.describe()}"
    named = plan.forgotten | plan.turns | plan.copies
    events = [(i, why if i in named else f"{why}; derived from forgotten evidence") for i in deleted]
    if events:
        lifecycle_db.insert_events(
            conn,
            **base,
            event="forgotten",
            actor=actor,
            now=now,
            ids=[str(i) for i, _ in events],
            reasons=[r for _, r in events],
            related=[None] * len(events),
        )
    if erased:
        store.event(
            conn,
            **base,
            memory_id=None,
            event="forgotten",
            actor=actor,
            reason=f"{why}; {len(erased)} raw episode(s) erased",
            related_ids=erased,
        )


def lock_agent(conn: Conn, tenant_id: UUID, agent_id: str) -> None:
    """The agent's advisory lock as forget takes it, for an erase of the whole agent
    (memworker/erase/agents.py): Unavailable after LOCK_WAIT_S."""
    _lock(conn, tenant_id, agent_id)


def _lock(conn: Conn, tenant_id: UUID, agent_id: str) -> None:
    """Wait (up to LOCK_WAIT_S) for the agent's advisory lock: a consolidation pass must not
    write an insight from memories this call is erasing."""
    deadline = LOCK_WAIT_S
    waited = 0.0
    while not db.try_agent_lock(conn, tenant_id, agent_id):
        if waited >= deadline:
            raise errors.Unavailable("the agent is busy (a consolidation or retention pass); retry shortly")
        conn.execute("SELECT pg_sleep(0.1)")
        waited += 0.1
