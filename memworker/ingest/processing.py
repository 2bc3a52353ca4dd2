"""Episodes out, worker side: claim, reflect, embed and store (the API side is
memworker.ingest.intake).

Exactly once: a worker claims episodes with a compare-and-set that bumps `attempts` (the
claim token), reflects and embeds outside any transaction, then writes each episode's
memories and its 'stored' status in one transaction that first re-checks the claim. A
worker killed mid-way commits nothing; a duplicate delivery finds the claim taken or the
episode stored; memories carry a unique source key per (episode, item) besides."""

from __future__ import annotations

import contextvars
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import numpy as np

from memworker import errors, metrics, reflection, tracing
from memworker.domain import episodic, memories
from memworker.domain.policy import Policy
from memworker.ingest import decisions, neighbours
from memworker.lifecycle import governance
from memworker.memories import writer
from memworker.models.embeddings import Embedder
from memworker.settings import Settings
from memworker.storage import core_db, db, store
from memworker.storage.db import Conn, Pool
from memworker.tenancy import service as tenancy

logger = logging.getLogger(__name__)

# Batches of a tenant's backlog one task takes beyond the episodes its message names: enough to
# keep the embedding overlapped with storing, few enough that other tenants' messages do not
# wait long behind it (4 x ingest_batch_max episodes, a few seconds of work).
EXTRA_BATCHES = 4


class PostTurn(Protocol):
    """The post-turn hook (memworker.sessions.hooks.episode_stored), run in the transaction
    that stores each episode so that what it queues (post_turn webhooks, the session's
    transcript estimate) commits with the episode or not at all. The caller passes it:
    ingest sits below sessions and imports nothing of theirs. Returns the webhook deliveries
    to send after the commit (Outcome.deliveries)."""

    def __call__(
        self,
        conn: Conn,
        *,
        tenant_id: UUID,
        agent_id: str,
        episode_id: UUID,
        session_id: str | None,
        content: str,
        metadata: dict[str, Any],
        memory_ids: list[UUID],
        settings: Settings,
    ) -> list[UUID]: ...


@dataclass
class Outcome:
    stored: list[UUID] = field(default_factory=list)
    failed: list[tuple[UUID, int]] = field(default_factory=list)  # (id, attempts) to retry
    dead: list[UUID] = field(default_factory=list)
    skipped: list[UUID] = field(default_factory=list)  # claimed by another worker meanwhile
    memories_written: int = 0
    duplicates: int = 0
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    deliveries: list[UUID] = field(default_factory=list)  # post_turn webhooks to send
    decisions: Counter[str] = field(default_factory=Counter)  # the LLM's, by relation (decisions.py)


@dataclass
class _Claimed:
    id: UUID
    agent_id: str
    session_id: str | None
    attempts: int
    metadata: dict[str, Any]
    episode: reflection.Episode
    occurred_at: datetime | None = None
    result: reflection.Reflection | None = None
    turns: list[episodic.Turn] = field(default_factory=list)  # the episodic layer, when on
    parts: dict[int, int] = field(default_factory=dict)  # message index -> its part count
    error: str | None = None
    subject: str | None = None

    def texts(self) -> list[str]:
        """What is embedded for this episode: its reflected items, then its turns, a split
        message by its first part only (turn_vectors)."""
        if self.result is None:
            return []
        return [i.text for i in self.result.items] + [t.embedded for t in self.turns if t.part == 0]

    def turn_vectors(self, vectors: Any) -> list[Any]:
        """One vector per turn from the vectors of its first parts (texts() order): a split
        message is embedded once, by its first part, and each of its other parts carries that
        vector; recall takes only a message's first part as a vector candidate (queries/core.sql:
        recall_fusion), so the other parts are its text, found through the message."""
        firsts = iter(vectors)
        out: list[Any] = []
        for t in self.turns:
            out.append(next(firsts) if t.part == 0 else out[-1])
        return out


def process(
    pool: Pool,
    embedder: Embedder,
    reflector: reflection.Reflector,
    settings: Settings,
    *,
    tenant_id: UUID,
    episode_ids: list[UUID],
    post_turn: PostTurn,
    others_waiting: Callable[[], bool] | None = None,
) -> Outcome:
    """Claim, reflect, embed and store one tenant's episodes, a batch at a time, until every
    named episode is done or claimed by someone else (a message may name more episodes than
    one batch holds, and nobody else will come for the rest). others_waiting: asked before
    each extra batch of the tenant's backlog; True (another tenant's urgent work is queued)
    ends the task after the batches already claimed, so the queue serves that work next.
    post_turn: the hook each stored episode runs in its transaction (PostTurn).

    While one batch is stored, the next is claimed, reflected and embedded in a second
    thread: the model (onnxruntime, torch) and the database waits (psycopg) both release the
    GIL, so embedding overlaps the store's round trips instead of queueing behind them."""
    outcome = Outcome()
    pending = list(episode_ids)
    extra = EXTRA_BATCHES
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-ahead") as ahead:
        batch = _prepare(pool, embedder, reflector, settings, tenant_id, pending, outcome)
        while batch.claimed:
            still = [e for e in pending if e not in batch.ids]
            if still and len(still) < len(pending):
                go_on = True
            else:
                # the named ones are done, or the rest are dead or another worker's claim; a full
                # batch says the tenant has a backlog, and its messages would find these claimed
                # anyway: take a few more batches while the pipeline is warm, unless someone
                # else's urgent message waits (fair ingest: the check is one Redis LLEN)
                go_on = len(batch.claimed) >= settings.ingest_batch_max and extra > 0
                go_on = go_on and not (others_waiting is not None and others_waiting())
                extra -= 1
            # run in a copy of this context: the thread's spans (tracing) stay in the task's trace
            run = contextvars.copy_context().run
            upcoming = (
                ahead.submit(run, _prepare, pool, embedder, reflector, settings, tenant_id, still, outcome)
                if go_on
                else None
            )
            _store_batch(pool, settings, tenant_id, batch, outcome, post_turn)
            if upcoming is None:
                break
            pending = still
            batch = upcoming.result()
    return outcome


@dataclass
class _Batch:
    claimed: list[_Claimed]
    vectors: Any  # one row per reflected item, in claim order; None when embedding failed

    @property
    def ids(self) -> set[UUID]:
        return {c.id for c in self.claimed}


def _prepare(
    pool: Pool,
    embedder: Embedder,
    reflector: reflection.Reflector,
    settings: Settings,
    tenant_id: UUID,
    episode_ids: list[UUID],
    outcome: Outcome,
) -> _Batch:
    """Claim a batch (the named episodes first), reflect and embed it; nothing stored yet."""
    with tracing.span("ingest.claim", tenant_id=str(tenant_id)):
        with db.tenant_tx(pool, tenant_id) as conn:
            tokens = core_db.claim_episodes(
                conn,
                tenant_id=tenant_id,
                ids=episode_ids,
                lease_s=settings.episode_lease_s,
                limit=settings.ingest_batch_max,
                opportunistic=True,
            )
            # the episodic layer is the agent's policy (episodic_layer), read in the claim's transaction
            layered = {
                a
                for a in {t.agent_id for t in tokens}
                if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=a).episodic_layer
            }
            if isinstance(reflector, reflection.LLMReflector) and tokens and tenancy.llm_budget(conn, tenant_id).paused:
                # the tenant's LLM tokens for the day are spent: the rules reflect until it turns
                metrics.LLM_BUDGET_PAUSED.labels(str(tenant_id), "reflect").inc(len(tokens))
                reflector = reflector.fallback
        # the claim (attempts spent) is committed before any payload is read: an episode that
        # cannot be read fails alone, counts its attempt and ends dead, never stalling the rest
        claimed, saved = _load_claimed(pool, tenant_id, tokens, layered)
    _attach_known(pool, embedder, reflector, tenant_id, [c for c in claimed if c.error is None and c.id not in saved])
    for c in claimed:
        if c.error is not None:
            continue
        if c.id in saved:
            try:
                c.result = reflection.Reflection.from_json(saved[c.id])
            except Exception as exc:  # a saved reflection that does not decode fails this episode only
                c.error = f"unreadable saved reflection: {type(exc).__name__}: {exc}"
            continue
        try:
            with tracing.span("ingest.reflect", episode_id=str(c.id)):
                c.result = reflector.reflect(c.episode)
        except Exception as exc:  # a reflector bug must fail this episode, not the batch
            logger.exception("reflection failed for episode %s", c.id)
            c.error = f"reflection failed: {type(exc).__name__}: {exc}"
            continue
        outcome.llm_calls += c.result.llm_calls
        outcome.tokens_in += c.result.tokens_in
        outcome.tokens_out += c.result.tokens_out
        if c.result.llm_calls:  # paid for: keep it so a retry after a crash does not pay again
            r = c.result
            with db.tenant_tx(pool, tenant_id) as conn:
                core_db.save_reflection(
                    conn,
                    tenant_id=tenant_id,
                    episode_id=c.id,
                    attempts=c.attempts,
                    reflection=r.to_json(),
                    llm_calls=r.llm_calls,
                    tokens_in=r.tokens_in,
                    tokens_out=r.tokens_out,
                    llm_ms=r.llm_ms,
                )
            c.result = reflection.Reflection.from_json(r.to_json())  # its cost is now on record
    texts = [text for c in claimed for text in c.texts()]
    try:
        with tracing.span("ingest.embed", texts=len(texts)):
            vectors = embedder.embed(texts)
    except Exception as exc:  # the embedder failing fails the whole batch, recorded per episode
        for c in claimed:
            c.error = c.error or f"embedding failed: {type(exc).__name__}: {exc}"
        vectors = None
    return _Batch(claimed, vectors if vectors is None else _settle(claimed, vectors, embedder))


def _settle(claimed: list[_Claimed], vectors: Any, embedder: Embedder) -> Any:
    """Each offline reflection weighed against the kinds' examples (reflection.settle), with the
    vectors of what it keeps: small talk leaves (with the episodic layer on, its message stays a
    turn), an untyped fact may take a kind. Done here, on the vectors the write computes anyway;
    only a spare taken in a dropped item's place is embedded on its own. When that fails, the
    episode keeps the rules' items as they were: it is never failed for it."""
    rows: list[Any] = []
    offset = 0
    for c in claimed:
        n = len(c.texts())
        mine = vectors[offset : offset + n]
        offset += n
        if c.result is not None:
            k = len(c.result.items)
            try:
                c.result, kept = reflection.settle(c.result, mine[:k], embedder)
                mine = np.concatenate([kept, mine[k:]])
            except errors.Unavailable:
                raise
            except Exception:
                logger.exception("weighing the items of episode %s failed; keeping the rules' items", c.id)
        rows.append(mine)
    return np.concatenate(rows) if rows else vectors


def _attach_known(
    pool: Pool, embedder: Embedder, reflector: reflection.Reflector, tenant_id: UUID, claimed: list[_Claimed]
) -> None:
    """The agent's nearest live memories on each episode about to be reflected, when the
    reflector decides against them (an LLM); nothing is fetched for the offline one."""
    if not claimed or not neighbours.wanted(reflector):
        return
    asked = [(c.agent_id, c.subject, c.episode) for c in claimed]
    try:
        with tracing.span("ingest.known", episodes=len(asked)):
            episodes = neighbours.attach(pool, embedder, tenant_id=tenant_id, episodes=asked)
    except errors.Unavailable:
        raise
    except Exception:  # the LLM reflects without them, as before they existed; the rules decide
        logger.exception("fetching known memories failed; reflecting without them")
        return
    for c, episode in zip(claimed, episodes, strict=True):
        c.episode = episode


def _load_claimed(
    pool: Pool, tenant_id: UUID, tokens: list[core_db.ClaimToken], layered: set[str]
) -> tuple[list[_Claimed], dict[UUID, Any]]:
    """The claimed episodes' payloads (and saved reflections), in claim order. Read together;
    when that fails, one by one, so a row that cannot be read (a value out of Python's range,
    data that does not decode) becomes a claim carrying its error, failed by _store_batch."""
    try:
        with db.tenant_tx(pool, tenant_id) as conn:
            found = core_db.claimed_episodes(conn, tenant_id=tenant_id, ids=[t.id for t in tokens])
        rows: dict[UUID, core_db.ClaimedEpisode | str] = {r.id: r for r in found}
    except errors.Unavailable:
        raise
    except Exception:  # one unreadable row: read each alone to find it
        rows = {t.id: got for t in tokens if (got := _load_one(pool, tenant_id, t.id)) is not None}
    claimed: list[_Claimed] = []
    for t in tokens:
        row = rows.get(t.id)
        if row is None:
            continue  # forgotten between the claim and this read: nothing to do
        if isinstance(row, str):
            c = _Claimed(t.id, t.agent_id, None, t.attempts, {}, reflection.Episode("", None), error=row)
            claimed.append(c)
            continue
        c = _Claimed(
            row.id,
            row.agent_id,
            row.session_id,
            t.attempts,
            row.metadata,
            reflection.Episode(row.content, row.messages),
            row.occurred_at,
            subject=row.subject,
        )
        try:  # the turns' part counts weigh the items too, whether or not the turns are kept
            turns = episodic.turns(c.episode.messages, c.episode.content, c.occurred_at)
        except Exception as exc:  # stored data the turn cutter cannot take fails this episode only
            logger.exception("cutting turns failed for episode %s", c.id)
            if c.agent_id in layered:  # without turns to keep, the items are weighed as whole messages
                c.error = f"unreadable episode: {type(exc).__name__}: {exc}"
            turns = []
        c.parts = episodic.message_parts(turns)
        if c.agent_id in layered:
            c.turns = turns
        claimed.append(c)
    saved = {r.id: r.reflection for r in rows.values() if isinstance(r, core_db.ClaimedEpisode) and r.reflection}
    return claimed, saved


def _load_one(pool: Pool, tenant_id: UUID, episode_id: UUID) -> core_db.ClaimedEpisode | str | None:
    """One claimed episode's payload, None when it is gone, or why it cannot be read."""
    try:
        with db.tenant_tx(pool, tenant_id) as conn:
            found = core_db.claimed_episodes(conn, tenant_id=tenant_id, ids=[episode_id])
    except errors.Unavailable:
        raise
    except Exception as exc:
        logger.exception("episode %s cannot be read", episode_id)
        return f"unreadable episode: {type(exc).__name__}: {exc}"
    return found[0] if found else None


def _store_batch(
    pool: Pool,
    settings: Settings,
    tenant_id: UUID,
    batch: _Batch,
    outcome: Outcome,
    post_turn: PostTurn,
) -> None:
    offset = 0
    for c in batch.claimed:
        n = len(c.texts())
        mine = batch.vectors[offset : offset + n] if batch.vectors is not None else None
        offset += n
        if c.error is None and mine is not None:
            try:
                with tracing.span("ingest.store", episode_id=str(c.id), items=len(mine)):
                    _store_one(pool, settings, tenant_id, c, mine, outcome, post_turn)
                continue
            except errors.Unavailable:
                raise  # Postgres is down: let the task retry the whole batch
            except Exception as exc:
                logger.exception("storing episode %s failed", c.id)
                c.error = f"store failed: {type(exc).__name__}: {exc}"
        _fail(pool, settings, tenant_id, c, outcome)


def _store_one(
    pool: Pool,
    settings: Settings,
    tenant_id: UUID,
    c: _Claimed,
    vectors: Any,
    outcome: Outcome,
    post_turn: PostTurn,
) -> None:
    assert c.result is not None
    with db.tenant_tx(pool, tenant_id) as conn:
        current = core_db.lock_claimed_episode(conn, tenant_id=tenant_id, episode_id=c.id)
        if current is None or current.status != memories.EpisodeStatus.PROCESSING or current.attempts != c.attempts:
            outcome.skipped.append(c.id)  # someone else's claim now, or already stored
            return
        policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=c.agent_id)
        expires_at = store.expiry(conn, policy, memories.Tier.L1)
        item_vectors, turn_vectors = vectors[: len(c.result.items)], vectors[len(c.result.items) :]
        # the episodic layer; the episode's memory_ids stay its reflected items (turns are found
        # by their provenance, episode:<id>#m<i>)
        for turn, vec in zip(c.turns, c.turn_vectors(turn_vectors), strict=True):
            _store_turn(conn, tenant_id, c, turn, vec)
            outcome.memories_written += 1
        stored = _store_items(conn, tenant_id, c, item_vectors, policy, expires_at, outcome)
        # a fact a new memory changes is superseded, or the contradiction queued for review;
        # the pairs the LLM reflector has decided are left as it decided
        writer.check(
            conn,
            tenant_id=tenant_id,
            owner=c.agent_id,
            written=[writer.Written(mid, True, draft) for mid, draft in stored.written],
            policy=policy,
            actor="ingest",
            decided=stored.decided,
        )
        deliveries = _finish_episode(conn, settings, tenant_id, c, stored.memory_ids, post_turn)
    outcome.stored.append(c.id)
    outcome.deliveries += deliveries
    outcome.decisions.update(stored.decisions)
    decisions.count(stored.decisions)


@dataclass
class _Stored:
    """What storing an episode's items did."""

    memory_ids: list[UUID] = field(default_factory=list)  # the episode's memories
    written: list[tuple[UUID, memories.Draft]] = field(default_factory=list)  # new in this attempt
    decided: set[tuple[UUID, UUID]] = field(default_factory=set)  # (new, known) pairs the LLM judged
    decisions: Counter[str] = field(default_factory=Counter)  # the LLM's decisions, by relation

    def add(self, memory_id: UUID) -> None:
        if memory_id not in self.memory_ids:
            self.memory_ids.append(memory_id)


def _store_items(
    conn: Conn,
    tenant_id: UUID,
    c: _Claimed,
    vectors: Any,
    policy: Policy,
    expires_at: datetime | None,
    outcome: Outcome,
) -> _Stored:
    """The reflected items as L1 memories, a near-duplicate confirming the memory it restates,
    the LLM reflector's decisions applied (memworker/ingest/decisions.py)."""
    assert c.result is not None
    out = _Stored()
    out.decisions["dropped"] += c.result.dropped
    now = governance.clock(conn) if any(i.relation for i in c.result.items) else None
    for i, (item, vec) in enumerate(zip(c.result.items, vectors, strict=True)):
        source = f"episode:{c.id}" + (f"#m{','.join(map(str, item.messages))}" if item.messages else "")
        # whom the item is about: its messages' subject, else the episode's; governance
        # (dedup here, supersede and review in check_new) stays within that subject
        subject = memories.subject_of(c.episode.messages, item.messages, c.subject)
        agent = c.agent_id
        relation = None if now is None else decisions.usable(conn, tenant_id, agent, item, subject, now)
        if item.relation is not None and relation is None:
            out.decisions["dropped"] += 1  # its memory is gone or another subject's: the rules decide
        if relation == "same":
            outcome.duplicates += 1
            out.decisions["same"] += 1
            out.add(decisions.confirm(conn, tenant_id, agent, item, source, policy))
            continue
        dup = _confirm_duplicate(conn, tenant_id, c, item, vec, subject, source, policy)
        if dup is not None:  # confirmed by a later episode: confidence, TTL, promotion
            outcome.duplicates += 1
            if relation is not None:  # the rules found it said already: their confirmation stands
                out.decisions["dropped"] += 1
            out.add(dup)
            continue
        mid, new, draft = _write_item(conn, tenant_id, c, i, item, vec, subject, source, expires_at)
        if new:  # else written by an earlier attempt that did commit
            out.written.append((mid, draft))
            if relation is not None and now is not None:
                decisions.apply(conn, tenant_id, agent, relation, item, mid, source, policy, now)
                out.decided |= {(mid, known) for known in c.result.shown}
                out.decisions[relation] += 1
        out.add(mid)
        outcome.memories_written += 1
    return out


def _write_item(
    conn: Conn,
    tenant_id: UUID,
    c: _Claimed,
    index: int,
    item: reflection.Item,
    vec: Any,
    subject: str | None,
    source: str,
    expires_at: datetime | None,
) -> tuple[UUID, bool, memories.Draft]:
    """One reflected item as an L1 memory: its id, whether this attempt wrote it, its draft."""
    draft = memories.Draft(
        text=item.text,
        kind=memories.Kind(item.kind),
        confidence=item.confidence,
        tier=memories.Tier.L1,
        entities=item.entities,
        topics=item.topics,
        provenance=(source,),
        metadata=c.metadata,
        expires_at=expires_at,
        flags=memories.flags_for(item.text),
        subject=subject,
        parts=episodic.item_parts(c.parts, item.messages, content_only=not c.episode.messages),
    )
    entry = writer.Entry(draft, vec, f"ep:{c.id}:{index}", c.session_id)
    # governed with the episode's other items once they are all written (_store_one)
    w = writer.write(conn, tenant_id=tenant_id, owner=c.agent_id, entries=[entry], reason=f"episode:{c.id}")[0]
    return w.id, w.new, draft


def _confirm_duplicate(
    conn: Conn,
    tenant_id: UUID,
    c: _Claimed,
    item: reflection.Item,
    vec: Any,
    subject: str | None,
    source: str,
    policy: Policy,
) -> UUID | None:
    """The memory of this subject the item restates, confirmed by it; None when it is new."""
    dup = store.find_duplicate(
        conn,
        tenant_id=tenant_id,
        agent_id=c.agent_id,
        text=item.text,
        embedding=vec,
        threshold=policy.dedup_similarity,
        subject=subject,
        restated=policy.dedup_restated_similarity,
    )
    if dup is not None:
        governance.confirm(
            conn,
            tenant_id=tenant_id,
            agent_id=c.agent_id,
            memory_id=dup,
            confidence=item.confidence,
            source=source,
            policy=policy,
        )
    return dup


def _finish_episode(
    conn: Conn, settings: Settings, tenant_id: UUID, c: _Claimed, memory_ids: list[UUID], post_turn: PostTurn
) -> list[UUID]:
    """The episode marked stored with its memories and LLM usage, then its post-turn hook.
    Returns the webhook deliveries to send after the commit."""
    assert c.result is not None
    r = c.result
    core_db.finish_episode(
        conn,
        tenant_id=tenant_id,
        episode_id=c.id,
        memory_ids=memory_ids,
        reflector=r.reflector,
        llm_calls=r.llm_calls,
        tokens_in=r.tokens_in,
        tokens_out=r.tokens_out,
        llm_ms=r.llm_ms,
    )
    # the post-turn hook: session transcript estimate, post_turn webhooks
    deliveries = post_turn(
        conn,
        tenant_id=tenant_id,
        agent_id=c.agent_id,
        episode_id=c.id,
        session_id=c.session_id,
        content=c.episode.content,
        metadata=c.metadata,
        memory_ids=memory_ids,
        settings=settings,
    )
    return deliveries


def _store_turn(conn: Conn, tenant_id: UUID, c: _Claimed, turn: episodic.Turn, vec: Any) -> UUID:
    """One message of the episode as a 'turn' memory (L0, no TTL: retention lets it go once a
    sleep pass has consolidated it and nobody recalled it; docs/episodes.md)."""
    key = f"ep:{c.id}:{turn.source_key}"
    who = {"role": turn.role} | ({"speaker": turn.speaker} if turn.speaker else {})
    when = {"occurred_at": turn.occurred_at.isoformat()} if turn.occurred_at else {}
    draft = memories.Draft(
        text=turn.text,
        kind=memories.Kind.TURN,
        confidence=1.0,  # it was said: what is uncertain is what it means, which the items carry
        tier=memories.Tier.L0,
        provenance=(f"episode:{c.id}#m{turn.message}",),
        metadata={**c.metadata, **who, **when},
        flags=memories.flags_for(turn.text),
        subject=memories.subject_of(c.episode.messages, (turn.message,), c.subject),
        index_text=turn.message_text,
        parts=turn.parts,
    )
    # written by an earlier attempt that did commit: the same id; a turn is what was said, never governed
    entry = writer.Entry(draft, vec, key, c.session_id)
    return writer.write(conn, tenant_id=tenant_id, owner=c.agent_id, entries=[entry], reason=f"episode:{c.id}")[0].id


def _fail(pool: Pool, settings: Settings, tenant_id: UUID, c: _Claimed, outcome: Outcome) -> None:
    with db.tenant_tx(pool, tenant_id) as conn:
        status = core_db.fail_episode(
            conn,
            tenant_id=tenant_id,
            episode_id=c.id,
            attempts=c.attempts,
            error=(c.error or "unknown")[:2000],
            max_attempts=settings.episode_max_attempts,
        )
    if status is None:
        outcome.skipped.append(c.id)
    elif status == memories.EpisodeStatus.DEAD:
        logger.error("episode %s is dead after %d attempts: %s", c.id, c.attempts, c.error)
        outcome.dead.append(c.id)
    else:
        outcome.failed.append((c.id, c.attempts))


def backoff_s(attempts: int) -> float:
    """Seconds before retry number `attempts`: 2, 4, 8, ... capped at 5 minutes."""
    return float(min(2**attempts, 300))
