"""What an LLM reflector is shown of the agent's memories before it reflects an episode: the
nearest live memories of the episode's subject (the general ones when it has none), of the
kinds a later episode can confirm, update or contradict. Fetched only for a reflector that
reads them (reflection.LLMReflector.sees_known): one embedding call for the batch's episodes
and one query per episode (queries/core.sql: nearest_live), before the LLM call and outside
the store transaction; the store transaction checks again that a named memory is live."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from uuid import UUID

from memworker import reflection
from memworker.domain import memories, tokens
from memworker.models.embeddings import Embedder
from memworker.storage import core_db, db, store
from memworker.storage.db import Pool

# The kinds an episode can say again or change; insights and summaries are sleep's own
# writing and turns are what was said, not statements to update.
KINDS = (
    memories.Kind.FACT,
    memories.Kind.PREFERENCE,
    memories.Kind.DECISION,
    memories.Kind.METHOD,
    memories.Kind.EVENT,
)
SHOWN = 8  # memories shown per episode: [m1]..[m8] in the prompt
# The episode text that is embedded and probed: the model reads only its first few hundred
# tokens, and a large agent's candidates come from the rarest of at most PROBE_TERMS terms.
EPISODE_CHARS = 4_000
PROBE_TERMS = 8


def wanted(reflector: reflection.Reflector) -> bool:
    """Whether the reflector reads Episode.known (the offline one does not: nothing fetched)."""
    return bool(getattr(reflector, "sees_known", False))


def attach(
    pool: Pool,
    embedder: Embedder,
    *,
    tenant_id: UUID,
    episodes: list[tuple[str, str | None, reflection.Episode]],
) -> list[reflection.Episode]:
    """Each (agent_id, subject, episode) as its episode with its nearest memories attached."""
    if not episodes:
        return []
    vectors = embedder.embed([e.content[:EPISODE_CHARS] for _, _, e in episodes])
    out = []
    with db.tenant_tx(pool, tenant_id) as conn:
        for (agent_id, subject, episode), vec in zip(episodes, vectors, strict=True):
            rows = nearest(conn, tenant_id=tenant_id, agent_id=agent_id, subject=subject, text=episode.content, vec=vec)
            out.append(replace(episode, known=tuple(reflection.Known(r.id, r.text, r.kind) for r in rows)))
    return out


def nearest(
    conn: db.Conn, *, tenant_id: UUID, agent_id: str, subject: str | None, text: str, vec: Any
) -> list[core_db.NearMemory]:
    """The agent's SHOWN live memories of the subject nearest the vector, nearest first."""
    return core_db.nearest_live(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        subject=subject,
        kinds=list(KINDS),
        embedding=vec,
        terms=sorted(set(tokens.tokenize(text[:EPISODE_CHARS]))),
        probe_terms=PROBE_TERMS,
        per_term=store.CANDIDATE_POSTINGS,
        df_cap=store.DF_CAP,
        k=SHOWN,
    )
