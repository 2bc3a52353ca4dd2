"""Episodes' use cases: accept a request's episodes (durable before the answer), read one or a
list, replay a dead or failed one, and the LLM use ingest and sleep spent. The one way in for the
API, the console, the CLI and the tasks; each function runs in the caller's transaction (the
caller publishes what it accepted once that has committed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from memworker import errors, reflection
from memworker.ingest import intake, processing
from memworker.ingest.intake import NewEpisode
from memworker.models.embeddings import Embedder
from memworker.schemas import Accepted, EpisodeIn, EpisodeList, EpisodeOut, Usage
from memworker.settings import Settings
from memworker.storage import console_db, core_db
from memworker.storage.db import Conn, Pool
from memworker.tenancy import service as tenancy

Processed = processing.Outcome
PostTurn = processing.PostTurn

__all__ = ["NewEpisode", "PostTurn", "Processed"]

USAGE_FIELDS = ("episodes", "stored", "dead", "llm_calls", "tokens_in", "tokens_out", "llm_ms")
SLEEP_FIELDS = ("runs", "llm_calls", "tokens_in", "tokens_out")


def prepare(bodies: Sequence[EpisodeIn], *, settings: Settings) -> list[NewEpisode]:
    """Request episodes checked and normalised, before any transaction. Raises PayloadTooLarge
    (too many, or one too large) and InvalidInput (metadata too deep or too large)."""
    if len(bodies) > settings.max_batch:
        raise errors.PayloadTooLarge(f"at most {settings.max_batch} episodes per batch")
    return [
        intake.normalise(
            b,
            max_content_bytes=settings.max_content_bytes,
            max_metadata_depth=settings.max_metadata_depth,
            max_metadata_bytes=settings.max_metadata_bytes,
        )
        for b in bodies
    ]


@dataclass(frozen=True)
class Intake:
    """What an accept stored: each episode's answer, in order, the new ones to publish, and the
    tenant's queued backlog before it (fair ingest: it sets their messages' priority)."""

    answers: list[Accepted]
    new: list[UUID]
    backlog: int


def accept(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    episodes: list[NewEpisode],
    batch: int,
) -> Intake:
    """Store a request's episodes queued (a repeated idempotency key answers the first episode,
    a duplicate; the key must name the same episode, else Conflict). batch: episodes one worker
    takes, the unit of the backlog's depth."""
    backlog = intake.backlog(conn, tenant_id=tenant_id, batch=batch)
    result = intake.accept(conn, tenant_id=tenant_id, agent_id=agent_id, episodes=episodes, strict_keys=True)
    answers: list[Accepted] = [
        {"episode_id": str(eid), "status": "queued", "duplicate": not is_new} for eid, is_new in result
    ]
    return Intake(answers, [eid for eid, is_new in result if is_new], backlog)


def accept_in_cluster(conn: Conn, *, tenant_id: UUID, agent_id: str, episode: NewEpisode) -> UUID:
    """An episode an in-cluster agent sent straight to the queue: stored queued, idempotent on
    its key (the first episode with it stands); its id."""
    ((episode_id, _),) = intake.accept(conn, tenant_id=tenant_id, agent_id=agent_id, episodes=[episode])
    return episode_id


def episode(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> EpisodeOut:
    """Raises NotFound."""
    row = core_db.get_episode(conn, tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id)
    if row is None:
        raise errors.NotFound("episode not found")
    return episode_out(row)


def episodes(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str | None,
    status: str | None,
    limit: int,
    agent_ids: list[str] | None,
) -> EpisodeList:
    """The tenant's episodes (one agent's, one status's, when given), newest first; agent_ids:
    the agents a key limited to some may see (None: all)."""
    return {"episodes": [episode_out(r) for r in listing(conn, tenant_id, agent_id, status, limit, agent_ids)]}


def listing(
    conn: Conn, tenant_id: UUID, agent_id: str | None, status: str | None, limit: int, agent_ids: list[str] | None
) -> list[core_db.EpisodeListing]:
    """episodes() as rows (the console lays them out itself)."""
    return core_db.list_episodes(
        conn, tenant_id=tenant_id, agent_id=agent_id, status=status, limit=limit, agent_ids=agent_ids
    )


def row(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> core_db.Episode | None:
    """The episode as its row (the console lays it out itself); None when there is none."""
    return core_db.get_episode(conn, tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id)


def source(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> core_db.ClaimedEpisode | None:
    """The episode's own text and messages (shown to admin keys only); None when there is none."""
    return console_db.episode_source(conn, tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id)


def replay(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> Accepted:
    """A dead or failed episode back to queued (the caller publishes it). Raises NotFound."""
    if core_db.replay_episode(conn, tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id) is None:
        raise errors.NotFound("no dead or failed episode with that id")
    return {"episode_id": str(episode_id), "status": "queued"}


def usage(conn: Conn, *, tenant_id: UUID, agent_id: str | None, agent_ids: list[str] | None) -> Usage:
    """LLM calls, tokens and latency per agent and for the tenant: ingest's (the top-level
    fields) and the sleep passes' (`sleep`). agent_ids: as for episodes()."""
    rows = core_db.usage(conn, tenant_id=tenant_id, agent_id=agent_id, agent_ids=agent_ids)
    wanted = [agent_id] if agent_id is not None else agent_ids
    sleep_rows = console_db.consolidation_usage(conn, tenant_id=tenant_id, agent_ids=wanted)
    sleep = {r.agent_id: {f: int(getattr(r, f) or 0) for f in SLEEP_FIELDS} for r in sleep_rows}
    counts = {r.agent_id: {f: int(getattr(r, f) or 0) for f in USAGE_FIELDS} for r in rows}
    for name in set(sleep) - set(counts):  # passes over direct writes only
        counts[name] = dict.fromkeys(USAGE_FIELDS, 0)
    idle = dict.fromkeys(SLEEP_FIELDS, 0)
    agents = [{"agent_id": a, **counts[a], "sleep": sleep.get(a, idle)} for a in sorted(counts)]
    tenant: dict[str, Any] = {f: sum(c[f] for c in counts.values()) for f in USAGE_FIELDS}
    tenant["sleep"] = {f: sum(sleep.get(a, idle)[f] for a in counts) for f in SLEEP_FIELDS}
    out: Usage = {"tenant": tenant, "agents": agents}
    if agent_ids is None:  # the spend is the whole tenant's: not for a key limited to some agents
        budget = tenancy.llm_budget(conn, tenant_id)
        out["llm_budget"] = {
            "tokens_per_day": budget.tokens_per_day,
            "spent_today": budget.spent_today,
            "paused": budget.paused,
        }
    return out


def episode_out(ep: core_db.Episode | core_db.EpisodeListing) -> EpisodeOut:
    """An episode as the API shows it: ids and times as strings."""
    out: EpisodeOut = {
        "episode_id": str(ep.id),
        "agent_id": ep.agent_id,
        "session_id": ep.session_id,
        "status": ep.status,
        "attempts": ep.attempts,
        "last_error": ep.last_error,
        "memory_ids": [str(m) for m in ep.memory_ids],
        "created_at": ep.created_at.isoformat(),
        "stored_at": ep.stored_at.isoformat() if ep.stored_at else None,
    }
    if isinstance(ep, core_db.Episode):
        out["reflector"] = ep.reflector
        out["llm_calls"] = ep.llm_calls
        out["tokens_in"] = ep.tokens_in
        out["tokens_out"] = ep.tokens_out
        out["llm_ms"] = ep.llm_ms
        out["occurred_at"] = ep.occurred_at.isoformat()
        out["metadata"] = ep.metadata
    return out


# --- the worker's side ---------------------------------------------------------------------


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
) -> Processed:
    """Claim, reflect, embed and store one tenant's episodes (memworker/ingest/processing.py).
    post_turn: the hook each stored episode runs in its transaction (the sessions capability's,
    passed in: ingest sits below it); others_waiting: fair ingest's question before each extra
    batch."""
    return processing.process(
        pool,
        embedder,
        reflector,
        settings,
        tenant_id=tenant_id,
        episode_ids=episode_ids,
        post_turn=post_turn,
        others_waiting=others_waiting,
    )


def retry_in_s(attempts: int) -> float:
    """Seconds before a failed episode's next attempt."""
    return processing.backoff_s(attempts)
