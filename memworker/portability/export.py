"""Export: an agent's data (or one subject's across a tenant's agents) as the NDJSON lines of
memworker/portability/format.py, read in keyset pages inside one transaction, so any size
streams in bounded memory (docs/export.md)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from functools import partial
from typing import Any
from uuid import UUID

from memworker.portability import format as fmt
from memworker.storage import db, portability_db

PAGE = 500  # rows per query: a page's lines are one chunk of the response


@dataclass(frozen=True)
class Spec:
    """What to export: one agent's everything, or one subject's (agent None) across agents."""

    tenant_id: UUID
    agent_id: str | None
    subject: str | None
    embeddings: bool
    model: str
    dim: int
    agents: frozenset[str] | None = None  # a subject's export: only these agents (None: all)


def _fields(row: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(row) if f.name not in skip}


def header(spec: Spec) -> str:
    return fmt.dumps(
        {
            "format": fmt.FORMAT,
            "version": fmt.VERSION,
            "agent": spec.agent_id,
            "subject": spec.subject,
            "model": spec.model,
            "dim": spec.dim,
            "embeddings": spec.embeddings,
            "embedding_encoding": fmt.EMBEDDING_ENCODING,
            "exported_at": datetime.now(UTC).isoformat(),
        }
    )


def lines(pool: db.Pool, spec: Spec) -> Iterator[bytes]:
    """The whole file, a chunk of lines at a time. The caller checked the agent exists (or the
    key may read every agent of a subject's export)."""
    counts: Counter[str] = Counter()
    with db.tenant_tx(pool, spec.tenant_id) as conn:
        yield (header(spec) + "\n").encode()
        if spec.agent_id is not None:
            yield from _agent(conn, spec, spec.agent_id, counts)
        else:
            assert spec.subject is not None
            for agent_id in portability_db.subject_agents(conn, tenant_id=spec.tenant_id, subject=spec.subject):
                if spec.agents is not None and agent_id not in spec.agents:
                    continue  # the key reaches other agents only
                yield from _records(conn, spec, agent_id, counts)
        yield (fmt.dumps({"type": "end", "counts": dict(sorted(counts.items()))}) + "\n").encode()


def _agent(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    """Everything an agent holds: its policy overrides, then the records a subject's export
    also has, then what belongs to the agent alone (links between memories, profiles)."""
    policy = portability_db.agent_policy(conn, tenant_id=spec.tenant_id, agent_id=agent_id) or {}
    yield _chunk([{"type": "policy", "policy": policy}], counts)
    yield from _records(conn, spec, agent_id, counts)
    yield from _links(conn, spec, agent_id, counts)
    profiles = portability_db.export_profiles(conn, tenant_id=spec.tenant_id, agent_id=agent_id)
    yield _chunk([{"type": "profile", **_fields(p)} for p in profiles], counts)


def _records(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    yield from _memories(conn, spec, agent_id, counts)
    yield from _episodes(conn, spec, agent_id, counts)
    yield from _sessions(conn, spec, agent_id, counts)


def _chunk(objs: list[dict[str, Any]], counts: Counter[str]) -> bytes:
    for obj in objs:
        counts[obj["type"]] += 1
    return "".join(fmt.dumps(o) + "\n" for o in objs).encode()


def _by_created(fetch: Callable[..., list[Any]]) -> Iterator[list[Any]]:
    """A table's rows in keyset pages on (created_at, id): one page in memory at a time."""
    after: tuple[datetime, UUID] | None = None
    while page := fetch(after_created=after[0] if after else None, after_id=after[1] if after else None, limit=PAGE):
        yield page
        after = (page[-1].created_at, page[-1].id)


def _memories(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    fetch = partial(
        portability_db.export_memories,
        conn,
        tenant_id=spec.tenant_id,
        agent_id=agent_id,
        subject=spec.subject,
        embeddings=spec.embeddings,
    )
    for page in _by_created(fetch):
        yield _chunk(_memory_objs(conn, spec.tenant_id, page), counts)


def _memory_objs(conn: db.Conn, tenant_id: UUID, page: list[portability_db.Memory]) -> list[dict[str, Any]]:
    ids = [m.id for m in page]
    history: dict[UUID, list[dict[str, Any]]] = defaultdict(list)
    for e in portability_db.export_events(conn, tenant_id=tenant_id, memory_ids=ids):
        history[e.memory_id].append(_fields(e, skip=("memory_id",)))
    split = [m.id for m in page if m.parts > 1]
    index = {
        t.memory_id: dict(zip(t.terms, t.tfs, strict=True))
        for t in (portability_db.export_terms(conn, tenant_id=tenant_id, memory_ids=split) if split else [])
    }
    out = []
    for m in page:
        obj: dict[str, Any] = {"type": "memory", "agent": m.agent_id}
        obj.update(_fields(m, skip=("agent_id", "embedding")))
        if m.id in index:
            obj["terms"] = index[m.id]
        obj["events"] = history.get(m.id, [])
        if m.embedding is not None:
            obj["embedding"] = fmt.encode_embedding(m.embedding)
        out.append(obj)
    return out


def _episodes(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    fetch = partial(
        portability_db.export_episodes, conn, tenant_id=spec.tenant_id, agent_id=agent_id, subject=spec.subject
    )
    for page in _by_created(fetch):
        yield _chunk([{"type": "episode", "agent": e.agent_id, **_fields(e, skip=("agent_id",))} for e in page], counts)


def _sessions(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    after: str | None = None
    while True:
        page = portability_db.export_sessions(
            conn, tenant_id=spec.tenant_id, agent_id=agent_id, subject=spec.subject, after_id=after, limit=PAGE
        )
        if not page:
            break
        yield _chunk([{"type": "session", "agent": s.agent_id, **_fields(s, skip=("agent_id",))} for s in page], counts)
        after = page[-1].id
    yield from _session_items(conn, spec, agent_id, counts)


def _session_items(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    """The items of the sessions exported, after every session line (an import writes a
    session before its items)."""
    after: tuple[str, int] = ("", -1)
    while page := portability_db.export_session_items(
        conn,
        tenant_id=spec.tenant_id,
        agent_id=agent_id,
        subject=spec.subject,
        after_session=after[0],
        after_position=after[1],
        limit=PAGE,
    ):
        lines = [{"type": "session_item", "agent": i.agent_id, **_fields(i, skip=("agent_id",))} for i in page]
        yield _chunk(lines, counts)
        after = (page[-1].session_id, page[-1].position)


def _links(conn: db.Conn, spec: Spec, agent_id: str, counts: Counter[str]) -> Iterator[bytes]:
    """What ties the agent's memories together: connections, merged-away ids, open and
    resolved contradiction reviews."""
    t = spec.tenant_id
    last = 0
    while page := portability_db.export_connections(conn, tenant_id=t, agent_id=agent_id, after_id=last, limit=PAGE):
        yield _chunk([{"type": "connection", **_fields(c, skip=("id",))} for c in page], counts)
        last = page[-1].id
    after: UUID | None = None
    while aliases := portability_db.export_aliases(conn, tenant_id=t, agent_id=agent_id, after_id=after, limit=PAGE):
        yield _chunk([{"type": "alias", **_fields(a)} for a in aliases], counts)
        after = aliases[-1].alias_id
    after = None
    while reviews := portability_db.export_reviews(conn, tenant_id=t, agent_id=agent_id, after_id=after, limit=PAGE):
        yield _chunk([{"type": "review", **_fields(r)} for r in reviews], counts)
        after = reviews[-1].id
