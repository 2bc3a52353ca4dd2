"""A CrewAI memory StorageBackend whose records are memworker memories of one agent.

    from crewai import Memory
    from memworker_crewai import MemworkerStorage

    storage = MemworkerStorage("http://127.0.0.1:8420", api_key, agent_id="research-crew")
    memory = Memory(storage=storage, embedder=storage.embedder, consolidation_threshold=1.0)

memworker embeds and ranks text itself (hybrid BM25 + vector recall), while crewai's
StorageBackend.search receives only a query vector. The storage's own `embedder` closes that
gap: it gives each text a vector that is a key for the text (a hash, not a meaning), and
search turns the vector back into the text and asks memworker's recall. Memory must be given
that embedder; a vector from any other embedder is refused with a message that says so.

The mapping (one crewai MemoryRecord = one memworker memory of `agent_id`):
- content is the memory's text; a longer content than memworker's bound (280 characters) is
  written as its first words, clipped at a word, and read back whole from metadata (CONTENT),
  so a crew's raw "Task: ... Result: ..." save is kept rather than refused;
- importance is the memory's salience, and kept exactly in metadata (IMPORTANCE);
- the record's id, scope, categories, source and private flag live in the memory's metadata
  under the reserved `crewai_` keys; the scope also as one flat entry per level, so a scope
  prefix is a plain containment filter for both recall and the list route;
- the caller's metadata is stored as the memory's own top-level metadata (so crewai's
  metadata_filter is memworker's metadata filter) and read back without the reserved keys;
- a search's score is recall's vector similarity of the hit (explain=true), clipped to [0, 1],
  in recall's order; min_score is applied to it;
- memories the agent holds from elsewhere (episodes, the API) read as records in scope "/".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
from crewai.memory.types import MemoryRecord, ScopeInfo

PREFIX = "crewai_"  # metadata keys this storage owns; a caller's key may not start with it
RECORD_ID = "crewai_id"
SCOPE = "crewai_scope"
LEVEL = "crewai_scope_{}"  # crewai_scope_0, crewai_scope_1, ...: one level each, for prefix filters
CATEGORIES = "crewai_categories"
IMPORTANCE = "crewai_importance"
SOURCE = "crewai_source"
PRIVATE = "crewai_private"
CONTENT = "crewai_content"  # the whole content of a record longer than MAX_TEXT
MAX_TEXT = 280  # memworker's bound on a memory's text

RECALL_MAX_K = 100  # the recall route's bound on k
RECALL_MAX_QUERY = 4000  # the recall route's bound on a query's characters
PAGE = 500  # the list route's bound on limit
FORGET_MAX_IDS = 1000  # the forget route's bound on memory_ids
WRITE_BATCH = 500  # memories per batch write (the API takes up to 1,000)
DIMS = 16  # a key vector's length: 16 floats from a SHA-256, no two texts alike in practice
KEYS_KEPT = 8192  # the embedder's remembered texts, least recently used dropped first
RETRIED = frozenset({429, 502, 503, 504})


class MemworkerError(Exception):
    """The memworker API refused a call (status and its message), or could not be reached
    (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"memworker API: HTTP {status}: {message}" if status else f"memworker API: {message}")


class MemworkerEmbedder:
    """crewai's embedder interface (a callable from texts to vectors) for MemworkerStorage: each
    vector is a key for its text, which the storage turns back into the text to recall with."""

    def __init__(self) -> None:
        self._texts: OrderedDict[tuple[float, ...], str] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002  # chromadb's name
        out = []
        for text in input:
            vec = key_vector(text)
            with self._lock:
                self._texts[tuple(vec)] = text
                self._texts.move_to_end(tuple(vec))
                while len(self._texts) > KEYS_KEPT:
                    self._texts.popitem(last=False)
            out.append(vec)
        return out

    def text_for(self, vector: list[float]) -> str | None:
        with self._lock:
            return self._texts.get(tuple(float(x) for x in vector))


def key_vector(text: str) -> list[float]:
    """DIMS floats in [-1, 1] from the text's SHA-256: equal texts, equal vectors."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return [v / 32767.5 - 1 for v in struct.unpack(f">{DIMS}H", digest)]


def scope_levels(scope: str | None) -> list[str]:
    """'/crew/research/' -> ['crew', 'research']; None, '' and '/' -> []."""
    return [part for part in (scope or "").split("/") if part]


def scope_path(levels: list[str]) -> str:
    return "/" + "/".join(levels)


def _scope_filter(scope_prefix: str | None) -> dict[str, Any]:
    return {LEVEL.format(i): level for i, level in enumerate(scope_levels(scope_prefix))}


def _naive_utc(stamp: str) -> datetime:
    # crewai compares record times with datetime.utcnow(): naive UTC
    return datetime.fromisoformat(stamp).astimezone(UTC).replace(tzinfo=None)


def to_record(memory: dict[str, Any]) -> MemoryRecord:
    """A memworker memory (or recall hit) as crewai's MemoryRecord."""
    meta = memory.get("metadata") or {}
    importance = meta.get(IMPORTANCE, memory.get("salience", 0.5))
    created = _naive_utc(memory["created_at"])
    return MemoryRecord(
        id=str(meta.get(RECORD_ID) or memory["id"]),
        content=str(meta.get(CONTENT) or memory["text"]),
        scope=str(meta.get(SCOPE) or "/"),
        categories=list(meta.get(CATEGORIES) or []),
        metadata={k: v for k, v in meta.items() if not k.startswith(PREFIX)},
        importance=min(1.0, max(0.0, float(importance))),
        created_at=created,
        last_accessed=created,
        source=meta.get(SOURCE),
        private=bool(meta.get(PRIVATE, False)),
    )


def to_memory(record: MemoryRecord, kind: str) -> dict[str, Any]:
    """A MemoryRecord as the body of a memworker memory write."""
    own = record.metadata or {}
    reserved = sorted(k for k in own if k.startswith(PREFIX))
    if reserved:
        raise ValueError(f"metadata keys starting with {PREFIX!r} are reserved for memworker_crewai: {reserved}")
    levels = scope_levels(record.scope)
    meta: dict[str, Any] = {
        **own,
        RECORD_ID: record.id,
        SCOPE: scope_path(levels),
        CATEGORIES: list(record.categories),
        IMPORTANCE: record.importance,
        PRIVATE: record.private,
        **{LEVEL.format(i): level for i, level in enumerate(levels)},
    }
    if record.source is not None:
        meta[SOURCE] = record.source
    text = record.content
    if len(text) > MAX_TEXT:
        meta[CONTENT] = text
        text = clip(text)
    return {"text": text, "kind": kind, "salience": record.importance, "metadata": meta}


def clip(text: str) -> str:
    """The first words of a text, cut at a word and marked with an ellipsis, within MAX_TEXT."""
    head = text[: MAX_TEXT - 1]
    cut = head.rsplit(None, 1)[0] if " " in head.strip() else head
    return cut.rstrip() + "\u2026"


def _meta_filter(metadata_filter: dict[str, Any] | None) -> dict[str, Any]:
    if not metadata_filter:
        return {}
    for key, value in metadata_filter.items():
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise ValueError(f"metadata_filter[{key!r}]: only str, int, float, bool or None values filter a search")
    return dict(metadata_filter)


class MemworkerStorage:
    """crewai's StorageBackend over memworker's HTTP API, for one agent (module docstring).

    `kind`: the memworker kind of the memories written ("fact" by default; an "event" is never
    superseded by a newer memory). `embedder`: give it to Memory(embedder=...)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        agent_id: str,
        kind: str = "fact",
        timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        if not agent_id:
            raise ValueError("agent_id: the memworker agent whose memories this storage reads and writes")
        self.base_url = base_url.rstrip("/")
        self.agent_id = agent_id
        self.kind = kind
        self.embedder = MemworkerEmbedder()
        self._retries = retries
        self._agent_path = f"/v1/agents/{quote(agent_id, safe='')}"
        self._http = httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout
        )

    # --- HTTP --------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemworkerStorage:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The decoded JSON answer, or MemworkerError with the API's own message."""
        for attempt in range(self._retries + 1):
            try:
                resp = self._http.request(method, self._agent_path + path, **kwargs)
            except httpx.TransportError as exc:
                raise MemworkerError(
                    0, f"cannot reach {self.base_url} ({exc or type(exc).__name__}): is memworker running there?"
                ) from None
            if resp.status_code in RETRIED and attempt < self._retries:
                time.sleep(_retry_after(resp))
                continue
            break
        if resp.status_code >= 400:
            try:
                body = resp.json()
                message = body.get("error") if isinstance(body, dict) else None
            except ValueError:
                message = None
            raise MemworkerError(resp.status_code, str(message or resp.text or resp.reason_phrase))
        return resp.json() if resp.content else None

    def _maybe_absent(self, method: str, path: str, **kwargs: Any) -> Any:
        """As _call, but None when the agent has no memory yet (the API's 404 'agent not found')."""
        try:
            return self._call(method, path, **kwargs)
        except MemworkerError as exc:
            if exc.status == 404 and exc.message == "agent not found":
                return None
            raise

    def _pages(self, contains: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every memory of the agent whose metadata contains `contains`, newest first."""
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": PAGE}
            if contains:
                params["metadata"] = json.dumps(contains)
            if cursor:
                params["cursor"] = cursor
            page = self._maybe_absent("GET", "/memories", params=params)
            if page is None:
                return
            yield from page["memories"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def _records(
        self, scope_prefix: str | None, metadata_filter: dict[str, Any] | None = None
    ) -> Iterator[MemoryRecord]:
        contains = {**_scope_filter(scope_prefix), **(metadata_filter or {})}
        for memory in self._pages(contains):
            yield to_record(memory)

    def _memworker_ids(self, record_id: str) -> list[str]:
        """The memworker ids of a record: those written with this crewai id, else the memory
        with this memworker id (a memory written outside crewai reads with its own id)."""
        found = [m["id"] for m in self._pages({RECORD_ID: record_id})]
        if found:
            return found
        try:
            return [self._call("GET", f"/memories/{quote(record_id, safe='')}")["id"]]
        except MemworkerError as exc:
            if exc.status in (404, 422):  # no such memory, or not a memworker id at all
                return []
            raise

    def _forget(self, ids: list[str]) -> int:
        gone = 0
        for start in range(0, len(ids), FORGET_MAX_IDS):
            chunk = ids[start : start + FORGET_MAX_IDS]
            receipt = self._call("POST", "/forget", json={"memory_ids": chunk})
            gone += len(chunk) - len(receipt.get("not_found") or [])
        return gone

    # --- StorageBackend ----------------------------------------------------------------------

    def save(self, records: list[MemoryRecord]) -> None:
        bodies = [to_memory(r, self.kind) for r in records]
        for body, record in zip(bodies, records, strict=True):
            # a retried save (crewai's or ours) writes the record once
            body["idempotency_key"] = f"crewai:{record.id}"
        for start in range(0, len(bodies), WRITE_BATCH):
            self._call("POST", "/memories/batch", json={"memories": bodies[start : start + WRITE_BATCH]})

    def search(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        query = self.embedder.text_for(query_embedding)
        if query is None:
            raise ValueError(
                "this query vector was not made by MemworkerStorage.embedder: build the crewai Memory "
                "with Memory(storage=storage, embedder=storage.embedder) (memworker embeds text itself)"
            )
        if limit <= 0 or not query.strip():
            return []
        contains = {**_meta_filter(metadata_filter), **_scope_filter(scope_prefix)}
        # categories and min_score are applied here, after recall (whose order is its fused
        # rank, not the vector score): fetch more so `limit` can still be filled
        k = min(RECALL_MAX_K, limit * 5 if categories or min_score > 0 else limit)
        body: dict[str, Any] = {"query": query[:RECALL_MAX_QUERY], "k": k, "explain": True}
        if contains:
            body["metadata"] = contains
        answer = self._maybe_absent("POST", "/recall", json=body)
        out: list[tuple[MemoryRecord, float]] = []
        for hit in answer["memories"] if answer else []:
            record = to_record(hit)
            score = min(1.0, max(0.0, float((hit.get("signals") or {}).get("vector", 0.0))))
            if score < min_score or (categories and not set(categories) & set(record.categories)):
                continue
            out.append((record, score))
            if len(out) == limit:
                break
        return out

    def delete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        contains = _scope_filter(scope_prefix) | (metadata_filter or {})
        filtered = bool(contains or categories or older_than)
        if record_ids is None or filtered:
            kept = [m["id"] for m in self._pages(contains) if _matches(to_record(m), categories, older_than)]
        if record_ids is None:
            ids = kept
        else:
            # the given records, those of them that also match every other criterion given
            ids = [i for rid in dict.fromkeys(record_ids) for i in self._memworker_ids(rid)]
            if filtered:
                ids = [i for i in ids if i in set(kept)]
        return self._forget(ids) if ids else 0

    def update(self, record: MemoryRecord) -> None:
        ids = self._memworker_ids(record.id)
        if not ids:
            raise ValueError(f"no memory with record id {record.id!r} for agent {self.agent_id!r}")
        body = to_memory(record, self.kind)
        body.pop("kind")
        for memory_id in ids:
            self._call("PATCH", f"/memories/{quote(memory_id, safe='')}", json=body)

    def get_record(self, record_id: str) -> MemoryRecord | None:
        ids = self._memworker_ids(record_id)
        if not ids:
            return None
        return to_record(self._call("GET", f"/memories/{quote(ids[0], safe='')}"))

    def list_records(self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0) -> list[MemoryRecord]:
        out: list[MemoryRecord] = []
        for i, record in enumerate(self._records(scope_prefix)):
            if i >= offset:
                out.append(record)
            if len(out) >= limit:
                break
        return out

    def get_scope_info(self, scope: str) -> ScopeInfo:
        levels = scope_levels(scope)
        records = list(self._records(scope))
        children = sorted(
            {
                scope_path(scope_levels(r.scope)[: len(levels) + 1])
                for r in records
                if len(scope_levels(r.scope)) > len(levels)
            }
        )
        return ScopeInfo(
            path=scope_path(levels),
            record_count=len(records),
            categories=sorted({c for r in records for c in r.categories}),
            oldest_record=min((r.created_at for r in records), default=None),
            newest_record=max((r.created_at for r in records), default=None),
            child_scopes=children,
        )

    def list_scopes(self, parent: str = "/") -> list[str]:
        return self.get_scope_info(parent).child_scopes

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self._records(scope_prefix):
            for category in record.categories:
                counts[category] = counts.get(category, 0) + 1
        return counts

    def count(self, scope_prefix: str | None = None) -> int:
        return sum(1 for _ in self._pages(_scope_filter(scope_prefix)))

    def reset(self, scope_prefix: str | None = None) -> None:
        """Forget (memworker's erasure, with its receipt) every memory of the agent in the
        scope; with no scope, every memory of the agent, crewai's or not."""
        self.delete(scope_prefix=scope_prefix)

    async def asave(self, records: list[MemoryRecord]) -> None:
        await asyncio.to_thread(self.save, records)

    async def asearch(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        return await asyncio.to_thread(
            self.search, query_embedding, scope_prefix, categories, metadata_filter, limit, min_score
        )

    async def adelete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        return await asyncio.to_thread(self.delete, scope_prefix, categories, record_ids, older_than, metadata_filter)


def _retry_after(resp: httpx.Response) -> float:
    """The server's Retry-After in seconds, at most 5; one second when it gives none."""
    try:
        return min(5.0, max(0.0, float(resp.headers.get("retry-after", "1"))))
    except ValueError:
        return 1.0


def _matches(record: MemoryRecord, categories: list[str] | None, older_than: datetime | None) -> bool:
    if categories and not set(categories) & set(record.categories):
        return False
    if older_than is not None:
        cutoff = older_than.astimezone(UTC).replace(tzinfo=None) if older_than.tzinfo else older_than
        if record.created_at >= cutoff:
            return False
    return True
