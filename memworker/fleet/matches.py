"""Matches: what several agents of a tenant learnt independently, whatever words each used.

Sleep proposes to a pool a general memory of the agent that another agent also holds
(memworker/fleet/pools.py). Agents that learn a thing on their own say it in their own words,
so the match is the one ingest's dedup uses for "the same fact said again" (rules.confirms),
asked across agents:

- candidates: the other agents' memories close to it: general ones only (a subject's memory
  is about one person and is never pooled, neither on the agent's side nor the other's), live,
  of its kind family (a fact, preference or decision; a method or lesson), at cosine >= the
  policy's dedup_restated_similarity. The search is bounded per memory: at most MAX_EXAMINED
  memories a pass (its window: what is new since the last pass, and what it derived), the
  MAX_PEERS most recently active other agents, PER_PEER memories from each, each agent probed
  through its rarest postings of the memory's terms before any vector is compared (a
  statement that says the same shares most of its words);
- confirmation by the words: the same identifiers and most words at cosine >=
  dedup_similarity, or the same content words said in another order or form at cosine >=
  dedup_restated_similarity; and never a knowledge update: a changed number, date or name, a
  negation, swapped roles, or "was" against "is" is a different fact, however close the
  vectors ("uses Postgres 15" / "uses Postgres 16").

One proposal per pool and fact: a finding joins the pool's proposal that names one of its
memories, has its normalised words (the key the first proposal took), or whose proposing
memory says the same (its nearest by vector, confirmed by the words as above). A rejected
proposal holds its fact's paraphrases too: they are neither proposed again nor shared."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from memworker.domain import rules, tokens
from memworker.domain.policy import Policy
from memworker.fleet.statuses import ProposalStatus
from memworker.storage import core_db, proposals_db, store
from memworker.storage.db import Conn

# Kinds a pool takes, by family: a fact is never matched with a method saying similar words.
_FACTS = ("fact", "preference", "decision")
_LESSONS = ("method", "conclusion", "insight")  # how to do a thing, and what was learnt doing it
FAMILIES: dict[str, tuple[str, ...]] = {k: fam for fam in (_FACTS, _LESSONS) for k in fam}

MAX_EXAMINED = 256  # the agent's memories looked at per pass (a default window holds 200)
MAX_PEERS = 64  # other agents searched per memory
PER_PEER = 2  # their memories kept per agent
PER_TERM = 100  # postings read per probed term
NEAR_PROPOSALS = 5  # a pool's proposals compared by their words
MAX_SOURCES = 100  # sources a proposal names (sql/0016_pool_proposals.sql), the agent's own first
# a decision taken on the fact comes first: a rejection holds, an approval was the share
_PRIORITY: dict[str, int] = {ProposalStatus.REJECTED: 0, ProposalStatus.APPROVED: 1, ProposalStatus.OPEN: 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """A memory of the agent that other agents hold too, in their own words."""

    agent_id: str
    memory: core_db.PoolMemory
    others: tuple[str, ...]  # 'memory:<agent>/<id>' of the other agents' memories of it

    @property
    def sources(self) -> list[str]:
        return [f"memory:{self.agent_id}/{self.memory.id}", *self.others]


def bar(policy: Policy) -> float:
    """The lowest cosine at which two statements may be the same fact."""
    return min(policy.dedup_similarity, policy.dedup_restated_similarity)


def same(older: str, newer: str, cosine: float, policy: Policy) -> bool:
    """newer says what older says (dedup's rule): never when a value, a negation, the roles or
    the time changed."""
    return rules.confirms(
        older, newer, cosine, similarity=policy.dedup_similarity, restated=policy.dedup_restated_similarity
    )


def findings(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: Iterable[UUID], policy: Policy) -> list[Finding]:
    """Of these memories of the agent, the general ones another agent of the tenant learnt
    too, each with the other agents' memories that say it, oldest first."""
    mine = core_db.pool_examined(
        conn, tenant_id=tenant_id, agent_id=agent_id, ids=list(ids), kinds=list(FAMILIES), limit=MAX_EXAMINED
    )
    out: list[Finding] = []
    for memory in mine:
        found = core_db.pool_candidates(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            embedding=memory.embedding,
            terms=sorted(set(tokens.tokenize(memory.text))),
            kinds=list(FAMILIES[memory.kind]),
            min_similarity=bar(policy),
            max_peers=MAX_PEERS,
            per_peer=PER_PEER,
            probe_terms=store.DUPLICATE_PROBE_TERMS,
            per_term=PER_TERM,
            df_cap=store.DF_CAP,
        )
        others = [
            f"memory:{c.other_agent}/{c.other_id}" for c in found if same(c.text, memory.text, c.similarity, policy)
        ]
        if others:  # a proposal names at most MAX_SOURCES memories
            out.append(Finding(agent_id, memory, tuple(others[: MAX_SOURCES - 1])))
    return out


def proposal(conn: Conn, *, tenant_id: UUID, pool: str, finding: Finding, policy: Policy) -> proposals_db.Match | None:
    """The pool's (its agents row's) proposal of the finding's fact, open or decided; a
    decided one before an open one; None when the pool has none yet."""
    found = proposals_db.match(
        conn,
        tenant_id=tenant_id,
        pool=pool,
        sources=finding.sources,
        content_hash=finding.memory.content_hash,
        embedding=finding.memory.embedding,
        min_similarity=bar(policy),
        near=NEAR_PROPOSALS,
    )
    held = [
        m for m in found if m.linked or (m.text is not None and same(m.text, finding.memory.text, m.similarity, policy))
    ]
    return min(held, key=lambda m: _PRIORITY.get(m.status, len(_PRIORITY)), default=None)
