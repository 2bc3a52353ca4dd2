"""Session archives: closing a session writes a gzip-compressed, versioned JSONL
snapshot of its state, working memory, plan, episodes and context calls into Postgres,
closes it, and distils it into long-term memory through the reflective write (a summary
episode, reflected like any other). Restoring brings the state back from the snapshot.

The snapshot moves out of the live tables what only the session needs (working memory,
plan, the context-call log): a closed session costs one compressed row. Episodes stay
where they are (memories point at them) and are copied in for audit; restore does not
re-insert episodes, so an episode forgotten since the archive stays forgotten.

Format (FORMAT_VERSION 1), one JSON object per line, in this order:
  {"type": "header", "format": "memworker.session-archive", "format_version": 1, ...}
  {"type": "session", ...restorable session fields}
  {"type": "working", "document": {...}}
  {"type": "plan", "document": {...} | null}
  {"type": "episode", ...}       one per episode of the session, oldest first
  {"type": "context_call", ...}  one per context call, oldest first
  {"type": "item", ...}          one per session item, by position (an archive written before
                                 session items existed has none)
  {"type": "footer", "counts": {...}}

Session items (memworker/sessions/items.py) are copied in like episodes, and like episodes
they stay in their table: an archived session's items are read as they were, and restore
leaves them as they are (an item forgotten since the archive stays forgotten)."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict, cast
from uuid import UUID

from memworker import errors
from memworker.ingest import intake
from memworker.lifecycle import needles
from memworker.schemas import ArchiveOut, Restored
from memworker.sessions import hooks, plans, session, working
from memworker.sessions.statuses import SessionStatus
from memworker.storage import sessions_db, sleep_db
from memworker.storage.db import Conn

FORMAT = "memworker.session-archive"
FORMAT_VERSION = 1
SESSION_FIELDS = (
    "status",
    "metadata",
    "revision",
    "window_tokens",
    "log_tokens",
    "last_context_tokens",
    "reported_used",
    "flush_armed",
    "flush_count",
    "flushed_at",
    "flushed_revision",
    "last_flush_episode_id",
    "created_at",
)
EPISODE_FIELDS = (
    "id",
    "content",
    "messages",
    "metadata",
    "idempotency_key",
    "status",
    "memory_ids",
    "occurred_at",
    "created_at",
    "stored_at",
)
CALL_FIELDS = ("id", "query", "max_tokens", "tokens", "memory_ids", "dropped", "sections", "used", "created_at")
ITEM_FIELDS = ("position", "item", "created_at")


class Line(TypedDict, total=False):
    """One line of an archive: `type` says which of the other keys it has (the format above)."""

    type: str
    # header
    format: str
    format_version: int
    agent_id: str
    session_id: str
    archive_version: int
    archived_at: str
    # working and plan: the document as the session row held it
    document: Any
    # session (SESSION_FIELDS), episode (EPISODE_FIELDS), context_call (CALL_FIELDS), item (ITEM_FIELDS)
    status: str
    metadata: Any
    revision: int
    window_tokens: int | None
    log_tokens: int
    last_context_tokens: int
    reported_used: float | None
    flush_armed: bool
    flush_count: int
    flushed_at: str | None
    flushed_revision: int
    last_flush_episode_id: str | None
    created_at: str
    id: str
    content: str
    messages: Any
    idempotency_key: str | None
    memory_ids: list[str]
    occurred_at: str
    stored_at: str | None
    query: str
    max_tokens: int
    tokens: int
    dropped: dict[str, Any]
    sections: dict[str, Any]
    used: float | None
    position: int
    item: Any
    # footer
    counts: dict[str, int]
    scrubbed: bool


# --- the format (pure) -----------------------------------------------------------------------


def snapshot(
    session: sessions_db.Session,
    episodes: Sequence[sessions_db.SessionEpisode],
    calls: Sequence[sessions_db.ContextCall],
    *,
    items: Sequence[sessions_db.SessionItem] = (),
    version: int,
    archived_at: datetime,
) -> list[Line]:
    """The archive's lines, as objects."""
    lines: list[Line] = [
        {
            "type": "header",
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "agent_id": session.agent_id,
            "session_id": session.id,
            "archive_version": version,
            "archived_at": archived_at.isoformat(),
        },
        _line("session", session, SESSION_FIELDS),
        {"type": "working", "document": working.normalised(session.working)},
        {"type": "plan", "document": session.plan},
    ]
    lines += [_line("episode", e, EPISODE_FIELDS) for e in episodes]
    lines += [_line("context_call", c, CALL_FIELDS) for c in calls]
    lines += [_line("item", i, ITEM_FIELDS) for i in items]
    lines.append({"type": "footer", "counts": counts_of(lines)})
    return lines


def _line(kind: str, row: object, fields: tuple[str, ...]) -> Line:
    """A line of the given type holding the row's fields as plain JSON values."""
    return cast(Line, {"type": kind, **{k: _plain(getattr(row, k)) for k in fields}})


def counts_of(lines: list[Line]) -> dict[str, int]:
    doc = next((x["document"] for x in lines if x["type"] == "working"), None) or {}
    plan = next((x["document"] for x in lines if x["type"] == "plan"), None)
    return {
        "episodes": sum(1 for x in lines if x["type"] == "episode"),
        "context_calls": sum(1 for x in lines if x["type"] == "context_call"),
        "items": sum(1 for x in lines if x["type"] == "item"),
        "working_items": len(doc.get("items", [])),
        "plan_steps": sum(len(m["steps"]) for m in plan["milestones"]) if plan else 0,
    }


def encode(lines: list[Line]) -> tuple[bytes, int, str]:
    """(gzip bytes, JSONL size, sha256 of the JSONL). mtime 0: the same content, the same bytes."""
    raw = "".join(json.dumps(x, ensure_ascii=False, sort_keys=True) + "\n" for x in lines).encode()
    return gzip.compress(raw, compresslevel=6, mtime=0), len(raw), hashlib.sha256(raw).hexdigest()


def decode(data: bytes, *, sha256: str | None = None) -> list[Line]:
    """The lines of an archive. Raises InvalidInput for a corrupt or unknown-version archive."""
    try:
        raw = gzip.decompress(data)
        lines: list[Line] = [json.loads(x) for x in raw.decode().splitlines() if x]
    except (OSError, EOFError, ValueError) as exc:
        raise errors.InvalidInput(f"archive is corrupt: {exc}") from exc
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise errors.InvalidInput("archive checksum mismatch")
    if not lines or lines[0].get("type") != "header" or lines[0].get("format") != FORMAT:
        raise errors.InvalidInput("not a memworker session archive")
    if lines[0].get("format_version") != FORMAT_VERSION:
        raise errors.InvalidInput(
            f"archive format version {lines[0].get('format_version')} is not supported "
            f"(this build reads version {FORMAT_VERSION})"
        )
    if lines[-1].get("type") != "footer":
        raise errors.InvalidInput("archive is truncated (no footer)")
    return lines


def summary_lines(lines: list[Line]) -> list[str]:
    """Sentences distilled into long-term memory: the session's working memory and plan."""
    doc = next(x["document"] for x in lines if x["type"] == "working")
    plan = next(x["document"] for x in lines if x["type"] == "plan")
    return working.render_lines(doc) + plans.render_lines(plan)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --- archive, restore, list, download ---------------------------------------------------------


def archive(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None = None
) -> tuple[ArchiveOut, UUID | None, list[UUID]]:
    """Archive and close the session. Returns (the archive's listing, the summary episode to
    publish or None, webhook deliveries to send). An already archived session returns its
    latest archive with already_archived true and nothing to publish. `subject`: the subject
    the caller acts for (session.load: another subject's or a general session is Forbidden)."""
    row = session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, lock=True, subject=subject)
    if row.status == SessionStatus.ARCHIVED:
        latest = sessions_db.archive_get(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            session_id=session_id,
            version=row.archive_count,
        )
        assert latest is not None
        out = listing(latest)
        out["already_archived"] = True
        return out, None, []
    version = row.archive_count + 1
    episodes = sessions_db.episodes(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    calls = sessions_db.context_calls_of_session(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    items = sessions_db.items_list(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, limit=None)
    lines = snapshot(row, episodes, calls, items=items, version=version, archived_at=session.now())
    data, raw_bytes, digest = encode(lines)
    summary = summary_lines(lines)
    episode_id = None
    if summary:  # the reflective write: the summary becomes an episode, reflected like any other
        ((episode_id, _),) = intake.accept(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            episodes=[
                intake.NewEpisode(
                    "\n".join(summary),
                    session_id=session_id,
                    idempotency_key=f"session-archive:{session_id}:{version}",
                    metadata={"source": "session_archive", "session_id": session_id, "archive_version": version},
                    subject=row.subject,  # a session with one subject is about it
                )
            ],
        )
    saved = sessions_db.archive_insert(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        version=version,
        format_version=FORMAT_VERSION,
        data=data,
        bytes=len(data),
        raw_bytes=raw_bytes,
        sha256=digest,
        counts=lines[-1]["counts"],
        episode_ids=[e.id for e in episodes],
        distill_episode_id=episode_id,
    )
    sessions_db.context_calls_delete(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    sessions_db.mark_archived(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version)
    sleep_db.session_ended(conn, tenant_id=tenant_id, agent_id=agent_id)  # sleep's session gate
    out = listing(saved)
    deliveries = hooks.emit(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        event="archive",
        session_id=session_id,
        data={k: out[k] for k in ("version", "bytes", "counts", "distill_episode_id")},
    )
    out["already_archived"] = False
    return out, episode_id, deliveries


def restore(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, version: int | None, subject: str | None = None
) -> Restored:
    """Reopen an archived session from its latest (or the given) archive. Raises NotFound,
    Forbidden (not `subject`'s, see session.load), Conflict (the session is open),
    InvalidInput (corrupt or unsupported archive)."""
    row = session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, lock=True, subject=subject)
    if row.status != SessionStatus.ARCHIVED:
        raise errors.Conflict(f"session {session_id} is open; only an archived session can be restored")
    arc = sessions_db.archive_get(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        version=version or row.archive_count,
    )
    if arc is None:
        raise errors.NotFound(f"no archive version {version} of this session")
    lines = decode(bytes(arc.data), sha256=arc.sha256)
    state = next(x for x in lines if x["type"] == "session")
    doc = next(x["document"] for x in lines if x["type"] == "working")
    plan = next(x["document"] for x in lines if x["type"] == "plan")
    sessions_db.restore(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        metadata=state["metadata"],
        working=doc,
        plan=plan or None,
        revision=state["revision"],
        window_tokens=state["window_tokens"],
        log_tokens=state["log_tokens"],
        last_context_tokens=state["last_context_tokens"],
        reported_used=state["reported_used"],
        flush_armed=state["flush_armed"],
        flush_count=state["flush_count"],
        flushed_at=state["flushed_at"],
        flushed_revision=state["flushed_revision"],
        last_flush_episode_id=state["last_flush_episode_id"],
    )
    calls = [x for x in lines if x["type"] == "context_call"]
    for c in calls:
        call: dict[str, Any] = dict(c)
        sessions_db.context_call_restore(
            conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, **{k: call[k] for k in CALL_FIELDS}
        )
    archived = [x["id"] for x in lines if x["type"] == "episode"]
    present = sessions_db.episodes_present(conn, tenant_id=tenant_id, agent_id=agent_id, ids=archived)
    return {
        "session_id": session_id,
        "status": SessionStatus.OPEN,
        "from_version": arc.version,
        "restored": {
            "working_items": len(doc.get("items", [])),
            "plan_steps": sum(len(m["steps"]) for m in plan["milestones"]) if plan else 0,
            "context_calls": len(calls),
            "items_in_archive": sum(1 for x in lines if x["type"] == "item"),
            "episodes_in_archive": len(archived),
            "episodes_present": present,
        },
    }


def listing(row: sessions_db.ArchiveInfo | sessions_db.Archive) -> ArchiveOut:
    return {
        "session_id": row.session_id,
        "version": row.version,
        "format_version": row.format_version,
        "bytes": row.bytes,
        "raw_bytes": row.raw_bytes,
        "sha256": row.sha256,
        "counts": row.counts,
        "distill_episode_id": str(row.distill_episode_id) if row.distill_episode_id else None,
        "created_at": row.created_at.isoformat(),
    }


def list_archives(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, subject: str | None = None
) -> list[ArchiveOut]:
    session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    rows = sessions_db.archive_list(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    return [listing(r) for r in rows]


def download(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, version: int, subject: str | None = None
) -> bytes:
    """The archive's gzip bytes. Raises NotFound, Forbidden (the session is not `subject`'s)."""
    if subject is not None:  # an archive is its session's: the acting subject is checked on the session
        session.load(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)
    row = sessions_db.archive_get(conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version)
    if row is None:
        raise errors.NotFound("archive not found")
    return bytes(row.data)


def scrub_lines(lines: list[Line], episode_ids: set[str], found: needles.Needles) -> tuple[list[Line], dict[str, int]]:
    """An archive's lines without what forget erases: the erased episodes' lines (and any
    other episode line holding a needle), the context calls whose query holds one, the items
    holding one in any string, and the
    needles' texts in the working memory, plan and session metadata. Returns (lines, counts
    of what went); the footer is recounted and marked scrubbed when anything went."""
    gone = {"episodes": 0, "context_calls": 0, "items": 0, "texts": 0}
    out: list[Line] = []
    for x in lines:
        if x["type"] == "episode" and (x["id"] in episode_ids or found.scrub(x)[1]):
            gone["episodes"] += 1
            continue
        if x["type"] == "context_call" and found.found_in(x.get("query")):
            gone["context_calls"] += 1
            continue
        if x["type"] == "item" and found.scrub(x["item"])[1]:
            gone["items"] += 1
            continue
        if x["type"] == "working":
            doc, n = working.scrub(x["document"], found.found_in)
            x, gone["texts"] = {**x, "document": doc}, gone["texts"] + n
        elif x["type"] == "plan":
            plan, n = plans.scrub(x["document"], found.found_in)
            x, gone["texts"] = {**x, "document": plan}, gone["texts"] + n
        elif x["type"] == "session":
            meta, n = found.scrub(x.get("metadata"))
            x, gone["texts"] = {**x, "metadata": meta}, gone["texts"] + n
        out.append(x)
    if any(gone.values()):
        out[-1] = {"type": "footer", "counts": counts_of(out), "scrubbed": True}
    return out, gone


def scrub_archives(
    conn: Conn, *, tenant_id: UUID, agent_id: str, episode_ids: list[UUID], found: needles.Needles
) -> dict[str, int]:
    """Rewrite the agent's archives without what forget erases (scrub_lines), so neither a
    download nor a restore and a new archive brings it back. With needles every archive of
    the agent is read (their text cannot be searched in the database: it is compressed);
    without, only those holding a copy of an erased episode. Returns counts: archives
    rewritten, and the episode lines, context calls and texts they lost."""
    total = {"archives": 0, "episodes": 0, "context_calls": 0, "items": 0, "texts": 0}
    if not episode_ids and not found:
        return total
    gone_ids = {str(e) for e in episode_ids}
    if found:
        keys = sessions_db.archive_keys(conn, tenant_id=tenant_id, agent_id=agent_id)
    else:
        keys = sessions_db.archives_with_episodes(conn, tenant_id=tenant_id, agent_id=agent_id, ids=episode_ids)
    for key in keys:
        session_id, version = key.session_id, key.version
        row = sessions_db.archive_get(
            conn, tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version
        )
        assert row is not None  # listed in this transaction, under the agent's lock
        kept, gone = scrub_lines(decode(bytes(row.data)), gone_ids, found)
        if not any(gone.values()):
            continue
        _rewrite(conn, tenant_id, agent_id, session_id, version, kept)
        total["archives"] += 1
        for k, n in gone.items():
            total[k] += n
    return total


def scrub_episodes(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_ids: list[UUID]) -> int:
    """Rewrite every archive of the agent that holds a copy of one of these episodes without
    it; how many archives were rewritten."""
    found = needles.Needles()
    return scrub_archives(conn, tenant_id=tenant_id, agent_id=agent_id, episode_ids=episode_ids, found=found)[
        "archives"
    ]


def _rewrite(conn: Conn, tenant_id: UUID, agent_id: str, session_id: str, version: int, lines: list[Line]) -> None:
    data, raw_bytes, digest = encode(lines)
    sessions_db.archive_rewrite(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        version=version,
        data=data,
        bytes=len(data),
        raw_bytes=raw_bytes,
        sha256=digest,
        counts=lines[-1]["counts"],
        episode_ids=[x["id"] for x in lines if x["type"] == "episode"],
    )
