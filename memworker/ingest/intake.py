"""Episodes in, API side: a request's episode normalised, redacted when the policy says so,
given its session's subject, and stored queued (docs/episodes.md); the urgency its ingest
message goes out with. The worker side is memworker.ingest.processing."""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker import errors, schemas
from memworker.domain import redact
from memworker.storage import core_db, sessions_db, sleep_db
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

logger = logging.getLogger(__name__)

# Fair ingest (docs/episodes.md): an ingest message's urgency is how deep in its tenant's queued
# backlog its first episode sits, in batches: within the first batch 0 (served first), within 4
# batches 1, within 16 batches 2, deeper 3 (served last). A tenant with nothing waiting goes
# ahead of one with thousands queued, whose own first batches still go ahead of its deeper ones.
URGENCY_BATCHES = (1, 4, 16)
# Sleep's explicit gate: an accepted episode that asks for it requests a consolidation pass.
_ASK = re.compile(r"\b(consolidate|save (my |the |our )?progress)\b|保存进度|整合记忆", re.IGNORECASE)


@dataclass(frozen=True)
class NewEpisode:
    """An episode to accept, as every way in gives it (an HTTP body once normalised, a session
    turn, an archive, a rumination): no row yet."""

    content: str
    messages: list[dict[str, Any]] | None = None
    session_id: str | None = None
    idempotency_key: str | None = None
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    subject: str | None = None  # whom the episode is about or with; messages may name their own


def render(messages: list[dict[str, Any]]) -> str:
    """The text form of a message list, as stored in episodes.content."""
    return "\n".join(f"{m.get('name') or m['role']}: {m['content']}" for m in messages)


def normalise(
    body: schemas.EpisodeIn, *, max_content_bytes: int, max_metadata_depth: int, max_metadata_bytes: int
) -> NewEpisode:
    """The one way a request's episode (HTTP or in-cluster) becomes a NewEpisode: messages
    as plain JSON, the content rendered from them, the sizes checked (the metadata is copied
    into every memory the episode gives: InvalidInput when it is too deep or too large)."""
    schemas.check_metadata(body.metadata, max_depth=max_metadata_depth, max_bytes=max_metadata_bytes)
    msgs = [m.model_dump(mode="json", exclude_none=True) for m in body.messages] if body.messages else None
    content = render(msgs) if msgs else (body.content or "")
    size = len(content.encode())
    if size > max_content_bytes:
        raise errors.PayloadTooLarge(_too_large(size, max_content_bytes, msgs))
    return NewEpisode(
        content, msgs, body.session_id, body.idempotency_key, body.occurred_at, body.metadata, body.subject
    )


def _too_large(size: int, limit: int, msgs: list[dict[str, Any]] | None) -> str:
    """Why an episode is refused for its size, naming its largest message and what to do."""
    why = f"episode content is {size:,} bytes, over the limit of {limit:,} (MEMWORKER_MAX_CONTENT_BYTES)"
    if msgs:
        i, m = max(enumerate(msgs), key=lambda x: len(str(x[1].get("content") or "").encode()))
        largest = len(str(m.get("content") or "").encode())
        why += f"; its largest message is messages[{i}] ({m.get('role')}, {largest:,} bytes)"
    return why + ": send a long message (tool output, a pasted file) as several episodes, or raise the limit"


def accept(
    conn: Conn, *, tenant_id: UUID, agent_id: str, episodes: list[NewEpisode], strict_keys: bool = False
) -> list[tuple[UUID, bool]]:
    """Insert episodes (creating the agent on first use); returns (id, is_new) per episode.

    A repeated idempotency key returns the first episode's id with is_new False, and the
    caller enqueues only the new ones. With strict_keys (keys a caller chose: the API's,
    an in-cluster agent's) the repeat must be the same episode, its subject and content,
    else Conflict and the caller's transaction writes nothing; without (the service's own
    keys, such as a rumination's day, whose input can grow on a re-run) the first stands."""
    tenancy.ensure_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    sent = episodes
    if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id).redact_pii:
        # Before storage, and so before any LLM sees it: the raw episode is kept redacted.
        episodes = [_redacted(ep) for ep in episodes]
    episodes = _session_subjects(conn, tenant_id, agent_id, episodes)
    out: list[tuple[UUID, bool]] = []
    asked = False
    for ep, raw in zip(episodes, sent, strict=True):
        new_id = core_db.insert_episode(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            session_id=ep.session_id,
            idempotency_key=ep.idempotency_key,
            content=ep.content,
            messages=Jsonb(ep.messages) if ep.messages else None,  # a JSON array
            metadata=ep.metadata,
            occurred_at=ep.occurred_at,
            subject=ep.subject,
        )
        if new_id is not None:
            out.append((new_id, True))
            asked = asked or asks_to_consolidate(ep.content)
            continue
        existing = core_db.episode_by_key(
            conn, tenant_id=tenant_id, agent_id=agent_id, idempotency_key=ep.idempotency_key
        )
        assert existing is not None  # the conflict was on this key
        if strict_keys:
            _same_episode(existing, ep, raw)
        out.append((existing.id, False))
    core_db.touch_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    if asked:  # the explicit gate: an episode that says "consolidate" / "save progress"
        sleep_db.request_pass(conn, tenant_id=tenant_id, agent_id=agent_id)
    return out


def _same_episode(existing: core_db.EpisodeKey, ep: NewEpisode, raw: NewEpisode) -> None:
    """Raises Conflict when an idempotency key already names another episode: another subject
    than ep's, or other content than raw's as sent or redacted (so a retry still matches after
    the agent's redact_pii changed). The answer names neither the other episode's subject nor
    its content."""
    if existing.subject != ep.subject:
        raise errors.Conflict(
            f"idempotency key {ep.idempotency_key!r} was used for an episode about another subject "
            "(or about none): one key names one episode; send this one with a new key"
        )
    if existing.content not in (ep.content, raw.content) and existing.content != _redacted(raw).content:
        raise errors.Conflict(
            f"idempotency key {ep.idempotency_key!r} was used for an episode with other content: "
            "one key names one episode; send this one with a new key"
        )


def asks_to_consolidate(text: str) -> bool:
    """The explicit gate: an episode that says 'consolidate' or 'save progress'."""
    return bool(_ASK.search(text))


def backlog(conn: Conn, *, tenant_id: UUID, batch: int) -> int:
    """The tenant's queued episodes before an accept, counted only as deep as urgency looks
    (one short index scan, whatever the tenant's history)."""
    return core_db.queued_backlog(conn, tenant_id=tenant_id, cap=URGENCY_BATCHES[-1] * batch)


def urgency(position: int, batch: int) -> int:
    """0 (most urgent) to len(URGENCY_BATCHES) for a message whose first episode has `position`
    of its tenant's queued episodes ahead of it."""
    return sum(1 for n in URGENCY_BATCHES if position >= n * batch)


def _session_subjects(conn: Conn, tenant_id: UUID, agent_id: str, episodes: list[NewEpisode]) -> list[NewEpisode]:
    """An episode posted in a session and naming no subject is about the session's subject:
    a session opened for one customer keeps every episode posted to it that customer's (a
    message naming its own subject still keeps it). A session_id that names no session, or a
    session without a subject, leaves the episode general."""
    subjects: dict[str, str | None] = {}
    out: list[NewEpisode] = []
    for ep in episodes:
        if ep.subject is None and ep.session_id is not None:
            if ep.session_id not in subjects:
                row = sessions_db.get(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=ep.session_id)
                subjects[ep.session_id] = row.subject if row else None
            ep = dataclasses.replace(ep, subject=subjects[ep.session_id])
        out.append(ep)
    return out


def _redacted(ep: NewEpisode) -> NewEpisode:
    """Content, messages (what was said and who said it) and metadata values redacted: the
    metadata is copied into every memory the episode gives."""
    msgs = [{**m, **{k: redact.redact(m[k]) for k in ("content", "name") if m.get(k)}} for m in ep.messages or []]
    return dataclasses.replace(
        ep,
        content=render(msgs) if msgs else redact.redact(ep.content),
        messages=msgs or None,
        metadata=redact.redact_value(ep.metadata),
    )
