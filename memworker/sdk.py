"""Python SDK: memworker.Client and memworker.AsyncClient over HTTP, and enqueue_in_cluster
for agents that sit next to Redis and want to skip the HTTP hop.

Each operation is described once, in _Operations: the request it sends (method, path, query,
body) and how its answer is read. The two clients only send descriptions: Client through an
httpx.Client, AsyncClient through an httpx.AsyncClient, with the same retries and errors.
Their public methods, below the GENERATED line, are written by `python -m tests.sdk_codegen`
from _Operations (same names, parameters and docstrings); tests/unit/test_sdk_clients.py
fails when they are out of date. Only the polling helpers (wait_for_*) and the transports are
written twice, once blocking and once async."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Self, TypeVar, cast
from urllib.parse import quote

import httpx

from memworker import errors
from memworker.domain.memories import EpisodeStatus

T = TypeVar("T")
U = TypeVar("U")


class ApiError(errors.MemworkerError):
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        message = body.get("error") if isinstance(body, dict) else str(body)
        super().__init__(f"HTTP {status}: {message}")


class Unreachable(ApiError):
    """No answer from the API: nothing listens at the URL, the connection failed or timed
    out. status is 0 (no HTTP status); the message names the URL and what to check."""

    def __init__(self, url: str, exc: httpx.TransportError) -> None:
        self.status = 0
        self.body = None
        self.url = url
        if isinstance(exc, httpx.UnsupportedProtocol):
            hint = "the base URL must start with http:// or https://"
        elif isinstance(exc, httpx.ConnectError):
            hint = "is `memworker up` (or the API) running there?"
        elif isinstance(exc, httpx.TimeoutException):
            hint = "the API did not answer in time: it may be overloaded; retry, or raise Client(timeout=...)"
        else:
            hint = "the connection failed; retry, and check the API's log if it goes on"
        errors.MemworkerError.__init__(
            self, f"cannot reach the memworker API at {url} ({str(exc) or type(exc).__name__}): {hint}"
        )


def _seg(value: object) -> str:
    """One path segment: escaped, so an id can never reach another path ('../other-agent',
    '?', '#'); '.' and '..' are not ids at all."""
    text = str(value)
    if text in (".", ".."):
        raise errors.InvalidInput(f"{text!r} is not a valid id")
    return quote(text, safe="")


def _acting(subject: str | None) -> dict[str, str]:
    """The query naming the subject a caller acts for: a session that is not that subject's
    (another subject's, or a general one) is then refused with a 403. None names none, and
    the key reaches every session it may: the subject is a guard a caller opts into."""
    return {} if subject is None else {"subject": subject}


REFUSED = (429, 503)  # refused before any work was done: safe to send again


def retry_after(resp: httpx.Response) -> float:
    """The server's Retry-After in seconds (capped at a minute), or one second."""
    try:
        return min(60.0, max(0.0, float(resp.headers.get("retry-after", "1"))))
    except ValueError:
        return 1.0


def answer(resp: httpx.Response) -> Any:
    """The decoded JSON of a final response (None when empty), or ApiError with its message."""
    if resp.status_code >= 400:
        try:
            body = resp.json()
        except ValueError:
            body = resp.text
        raise ApiError(resp.status_code, body)
    return resp.json() if resp.content else None


# --- the operations, each described once -------------------------------------------------


@dataclass(frozen=True)
class _Op(Generic[T]):
    """One request (method, path under the base URL, httpx keyword arguments) and how its
    final answer is read; either client sends it, with retries, and reads the answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def then(self, convert: Callable[[T], U]) -> _Op[U]:
        """The same request, its read answer passed through `convert`."""
        read = self.read
        return _Op(self.method, self.path, lambda resp: convert(read(resp)), self.kwargs)


@dataclass(frozen=True)
class _Stream:
    """A GET whose answer is read as it arrives, chunk by chunk (no retries: the caller
    holds what came so far)."""

    path: str
    params: dict[str, Any]


def _content(resp: httpx.Response) -> bytes:
    """The answer's bytes as sent (an export, an archive), or ApiError with its message."""
    if resp.status_code >= 400:
        answer(resp)
    return resp.content


def _any(method: str, path: str, **kwargs: Any) -> _Op[Any]:
    """An answer read as decoded JSON (None when empty)."""
    return _Op(method, path, answer, kwargs)


def _obj(method: str, path: str, **kwargs: Any) -> _Op[dict[str, Any]]:
    """An endpoint that answers a JSON object."""
    return _Op(method, path, lambda resp: cast("dict[str, Any]", answer(resp)), kwargs)


def _list(method: str, path: str, *, key: str, **kwargs: Any) -> _Op[list[dict[str, Any]]]:
    """The list of objects under `key` in an endpoint's JSON answer."""
    return _Op(method, path, lambda resp: cast("list[dict[str, Any]]", answer(resp)[key]), kwargs)


def _nothing(resp: httpx.Response) -> None:
    answer(resp)


def _none(method: str, path: str, **kwargs: Any) -> _Op[None]:
    """An endpoint whose answer carries nothing to return (204)."""
    return _Op(method, path, _nothing, kwargs)


def _bytes(method: str, path: str, **kwargs: Any) -> _Op[bytes]:
    """An endpoint that answers a file: its bytes."""
    return _Op(method, path, _content, kwargs)


def _jsonl_gz(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(raw).decode().splitlines() if line]


def _params(**values: Any) -> dict[str, Any]:
    """The query parameters (or body fields) that are given: None leaves one out."""
    return {k: v for k, v in values.items() if v is not None}


class _Operations:
    """What each public method of Client and AsyncClient sends and how its answer is read.
    A method here returns an _Op (or a _Stream); its name, parameters and docstring are the
    clients' (tests/sdk_codegen.py writes their methods from these)."""

    def request(self, method: str, path: str, **kwargs: Any) -> _Op[Any]:
        """One call to any route (path under the base URL, httpx keyword arguments), with the
        same retries and errors as the methods below: the decoded JSON answer, or None.
        For integrations (memworker.integrations) that drive routes generically."""
        return _any(method, path, **kwargs)

    # episodes
    def add_episode(
        self, agent_id: str, content: str | None = None, *, messages: list[dict[str, Any]] | None = None, **fields: Any
    ) -> _Op[dict[str, Any]]:
        body = {"content": content} if messages is None else {"messages": messages}
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/episodes", json={**body, **fields})

    def add_episodes(self, agent_id: str, episodes: list[dict[str, Any]]) -> _Op[list[dict[str, Any]]]:
        return _list("POST", f"/v1/agents/{_seg(agent_id)}/episodes/batch", json={"episodes": episodes}, key="episodes")

    def get_episode(self, agent_id: str, episode_id: str) -> _Op[dict[str, Any]]:
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/episodes/{_seg(episode_id)}")

    def replay_episode(self, agent_id: str, episode_id: str) -> _Op[dict[str, Any]]:
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/episodes/{_seg(episode_id)}/replay")

    def list_episodes(
        self, *, status: str | None = None, agent_id: str | None = None, limit: int = 100
    ) -> _Op[list[dict[str, Any]]]:
        params = _params(status=status, agent_id=agent_id, limit=limit)
        return _list("GET", "/v1/episodes", params=params, key="episodes")

    def usage(self, agent_id: str | None = None) -> _Op[dict[str, Any]]:
        return _obj("GET", "/v1/usage", params={"agent_id": agent_id} if agent_id else {})

    # memories
    def add_memory(self, agent_id: str, text: str, **fields: Any) -> _Op[dict[str, Any]]:
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/memories", json={"text": text, **fields})

    def add_memories(self, agent_id: str, memories: list[dict[str, Any]]) -> _Op[list[dict[str, Any]]]:
        return _list("POST", f"/v1/agents/{_seg(agent_id)}/memories/batch", json={"memories": memories}, key="memories")

    def get_memory(self, agent_id: str, memory_id: str) -> _Op[dict[str, Any]]:
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}")

    def update_memory(self, agent_id: str, memory_id: str, **changes: Any) -> _Op[dict[str, Any]]:
        return _obj("PATCH", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}", json=changes)

    def delete_memory(self, agent_id: str, memory_id: str) -> _Op[None]:
        return _none("DELETE", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}")

    def list_memories(
        self,
        agent_id: str,
        *,
        tier: str | None = None,
        kind: str | None = None,
        session: str | None = None,
        metadata: dict[str, Any] | None = None,
        limit: int = 50,
        cursor: str | None = None,
        subject: str | None = None,
    ) -> _Op[dict[str, Any]]:
        """metadata: only memories whose metadata contains this object (jsonb @>); subject:
        only that subject's memories."""
        params = _params(
            tier=tier,
            kind=kind,
            session=session,
            subject=subject,
            metadata=None if metadata is None else json.dumps(metadata),
            limit=limit,
            cursor=cursor,
        )
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/memories", params=params)

    def recall(self, agent_id: str, query: str, k: int = 5, **options: Any) -> _Op[dict[str, Any]]:
        """{"memories": [...], "took_ms": ...}; options: tiers, kinds, since, until, metadata, explain,
        subject (that subject's memories and the agent's general ones, never another subject's),
        include_superseded (an audit: superseded memories too, each with valid_to and
        superseded_by). A hit in an open review names the other memory (conflicts_with)."""
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/recall", json={"query": query, "k": k, **options})

    def recall_agents(self, agents: list[str], query: str, k: int = 5, **options: Any) -> _Op[dict[str, Any]]:
        """One ranked list over several agents' memories (each hit names its agent_id); the
        same options as recall."""
        return _obj("POST", "/v1/recall", json={"agents": agents, "query": query, "k": k, **options})

    # sleep (consolidation)
    def consolidate(self, agent_id: str) -> _Op[str]:
        """Queue one consolidation pass; returns its run id."""
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/consolidate").then(lambda answer: answer["run_id"])

    def consolidation_runs(self, agent_id: str, *, limit: int = 20) -> _Op[list[dict[str, Any]]]:
        return _list("GET", f"/v1/agents/{_seg(agent_id)}/consolidation/runs", params={"limit": limit}, key="runs")

    def consolidation_status(self, agent_id: str) -> _Op[dict[str, Any]]:
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/consolidation")

    def profile(self, agent_id: str, version: int | None = None, *, subject: str | None = None) -> _Op[dict[str, Any]]:
        """The agent's profile, or with subject that subject's (built from its memories)."""
        params: dict[str, Any] = {"version": version} if version else {}
        if subject is not None:
            params["subject"] = subject
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/profile", params=params)

    # lifecycle governance
    def promote(self, agent_id: str, memory_id: str, tier: str, reason: str) -> _Op[dict[str, Any]]:
        path = f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}/promote"
        return _obj("POST", path, json={"tier": tier, "reason": reason})

    def history(self, agent_id: str, memory_id: str) -> _Op[dict[str, Any]]:
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}/history")

    def reviews(self, agent_id: str, *, status: str = "open", limit: int = 100) -> _Op[list[dict[str, Any]]]:
        params = {"status": status, "limit": limit}
        return _list("GET", f"/v1/agents/{_seg(agent_id)}/review", params=params, key="reviews")

    def resolve_review(self, agent_id: str, review_id: str, keep: str, reason: str = "") -> _Op[dict[str, Any]]:
        """keep: 'both', or the id of the memory to keep (the other is superseded by it)."""
        path = f"/v1/agents/{_seg(agent_id)}/review/{_seg(review_id)}/resolve"
        return _obj("POST", path, json={"keep": keep, "reason": reason})

    def forget(self, agent_id: str, **selector: Any) -> _Op[dict[str, Any]]:
        """Exactly one of provenance=, memory_ids=, session_id=, before=; returns the receipt."""
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/forget", json=selector)

    # shared pools (a tenant's memories its agents read by policy: pools_read, pools_write)
    def pools(self) -> _Op[list[dict[str, Any]]]:
        return _list("GET", "/v1/pools", key="pools")

    def add_pool_memory(self, pool: str, text: str, **fields: Any) -> _Op[dict[str, Any]]:
        return _obj("POST", f"/v1/pools/{_seg(pool)}/memories", json={"text": text, **fields})

    def add_pool_memories(self, pool: str, memories: list[dict[str, Any]]) -> _Op[list[dict[str, Any]]]:
        return _list("POST", f"/v1/pools/{_seg(pool)}/memories/batch", json={"memories": memories}, key="memories")

    def pool_memories(self, pool: str, *, limit: int = 50, subject: str | None = None) -> _Op[list[dict[str, Any]]]:
        params: dict[str, Any] = {"limit": limit} | ({"subject": subject} if subject else {})
        return _list("GET", f"/v1/pools/{_seg(pool)}/memories", params=params, key="memories")

    def delete_pool_memory(self, pool: str, memory_id: str) -> _Op[None]:
        return _none("DELETE", f"/v1/pools/{_seg(pool)}/memories/{_seg(memory_id)}")

    def share_memory(self, agent_id: str, memory_id: str, pool: str) -> _Op[dict[str, Any]]:
        """Copy the agent's memory into a pool its policy may write ({"outcome": "copied" |
        "confirmed" | "already shared", "memory"})."""
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}/share", json={"pool": pool})

    def pool_proposals(self, pool: str, *, status: str = "open", limit: int = 100) -> _Op[list[dict[str, Any]]]:
        """What sleep proposed to the pool (policy pools_propose 'review'): open, approved, rejected or all."""
        params = {"status": status, "limit": limit}
        return _list("GET", f"/v1/pools/{_seg(pool)}/proposals", params=params, key="proposals")

    def approve_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> _Op[dict[str, Any]]:
        """Share the proposal into the pool ({"proposal", "outcome", "memory"}); again: the same memory."""
        path = f"/v1/pools/{_seg(pool)}/proposals/{_seg(proposal_id)}/approve"
        return _obj("POST", path, json={"reason": reason})

    def reject_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> _Op[dict[str, Any]]:
        """The fact is not proposed to the pool again ({"proposal"})."""
        path = f"/v1/pools/{_seg(pool)}/proposals/{_seg(proposal_id)}/reject"
        return _obj("POST", path, json={"reason": reason})

    def policy(self, agent_id: str | None = None) -> _Op[dict[str, Any]]:
        """{"overrides", "effective"} of an agent, or of the tenant's defaults."""
        path = f"/v1/agents/{_seg(agent_id)}/policy" if agent_id else "/v1/policy"
        return _obj("GET", path)

    def set_policy(self, overrides: dict[str, Any], agent_id: str | None = None) -> _Op[dict[str, Any]]:
        """Replace the overrides of an agent, or the tenant's defaults."""
        path = f"/v1/agents/{_seg(agent_id)}/policy" if agent_id else "/v1/policy"
        return _obj("PUT", path, json=overrides)

    def run_retention(self, agent_id: str) -> _Op[dict[str, Any]]:
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/retention/run")

    def retention_runs(self, agent_id: str, *, limit: int = 20) -> _Op[list[dict[str, Any]]]:
        return _list("GET", f"/v1/agents/{_seg(agent_id)}/retention", params={"limit": limit}, key="runs")

    # sessions: working memory, plans, runtime context, archives, webhooks
    def create_session(
        self,
        agent_id: str,
        session_id: str | None = None,
        *,
        goal: str | None = None,
        context_window_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
        subject: str | None = None,
    ) -> _Op[dict[str, Any]]:
        """Open a session (an existing session_id returns it unchanged, created False);
        subject: whom the session is with (its context calls recall for that subject), and
        the subject the caller acts for: an existing session_id not that subject's is a 403."""
        body = _params(
            session_id=session_id,
            subject=subject,
            goal=goal,
            metadata=metadata,
            context_window_tokens=context_window_tokens,
        )
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/sessions", json=body)

    def sessions(self, agent_id: str, *, status: str | None = None, limit: int = 50) -> _Op[list[dict[str, Any]]]:
        params = _params(status=status, limit=limit)
        return _list("GET", f"/v1/agents/{_seg(agent_id)}/sessions", params=params, key="sessions")

    # `subject=` on a session's methods: the subject the caller acts for (see _acting)
    def session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> _Op[dict[str, Any]]:
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}", params=_acting(subject))

    def working(self, agent_id: str, session_id: str, *, subject: str | None = None) -> _Op[dict[str, Any]]:
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/working"
        return _obj("GET", path, params=_acting(subject))

    def update_working(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **changes: Any
    ) -> _Op[dict[str, Any]]:
        """changes: goal=, intent= (None clears), add=[{"kind", "text" | "memory_id"}], remove=[ids],
        touch=[ids], expected_revision=."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/working"
        return _obj("PATCH", path, params=_acting(subject), json=changes)

    def set_plan(
        self,
        agent_id: str,
        session_id: str,
        milestones: list[dict[str, Any]],
        *,
        title: str | None = None,
        subject: str | None = None,
    ) -> _Op[dict[str, Any]]:
        """milestones: [{"id"?, "title", "steps": [{"id"?, "title", "status"?, "progress"?}]}]."""
        body: dict[str, Any] = {"milestones": milestones, **({"title": title} if title else {})}
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/plan"
        return _obj("PUT", path, params=_acting(subject), json=body)

    def plan(self, agent_id: str, session_id: str, *, subject: str | None = None) -> _Op[dict[str, Any]]:
        """The plan, its milestones' status and progress, and "resume" (last completed milestone, next step)."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/plan"
        return _obj("GET", path, params=_acting(subject))

    def update_step(
        self, agent_id: str, session_id: str, step_id: str, *, subject: str | None = None, **changes: Any
    ) -> _Op[dict[str, Any]]:
        """changes: status=, progress= (0-100), output=, note=, expected_revision=."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/plan/steps/{_seg(step_id)}"
        return _obj("PATCH", path, params=_acting(subject), json=changes)

    def context(
        self, agent_id: str, query: str, *, session_id: str | None = None, max_tokens: int | None = None, **options: Any
    ) -> _Op[dict[str, Any]]:
        """The runtime context; options: k, context_used (0..1) or used_tokens and window_tokens,
        subject (recall for it; with session_id, the session must be that subject's, else 403)."""
        body = {"query": query, **_params(session_id=session_id, max_tokens=max_tokens), **options}
        return _obj("POST", f"/v1/agents/{_seg(agent_id)}/context", json=body)

    def report_usage(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **usage: Any
    ) -> _Op[dict[str, Any]]:
        """usage: context_used (0..1), or used_tokens with window_tokens; none: the estimate."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/usage"
        return _obj("POST", path, params=_acting(subject), json=usage)

    def context_calls(
        self, agent_id: str, session_id: str, *, limit: int = 50, subject: str | None = None
    ) -> _Op[list[dict[str, Any]]]:
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/context_calls"
        return _list("GET", path, params={"limit": limit, **_acting(subject)}, key="context_calls")

    # session items: a framework's raw conversation log (docs/sessions.md, "Session items")
    def add_session_items(
        self, agent_id: str, session_id: str, items: list[dict[str, Any]], *, subject: str | None = None
    ) -> _Op[list[int]]:
        """Append items (JSON objects, kept as given) after the session's last one; the
        positions they took, in order. An archived session is a 409."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/items"
        op = _obj("POST", path, params=_acting(subject), json={"items": items})
        return op.then(lambda out: cast("list[int]", out["positions"]))

    def session_items(
        self, agent_id: str, session_id: str, *, limit: int | None = None, subject: str | None = None
    ) -> _Op[list[dict[str, Any]]]:
        """The session's items ({"position", "item", "created_at"}), oldest first: the last
        `limit` of them, or every item for None."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/items"
        return _list("GET", path, params={**_params(limit=limit), **_acting(subject)}, key="items")

    def pop_session_item(
        self, agent_id: str, session_id: str, *, subject: str | None = None
    ) -> _Op[dict[str, Any] | None]:
        """Delete the session's last item and return it ({"position", "item", "created_at"});
        None when the session has no item."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/items/last"
        op = _obj("DELETE", path, params=_acting(subject))
        return op.then(lambda out: None if out["item"] is None else out)

    def clear_session_items(self, agent_id: str, session_id: str, *, subject: str | None = None) -> _Op[int]:
        """Delete every item of the session; how many went."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/items"
        return _obj("DELETE", path, params=_acting(subject)).then(lambda out: cast(int, out["deleted"]))

    def archive_session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> _Op[dict[str, Any]]:
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/archive"
        return _obj("POST", path, params=_acting(subject))

    def restore_session(
        self, agent_id: str, session_id: str, version: int | None = None, *, subject: str | None = None
    ) -> _Op[dict[str, Any]]:
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/restore"
        return _obj("POST", path, params=_acting(subject), json={"version": version} if version else {})

    def archives(self, agent_id: str, session_id: str, *, subject: str | None = None) -> _Op[list[dict[str, Any]]]:
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/archives"
        return _list("GET", path, params=_acting(subject), key="archives")

    def download_archive(
        self, agent_id: str, session_id: str, version: int, *, subject: str | None = None
    ) -> _Op[bytes]:
        """The archive as stored: gzip-compressed JSONL bytes."""
        path = f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/archives/{_seg(version)}"
        return _bytes("GET", path, params=_acting(subject))

    def read_archive(
        self, agent_id: str, session_id: str, version: int, *, subject: str | None = None
    ) -> _Op[list[dict[str, Any]]]:
        """The archive's JSONL lines, decompressed and parsed."""
        return self.download_archive(agent_id, session_id, version, subject=subject).then(_jsonl_gz)

    # export and import (docs/export.md)
    def download_export(self, agent_id: str, *, embeddings: bool = False) -> _Op[bytes]:
        """The agent's whole export (NDJSON) in memory; export_chunks streams a large one."""
        return _bytes("GET", f"/v1/agents/{_seg(agent_id)}/export", params={"embeddings": embeddings})

    def export_chunks(self, agent_id: str, *, embeddings: bool = False) -> _Stream:
        """The agent's export (NDJSON) as it arrives: write it to a file chunk by chunk."""
        return _Stream(f"/v1/agents/{_seg(agent_id)}/export", {"embeddings": embeddings})

    def download_subject_export(self, subject: str, *, embeddings: bool = False) -> _Op[bytes]:
        """One subject's data across the tenant's agents (NDJSON), in memory."""
        return _bytes("GET", "/v1/export", params={"subject": subject, "embeddings": embeddings})

    def subject_export_chunks(self, subject: str, *, embeddings: bool = False) -> _Stream:
        return _Stream("/v1/export", {"subject": subject, "embeddings": embeddings})

    def import_file(
        self,
        agent_id: str,
        source: str | os.PathLike[str] | bytes,
        *,
        format: str = "auto",
        progress: Callable[[int], None] | None = None,
    ) -> _Op[dict[str, Any]]:
        """Import a file (a path, streamed from disk, or bytes): a memworker export, a JSONL of
        {"text": ...} lines, LangGraph items or a Mem0 export (format "auto" tells them apart;
        docs/export.md). `progress` is called with each chunk's size as
        it is sent. Answers the import's counts; ApiError 422 names a bad line (nothing written)."""
        content: bytes | _FileChunks = source if isinstance(source, bytes) else _FileChunks(Path(source), progress)
        return _obj(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/import",
            params={"format": format},
            content=content,
            headers={"content-type": "application/x-ndjson"},
            timeout=None,  # a restore of a large file takes as long as it takes
        )

    def add_webhook(
        self, url: str, events: list[str], *, agent_ids: list[str] | None = None, description: str = ""
    ) -> _Op[dict[str, Any]]:
        """Register a webhook for pre_turn, post_turn and/or archive; the answer's "secret" is shown once."""
        body: dict[str, Any] = {"url": url, "events": events, "description": description}
        if agent_ids is not None:
            body["agent_ids"] = agent_ids
        return _obj("POST", "/v1/webhooks", json=body)

    def webhooks(self) -> _Op[list[dict[str, Any]]]:
        return _list("GET", "/v1/webhooks", key="webhooks")

    def delete_webhook(self, webhook_id: str) -> _Op[None]:
        return _none("DELETE", f"/v1/webhooks/{_seg(webhook_id)}")

    def webhook_deliveries(self, webhook_id: str, *, limit: int = 50) -> _Op[list[dict[str, Any]]]:
        return _list("GET", f"/v1/webhooks/{_seg(webhook_id)}/deliveries", params={"limit": limit}, key="deliveries")

    # administration within a tenant: agents, subject requests, keys (README route table)
    def agents(self, *, limit: int = 50, cursor: str | None = None) -> _Op[dict[str, Any]]:
        """A page of the tenant's agents this key reaches, each with its counts and last
        activity: {"agents": [...], "next_cursor": ...} (None on the last page)."""
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        return _obj("GET", "/v1/agents", params=params)

    def erase_agent(self, agent_id: str) -> _Op[dict[str, Any]]:
        """Erase the agent and everything of it; the receipt (counts per place)."""
        return _obj("DELETE", f"/v1/agents/{_seg(agent_id)}")

    def agent_subjects(self, agent_id: str, *, limit: int = 50, cursor: str | None = None) -> _Op[dict[str, Any]]:
        """A page of the subjects the agent holds, with counts: {"subjects": [...], "next_cursor": ...}."""
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        return _obj("GET", f"/v1/agents/{_seg(agent_id)}/subjects", params=params)

    def forget_subject(self, subject: str, *, keep_turns: bool = False) -> _Op[dict[str, Any]]:
        """Erase the subject from every agent and pool of the tenant; the receipt (per agent,
        per pool, totals; `complete` false: call again for the holders left)."""
        return _obj("POST", f"/v1/subjects/{_seg(subject)}/forget", json={"keep_turns": keep_turns})

    def create_key(
        self,
        scopes: list[str],
        *,
        name: str = "",
        agents: list[str] | None = None,
        pools: list[str] | None = None,
        expires_at: str | None = None,
    ) -> _Op[dict[str, Any]]:
        """Mint a key within this key's own powers (the `keys` scope); the answer's `api_key`
        is the secret, shown once."""
        body: dict[str, Any] = {"name": name, "scopes": scopes}
        body |= _params(agents=agents, pools=pools, expires_at=expires_at)
        return _obj("POST", "/v1/keys", json=body)

    def list_keys(self) -> _Op[list[dict[str, Any]]]:
        """The tenant's keys within this key's powers (prefixes, never secrets)."""
        return _list("GET", "/v1/keys", key="keys")

    def revoke_key(self, prefix: str) -> _Op[dict[str, Any]]:
        return _obj("DELETE", f"/v1/keys/{_seg(prefix)}")


_OPS = _Operations()


class _FileChunks:
    """A file's bytes as a request body, read anew each time it is iterated (a retried request
    sends it again), reporting each chunk's size to `progress`."""

    def __init__(self, path: Path, progress: Callable[[int], None] | None) -> None:
        self.path, self.progress = path, progress

    def __iter__(self) -> Iterator[bytes]:
        with self.path.open("rb") as f:
            while chunk := f.read(1 << 20):
                if self.progress is not None:
                    self.progress(len(chunk))
                yield chunk


class _AsyncFileChunks:
    """_FileChunks for an httpx.AsyncClient (which takes only an async iterable as a streamed
    body): each chunk is read in a thread, so the event loop never waits on the disk."""

    def __init__(self, chunks: _FileChunks) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with self.chunks.path.open("rb") as f:
            while chunk := await asyncio.to_thread(f.read, 1 << 20):
                if self.chunks.progress is not None:
                    self.chunks.progress(len(chunk))
                yield chunk


def _episode_settled(ep: dict[str, Any]) -> bool:
    return ep["status"] in (EpisodeStatus.STORED, EpisodeStatus.DEAD)  # done, one way or the other


def _run_settled(runs: list[dict[str, Any]], run_id: str) -> tuple[dict[str, Any] | None, bool]:
    """The run (None until it is listed) and whether it is done, skipped or failed."""
    run = next((r for r in runs if r["run_id"] == run_id), None)
    return run, bool(run and run["status"] in ("done", "skipped", "failed"))


# --- the transports: one blocking, one async ---------------------------------------------


class _Transport:
    """What both clients keep besides their httpx client: the retries, and the newest write's
    WAL position the server answered (replicas: read-your-writes)."""

    _http: httpx.Client | httpx.AsyncClient

    def __init__(self, retries: int) -> None:
        self._retries = retries
        self._lsn = 0

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        """Every request's transport errors (refused, timed out, reset) as Unreachable: an
        ApiError naming the URL, so a caller handles one kind of error."""
        try:
            yield
        except httpx.TransportError as exc:
            raise Unreachable(str(self._http.base_url).rstrip("/"), exc) from exc

    def _note_lsn(self, lsn: str | None) -> None:
        """A server with read replicas answers a write with its WAL position; sent back with
        every later request, it makes a replica's read wait for that write (or go to the primary)."""
        high, _, low = (lsn or "").partition("/")
        try:
            position = (int(high, 16) << 32) | int(low, 16)
        except ValueError:
            return
        if position > self._lsn:
            self._lsn = position
            self._http.headers["X-Memworker-LSN"] = lsn or ""

    def _read(self, op: _Op[T], resp: httpx.Response) -> T:
        self._note_lsn(resp.headers.get("x-memworker-lsn"))
        return op.read(resp)


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


class _SyncTransport(_Transport):
    _http: httpx.Client

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, retries: int = 3) -> None:
        """`retries`: how many times a request answered 429 (rate limited) or 503 (overloaded)
        is sent again after the Retry-After the server gave. Both answers mean the request
        was refused before it did anything, so any request may be resent; 0 turns it off."""
        super().__init__(retries)
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, headers=_headers(api_key))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _send(self, op: _Op[T]) -> T:
        with self._reaching():
            resp = self._http.request(op.method, op.path, **op.kwargs)
            for _ in range(self._retries):
                if resp.status_code not in REFUSED:
                    break
                time.sleep(retry_after(resp))
                resp = self._http.request(op.method, op.path, **op.kwargs)
        return self._read(op, resp)

    def _chunks(self, stream: _Stream) -> Iterator[bytes]:
        with self._reaching(), self._http.stream("GET", stream.path, params=stream.params, timeout=None) as resp:
            if resp.status_code >= 400:
                resp.read()
                answer(resp)
            yield from resp.iter_bytes()

    def wait_for_episode(self, agent_id: str, episode_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the episode is stored or dead; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            ep = self._send(_OPS.get_episode(agent_id, episode_id))
            if _episode_settled(ep):
                return ep
            if time.monotonic() > deadline:
                raise TimeoutError(f"episode {episode_id} still {ep['status']} after {timeout}s")
            time.sleep(0.1)

    def wait_for_run(self, agent_id: str, run_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the run is done, skipped or failed; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            run, settled = _run_settled(self._send(_OPS.consolidation_runs(agent_id, limit=200)), run_id)
            if run and settled:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"consolidation run {run_id} still {run and run['status']} after {timeout}s")
            time.sleep(0.2)


class _AsyncTransport(_Transport):
    _http: httpx.AsyncClient

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, retries: int = 3) -> None:
        """`retries`: how many times a request answered 429 (rate limited) or 503 (overloaded)
        is sent again after the Retry-After the server gave. Both answers mean the request
        was refused before it did anything, so any request may be resent; 0 turns it off.
        Its connections belong to the event loop that first uses it: one client per loop."""
        super().__init__(retries)
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout, headers=_headers(api_key))

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.close()

    async def _send(self, op: _Op[T]) -> T:
        content = op.kwargs.get("content")
        kwargs = {**op.kwargs, "content": _AsyncFileChunks(content)} if isinstance(content, _FileChunks) else op.kwargs
        with self._reaching():
            resp = await self._http.request(op.method, op.path, **kwargs)
            for _ in range(self._retries):
                if resp.status_code not in REFUSED:
                    break
                await asyncio.sleep(retry_after(resp))
                resp = await self._http.request(op.method, op.path, **kwargs)
        return self._read(op, resp)

    async def _chunks(self, stream: _Stream) -> AsyncIterator[bytes]:
        with self._reaching():
            async with self._http.stream("GET", stream.path, params=stream.params, timeout=None) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    answer(resp)
                async for chunk in resp.aiter_bytes():
                    yield chunk

    async def wait_for_episode(self, agent_id: str, episode_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the episode is stored or dead; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            ep = await self._send(_OPS.get_episode(agent_id, episode_id))
            if _episode_settled(ep):
                return ep
            if time.monotonic() > deadline:
                raise TimeoutError(f"episode {episode_id} still {ep['status']} after {timeout}s")
            await asyncio.sleep(0.1)

    async def wait_for_run(self, agent_id: str, run_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the run is done, skipped or failed; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            run, settled = _run_settled(await self._send(_OPS.consolidation_runs(agent_id, limit=200)), run_id)
            if run and settled:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"consolidation run {run_id} still {run and run['status']} after {timeout}s")
            await asyncio.sleep(0.2)


# GENERATED by `python -m tests.sdk_codegen` from _Operations: do not edit by hand.


class Client(_SyncTransport):
    """client = Client("http://127.0.0.1:8420", api_key); client.add_episode("bot", "...")"""

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call to any route (path under the base URL, httpx keyword arguments), with the
        same retries and errors as the methods below: the decoded JSON answer, or None.
        For integrations (memworker.integrations) that drive routes generically."""
        return self._send(_OPS.request(method, path, **kwargs))

    def add_episode(
        self, agent_id: str, content: str | None = None, *, messages: list[dict[str, Any]] | None = None, **fields: Any
    ) -> dict[str, Any]:
        return self._send(_OPS.add_episode(agent_id, content, messages=messages, **fields))

    def add_episodes(self, agent_id: str, episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._send(_OPS.add_episodes(agent_id, episodes))

    def get_episode(self, agent_id: str, episode_id: str) -> dict[str, Any]:
        return self._send(_OPS.get_episode(agent_id, episode_id))

    def replay_episode(self, agent_id: str, episode_id: str) -> dict[str, Any]:
        return self._send(_OPS.replay_episode(agent_id, episode_id))

    def list_episodes(
        self, *, status: str | None = None, agent_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        return self._send(_OPS.list_episodes(status=status, agent_id=agent_id, limit=limit))

    def usage(self, agent_id: str | None = None) -> dict[str, Any]:
        return self._send(_OPS.usage(agent_id))

    def add_memory(self, agent_id: str, text: str, **fields: Any) -> dict[str, Any]:
        return self._send(_OPS.add_memory(agent_id, text, **fields))

    def add_memories(self, agent_id: str, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._send(_OPS.add_memories(agent_id, memories))

    def get_memory(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        return self._send(_OPS.get_memory(agent_id, memory_id))

    def update_memory(self, agent_id: str, memory_id: str, **changes: Any) -> dict[str, Any]:
        return self._send(_OPS.update_memory(agent_id, memory_id, **changes))

    def delete_memory(self, agent_id: str, memory_id: str) -> None:
        return self._send(_OPS.delete_memory(agent_id, memory_id))

    def list_memories(
        self,
        agent_id: str,
        *,
        tier: str | None = None,
        kind: str | None = None,
        session: str | None = None,
        metadata: dict[str, Any] | None = None,
        limit: int = 50,
        cursor: str | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        """metadata: only memories whose metadata contains this object (jsonb @>); subject:
        only that subject's memories."""
        return self._send(
            _OPS.list_memories(
                agent_id,
                tier=tier,
                kind=kind,
                session=session,
                metadata=metadata,
                limit=limit,
                cursor=cursor,
                subject=subject,
            )
        )

    def recall(self, agent_id: str, query: str, k: int = 5, **options: Any) -> dict[str, Any]:
        """{"memories": [...], "took_ms": ...}; options: tiers, kinds, since, until, metadata, explain,
        subject (that subject's memories and the agent's general ones, never another subject's),
        include_superseded (an audit: superseded memories too, each with valid_to and
        superseded_by). A hit in an open review names the other memory (conflicts_with)."""
        return self._send(_OPS.recall(agent_id, query, k, **options))

    def recall_agents(self, agents: list[str], query: str, k: int = 5, **options: Any) -> dict[str, Any]:
        """One ranked list over several agents' memories (each hit names its agent_id); the
        same options as recall."""
        return self._send(_OPS.recall_agents(agents, query, k, **options))

    def consolidate(self, agent_id: str) -> str:
        """Queue one consolidation pass; returns its run id."""
        return self._send(_OPS.consolidate(agent_id))

    def consolidation_runs(self, agent_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
        return self._send(_OPS.consolidation_runs(agent_id, limit=limit))

    def consolidation_status(self, agent_id: str) -> dict[str, Any]:
        return self._send(_OPS.consolidation_status(agent_id))

    def profile(self, agent_id: str, version: int | None = None, *, subject: str | None = None) -> dict[str, Any]:
        """The agent's profile, or with subject that subject's (built from its memories)."""
        return self._send(_OPS.profile(agent_id, version, subject=subject))

    def promote(self, agent_id: str, memory_id: str, tier: str, reason: str) -> dict[str, Any]:
        return self._send(_OPS.promote(agent_id, memory_id, tier, reason))

    def history(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        return self._send(_OPS.history(agent_id, memory_id))

    def reviews(self, agent_id: str, *, status: str = "open", limit: int = 100) -> list[dict[str, Any]]:
        return self._send(_OPS.reviews(agent_id, status=status, limit=limit))

    def resolve_review(self, agent_id: str, review_id: str, keep: str, reason: str = "") -> dict[str, Any]:
        """keep: 'both', or the id of the memory to keep (the other is superseded by it)."""
        return self._send(_OPS.resolve_review(agent_id, review_id, keep, reason))

    def forget(self, agent_id: str, **selector: Any) -> dict[str, Any]:
        """Exactly one of provenance=, memory_ids=, session_id=, before=; returns the receipt."""
        return self._send(_OPS.forget(agent_id, **selector))

    def pools(self) -> list[dict[str, Any]]:
        return self._send(_OPS.pools())

    def add_pool_memory(self, pool: str, text: str, **fields: Any) -> dict[str, Any]:
        return self._send(_OPS.add_pool_memory(pool, text, **fields))

    def add_pool_memories(self, pool: str, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._send(_OPS.add_pool_memories(pool, memories))

    def pool_memories(self, pool: str, *, limit: int = 50, subject: str | None = None) -> list[dict[str, Any]]:
        return self._send(_OPS.pool_memories(pool, limit=limit, subject=subject))

    def delete_pool_memory(self, pool: str, memory_id: str) -> None:
        return self._send(_OPS.delete_pool_memory(pool, memory_id))

    def share_memory(self, agent_id: str, memory_id: str, pool: str) -> dict[str, Any]:
        """Copy the agent's memory into a pool its policy may write ({"outcome": "copied" |
        "confirmed" | "already shared", "memory"})."""
        return self._send(_OPS.share_memory(agent_id, memory_id, pool))

    def pool_proposals(self, pool: str, *, status: str = "open", limit: int = 100) -> list[dict[str, Any]]:
        """What sleep proposed to the pool (policy pools_propose 'review'): open, approved, rejected or all."""
        return self._send(_OPS.pool_proposals(pool, status=status, limit=limit))

    def approve_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> dict[str, Any]:
        """Share the proposal into the pool ({"proposal", "outcome", "memory"}); again: the same memory."""
        return self._send(_OPS.approve_pool_proposal(pool, proposal_id, reason))

    def reject_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> dict[str, Any]:
        """The fact is not proposed to the pool again ({"proposal"})."""
        return self._send(_OPS.reject_pool_proposal(pool, proposal_id, reason))

    def policy(self, agent_id: str | None = None) -> dict[str, Any]:
        """{"overrides", "effective"} of an agent, or of the tenant's defaults."""
        return self._send(_OPS.policy(agent_id))

    def set_policy(self, overrides: dict[str, Any], agent_id: str | None = None) -> dict[str, Any]:
        """Replace the overrides of an agent, or the tenant's defaults."""
        return self._send(_OPS.set_policy(overrides, agent_id))

    def run_retention(self, agent_id: str) -> dict[str, Any]:
        return self._send(_OPS.run_retention(agent_id))

    def retention_runs(self, agent_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
        return self._send(_OPS.retention_runs(agent_id, limit=limit))

    def create_session(
        self,
        agent_id: str,
        session_id: str | None = None,
        *,
        goal: str | None = None,
        context_window_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        """Open a session (an existing session_id returns it unchanged, created False);
        subject: whom the session is with (its context calls recall for that subject), and
        the subject the caller acts for: an existing session_id not that subject's is a 403."""
        return self._send(
            _OPS.create_session(
                agent_id,
                session_id,
                goal=goal,
                context_window_tokens=context_window_tokens,
                metadata=metadata,
                subject=subject,
            )
        )

    def sessions(self, agent_id: str, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return self._send(_OPS.sessions(agent_id, status=status, limit=limit))

    def session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return self._send(_OPS.session(agent_id, session_id, subject=subject))

    def working(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return self._send(_OPS.working(agent_id, session_id, subject=subject))

    def update_working(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        """changes: goal=, intent= (None clears), add=[{"kind", "text" | "memory_id"}], remove=[ids],
        touch=[ids], expected_revision=."""
        return self._send(_OPS.update_working(agent_id, session_id, subject=subject, **changes))

    def set_plan(
        self,
        agent_id: str,
        session_id: str,
        milestones: list[dict[str, Any]],
        *,
        title: str | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        """milestones: [{"id"?, "title", "steps": [{"id"?, "title", "status"?, "progress"?}]}]."""
        return self._send(_OPS.set_plan(agent_id, session_id, milestones, title=title, subject=subject))

    def plan(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        """The plan, its milestones' status and progress, and "resume" (last completed milestone, next step)."""
        return self._send(_OPS.plan(agent_id, session_id, subject=subject))

    def update_step(
        self, agent_id: str, session_id: str, step_id: str, *, subject: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        """changes: status=, progress= (0-100), output=, note=, expected_revision=."""
        return self._send(_OPS.update_step(agent_id, session_id, step_id, subject=subject, **changes))

    def context(
        self, agent_id: str, query: str, *, session_id: str | None = None, max_tokens: int | None = None, **options: Any
    ) -> dict[str, Any]:
        """The runtime context; options: k, context_used (0..1) or used_tokens and window_tokens,
        subject (recall for it; with session_id, the session must be that subject's, else 403)."""
        return self._send(_OPS.context(agent_id, query, session_id=session_id, max_tokens=max_tokens, **options))

    def report_usage(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **usage: Any
    ) -> dict[str, Any]:
        """usage: context_used (0..1), or used_tokens with window_tokens; none: the estimate."""
        return self._send(_OPS.report_usage(agent_id, session_id, subject=subject, **usage))

    def context_calls(
        self, agent_id: str, session_id: str, *, limit: int = 50, subject: str | None = None
    ) -> list[dict[str, Any]]:
        return self._send(_OPS.context_calls(agent_id, session_id, limit=limit, subject=subject))

    def add_session_items(
        self, agent_id: str, session_id: str, items: list[dict[str, Any]], *, subject: str | None = None
    ) -> list[int]:
        """Append items (JSON objects, kept as given) after the session's last one; the
        positions they took, in order. An archived session is a 409."""
        return self._send(_OPS.add_session_items(agent_id, session_id, items, subject=subject))

    def session_items(
        self, agent_id: str, session_id: str, *, limit: int | None = None, subject: str | None = None
    ) -> list[dict[str, Any]]:
        """The session's items ({"position", "item", "created_at"}), oldest first: the last
        `limit` of them, or every item for None."""
        return self._send(_OPS.session_items(agent_id, session_id, limit=limit, subject=subject))

    def pop_session_item(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any] | None:
        """Delete the session's last item and return it ({"position", "item", "created_at"});
        None when the session has no item."""
        return self._send(_OPS.pop_session_item(agent_id, session_id, subject=subject))

    def clear_session_items(self, agent_id: str, session_id: str, *, subject: str | None = None) -> int:
        """Delete every item of the session; how many went."""
        return self._send(_OPS.clear_session_items(agent_id, session_id, subject=subject))

    def archive_session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return self._send(_OPS.archive_session(agent_id, session_id, subject=subject))

    def restore_session(
        self, agent_id: str, session_id: str, version: int | None = None, *, subject: str | None = None
    ) -> dict[str, Any]:
        return self._send(_OPS.restore_session(agent_id, session_id, version, subject=subject))

    def archives(self, agent_id: str, session_id: str, *, subject: str | None = None) -> list[dict[str, Any]]:
        return self._send(_OPS.archives(agent_id, session_id, subject=subject))

    def download_archive(self, agent_id: str, session_id: str, version: int, *, subject: str | None = None) -> bytes:
        """The archive as stored: gzip-compressed JSONL bytes."""
        return self._send(_OPS.download_archive(agent_id, session_id, version, subject=subject))

    def read_archive(
        self, agent_id: str, session_id: str, version: int, *, subject: str | None = None
    ) -> list[dict[str, Any]]:
        """The archive's JSONL lines, decompressed and parsed."""
        return self._send(_OPS.read_archive(agent_id, session_id, version, subject=subject))

    def download_export(self, agent_id: str, *, embeddings: bool = False) -> bytes:
        """The agent's whole export (NDJSON) in memory; export_chunks streams a large one."""
        return self._send(_OPS.download_export(agent_id, embeddings=embeddings))

    def export_chunks(self, agent_id: str, *, embeddings: bool = False) -> Iterator[bytes]:
        """The agent's export (NDJSON) as it arrives: write it to a file chunk by chunk."""
        return self._chunks(_OPS.export_chunks(agent_id, embeddings=embeddings))

    def download_subject_export(self, subject: str, *, embeddings: bool = False) -> bytes:
        """One subject's data across the tenant's agents (NDJSON), in memory."""
        return self._send(_OPS.download_subject_export(subject, embeddings=embeddings))

    def subject_export_chunks(self, subject: str, *, embeddings: bool = False) -> Iterator[bytes]:
        return self._chunks(_OPS.subject_export_chunks(subject, embeddings=embeddings))

    def import_file(
        self,
        agent_id: str,
        source: str | os.PathLike[str] | bytes,
        *,
        format: str = "auto",
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Import a file (a path, streamed from disk, or bytes): a memworker export, a JSONL of
        {"text": ...} lines, LangGraph items or a Mem0 export (format "auto" tells them apart;
        docs/export.md). `progress` is called with each chunk's size as
        it is sent. Answers the import's counts; ApiError 422 names a bad line (nothing written)."""
        return self._send(_OPS.import_file(agent_id, source, format=format, progress=progress))

    def add_webhook(
        self, url: str, events: list[str], *, agent_ids: list[str] | None = None, description: str = ""
    ) -> dict[str, Any]:
        """Register a webhook for pre_turn, post_turn and/or archive; the answer's "secret" is shown once."""
        return self._send(_OPS.add_webhook(url, events, agent_ids=agent_ids, description=description))

    def webhooks(self) -> list[dict[str, Any]]:
        return self._send(_OPS.webhooks())

    def delete_webhook(self, webhook_id: str) -> None:
        return self._send(_OPS.delete_webhook(webhook_id))

    def webhook_deliveries(self, webhook_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
        return self._send(_OPS.webhook_deliveries(webhook_id, limit=limit))

    def agents(self, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """A page of the tenant's agents this key reaches, each with its counts and last
        activity: {"agents": [...], "next_cursor": ...} (None on the last page)."""
        return self._send(_OPS.agents(limit=limit, cursor=cursor))

    def erase_agent(self, agent_id: str) -> dict[str, Any]:
        """Erase the agent and everything of it; the receipt (counts per place)."""
        return self._send(_OPS.erase_agent(agent_id))

    def agent_subjects(self, agent_id: str, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """A page of the subjects the agent holds, with counts: {"subjects": [...], "next_cursor": ...}."""
        return self._send(_OPS.agent_subjects(agent_id, limit=limit, cursor=cursor))

    def forget_subject(self, subject: str, *, keep_turns: bool = False) -> dict[str, Any]:
        """Erase the subject from every agent and pool of the tenant; the receipt (per agent,
        per pool, totals; `complete` false: call again for the holders left)."""
        return self._send(_OPS.forget_subject(subject, keep_turns=keep_turns))

    def create_key(
        self,
        scopes: list[str],
        *,
        name: str = "",
        agents: list[str] | None = None,
        pools: list[str] | None = None,
        expires_at: str | None = None,
    ) -> dict[str, Any]:
        """Mint a key within this key's own powers (the `keys` scope); the answer's `api_key`
        is the secret, shown once."""
        return self._send(_OPS.create_key(scopes, name=name, agents=agents, pools=pools, expires_at=expires_at))

    def list_keys(self) -> list[dict[str, Any]]:
        """The tenant's keys within this key's powers (prefixes, never secrets)."""
        return self._send(_OPS.list_keys())

    def revoke_key(self, prefix: str) -> dict[str, Any]:
        return self._send(_OPS.revoke_key(prefix))


class AsyncClient(_AsyncTransport):
    """async with AsyncClient(url, api_key) as client: await client.recall("bot", "...")

    The methods of Client, each a coroutine (the *_chunks streams: `async for`); one
    client per event loop, shared by the loop's tasks (asyncio.gather)."""

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call to any route (path under the base URL, httpx keyword arguments), with the
        same retries and errors as the methods below: the decoded JSON answer, or None.
        For integrations (memworker.integrations) that drive routes generically."""
        return await self._send(_OPS.request(method, path, **kwargs))

    async def add_episode(
        self, agent_id: str, content: str | None = None, *, messages: list[dict[str, Any]] | None = None, **fields: Any
    ) -> dict[str, Any]:
        return await self._send(_OPS.add_episode(agent_id, content, messages=messages, **fields))

    async def add_episodes(self, agent_id: str, episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self._send(_OPS.add_episodes(agent_id, episodes))

    async def get_episode(self, agent_id: str, episode_id: str) -> dict[str, Any]:
        return await self._send(_OPS.get_episode(agent_id, episode_id))

    async def replay_episode(self, agent_id: str, episode_id: str) -> dict[str, Any]:
        return await self._send(_OPS.replay_episode(agent_id, episode_id))

    async def list_episodes(
        self, *, status: str | None = None, agent_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        return await self._send(_OPS.list_episodes(status=status, agent_id=agent_id, limit=limit))

    async def usage(self, agent_id: str | None = None) -> dict[str, Any]:
        return await self._send(_OPS.usage(agent_id))

    async def add_memory(self, agent_id: str, text: str, **fields: Any) -> dict[str, Any]:
        return await self._send(_OPS.add_memory(agent_id, text, **fields))

    async def add_memories(self, agent_id: str, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self._send(_OPS.add_memories(agent_id, memories))

    async def get_memory(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        return await self._send(_OPS.get_memory(agent_id, memory_id))

    async def update_memory(self, agent_id: str, memory_id: str, **changes: Any) -> dict[str, Any]:
        return await self._send(_OPS.update_memory(agent_id, memory_id, **changes))

    async def delete_memory(self, agent_id: str, memory_id: str) -> None:
        return await self._send(_OPS.delete_memory(agent_id, memory_id))

    async def list_memories(
        self,
        agent_id: str,
        *,
        tier: str | None = None,
        kind: str | None = None,
        session: str | None = None,
        metadata: dict[str, Any] | None = None,
        limit: int = 50,
        cursor: str | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        """metadata: only memories whose metadata contains this object (jsonb @>); subject:
        only that subject's memories."""
        return await self._send(
            _OPS.list_memories(
                agent_id,
                tier=tier,
                kind=kind,
                session=session,
                metadata=metadata,
                limit=limit,
                cursor=cursor,
                subject=subject,
            )
        )

    async def recall(self, agent_id: str, query: str, k: int = 5, **options: Any) -> dict[str, Any]:
        """{"memories": [...], "took_ms": ...}; options: tiers, kinds, since, until, metadata, explain,
        subject (that subject's memories and the agent's general ones, never another subject's),
        include_superseded (an audit: superseded memories too, each with valid_to and
        superseded_by). A hit in an open review names the other memory (conflicts_with)."""
        return await self._send(_OPS.recall(agent_id, query, k, **options))

    async def recall_agents(self, agents: list[str], query: str, k: int = 5, **options: Any) -> dict[str, Any]:
        """One ranked list over several agents' memories (each hit names its agent_id); the
        same options as recall."""
        return await self._send(_OPS.recall_agents(agents, query, k, **options))

    async def consolidate(self, agent_id: str) -> str:
        """Queue one consolidation pass; returns its run id."""
        return await self._send(_OPS.consolidate(agent_id))

    async def consolidation_runs(self, agent_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
        return await self._send(_OPS.consolidation_runs(agent_id, limit=limit))

    async def consolidation_status(self, agent_id: str) -> dict[str, Any]:
        return await self._send(_OPS.consolidation_status(agent_id))

    async def profile(self, agent_id: str, version: int | None = None, *, subject: str | None = None) -> dict[str, Any]:
        """The agent's profile, or with subject that subject's (built from its memories)."""
        return await self._send(_OPS.profile(agent_id, version, subject=subject))

    async def promote(self, agent_id: str, memory_id: str, tier: str, reason: str) -> dict[str, Any]:
        return await self._send(_OPS.promote(agent_id, memory_id, tier, reason))

    async def history(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        return await self._send(_OPS.history(agent_id, memory_id))

    async def reviews(self, agent_id: str, *, status: str = "open", limit: int = 100) -> list[dict[str, Any]]:
        return await self._send(_OPS.reviews(agent_id, status=status, limit=limit))

    async def resolve_review(self, agent_id: str, review_id: str, keep: str, reason: str = "") -> dict[str, Any]:
        """keep: 'both', or the id of the memory to keep (the other is superseded by it)."""
        return await self._send(_OPS.resolve_review(agent_id, review_id, keep, reason))

    async def forget(self, agent_id: str, **selector: Any) -> dict[str, Any]:
        """Exactly one of provenance=, memory_ids=, session_id=, before=; returns the receipt."""
        return await self._send(_OPS.forget(agent_id, **selector))

    async def pools(self) -> list[dict[str, Any]]:
        return await self._send(_OPS.pools())

    async def add_pool_memory(self, pool: str, text: str, **fields: Any) -> dict[str, Any]:
        return await self._send(_OPS.add_pool_memory(pool, text, **fields))

    async def add_pool_memories(self, pool: str, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return await self._send(_OPS.add_pool_memories(pool, memories))

    async def pool_memories(self, pool: str, *, limit: int = 50, subject: str | None = None) -> list[dict[str, Any]]:
        return await self._send(_OPS.pool_memories(pool, limit=limit, subject=subject))

    async def delete_pool_memory(self, pool: str, memory_id: str) -> None:
        return await self._send(_OPS.delete_pool_memory(pool, memory_id))

    async def share_memory(self, agent_id: str, memory_id: str, pool: str) -> dict[str, Any]:
        """Copy the agent's memory into a pool its policy may write ({"outcome": "copied" |
        "confirmed" | "already shared", "memory"})."""
        return await self._send(_OPS.share_memory(agent_id, memory_id, pool))

    async def pool_proposals(self, pool: str, *, status: str = "open", limit: int = 100) -> list[dict[str, Any]]:
        """What sleep proposed to the pool (policy pools_propose 'review'): open, approved, rejected or all."""
        return await self._send(_OPS.pool_proposals(pool, status=status, limit=limit))

    async def approve_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> dict[str, Any]:
        """Share the proposal into the pool ({"proposal", "outcome", "memory"}); again: the same memory."""
        return await self._send(_OPS.approve_pool_proposal(pool, proposal_id, reason))

    async def reject_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> dict[str, Any]:
        """The fact is not proposed to the pool again ({"proposal"})."""
        return await self._send(_OPS.reject_pool_proposal(pool, proposal_id, reason))

    async def policy(self, agent_id: str | None = None) -> dict[str, Any]:
        """{"overrides", "effective"} of an agent, or of the tenant's defaults."""
        return await self._send(_OPS.policy(agent_id))

    async def set_policy(self, overrides: dict[str, Any], agent_id: str | None = None) -> dict[str, Any]:
        """Replace the overrides of an agent, or the tenant's defaults."""
        return await self._send(_OPS.set_policy(overrides, agent_id))

    async def run_retention(self, agent_id: str) -> dict[str, Any]:
        return await self._send(_OPS.run_retention(agent_id))

    async def retention_runs(self, agent_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
        return await self._send(_OPS.retention_runs(agent_id, limit=limit))

    async def create_session(
        self,
        agent_id: str,
        session_id: str | None = None,
        *,
        goal: str | None = None,
        context_window_tokens: int | None = None,
        metadata: dict[str, Any] | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        """Open a session (an existing session_id returns it unchanged, created False);
        subject: whom the session is with (its context calls recall for that subject), and
        the subject the caller acts for: an existing session_id not that subject's is a 403."""
        return await self._send(
            _OPS.create_session(
                agent_id,
                session_id,
                goal=goal,
                context_window_tokens=context_window_tokens,
                metadata=metadata,
                subject=subject,
            )
        )

    async def sessions(self, agent_id: str, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return await self._send(_OPS.sessions(agent_id, status=status, limit=limit))

    async def session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return await self._send(_OPS.session(agent_id, session_id, subject=subject))

    async def working(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return await self._send(_OPS.working(agent_id, session_id, subject=subject))

    async def update_working(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        """changes: goal=, intent= (None clears), add=[{"kind", "text" | "memory_id"}], remove=[ids],
        touch=[ids], expected_revision=."""
        return await self._send(_OPS.update_working(agent_id, session_id, subject=subject, **changes))

    async def set_plan(
        self,
        agent_id: str,
        session_id: str,
        milestones: list[dict[str, Any]],
        *,
        title: str | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        """milestones: [{"id"?, "title", "steps": [{"id"?, "title", "status"?, "progress"?}]}]."""
        return await self._send(_OPS.set_plan(agent_id, session_id, milestones, title=title, subject=subject))

    async def plan(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        """The plan, its milestones' status and progress, and "resume" (last completed milestone, next step)."""
        return await self._send(_OPS.plan(agent_id, session_id, subject=subject))

    async def update_step(
        self, agent_id: str, session_id: str, step_id: str, *, subject: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        """changes: status=, progress= (0-100), output=, note=, expected_revision=."""
        return await self._send(_OPS.update_step(agent_id, session_id, step_id, subject=subject, **changes))

    async def context(
        self, agent_id: str, query: str, *, session_id: str | None = None, max_tokens: int | None = None, **options: Any
    ) -> dict[str, Any]:
        """The runtime context; options: k, context_used (0..1) or used_tokens and window_tokens,
        subject (recall for it; with session_id, the session must be that subject's, else 403)."""
        return await self._send(_OPS.context(agent_id, query, session_id=session_id, max_tokens=max_tokens, **options))

    async def report_usage(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **usage: Any
    ) -> dict[str, Any]:
        """usage: context_used (0..1), or used_tokens with window_tokens; none: the estimate."""
        return await self._send(_OPS.report_usage(agent_id, session_id, subject=subject, **usage))

    async def context_calls(
        self, agent_id: str, session_id: str, *, limit: int = 50, subject: str | None = None
    ) -> list[dict[str, Any]]:
        return await self._send(_OPS.context_calls(agent_id, session_id, limit=limit, subject=subject))

    async def add_session_items(
        self, agent_id: str, session_id: str, items: list[dict[str, Any]], *, subject: str | None = None
    ) -> list[int]:
        """Append items (JSON objects, kept as given) after the session's last one; the
        positions they took, in order. An archived session is a 409."""
        return await self._send(_OPS.add_session_items(agent_id, session_id, items, subject=subject))

    async def session_items(
        self, agent_id: str, session_id: str, *, limit: int | None = None, subject: str | None = None
    ) -> list[dict[str, Any]]:
        """The session's items ({"position", "item", "created_at"}), oldest first: the last
        `limit` of them, or every item for None."""
        return await self._send(_OPS.session_items(agent_id, session_id, limit=limit, subject=subject))

    async def pop_session_item(
        self, agent_id: str, session_id: str, *, subject: str | None = None
    ) -> dict[str, Any] | None:
        """Delete the session's last item and return it ({"position", "item", "created_at"});
        None when the session has no item."""
        return await self._send(_OPS.pop_session_item(agent_id, session_id, subject=subject))

    async def clear_session_items(self, agent_id: str, session_id: str, *, subject: str | None = None) -> int:
        """Delete every item of the session; how many went."""
        return await self._send(_OPS.clear_session_items(agent_id, session_id, subject=subject))

    async def archive_session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return await self._send(_OPS.archive_session(agent_id, session_id, subject=subject))

    async def restore_session(
        self, agent_id: str, session_id: str, version: int | None = None, *, subject: str | None = None
    ) -> dict[str, Any]:
        return await self._send(_OPS.restore_session(agent_id, session_id, version, subject=subject))

    async def archives(self, agent_id: str, session_id: str, *, subject: str | None = None) -> list[dict[str, Any]]:
        return await self._send(_OPS.archives(agent_id, session_id, subject=subject))

    async def download_archive(
        self, agent_id: str, session_id: str, version: int, *, subject: str | None = None
    ) -> bytes:
        """The archive as stored: gzip-compressed JSONL bytes."""
        return await self._send(_OPS.download_archive(agent_id, session_id, version, subject=subject))

    async def read_archive(
        self, agent_id: str, session_id: str, version: int, *, subject: str | None = None
    ) -> list[dict[str, Any]]:
        """The archive's JSONL lines, decompressed and parsed."""
        return await self._send(_OPS.read_archive(agent_id, session_id, version, subject=subject))

    async def download_export(self, agent_id: str, *, embeddings: bool = False) -> bytes:
        """The agent's whole export (NDJSON) in memory; export_chunks streams a large one."""
        return await self._send(_OPS.download_export(agent_id, embeddings=embeddings))

    def export_chunks(self, agent_id: str, *, embeddings: bool = False) -> AsyncIterator[bytes]:
        """The agent's export (NDJSON) as it arrives: write it to a file chunk by chunk."""
        return self._chunks(_OPS.export_chunks(agent_id, embeddings=embeddings))

    async def download_subject_export(self, subject: str, *, embeddings: bool = False) -> bytes:
        """One subject's data across the tenant's agents (NDJSON), in memory."""
        return await self._send(_OPS.download_subject_export(subject, embeddings=embeddings))

    def subject_export_chunks(self, subject: str, *, embeddings: bool = False) -> AsyncIterator[bytes]:
        return self._chunks(_OPS.subject_export_chunks(subject, embeddings=embeddings))

    async def import_file(
        self,
        agent_id: str,
        source: str | os.PathLike[str] | bytes,
        *,
        format: str = "auto",
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Import a file (a path, streamed from disk, or bytes): a memworker export, a JSONL of
        {"text": ...} lines, LangGraph items or a Mem0 export (format "auto" tells them apart;
        docs/export.md). `progress` is called with each chunk's size as
        it is sent. Answers the import's counts; ApiError 422 names a bad line (nothing written)."""
        return await self._send(_OPS.import_file(agent_id, source, format=format, progress=progress))

    async def add_webhook(
        self, url: str, events: list[str], *, agent_ids: list[str] | None = None, description: str = ""
    ) -> dict[str, Any]:
        """Register a webhook for pre_turn, post_turn and/or archive; the answer's "secret" is shown once."""
        return await self._send(_OPS.add_webhook(url, events, agent_ids=agent_ids, description=description))

    async def webhooks(self) -> list[dict[str, Any]]:
        return await self._send(_OPS.webhooks())

    async def delete_webhook(self, webhook_id: str) -> None:
        return await self._send(_OPS.delete_webhook(webhook_id))

    async def webhook_deliveries(self, webhook_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
        return await self._send(_OPS.webhook_deliveries(webhook_id, limit=limit))

    async def agents(self, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """A page of the tenant's agents this key reaches, each with its counts and last
        activity: {"agents": [...], "next_cursor": ...} (None on the last page)."""
        return await self._send(_OPS.agents(limit=limit, cursor=cursor))

    async def erase_agent(self, agent_id: str) -> dict[str, Any]:
        """Erase the agent and everything of it; the receipt (counts per place)."""
        return await self._send(_OPS.erase_agent(agent_id))

    async def agent_subjects(self, agent_id: str, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """A page of the subjects the agent holds, with counts: {"subjects": [...], "next_cursor": ...}."""
        return await self._send(_OPS.agent_subjects(agent_id, limit=limit, cursor=cursor))

    async def forget_subject(self, subject: str, *, keep_turns: bool = False) -> dict[str, Any]:
        """Erase the subject from every agent and pool of the tenant; the receipt (per agent,
        per pool, totals; `complete` false: call again for the holders left)."""
        return await self._send(_OPS.forget_subject(subject, keep_turns=keep_turns))

    async def create_key(
        self,
        scopes: list[str],
        *,
        name: str = "",
        agents: list[str] | None = None,
        pools: list[str] | None = None,
        expires_at: str | None = None,
    ) -> dict[str, Any]:
        """Mint a key within this key's own powers (the `keys` scope); the answer's `api_key`
        is the secret, shown once."""
        return await self._send(_OPS.create_key(scopes, name=name, agents=agents, pools=pools, expires_at=expires_at))

    async def list_keys(self) -> list[dict[str, Any]]:
        """The tenant's keys within this key's powers (prefixes, never secrets)."""
        return await self._send(_OPS.list_keys())

    async def revoke_key(self, prefix: str) -> dict[str, Any]:
        return await self._send(_OPS.revoke_key(prefix))


# END GENERATED


def enqueue_in_cluster(
    redis_url: str,
    *,
    tenant_id: str,
    agent_id: str,
    content: str | None = None,
    messages: list[dict[str, str]] | None = None,
    idempotency_key: str | None = None,
    **fields: Any,
) -> str:
    """Send an episode straight to the ingest queue (Celery send_task), skipping HTTP.

    A worker writes the durable episode row first, then processes it. Until then the
    message lives only in Redis (AOF), so the idempotency key (generated if not given)
    makes a redelivered message harmless. Returns the idempotency key."""
    from memworker.settings import Settings
    from tasks.publish import Publisher

    key = idempotency_key or f"cluster:{uuid.uuid4()}"
    publisher = Publisher.for_settings(Settings(redis_url=redis_url))
    episode = {"content": content, "messages": messages, "idempotency_key": key, **fields}
    try:
        publisher.accept_episode(tenant_id, agent_id, episode)
    finally:
        publisher.close()
    return key
