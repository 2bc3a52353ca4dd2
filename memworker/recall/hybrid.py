"""Hybrid recall: one SQL statement (storage/queries/core.sql: recall) per call, over the
query vector the caller embedded (models/embeddings.CachedQueryEmbedder). Up to EXACT_MAX live
memories the plan is an exact per-agent scan for both BM25 and cosine, so every agent gets its
own true top-k and never another agent's rows; see docs/recall.md. A larger agent
gets recall_bounded instead, one statement too: a bounded candidate set (a pool of postings
read by impact, scored on every query term; the nearest memories from the HNSW index and the
agent's memories not yet in it) scored with the agent's own BM25 statistics by the same
fusion and tail as recall, so its cost stops growing with the agent (docs/scaling.md, "Large
agents")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict, cast
from uuid import UUID

import numpy as np
from pydantic import ValidationError

from memworker import errors
from memworker.domain import tokens
from memworker.domain.policy import RECALL_CANDIDATES_MAX, Policy
from memworker.fleet import pools
from memworker.recall.stats import Stats
from memworker.schemas import Hit as HitOut
from memworker.schemas import Holder, RecallIn, Signals
from memworker.storage import bumps, core_db, db, large_agents, replicas
from memworker.storage.db import Conn, Pool

MAX_K = 100

# The switch: an agent with more live memories than this gets the bounded statement; it is the
# size at which storage/large_agents.py puts an agent into the HNSW index.
EXACT_MAX = large_agents.EXACT_MAX
# Lexical candidates: the pool is the rarest query terms' postings in full while their
# document frequencies add up to at most POSTINGS_BUDGET, and the other terms'
# POSTINGS_PER_TERM best by impact; every pooled memory is scored by all its query terms and
# the LEXICAL_CANDIDATES best are scored exactly by the recall statement (queries/core.sql:
# recall_bounded says when the pool provably holds the exact BM25 top). More than the
# exact statement's candidates: a query whose vector lies between the clusters of its terms
# has its nearest memories spread over them, where one HNSW scan reaches few, and they share
# its terms. On 40 such queries (bench/agent_size.py's corpus, 100,000 memories) the top 10
# was the exact statement's on 0.965 of results with 200, 0.99 with 400, 1.0 with 600; the
# statement's cost grows with its candidates (about 9 ms over 250, 18 ms over 600).
POSTINGS_BUDGET = 5_000
POSTINGS_PER_TERM = 200
LEXICAL_CANDIDATES = 400
# HNSW breadth for the vector candidates. Texts that share their terms lie in dense clusters
# of near-equal vectors; what finds a query's cluster is the graph's density (sql/0019), not
# a wider scan: ef_search 120 and 400 found the same share of the exact top 60
# (bench/agent_size.py, docs/scaling.md), and a wider scan costs more where a query's vector
# lies between clusters.
EF_SEARCH = 120

Plan = Literal["auto", "exact", "bounded"]


class Related(TypedDict):
    """A memory a hit replaced, or is in an open review with (the context packer's history)."""

    id: str
    text: str
    kind: str
    relation: str


class Newer(Related):
    created_at: str


class Hit(HitOut):
    """A recalled memory as the API answers it, and with history_since (the context packer's)
    what it replaced since then (previously) and the newest live memory it conflicts with that
    came after it (newer)."""

    previously: NotRequired[list[Related]]
    newer: NotRequired[Newer]


class UnionParams(TypedDict):
    """recall_agents' parameters (queries/core.sql)."""

    tenant_id: UUID
    terms: list[str]
    qvec: np.ndarray
    tiers: list[str]
    kinds: list[str] | None
    since: datetime | None
    until: datetime | None
    metadata: dict[str, Any] | None
    hide_flagged: bool
    candidates: int
    vector_floor: float
    w_bm25: float
    w_vector: float
    w_parts: float
    w_prior: float
    k: int
    pool: int
    subject: str | None
    retired: bool


class Params(UnionParams):
    """recall's parameters (queries/core.sql)."""

    agent_id: str
    collapse: bool


class BoundedParams(TypedDict):
    """recall_bounded's own parameters, beside recall's."""

    n: float
    avgdl: float
    dfs: list[float]
    budget: int
    per_term: int
    lexical: int
    ann: int


class Owner(TypedDict, total=False):
    """Whose a memory is: an agent's (agent_id) or a pool's (pool)."""

    agent_id: str
    pool: str


@dataclass(frozen=True)
class Probe:
    """What a recall needs from the process besides its query: the query's vector and the
    process's cache of large agents' statistics (runtime.Resources.recall_stats; None: read
    them again)."""

    vector: np.ndarray
    stats: Stats | None = None


@dataclass(frozen=True)
class Query:
    text: str
    k: int = 5
    tiers: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, Any] | None = None
    explain: bool = False
    # whom the recall is for: that subject's memories and the agent's general ones, never
    # another subject's; None: the general ones only
    subject: str | None = None
    # an audit: the superseded memories still kept for history are ranked too, each hit of
    # them marked with its valid_to and superseded_by; never what recall serves as current
    include_superseded: bool = False

    def validate(self) -> None:
        """InvalidInput unless the query keeps the rules of a recall's input: those of
        schemas.RecallIn, the API's edge check, stated once there with their messages (a query
        built in code, the context packer's or the console's, is held to the same)."""
        try:
            RecallIn.model_validate(
                {
                    "query": self.text,
                    "k": self.k,
                    "tiers": list(self.tiers) if self.tiers else None,
                    "kinds": list(self.kinds) if self.kinds else None,
                    "since": self.since,
                    "until": self.until,
                    "metadata": self.metadata,
                    "explain": self.explain,
                    "subject": self.subject,
                    "include_superseded": self.include_superseded,
                }
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            raise errors.InvalidInput(f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from None


def recall(
    conn: Conn,
    qvec: np.ndarray,
    *,
    tenant_id: UUID,
    agent_id: str,
    query: Query,
    policy: Policy,
    path: Plan = "auto",
    history_since: datetime | None = None,
    stats: Stats | None = None,
) -> list[Hit]:
    """The agent's top-k live memories for the query, best first, with their signals, inside
    the caller's transaction. qvec is the query's embedding (the caller embeds it before it
    takes a connection, so no pooled connection waits on the model). A read only (a replica
    can run it): serve() counts the hits as accessed. path: "auto" picks the exact or the
    bounded statement by the agent's size (EXACT_MAX); the others force one (tests, benches).
    history_since (the context packer's): each hit also says what it replaced since then and
    what it conflicts with (`previously`, `newer`: see `current`). stats: the process's cache
    of large agents' statistics (runtime.Resources.recall_stats); without one they are read
    again."""
    return _found(conn, qvec, tenant_id, agent_id, query, policy, path, history_since, stats)[0]


def _found(
    conn: Conn,
    qvec: np.ndarray,
    tenant_id: UUID,
    agent_id: str,
    query: Query,
    policy: Policy,
    path: Plan = "auto",
    history_since: datetime | None = None,
    stats: Stats | None = None,
) -> tuple[list[Hit], list[UUID]]:
    """The hits, and the memories the recall counts as accessed: the agent's own hits and the
    memories collapsed into them (their slot went to a memory that names their messages, so
    they were found too and retention keeps them); a pool's memories are not the agent's."""
    if policy.pools_read:  # the agent's memories and its pools' (memworker/fleet/pools.py), one ranked list
        return _with_pools(conn, qvec, tenant_id, agent_id, query, policy, history_since)
    rows = _rows(conn, _params(qvec, tenant_id, agent_id, query, policy), path=path, stats=stats)
    hits = current(conn, tenant_id, _hits(rows, query.explain), history_since, audit=query.include_superseded)
    # a superseded hit (an audit's) is history, not use: it is not counted as accessed
    retired = {h["id"] for h in hits if "valid_to" in h}
    return hits, [i for r in rows if str(r.id) not in retired for i in [r.id, *(r.collapsed or [])]]


def _rows(conn: Conn, params: Params, *, path: Plan = "auto", stats: Stats | None = None) -> list[core_db.RecallRow]:
    bounded = _bounded(conn, params, path, stats)
    if bounded is None:
        return core_db.recall(conn, **params)
    live = {k: v for k, v in params.items() if k != "retired"}  # the bounded path reads live rows only
    return core_db.recall_bounded(conn, **live, **bounded)


def _bounded(conn: Conn, params: Params, path: Plan, stats: Stats | None = None) -> BoundedParams | None:
    """The bounded statement's own parameters for a large agent, None for the exact
    statement. Filters other than tiers and subject (kinds, time, metadata) keep the exact
    statement: they may reject most of a bounded candidate set. The vector candidates come
    from the HNSW index, which holds an agent once large_agents.index has put it in
    (ann_ready); until then it keeps the exact statement."""
    if path == "exact" or any(params[f] is not None for f in ("kinds", "since", "until", "metadata")):
        return None
    if params["retired"]:  # an audit: the HNSW index holds live memories only
        return None
    stats = stats or Stats()
    agent = stats.agent(conn, params["tenant_id"], params["agent_id"], params["subject"])
    if path == "auto" and (agent.rows <= EXACT_MAX or not agent.ann_ready):
        return None
    dfs = _setup(
        conn, params["tenant_id"], params["agent_id"], params["terms"], max(EF_SEARCH, 2 * params["candidates"]), stats
    )
    return BoundedParams(
        n=float(agent.n),
        avgdl=agent.avgdl,
        dfs=dfs,
        budget=POSTINGS_BUDGET,
        per_term=POSTINGS_PER_TERM,
        lexical=max(LEXICAL_CANDIDATES, params["candidates"]),
        # twice what the statement keeps: an approximate scan's misses fall past its cut
        ann=2 * params["candidates"],
    )


def _setup(conn: Conn, tenant_id: UUID, agent_id: str, terms: list[str], ef_search: int, stats: Stats) -> list[float]:
    """The bounded statement's settings and each term's document frequency over the agent, at
    most stats.STATS_TTL_S old, in one round trip: counted for the terms this process has not
    counted within that time (most queries repeat earlier terms). Sending the settings in a
    pipeline with the statement when every count is cached saved nothing measurable."""
    fresh = stats.fresh_dfs(tenant_id, agent_id, terms)
    missing = [t for t in terms if t not in fresh]
    counted = core_db.recall_bounded_setup(
        conn, tenant_id=tenant_id, agent_id=agent_id, terms=missing, ef_search=ef_search
    )
    if missing:
        new = dict(zip(missing, counted, strict=True))
        stats.keep_dfs(tenant_id, agent_id, new)
        fresh.update(new)
    return [fresh[t] for t in terms]


def serve(
    pool: Pool,
    qvec: np.ndarray,
    *,
    tenant_id: UUID,
    agent_id: str,
    query: Query,
    policy: Policy,
    access: bumps.Buffer,
    reads: replicas.Reads | None = None,
    client_lsn: int = 0,
    stats: Stats | None = None,
) -> list[Hit]:
    """recall() as the API serves it, in a transaction of its own: with replicas (reads), on
    one that has replayed the caller's last write (client_lsn, or the one Redis remembers),
    else on the primary. The accesses are counted in the process's buffer (access), which
    sends them to Redis, and the beat's drain applies them on the primary in batches
    (storage/bumps.py): the statement only reads, so concurrent recalls of one agent never
    wait on each other's row locks, and a recall writes no WAL."""

    def find(conn: Conn) -> tuple[list[Hit], list[UUID]]:
        return _found(conn, qvec, tenant_id, agent_id, query, policy, stats=stats)

    if reads is None or policy.pools_read:
        with db.tenant_tx(pool, tenant_id) as conn:
            hits, accessed = find(conn)
    else:
        hits, accessed = reads.read(tenant_id, find, agent_id=agent_id, client_lsn=client_lsn)
    access.add(tenant_id, accessed)
    return hits


def _with_pools(
    conn: Conn,
    qvec: np.ndarray,
    tenant_id: UUID,
    agent_id: str,
    query: Query,
    policy: Policy,
    history_since: datetime | None = None,
) -> tuple[list[Hit], list[UUID]]:
    """The agent's recall with the pools it reads: the statement over several agents (BM25
    over the union), each pool hit naming its pool and every hit its holders (a text the
    agent shared into a pool is one hit); the agent's own copies of the hits count as accessed."""
    owners = [agent_id, *pools.readable(policy)]
    rows = core_db.recall_agents(conn, agent_ids=owners, **_union_params(qvec, tenant_id, owners, query, policy))
    hits = _hits(list(rows), query.explain)
    for r, hit in zip(rows, hits, strict=True):
        pool = pools.name_of(r.agent_id)
        if r.agent_id != agent_id and pool is not None:
            hit["pool"] = pool
        hit["holders"] = _holders(r)
    hits = current(conn, tenant_id, hits, history_since, audit=query.include_superseded)
    retired = {h["id"] for h in hits if "valid_to" in h}
    own = [
        i
        for r in rows
        if str(r.id) not in retired
        for a, i in zip(r.holder_agents, r.holder_ids, strict=True)
        if a == agent_id
    ]
    return hits, own


def serve_agents(
    pool: Pool,
    qvec: np.ndarray,
    *,
    tenant_id: UUID,
    agent_ids: list[str],
    query: Query,
    policy: Policy,
) -> list[Hit]:
    """One ranked list over several agents' (and pools') memories, each hit naming its
    agent_id (or its pool; agent_ids holds pools as their owner ids, memworker/fleet/pools.py). BM25's
    statistics are those of the union of the agents' live memories (one corpus), and the
    weights and thresholds are `policy`'s (the tenant's), so scores compare across agents.
    One text is one hit: the copies several agents hold of it are named in its holders, so k
    hits are k distinct texts (queries/core.sql: recall_agents). A read only: no access
    counts are bumped."""
    params = _union_params(qvec, tenant_id, agent_ids, query, policy)
    with db.tenant_tx(pool, tenant_id) as conn:
        rows = core_db.recall_agents(conn, agent_ids=agent_ids, **params)
        hits = [_owned(r, hit) for r, hit in zip(rows, _hits(list(rows), query.explain), strict=True)]
        return current(conn, tenant_id, hits, audit=query.include_superseded)


def _union_params(qvec: np.ndarray, tenant_id: UUID, agent_ids: list[str], query: Query, policy: Policy) -> UnionParams:
    """recall_agents' parameters: recall's, less those only the one-agent statement takes,
    with room for k distinct texts when every agent holds a copy of each: k ranked copies per
    agent, from at least as many candidates per signal."""
    params = _params(qvec, tenant_id, agent_ids[0], query, policy)
    pool = query.k * len(agent_ids)
    return UnionParams(
        tenant_id=params["tenant_id"],
        terms=params["terms"],
        qvec=params["qvec"],
        tiers=params["tiers"],
        kinds=params["kinds"],
        since=params["since"],
        until=params["until"],
        metadata=params["metadata"],
        hide_flagged=params["hide_flagged"],
        # as many candidates per signal as the pool ranks, within the policy's own ceiling
        candidates=min(max(params["candidates"], pool), RECALL_CANDIDATES_MAX),
        vector_floor=params["vector_floor"],
        w_bm25=params["w_bm25"],
        w_vector=params["w_vector"],
        w_parts=params["w_parts"],
        w_prior=params["w_prior"],
        k=params["k"],
        pool=pool,
        subject=params["subject"],
        retired=params["retired"],
    )


def _owner(owner: str) -> Owner:
    """Whose a memory is: {"agent_id": ...}, or {"pool": ...} for a pool's memory."""
    pool = pools.name_of(owner)
    return Owner(agent_id=owner) if pool is None else Owner(pool=pool)


def _owned(row: core_db.AgentsRecallRow, hit: Hit) -> Hit:
    """A hit over several agents: whose it is first, then the hit, then every holder."""
    return cast(Hit, {**_owner(row.agent_id), **hit, "holders": _holders(row)})


def _holders(row: core_db.AgentsRecallRow) -> list[Holder]:
    """Every agent or pool holding the hit's text, with its memory's id, the hit's own first."""
    return [cast(Holder, {**_owner(a), "id": str(i)}) for a, i in zip(row.holder_agents, row.holder_ids, strict=True)]


def _params(qvec: np.ndarray, tenant_id: UUID, agent_id: str, query: Query, policy: Policy) -> Params:
    query.validate()  # a query built in code (the context packer's, the console's); the API's is RecallIn
    return Params(
        tenant_id=tenant_id,
        agent_id=agent_id,
        terms=sorted(set(tokens.tokenize(query.text))),
        qvec=qvec,
        tiers=list(query.tiers or policy.recall_tiers),
        kinds=list(query.kinds) if query.kinds else None,
        since=query.since,
        until=query.until,
        metadata=query.metadata or None,
        hide_flagged=policy.hold_back_flagged,
        candidates=max(policy.recall_candidates, query.k),
        vector_floor=policy.recall_vector_floor,
        w_bm25=policy.recall_bm25_weight,
        w_vector=policy.recall_vector_weight,
        w_parts=policy.recall_part_discount,
        w_prior=policy.recall_prior_weight,
        k=query.k,
        # room for hits that collapse into better-ranked ones (an item and its turns)
        pool=query.k * 3 if policy.recall_collapse else query.k,
        collapse=policy.recall_collapse,
        subject=query.subject,
        retired=query.include_superseded,
    )


def _hits(rows: list[core_db.RecallRow], explain: bool) -> list[Hit]:
    hits = []
    for r in rows:
        hit = Hit(
            id=str(r.id),
            text=r.text,
            kind=r.kind,
            tier=r.tier,
            score=round(float(r.score), 6),
            metadata=r.metadata,
            created_at=r.created_at.isoformat(),
            provenance=r.provenance,
            flags=r.flags,
            trust=r.trust,
            subject=r.subject,
        )
        if explain:
            hit["signals"] = Signals(
                bm25=float(r.bm25),
                vector=float(r.vector),
                fused=float(r.fused),
                salience=float(r.salience),
                access=int(r.access_count),
                freshness=float(r.freshness),
                prior=float(r.prior),
            )
            # memories whose source messages this hit (or a better one) already names: they
            # gave up their slot (policy.recall_collapse)
            hit["collapsed"] = [str(c) for c in r.collapsed or []]
        hits.append(hit)
    return hits


# --- what is true now: conflicts under review ---------------------------------------------------


def current(
    conn: Conn,
    tenant_id: UUID,
    hits: list[Hit],
    history_since: datetime | None = None,
    *,
    audit: bool = False,
) -> list[Hit]:
    """The hits with their open conflicts (one query for all of them, queries/core.sql:
    recall_related): a hit in an open review with another live memory names it
    (conflicts_with) and says since when it holds (valid_from), and of two such hits the newer
    ranks directly above the older, whatever their scores: until a person settles the review
    the later statement is the better guess at what is true now (docs/recall.md).
    With history_since (never from the API: the context packer's), a hit also gets
    `previously`: the memories it superseded since then and the older ones it conflicts with
    ({"id", "text", "kind", "relation"}, newest first), and `newer`: the newest live memory
    it conflicts with that came after it. With audit (include_superseded), a superseded hit
    gets valid_from, valid_to and superseded_by (None: retired as derived from a superseded
    memory, lifecycle/derived.py)."""
    if not hits:
        return hits
    rows = core_db.recall_related(
        conn, tenant_id=tenant_id, ids=[UUID(h["id"]) for h in hits], replaced_since=history_since, audit=audit
    )
    by_id = {h["id"]: h for h in hits}
    for r in rows:
        if r.relation == "retired" and str(r.memory_id) in by_id:
            hit = by_id[str(r.memory_id)]
            hit["valid_from"] = r.valid_from.isoformat()
            hit["valid_to"] = r.other_valid_from.isoformat()
            hit["superseded_by"] = None if r.other_id is None else str(r.other_id)
    if history_since is not None:
        _histories(hits, rows)
    return mark_conflicts(hits, rows)


def _histories(hits: list[Hit], rows: list[core_db.RelatedRow]) -> None:
    by_id = {h["id"]: h for h in hits}
    for r in rows:
        hit = by_id.get(str(r.memory_id))
        if hit is None or r.relation == "retired":
            continue
        other = Related(id=str(r.other_id), text=r.other_text, kind=r.other_kind, relation=r.relation)
        if r.newer:
            hit.setdefault("previously", []).append(other)
        elif "newer" not in hit:  # rows come newest other first
            hit["newer"] = Newer(**other, created_at=r.other_valid_from.isoformat())


def mark_conflicts(hits: list[Hit], rows: list[core_db.RelatedRow]) -> list[Hit]:
    """Pure: each conflict row's hit gets valid_from and conflicts_with (the other memories'
    ids, newest first), and every hit that is the newer side of a review with another hit is
    moved directly above it (the order of the rest is kept)."""
    by_id = {h["id"]: h for h in hits}
    newer_than: list[tuple[str, str]] = []  # (newer, older), both hits
    for r in rows:
        if r.relation != "conflict" or str(r.memory_id) not in by_id:
            continue
        hit, other = by_id[str(r.memory_id)], str(r.other_id)
        hit["valid_from"] = r.valid_from.isoformat()
        hit.setdefault("conflicts_with", []).append(other)
        if other in by_id and r.newer:
            newer_than.append((hit["id"], other))
    order = [h["id"] for h in hits]
    for _ in range(len(newer_than)):  # each pass settles one more pair; a chain needs at most this many
        moved = False
        for newer, older in newer_than:
            i, j = order.index(newer), order.index(older)
            if i > j:
                order.insert(j, order.pop(i))
                moved = True
        if not moved:
            break
    return [by_id[i] for i in order]
