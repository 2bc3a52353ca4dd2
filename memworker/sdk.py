"""Python SDK: memworker.Client over HTTP, and enqueue_in_cluster for agents that sit next
to Redis and want to skip the HTTP hop."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import httpx

from memworker import errors
from memworker.memories import EpisodeStatus


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


class Client:
    """client = Client("http://127.0.0.1:8420", api_key); client.add_episode("bot", "...")"""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, retries: int = 3) -> None:
        """`retries`: how many times a request answered 429 (rate limited) or 503 (overloaded)
        is sent again after the Retry-After the server gave. Both answers mean the request
        was refused before it did anything, so any request may be resent; 0 turns it off."""
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout, headers={"Authorization": f"Bearer {api_key}"}
        )
        self._retries = retries
        self._lsn = 0  # the newest write's WAL position the server answered (replicas: read-your-writes)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call to any route (path under the base URL, httpx keyword arguments), with the
        same retries and errors as the methods below: the decoded JSON answer, or None.
        For integrations (memworker.integrations) that drive routes generically."""
        return self._call(method, path, **kwargs)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        with self._reaching():
            resp = self._http.request(method, path, **kwargs)
            for _ in range(self._retries):
                if resp.status_code not in REFUSED:
                    break
                time.sleep(retry_after(resp))
                resp = self._http.request(method, path, **kwargs)
        self._note_lsn(resp.headers.get("x-memworker-lsn"))
        return answer(resp)

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

    def _obj(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """_call for the endpoints that answer a JSON object."""
        return cast("dict[str, Any]", self._call(method, path, **kwargs))

    def _list(self, method: str, path: str, *, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        """The list of objects under `key` in an endpoint's JSON answer."""
        return cast("list[dict[str, Any]]", self._obj(method, path, **kwargs)[key])

    # episodes
    def add_episode(
        self, agent_id: str, content: str | None = None, *, messages: list[dict[str, Any]] | None = None, **fields: Any
    ) -> dict[str, Any]:
        body = {"content": content} if messages is None else {"messages": messages}
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/episodes", json={**body, **fields})

    def add_episodes(self, agent_id: str, episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._list(
            "POST", f"/v1/agents/{_seg(agent_id)}/episodes/batch", json={"episodes": episodes}, key="episodes"
        )

    def get_episode(self, agent_id: str, episode_id: str) -> dict[str, Any]:
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/episodes/{_seg(episode_id)}")

    def wait_for_episode(self, agent_id: str, episode_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the episode is stored or dead; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            ep = self.get_episode(agent_id, episode_id)
            if ep["status"] in (EpisodeStatus.STORED, EpisodeStatus.DEAD):  # done, one way or the other
                return ep
            if time.monotonic() > deadline:
                raise TimeoutError(f"episode {episode_id} still {ep['status']} after {timeout}s")
            time.sleep(0.1)

    def replay_episode(self, agent_id: str, episode_id: str) -> dict[str, Any]:
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/episodes/{_seg(episode_id)}/replay")

    def list_episodes(
        self, *, status: str | None = None, agent_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        params = {k: v for k, v in {"status": status, "agent_id": agent_id, "limit": limit}.items() if v is not None}
        return self._list("GET", "/v1/episodes", params=params, key="episodes")

    def usage(self, agent_id: str | None = None) -> dict[str, Any]:
        return self._obj("GET", "/v1/usage", params={"agent_id": agent_id} if agent_id else {})

    # memories
    def add_memory(self, agent_id: str, text: str, **fields: Any) -> dict[str, Any]:
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/memories", json={"text": text, **fields})

    def add_memories(self, agent_id: str, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._list(
            "POST", f"/v1/agents/{_seg(agent_id)}/memories/batch", json={"memories": memories}, key="memories"
        )

    def get_memory(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}")

    def update_memory(self, agent_id: str, memory_id: str, **changes: Any) -> dict[str, Any]:
        return self._obj("PATCH", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}", json=changes)

    def delete_memory(self, agent_id: str, memory_id: str) -> None:
        self._call("DELETE", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}")

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
        params = {
            k: v
            for k, v in {
                "tier": tier,
                "kind": kind,
                "session": session,
                "subject": subject,
                "metadata": None if metadata is None else json.dumps(metadata),
                "limit": limit,
                "cursor": cursor,
            }.items()
            if v is not None
        }
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/memories", params=params)

    def recall(self, agent_id: str, query: str, k: int = 5, **options: Any) -> dict[str, Any]:
        """{"memories": [...], "took_ms": ...}; options: tiers, kinds, since, until, metadata, explain,
        subject (that subject's memories and the agent's general ones, never another subject's),
        include_superseded (an audit: superseded memories too, each with valid_to and
        superseded_by). A hit in an open review names the other memory (conflicts_with)."""
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/recall", json={"query": query, "k": k, **options})

    def recall_agents(self, agents: list[str], query: str, k: int = 5, **options: Any) -> dict[str, Any]:
        """One ranked list over several agents' memories (each hit names its agent_id); the
        same options as recall."""
        return self._obj("POST", "/v1/recall", json={"agents": agents, "query": query, "k": k, **options})

    # sleep (consolidation)
    def consolidate(self, agent_id: str) -> str:
        """Queue one consolidation pass; returns its run id."""
        return cast(str, self._obj("POST", f"/v1/agents/{_seg(agent_id)}/consolidate")["run_id"])

    def consolidation_runs(self, agent_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
        return self._list("GET", f"/v1/agents/{_seg(agent_id)}/consolidation/runs", params={"limit": limit}, key="runs")

    def consolidation_status(self, agent_id: str) -> dict[str, Any]:
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/consolidation")

    def wait_for_run(self, agent_id: str, run_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the run is done, skipped or failed; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            run = next((r for r in self.consolidation_runs(agent_id, limit=200) if r["run_id"] == run_id), None)
            if run and run["status"] in ("done", "skipped", "failed"):
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"consolidation run {run_id} still {run and run['status']} after {timeout}s")
            time.sleep(0.2)

    def profile(self, agent_id: str, version: int | None = None, *, subject: str | None = None) -> dict[str, Any]:
        """The agent's profile, or with subject that subject's (built from its memories)."""
        params: dict[str, Any] = {"version": version} if version else {}
        if subject is not None:
            params["subject"] = subject
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/profile", params=params)

    # lifecycle governance
    def promote(self, agent_id: str, memory_id: str, tier: str, reason: str) -> dict[str, Any]:
        return self._obj(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}/promote",
            json={"tier": tier, "reason": reason},
        )

    def history(self, agent_id: str, memory_id: str) -> dict[str, Any]:
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}/history")

    def reviews(self, agent_id: str, *, status: str = "open", limit: int = 100) -> list[dict[str, Any]]:
        return self._list(
            "GET",
            f"/v1/agents/{_seg(agent_id)}/review",
            params={"status": status, "limit": limit},
            key="reviews",
        )

    def resolve_review(self, agent_id: str, review_id: str, keep: str, reason: str = "") -> dict[str, Any]:
        """keep: 'both', or the id of the memory to keep (the other is superseded by it)."""
        return self._obj(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/review/{_seg(review_id)}/resolve",
            json={"keep": keep, "reason": reason},
        )

    def forget(self, agent_id: str, **selector: Any) -> dict[str, Any]:
        """Exactly one of provenance=, memory_ids=, session_id=, before=; returns the receipt."""
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/forget", json=selector)

    # shared pools (a tenant's memories its agents read by policy: pools_read, pools_write)
    def pools(self) -> list[dict[str, Any]]:
        return self._list("GET", "/v1/pools", key="pools")

    def add_pool_memory(self, pool: str, text: str, **fields: Any) -> dict[str, Any]:
        return self._obj("POST", f"/v1/pools/{_seg(pool)}/memories", json={"text": text, **fields})

    def add_pool_memories(self, pool: str, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._list("POST", f"/v1/pools/{_seg(pool)}/memories/batch", json={"memories": memories}, key="memories")

    def pool_memories(self, pool: str, *, limit: int = 50, subject: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit} | ({"subject": subject} if subject else {})
        return self._list("GET", f"/v1/pools/{_seg(pool)}/memories", params=params, key="memories")

    def delete_pool_memory(self, pool: str, memory_id: str) -> None:
        self._call("DELETE", f"/v1/pools/{_seg(pool)}/memories/{_seg(memory_id)}")

    def share_memory(self, agent_id: str, memory_id: str, pool: str) -> dict[str, Any]:
        """Copy the agent's memory into a pool its policy may write ({"outcome": "copied" |
        "confirmed" | "already shared", "memory"})."""
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/memories/{_seg(memory_id)}/share", json={"pool": pool})

    def pool_proposals(self, pool: str, *, status: str = "open", limit: int = 100) -> list[dict[str, Any]]:
        """What sleep proposed to the pool (policy pools_propose 'review'): open, approved, rejected or all."""
        params = {"status": status, "limit": limit}
        return self._list("GET", f"/v1/pools/{_seg(pool)}/proposals", params=params, key="proposals")

    def approve_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> dict[str, Any]:
        """Share the proposal into the pool ({"proposal", "outcome", "memory"}); again: the same memory."""
        path = f"/v1/pools/{_seg(pool)}/proposals/{_seg(proposal_id)}/approve"
        return self._obj("POST", path, json={"reason": reason})

    def reject_pool_proposal(self, pool: str, proposal_id: str, reason: str = "") -> dict[str, Any]:
        """The fact is not proposed to the pool again ({"proposal"})."""
        path = f"/v1/pools/{_seg(pool)}/proposals/{_seg(proposal_id)}/reject"
        return self._obj("POST", path, json={"reason": reason})

    def policy(self, agent_id: str | None = None) -> dict[str, Any]:
        """{"overrides", "effective"} of an agent, or of the tenant's defaults."""
        path = f"/v1/agents/{_seg(agent_id)}/policy" if agent_id else "/v1/policy"
        return self._obj("GET", path)

    def set_policy(self, overrides: dict[str, Any], agent_id: str | None = None) -> dict[str, Any]:
        """Replace the overrides of an agent, or the tenant's defaults."""
        path = f"/v1/agents/{_seg(agent_id)}/policy" if agent_id else "/v1/policy"
        return self._obj("PUT", path, json=overrides)

    def run_retention(self, agent_id: str) -> dict[str, Any]:
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/retention/run")

    def retention_runs(self, agent_id: str, *, limit: int = 20) -> list[dict[str, Any]]:
        return self._list("GET", f"/v1/agents/{_seg(agent_id)}/retention", params={"limit": limit}, key="runs")

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
    ) -> dict[str, Any]:
        """Open a session (an existing session_id returns it unchanged, created False);
        subject: whom the session is with (its context calls recall for that subject), and
        the subject the caller acts for: an existing session_id not that subject's is a 403."""
        body = {
            k: v
            for k, v in {
                "session_id": session_id,
                "subject": subject,
                "goal": goal,
                "metadata": metadata,
                "context_window_tokens": context_window_tokens,
            }.items()
            if v is not None
        }
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/sessions", json=body)

    def sessions(self, agent_id: str, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        params = {k: v for k, v in {"status": status, "limit": limit}.items() if v is not None}
        return self._list("GET", f"/v1/agents/{_seg(agent_id)}/sessions", params=params, key="sessions")

    # `subject=` on a session's methods: the subject the caller acts for (see _acting)
    def session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}", params=_acting(subject))

    def working(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return self._obj(
            "GET", f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/working", params=_acting(subject)
        )

    def update_working(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        """changes: goal=, intent= (None clears), add=[{"kind", "text" | "memory_id"}], remove=[ids],
        touch=[ids], expected_revision=."""
        return self._obj(
            "PATCH",
            f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/working",
            params=_acting(subject),
            json=changes,
        )

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
        body: dict[str, Any] = {"milestones": milestones, **({"title": title} if title else {})}
        return self._obj(
            "PUT", f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/plan", params=_acting(subject), json=body
        )

    def plan(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        """The plan, its milestones' status and progress, and "resume" (last completed milestone, next step)."""
        return self._obj(
            "GET", f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/plan", params=_acting(subject)
        )

    def update_step(
        self, agent_id: str, session_id: str, step_id: str, *, subject: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        """changes: status=, progress= (0-100), output=, note=, expected_revision=."""
        return self._obj(
            "PATCH",
            f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/plan/steps/{_seg(step_id)}",
            params=_acting(subject),
            json=changes,
        )

    def context(
        self, agent_id: str, query: str, *, session_id: str | None = None, max_tokens: int | None = None, **options: Any
    ) -> dict[str, Any]:
        """The runtime context; options: k, context_used (0..1) or used_tokens and window_tokens,
        subject (recall for it; with session_id, the session must be that subject's, else 403)."""
        body = {
            "query": query,
            **{k: v for k, v in {"session_id": session_id, "max_tokens": max_tokens}.items() if v is not None},
            **options,
        }
        return self._obj("POST", f"/v1/agents/{_seg(agent_id)}/context", json=body)

    def report_usage(
        self, agent_id: str, session_id: str, *, subject: str | None = None, **usage: Any
    ) -> dict[str, Any]:
        """usage: context_used (0..1), or used_tokens with window_tokens; none: the estimate."""
        return self._obj(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/usage",
            params=_acting(subject),
            json=usage,
        )

    def context_calls(
        self, agent_id: str, session_id: str, *, limit: int = 50, subject: str | None = None
    ) -> list[dict[str, Any]]:
        return self._list(
            "GET",
            f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/context_calls",
            params={"limit": limit, **_acting(subject)},
            key="context_calls",
        )

    def archive_session(self, agent_id: str, session_id: str, *, subject: str | None = None) -> dict[str, Any]:
        return self._obj(
            "POST", f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/archive", params=_acting(subject)
        )

    def restore_session(
        self, agent_id: str, session_id: str, version: int | None = None, *, subject: str | None = None
    ) -> dict[str, Any]:
        return self._obj(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/restore",
            params=_acting(subject),
            json={"version": version} if version else {},
        )

    def archives(self, agent_id: str, session_id: str, *, subject: str | None = None) -> list[dict[str, Any]]:
        return self._list(
            "GET",
            f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/archives",
            params=_acting(subject),
            key="archives",
        )

    def download_archive(self, agent_id: str, session_id: str, version: int, *, subject: str | None = None) -> bytes:
        """The archive as stored: gzip-compressed JSONL bytes."""
        with self._reaching():
            resp = self._http.get(
                f"/v1/agents/{_seg(agent_id)}/sessions/{_seg(session_id)}/archives/{_seg(version)}",
                params=_acting(subject),
            )
        if resp.status_code >= 400:
            raise ApiError(
                resp.status_code,
                resp.json() if resp.headers.get("content-type", "").startswith("application/json") else resp.text,
            )
        return resp.content

    def read_archive(
        self, agent_id: str, session_id: str, version: int, *, subject: str | None = None
    ) -> list[dict[str, Any]]:
        """The archive's JSONL lines, decompressed and parsed."""
        import gzip
        import json

        raw = gzip.decompress(self.download_archive(agent_id, session_id, version, subject=subject))
        return [json.loads(line) for line in raw.decode().splitlines() if line]

    # export and import (docs/export.md)
    def download_export(self, agent_id: str, *, embeddings: bool = False) -> bytes:
        """The agent's whole export (NDJSON) in memory; export_chunks streams a large one."""
        with self._reaching():
            resp = self._http.get(f"/v1/agents/{_seg(agent_id)}/export", params={"embeddings": embeddings})
        answer(resp) if resp.status_code >= 400 else None
        return resp.content

    def export_chunks(self, agent_id: str, *, embeddings: bool = False) -> Iterator[bytes]:
        """The agent's export (NDJSON) as it arrives: write it to a file chunk by chunk."""
        return self._stream(f"/v1/agents/{_seg(agent_id)}/export", {"embeddings": embeddings})

    def download_subject_export(self, subject: str, *, embeddings: bool = False) -> bytes:
        """One subject's data across the tenant's agents (NDJSON), in memory."""
        with self._reaching():
            resp = self._http.get("/v1/export", params={"subject": subject, "embeddings": embeddings})
        answer(resp) if resp.status_code >= 400 else None
        return resp.content

    def subject_export_chunks(self, subject: str, *, embeddings: bool = False) -> Iterator[bytes]:
        return self._stream("/v1/export", {"subject": subject, "embeddings": embeddings})

    def _stream(self, path: str, params: dict[str, Any]) -> Iterator[bytes]:
        with self._reaching(), self._http.stream("GET", path, params=params, timeout=None) as resp:
            if resp.status_code >= 400:
                resp.read()
                answer(resp)
            yield from resp.iter_bytes()

    def import_file(
        self,
        agent_id: str,
        source: str | os.PathLike[str] | bytes,
        *,
        format: str = "auto",
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Import a file (a path, streamed from disk, or bytes): a memworker export, a JSONL of
        {"text": ...} lines or LangGraph items. `progress` is called with each chunk's size as
        it is sent. Answers the import's counts; ApiError 422 names a bad line (nothing written)."""
        content: bytes | _FileChunks = source if isinstance(source, bytes) else _FileChunks(Path(source), progress)
        return self._obj(
            "POST",
            f"/v1/agents/{_seg(agent_id)}/import",
            params={"format": format},
            content=content,
            headers={"content-type": "application/x-ndjson"},
            timeout=None,  # a restore of a large file takes as long as it takes
        )

    def add_webhook(
        self, url: str, events: list[str], *, agent_ids: list[str] | None = None, description: str = ""
    ) -> dict[str, Any]:
        """Register a webhook for pre_turn, post_turn and/or archive; the answer's "secret" is shown once."""
        body: dict[str, Any] = {"url": url, "events": events, "description": description}
        if agent_ids is not None:
            body["agent_ids"] = agent_ids
        return self._obj("POST", "/v1/webhooks", json=body)

    def webhooks(self) -> list[dict[str, Any]]:
        return self._list("GET", "/v1/webhooks", key="webhooks")

    def delete_webhook(self, webhook_id: str) -> None:
        self._call("DELETE", f"/v1/webhooks/{_seg(webhook_id)}")

    def webhook_deliveries(self, webhook_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
        return self._list(
            "GET", f"/v1/webhooks/{_seg(webhook_id)}/deliveries", params={"limit": limit}, key="deliveries"
        )

    # administration within a tenant: agents, subject requests, keys (README route table)
    def agents(self, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """A page of the tenant's agents this key reaches, each with its counts and last
        activity: {"agents": [...], "next_cursor": ...} (None on the last page)."""
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        return self._obj("GET", "/v1/agents", params=params)

    def erase_agent(self, agent_id: str) -> dict[str, Any]:
        """Erase the agent and everything of it; the receipt (counts per place)."""
        return self._obj("DELETE", f"/v1/agents/{_seg(agent_id)}")

    def agent_subjects(self, agent_id: str, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """A page of the subjects the agent holds, with counts: {"subjects": [...], "next_cursor": ...}."""
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        return self._obj("GET", f"/v1/agents/{_seg(agent_id)}/subjects", params=params)

    def forget_subject(self, subject: str, *, keep_turns: bool = False) -> dict[str, Any]:
        """Erase the subject from every agent and pool of the tenant; the receipt (per agent,
        per pool, totals; `complete` false: call again for the holders left)."""
        return self._obj("POST", f"/v1/subjects/{_seg(subject)}/forget", json={"keep_turns": keep_turns})

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
        body: dict[str, Any] = {"name": name, "scopes": scopes}
        body |= {k: v for k, v in {"agents": agents, "pools": pools, "expires_at": expires_at}.items() if v is not None}
        return self._obj("POST", "/v1/keys", json=body)

    def list_keys(self) -> list[dict[str, Any]]:
        """The tenant's keys within this key's powers (prefixes, never secrets)."""
        return self._list("GET", "/v1/keys", key="keys")

    def revoke_key(self, prefix: str) -> dict[str, Any]:
        return self._obj("DELETE", f"/v1/keys/{_seg(prefix)}")


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
