"""Import: which kind of file a body is, every line checked before anything is written, and
the restore of a memworker export (docs/export.md).

A memworker export is a restore: its records are written as they were (no redaction, dedup
or governance judges them again), with ids derived from the exported ones (format.new_id), in
one transaction: a file is restored whole or not at all, and a second import of it finds
every row already there and writes nothing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np

from memworker import errors
from memworker.domain import memories, tokens
from memworker.domain.policy import Policy
from memworker.models.embeddings import Embedder
from memworker.portability import format as fmt
from memworker.portability import mem0
from memworker.storage import db, portability_db, store
from memworker.tenancy import service as tenancy

CHUNK = 500  # lines written per statement
MEMWORKER, JSONL, LANGGRAPH, MEM0 = "memworker", "jsonl", "langgraph", mem0.MEM0


class LineError(errors.InvalidInput):
    """A line of an import that is not what its format allows: nothing was written."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line


def numbered(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number from 1, parsed JSON) of each non-blank line; LineError for one that is not
    UTF-8 JSON."""
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield n, json.loads(raw)
            except UnicodeDecodeError:
                raise LineError(n, "not UTF-8") from None
            except ValueError as exc:
                raise LineError(n, f"not JSON ({exc})") from None
            except RecursionError:
                raise LineError(n, "nested too deeply") from None


def count_lines(path: Path) -> int:
    """The file's non-blank lines."""
    with path.open("rb") as f:
        return sum(1 for raw in f if raw.strip())


def sniff(path: Path) -> str:
    """The file's format, from its start: a Mem0 get_all answer ({"results": ...}), else from its
    first line: a memworker export's header, a LangGraph store item (namespace, key, value) or a
    plain {"text": ...} line."""
    if mem0.looks_like(path):
        return MEM0
    for n, obj in numbered(path):
        if not isinstance(obj, dict):
            raise LineError(n, "not a JSON object")
        if "format" in obj:
            return MEMWORKER
        if {"namespace", "key", "value"} <= obj.keys():
            return LANGGRAPH
        if "text" in obj:
            return JSONL
        raise LineError(
            n, 'neither a memworker export header, a LangGraph item, a {"text": ...} line nor a Mem0 {"results": ...}'
        )
    raise errors.InvalidInput("the file holds no lines")


def check(path: Path) -> fmt.Header:
    """The header of a memworker export whose every line is valid and whose end line counts
    what it holds; LineError for the first line that is not."""
    header: fmt.Header | None = None
    counts: Counter[str] = Counter()
    sessions: set[tuple[str, str]] = set()  # (agent, id) of the session lines so far
    ended = 0
    for n, obj in numbered(path):
        if ended:
            raise LineError(n, f"a line after the end line (line {ended})")
        if header is None:
            try:
                header = fmt.parse_header(obj)
            except ValueError as exc:
                raise LineError(n, str(exc)) from None
            continue
        try:
            line = fmt.parse_line(obj, header)
            if isinstance(line, fmt.PolicyLine):
                Policy.resolve(line.policy)
        except (ValueError, errors.InvalidInput) as exc:
            raise LineError(n, str(exc)) from None
        if isinstance(line, fmt.SessionLine):
            sessions.add((line.agent, line.id))
        elif isinstance(line, fmt.SessionItemLine) and (line.agent, line.session_id) not in sessions:
            raise LineError(n, f"session_item: session {line.session_id!r} has no session line before it")
        if isinstance(line, fmt.EndLine):
            if dict(line.counts) != {k: v for k, v in counts.items() if v}:
                raise LineError(n, f"the end line counts {line.counts}, the file holds {dict(counts)}")
            ended = n
        else:
            counts[line.type] += 1
    if header is None:
        raise errors.InvalidInput("the file holds no lines")
    if not ended:
        raise errors.InvalidInput("the file has no end line: it was cut short (nothing was written)")
    return header


@dataclass
class Target:
    tenant_id: UUID
    agent_id: str
    embedder: Embedder
    model: str
    dim: int


def restore(conn: db.Conn, target: Target, path: Path, header: fmt.Header) -> dict[str, int]:
    """Write a checked export into the target agent, in the caller's one transaction. Vectors are the
    file's when its model is this server's (name and dimension), else computed again, as for
    a memory exported without one. Answers what was written (and what was already there)."""
    fits = header.embeddings and header.model == target.model and header.dim == target.dim
    counts: Counter[str] = Counter()
    pending: list[tuple[str, str]] = []  # (memory id, the id of the memory that superseded it)
    tenancy.ensure_agent(conn, tenant_id=target.tenant_id, agent_id=target.agent_id)
    for kind, objs, vectors in _ahead(target, _runs(path), fits):
        _write_run(conn, target, kind, objs, vectors, counts, pending)
    if pending:
        ids, newer = zip(*pending, strict=True)
        portability_db.restore_supersedes(conn, tenant_id=target.tenant_id, ids=list(ids), newer=list(newer))
    store.event(
        conn,
        tenant_id=target.tenant_id,
        agent_id=target.agent_id,
        memory_id=None,
        event="imported",
        reason=f"{fmt.FORMAT} v{header.version} of {header.agent or header.subject}: "
        f"{counts['memories_written']} memories written",
        actor="api",
    )
    return dict(counts)


def _runs(path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The record lines (header and end left out) in runs of one type, at most CHUNK long."""
    kind, first = "", True
    run: list[dict[str, Any]] = []
    for _, obj in numbered(path):
        if first or obj.get("type") == "end":
            first = False
            continue
        if obj["type"] != kind or len(run) >= CHUNK:
            if run:
                yield kind, run
            kind, run = obj["type"], []
        run.append(obj)
    if run:
        yield kind, run


Vectors = tuple[list[np.ndarray], int]  # a run's memories' vectors, and how many were embedded now


def _ahead(
    target: Target, runs: Iterator[tuple[str, list[dict[str, Any]]]], fits: bool
) -> Iterator[tuple[str, list[dict[str, Any]], Vectors | None]]:
    """Each run with its memories' vectors, those of the next run computed while this one is
    written: the embedder (outside the GIL) and the database work at the same time."""
    with ThreadPoolExecutor(1, thread_name_prefix="restore-vectors") as pool:
        held: tuple[str, list[dict[str, Any]], Future[Vectors] | None] | None = None
        for kind, objs in runs:
            job = pool.submit(_vectors, target, objs, fits) if kind == "memory" else None
            if held is not None:
                yield held[0], held[1], held[2].result() if held[2] else None
            held = (kind, objs, job)
        if held is not None:
            yield held[0], held[1], held[2].result() if held[2] else None


def _write_run(
    conn: db.Conn,
    target: Target,
    kind: str,
    objs: list[dict[str, Any]],
    vectors: Vectors | None,
    counts: Counter[str],
    pending: list[tuple[str, str]],
) -> None:
    t, a = target.tenant_id, target.agent_id
    if kind == "memory" and vectors is not None:
        _memories(conn, target, objs, vectors, counts, pending)
    elif kind == "policy":
        for o in objs:
            portability_db.merge_agent_policy(conn, tenant_id=t, agent_id=a, policy=o["policy"])
        counts["policy_applied"] += len(objs)
    elif kind in _LINKS:
        query, name = _LINKS[kind]
        rows = [
            _mapped(t, a, o, ("from_id", "to_id", "insight_id", "alias_id", "memory_id", "other_id", "id"))
            for o in objs
        ]
        counts[f"{name}_written"] += query(conn, tenant_id=t, agent_id=a, rows=portability_db.rows(rows))
    elif kind == "episode":
        rows = [
            {**_mapped(t, a, o, ("id",)), "memory_ids": [str(fmt.new_id(t, a, m)) for m in o["memory_ids"]]}
            for o in objs
        ]
        written = portability_db.restore_episodes(conn, tenant_id=t, agent_id=a, rows=portability_db.rows(rows))
        _count(counts, "episodes", len(written), len(objs))
    elif kind == "session":
        rows = [_mapped(t, a, o, ("last_flush_episode_id",)) for o in objs]
        written_s = portability_db.restore_sessions(conn, tenant_id=t, agent_id=a, rows=portability_db.rows(rows))
        _count(counts, "sessions", len(written_s), len(objs))
    elif kind == "session_item":
        rows = [{k: o[k] for k in ("session_id", "position", "item", "created_at")} for o in objs]
        written_i = portability_db.restore_session_items(conn, tenant_id=t, agent_id=a, rows=portability_db.rows(rows))
        _count(counts, "session_items", len(written_i), len(objs))
    elif kind == "profile":
        written_p = portability_db.restore_profiles(conn, tenant_id=t, agent_id=a, rows=portability_db.rows(objs))
        _count(counts, "profiles", len(written_p), len(objs))


_LINKS = {
    "connection": (portability_db.restore_connections, "connections"),
    "alias": (portability_db.restore_aliases, "aliases"),
    "review": (portability_db.restore_reviews, "reviews"),
}


def _count(counts: Counter[str], name: str, written: int, seen: int) -> None:
    counts[f"{name}_written"] += written
    counts[f"{name}_existing"] += seen - written


def _mapped(tenant_id: UUID, agent_id: str, obj: dict[str, Any], id_fields: tuple[str, ...]) -> dict[str, Any]:
    """The line with each id field mapped to its id in the target agent."""
    out = dict(obj)
    for f in id_fields:
        if f in out:
            out[f] = fmt.maybe_new_id(tenant_id, agent_id, out[f])
    return out


def _memories(
    conn: db.Conn,
    target: Target,
    objs: list[dict[str, Any]],
    computed: Vectors,
    counts: Counter[str],
    pending: list[tuple[str, str]],
) -> None:
    t, a = target.tenant_id, target.agent_id
    vectors, embedded = computed
    counts["reembedded"] += embedded
    rows, postings = [], {}
    for n, o in enumerate(objs, 1):
        mid = str(fmt.new_id(t, a, o["id"]))
        terms = o.get("terms") or tokens.term_frequencies(o["text"])[0]
        postings[mid] = terms
        row = {
            k: v for k, v in o.items() if k not in ("type", "agent", "events", "embedding", "terms", "superseded_by")
        }
        row.update(
            n=n,
            id=mid,
            carried_by=fmt.maybe_new_id(t, a, o["carried_by"]),
            source_key=f"import:{a}/{o['id']}",
            content_hash=memories.content_hash(o["text"]),
        )
        rows.append(row)
    written = {
        str(i)
        for i in portability_db.restore_memories(
            conn, tenant_id=t, agent_id=a, rows=portability_db.rows(rows), embeddings=vectors
        )
    }
    _count(counts, "memories", len(written), len(objs))
    _postings(conn, t, a, [r for r in rows if r["id"] in written], postings)
    events = [
        {**e, "memory_id": r["id"], "related_ids": [str(fmt.new_id(t, a, x)) for x in e["related_ids"]]}
        for r, o in zip(rows, objs, strict=True)
        if r["id"] in written
        for e in o["events"]
    ]
    if events:
        counts["events_written"] += portability_db.restore_events(
            conn, tenant_id=t, agent_id=a, rows=portability_db.rows(events)
        )
    pending += [
        (r["id"], str(fmt.new_id(t, a, o["superseded_by"])))
        for r, o in zip(rows, objs, strict=True)
        if r["id"] in written and o["superseded_by"]
    ]


def _vectors(target: Target, objs: list[dict[str, Any]], fits: bool) -> Vectors:
    """Each memory's vector: the file's when it fits this server's model, else embedded now
    (and how many were)."""
    out: list[np.ndarray | None] = [
        fmt.decode_embedding(o["embedding"], target.dim) if fits and o.get("embedding") else None for o in objs
    ]
    missing = [i for i, v in enumerate(out) if v is None]
    if missing:
        for i, v in zip(missing, target.embedder.embed([objs[i]["text"] for i in missing]), strict=True):
            out[i] = np.asarray(v, dtype=np.float32)
    return [v for v in out if v is not None], len(missing)


def _postings(
    conn: db.Conn, tenant_id: UUID, agent_id: str, rows: list[dict[str, Any]], postings: dict[str, dict[str, int]]
) -> None:
    ids: list[str] = []
    terms: list[str] = []
    tfs: list[int] = []
    doc_lens: list[int] = []
    for r in rows:
        for term, tf in postings[r["id"]].items():
            ids.append(r["id"])
            terms.append(term)
            tfs.append(tf)
            doc_lens.append(r["doc_len"])
    if ids:
        portability_db.restore_terms(
            conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=ids, terms=terms, tfs=tfs, doc_lens=doc_lens
        )
