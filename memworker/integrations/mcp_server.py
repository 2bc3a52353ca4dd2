"""memworker as a Model Context Protocol server: the tools an LLM agent needs to remember,
recall, build its runtime context, forget, and keep a session's working memory and plan; and
the fleet's: recall across agents and pools, shared pools (list, read, share into) and the
pools' proposals (list, approve, reject).

Every tool is a thin call through memworker.sdk.Client to the HTTP API, so the API's
scopes, tenancy, limits and validation apply unchanged: the server holds one tenant's API
key and can do exactly what that key may do. Bound to an agent, the tools' `agent`
argument defaults to it and any other agent is refused; unbound, every call names its agent.
Bound to a subject, every call that reads or writes memories or a session names that subject
to the API, which then serves that subject's memories (and the general ones) and that
subject's sessions only. An API error reaches the client as an MCP tool error carrying the
API's message.

Every tool is listed whatever the key's scopes: the API has no route that tells a key its
own scopes (GET /v1/keys needs the `keys` scope, which a key for an agent should not hold),
and the key's reach (its agents and pools) is per call anyway. A tool the key may not use
answers the API's refusal as a tool error ("HTTP 403: this key lacks the 'memories:write'
scope"). The binding decides what is listed: a server bound to a subject writes only that
subject's memories, so it offers no proposal decisions (they write general knowledge into a
pool)."""

from __future__ import annotations

import functools
import hmac
import inspect
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from typing import Annotated, Any, Literal, TypeVar

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12

from memworker import errors
from memworker.domain import memories
from memworker.schemas import Kind, Message, Tier, WritableKind, WritableTier
from memworker.sdk import (
    Accepted,
    ApiError,
    Client,
    ContextOut,
    EpisodeOut,
    Forgotten,
    MemoryOut,
    PlanOut,
    PoolOut,
    ProposalDecided,
    ProposalOut,
    Recalled,
    SessionOut,
    Shared,
    WorkingOut,
)

INSTRUCTIONS = """Long-term memory for this agent, served by memworker.
- remember: record what happened (an episode: content or messages; a worker distils it into memories
  within seconds) or store one memory as given (text).
- recall: search memories for a query; context: a ready-to-use context block under a token budget.
- forget: erase memories by id (returns a receipt).
- open_session, working_memory, plan, update_step: a session's whiteboard (goal, constraints,
  decisions, open questions) and its execution plan, which survive restarts and say where to resume.
- recall_agents: one ranked search over several agents' memories and shared pools.
- pools, pool_memories, share_memory: the tenant's shared pools, what one holds, and sharing a
  memory into one.
- pool_proposals (and, where offered, approve_proposal, reject_proposal): facts several agents
  learnt, waiting for a decision before they enter a pool.
A tool this server's API key may not use answers with the API's refusal (HTTP 403, naming the scope)."""

# How long remember(wait=True) waits for a worker to store the episode.
WAIT_S = 30.0

StepStatus = Literal["pending", "in_progress", "done", "blocked", "skipped"]

Agent = Annotated[
    str,
    Field(
        description="the agent whose memory this is (memories are per agent within the tenant)",
        pattern=memories.AGENT_ID.pattern,
    ),
]
SessionId = Annotated[
    str, Field(description="the session id (from open_session)", pattern=memories.AGENT_ID.pattern, max_length=128)
]
Query = Annotated[str, Field(description="what to look for, in natural language", min_length=1, max_length=4000)]
PoolName = Annotated[
    str, Field(description="a shared pool's name (see pools)", pattern=memories.AGENT_ID.pattern, max_length=128)
]
ProposalId = Annotated[str, Field(description="the proposal's id (see pool_proposals)", min_length=1, max_length=64)]
Reason = Annotated[str, Field(description="why, kept in the audit trail", max_length=500)]
HowMany = Annotated[int, Field(description="how many memories, best first", ge=1, le=100)]
Kinds = Annotated[list[Kind] | None, Field(description="only these kinds")]
Tiers = Annotated[list[Tier] | None, Field(description="only these tiers")]
SubjectFilter = Annotated[
    str | None, Field(description="that subject's memories and the general ones (never another subject's)")
]
# A page of a pool read for a server bound to a subject, before the memories of other subjects
# are dropped: the API lists one subject's memories or every memory, never "S's and the general".
POOL_PAGE = 500


class WorkingItem(BaseModel):
    """An item to add to working memory: its text, or the id of a memory it refers to."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["constraint", "decision", "question", "candidate"]
    text: str | None = Field(default=None, min_length=1, max_length=500)
    memory_id: str | None = None


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(default=None, description="a stable id (default: generated)")
    title: str = Field(min_length=1, max_length=500)
    status: StepStatus | None = None
    progress: int | None = Field(default=None, ge=0, le=100)


class Milestone(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(default=None, description="a stable id (default: generated)")
    title: str = Field(min_length=1, max_length=500)
    steps: list[Step] = Field(min_length=1)


# --- the tools' answers (besides the SDK's) -----------------------------------------------


class StoredEpisode(EpisodeOut):
    """An episode remember(wait=True) waited for; duplicate: its idempotency key was seen before."""

    duplicate: bool


class Pools(TypedDict):
    pools: list[PoolOut]


class PoolMemories(TypedDict):
    pool: str
    memories: list[MemoryOut]


class PoolProposals(TypedDict):
    pool: str
    proposals: list[ProposalOut]


# --- errors --------------------------------------------------------------------------------


@contextmanager
def api_errors(not_found: str | None = None) -> Iterator[None]:
    """Turn what the API or the network says into a tool error the model can read (the SDK
    shows a ToolError's message and nothing else; any other exception would reach the client
    as a bare "Error executing tool"). The SDK raises a MemworkerError for an API error, an
    API it cannot reach (Unreachable, naming the URL) and an argument it refuses before any
    request; TimeoutError is remember(wait=True) running out of time; an httpx.HTTPError is
    what the SDK leaves as it came (a body it cannot decode, a redirect loop). `not_found` is
    added to a 404's message: the API answers "agent not found" for a pool the key does not
    reach, which names neither the pool nor why."""
    try:
        yield
    except ApiError as exc:
        if exc.status == 404 and not_found:
            raise ToolError(f"{exc} ({not_found})") from exc
        raise ToolError(str(exc)) from exc
    except (errors.MemworkerError, httpx.HTTPError, TimeoutError) as exc:
        raise ToolError(str(exc)) from exc


T = TypeVar("T")


def _without_none(**fields: T | None) -> dict[str, T]:
    """The fields that are given: None leaves one out."""
    return {k: v for k, v in fields.items() if v is not None}


def version() -> str:
    """memworker's package version, which the server reports to its clients."""
    try:
        return metadata.version("memworker")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


# --- the tools -----------------------------------------------------------------------------


class Tools:
    """The tools over one API client. Each method is one MCP tool: its signature is the
    tool's input schema, its docstring the description the model reads."""

    def __init__(self, client: Client, agent: str | None, subject: str | None = None) -> None:
        self._client = client
        self._agent = agent
        # Every session call names the bound subject, and the API refuses (403) a session that
        # is not that subject's: session ids are chosen by callers and easy to guess, so an id
        # alone must not reach another subject's session. Unbound (None), the key reaches every
        # session it may.
        self._bound_subject = subject

    def _subject(self, subject: str | None) -> str | None:
        """The subject a call is for: the bound one (no other is served: a server for one end
        user never reads another's memories), else the one the call names, if any."""
        if self._bound_subject is None:
            return subject or None
        if subject not in (None, "", self._bound_subject):
            raise ToolError(f"this server is bound to subject {self._bound_subject!r}; it cannot act for {subject!r}")
        return self._bound_subject

    def _agent_id(self, agent: str | None) -> str:
        """The agent a call is for: the bound one, or the one the call names."""
        if self._agent is None:
            if not agent:
                raise ToolError("give the agent: this server is not bound to one")
            return agent
        if agent not in (None, "", self._agent):
            raise ToolError(f"this server is bound to agent {self._agent!r}; it cannot act for {agent!r}")
        return self._agent

    def remember(
        self,
        *,
        agent: Agent,
        content: Annotated[str | None, Field(description="an episode as free text: what happened")] = None,
        messages: Annotated[
            list[Message] | None, Field(description="an episode as a conversation: its messages in order")
        ] = None,
        text: Annotated[str | None, Field(description="one memory to store as given (no distillation)")] = None,
        kind: Annotated[WritableKind, Field(description="the memory's kind (with text only)")] = Kind.FACT,
        tier: Annotated[WritableTier, Field(description="L0 short-lived .. L2 durable (with text only)")] = Tier.L1,
        salience: Annotated[float | None, Field(description="0..1, how much it matters", ge=0, le=1)] = None,
        confidence: Annotated[float | None, Field(description="0..1, how sure it is", ge=0, le=1)] = None,
        session_id: Annotated[str | None, Field(description="the session this belongs to")] = None,
        idempotency_key: Annotated[
            str | None, Field(description="a key of yours: sending the same key again stores nothing twice")
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="free-form JSON to keep with it")] = None,
        wait: Annotated[
            bool, Field(description=f"for an episode: wait (up to {WAIT_S:.0f} s) until a worker has stored it")
        ] = False,
        subject: Annotated[
            str | None, Field(description="whom this is about or with (an end user, a customer); absent: general")
        ] = None,
    ) -> MemoryOut | Accepted | StoredEpisode:
        """Remember something. Give exactly one of: `content` or `messages` (an episode: what
        happened; a worker distils it into memories within seconds; returns episode_id and
        status "queued", or the final status and memory_ids with wait=true), or `text` (one
        memory stored as given, recallable at once; returns the memory)."""
        agent_id = self._agent_id(agent)
        if sum(x is not None for x in (content, messages, text)) != 1:
            raise ToolError("give exactly one of content, messages (an episode) or text (a memory)")
        with api_errors():
            if session_id is not None and self._bound_subject is not None:  # the session must be the subject's
                self._client.session(agent_id, session_id, subject=self._bound_subject)
            if text is not None:
                fields = _without_none(
                    salience=salience,
                    confidence=confidence,
                    session_id=session_id,
                    idempotency_key=idempotency_key,
                    metadata=metadata,
                    subject=self._subject(subject),
                )
                return self._client.add_memory(agent_id, text, kind=kind, tier=tier, **fields)
            fields = _without_none(
                session_id=session_id,
                idempotency_key=idempotency_key,
                metadata=metadata,
                subject=self._subject(subject),
            )
            msgs = [m.model_dump(mode="json", exclude_none=True) for m in messages] if messages is not None else None
            accepted = self._client.add_episode(agent_id, content, messages=msgs, **fields)
            if not wait:
                return accepted
            episode = self._client.wait_for_episode(agent_id, accepted["episode_id"], timeout=WAIT_S)
            stored: StoredEpisode = {**episode, "duplicate": accepted.get("duplicate", False)}
            return stored

    def recall(
        self,
        *,
        agent: Agent,
        query: Query,
        k: HowMany = 5,
        explain: Annotated[
            bool, Field(description="add each memory's signals (bm25, vector, salience, freshness...)")
        ] = False,
        kinds: Kinds = None,
        tiers: Tiers = None,
        subject: SubjectFilter = None,
    ) -> Recalled:
        """Search the agent's memories (hybrid keyword + semantic). Returns "memories" (id,
        text, kind, tier, score, provenance...), best first; with explain=true each has the
        "signals" behind its score."""
        agent_id = self._agent_id(agent)
        with api_errors():
            options = _without_none(kinds=kinds, tiers=tiers, subject=self._subject(subject))
            return self._client.recall(agent_id, query, k=k, explain=explain, **options)

    def context(
        self,
        *,
        agent: Agent,
        query: Query,
        session_id: Annotated[
            str | None, Field(description="include this session's working memory and plan progress")
        ] = None,
        max_tokens: Annotated[
            int | None, Field(description="the token budget (default: the agent's policy)", ge=16)
        ] = None,
        k: Annotated[int | None, Field(description="at most this many recalled memories", ge=1, le=100)] = None,
        subject: Annotated[
            str | None,
            Field(description="recall this subject's memories and the general ones (default: the session's)"),
        ] = None,
    ) -> ContextOut:
        """The runtime context for a query: the agent's profile, the session's working memory
        and plan progress, and recalled memories, packed under max_tokens. Returns "context"
        (the text to put in the prompt), its "tokens", the "memory_ids" it used and what was
        "dropped" to fit."""
        agent_id = self._agent_id(agent)
        with api_errors():
            return self._client.context(
                agent_id,
                query,
                session_id=session_id,
                max_tokens=max_tokens,
                k=k,
                **_without_none(subject=self._subject(subject)),
            )

    def forget(
        self,
        *,
        agent: Agent,
        memory_ids: Annotated[list[str], Field(description="the ids of the memories to erase", min_length=1)],
    ) -> Forgotten:
        """Erase memories for good, with the episodes they came from and what was derived from
        them. Returns the receipt: what was erased ("memories", "derived", "episodes") and the
        ids that matched nothing ("not_found")."""
        agent_id = self._agent_id(agent)
        with api_errors():
            if self._bound_subject is not None:  # a subject's server erases only that subject's memories
                for memory_id in memory_ids:
                    if self._client.get_memory(agent_id, memory_id).get("subject") != self._bound_subject:
                        raise ToolError(f"memory {memory_id} is not subject {self._bound_subject!r}'s")
            return self._client.forget(agent_id, memory_ids=memory_ids)

    def open_session(
        self,
        *,
        agent: Agent,
        session_id: Annotated[
            str | None, Field(description="your own id (default: generated); an existing id returns that session")
        ] = None,
        goal: Annotated[str | None, Field(description="what the session is for")] = None,
        context_window_tokens: Annotated[
            int | None, Field(description="your model's context window, in tokens", ge=256)
        ] = None,
        subject: Annotated[
            str | None,
            Field(
                description="whom the session is with (an end user, a customer): its context recalls that "
                "subject's memories, and an existing session_id must be that subject's; absent: general"
            ),
        ] = None,
    ) -> SessionOut:
        """Open a session (or get an open one back by its id): the home of a working memory
        and a plan. Returns its session_id."""
        agent_id = self._agent_id(agent)
        with api_errors():
            return self._client.create_session(  # a bound subject's sessions are with it
                agent_id,
                session_id,
                goal=goal,
                context_window_tokens=context_window_tokens,
                subject=self._subject(subject),
            )

    def working_memory(
        self,
        *,
        agent: Agent,
        session_id: SessionId,
        goal: Annotated[str | None, Field(description="set the session's goal")] = None,
        intent: Annotated[str | None, Field(description="set what you are doing right now")] = None,
        add: Annotated[list[WorkingItem] | None, Field(description="items to add")] = None,
        remove: Annotated[list[int] | None, Field(description="ids of items to remove")] = None,
        touch: Annotated[list[int] | None, Field(description="ids of items still relevant (kept longer)")] = None,
        expected_revision: Annotated[
            int | None, Field(description="refuse the change if the session moved past this revision")
        ] = None,
    ) -> WorkingOut:
        """Read a session's working memory (goal, intent, constraints, decisions, questions,
        candidates, plan steps), or change it: with goal, intent, add, remove or touch it is
        updated and the new state returned."""
        agent_id = self._agent_id(agent)
        changes: dict[str, object] = _without_none(
            goal=goal,
            intent=intent,
            add=[a.model_dump(exclude_none=True) for a in add] if add else None,
            remove=remove or None,
            touch=touch or None,
        )
        with api_errors():
            if not changes:
                return self._client.working(agent_id, session_id, subject=self._bound_subject)
            if expected_revision is not None:
                changes["expected_revision"] = expected_revision
            return self._client.update_working(agent_id, session_id, subject=self._bound_subject, **changes)

    def plan(
        self,
        *,
        agent: Agent,
        session_id: SessionId,
        milestones: Annotated[
            list[Milestone] | None, Field(description="replace the plan with these milestones and steps")
        ] = None,
        title: Annotated[str | None, Field(description="the plan's title (with milestones)")] = None,
    ) -> PlanOut:
        """Read a session's execution plan, or replace it (give milestones). Returns the plan
        with each milestone's status and progress, and "resume": the last completed milestone
        and the next step."""
        agent_id = self._agent_id(agent)
        with api_errors():
            if milestones is None:
                return self._client.plan(agent_id, session_id, subject=self._bound_subject)
            spec = [m.model_dump(exclude_none=True) for m in milestones]
            return self._client.set_plan(agent_id, session_id, spec, title=title, subject=self._bound_subject)

    def update_step(
        self,
        *,
        agent: Agent,
        session_id: SessionId,
        step_id: Annotated[str, Field(description="the step's id (see plan)", min_length=1, max_length=64)],
        status: StepStatus | None = None,
        progress: Annotated[int | None, Field(description="0..100", ge=0, le=100)] = None,
        output: Annotated[str | None, Field(description="what the step produced")] = None,
        note: Annotated[str | None, Field(description="a note on the step")] = None,
    ) -> PlanOut:
        """Record progress on one step of the session's plan; returns the updated plan."""
        agent_id = self._agent_id(agent)
        changes = _without_none(status=status, progress=progress, output=output, note=note)
        if not changes:
            raise ToolError("nothing to change: give status, progress, output or note")
        with api_errors():
            return self._client.update_step(agent_id, session_id, step_id, subject=self._bound_subject, **changes)

    # --- the fleet: recall across agents, shared pools, proposals ---------------------------

    def recall_agents(
        self,
        *,
        query: Query,
        agents: Annotated[
            list[Agent] | None,
            Field(description="the agents whose memories to rank (default: the bound agent, if any)", max_length=50),
        ] = None,
        pools: Annotated[list[PoolName] | None, Field(description="shared pools to rank in too", max_length=20)] = None,
        k: HowMany = 5,
        explain: Annotated[bool, Field(description="add each memory's signals")] = False,
        kinds: Kinds = None,
        tiers: Tiers = None,
        subject: SubjectFilter = None,
    ) -> Recalled:
        """Search several agents' memories and shared pools at once: one ranked list, each
        memory naming its "agent_id" (a pool's memory: its "pool"). Needs the memories:read
        scope, and a key that reaches every agent and pool named."""
        if self._agent is None:
            named = list(agents or [])
        else:  # a bound server ranks its own agent's memories (with pools), never another's
            named = [self._agent_id(a) for a in agents or [self._agent]]
        if not named and not pools:
            raise ToolError("name at least one agent (agents) or pool (pools)")
        with api_errors("an agent or pool named does not exist, or this server's key does not reach it"):
            options = _without_none(kinds=kinds, tiers=tiers, subject=self._subject(subject))
            return self._client.recall_agents(named, query, k=k, explain=explain, pools=pools or [], **options)

    def pools(self) -> Pools:
        """The tenant's shared pools this server's key reaches, each with its number of live
        memories. Needs the memories:read scope."""
        with api_errors():
            return {"pools": self._client.pools()}

    def pool_memories(
        self,
        *,
        pool: PoolName,
        limit: Annotated[int, Field(description="at most this many, newest first", ge=1, le=POOL_PAGE)] = 50,
        subject: Annotated[
            str | None, Field(description="only that subject's memories (absent: every memory of the pool)")
        ] = None,
    ) -> PoolMemories:
        """The memories a shared pool holds, newest first. Needs the memories:read scope and a
        key that reaches the pool."""
        with api_errors(f"pool {pool!r} does not exist, or this server's key does not reach it"):
            if self._bound_subject is None:
                found = self._client.pool_memories(pool, limit=limit, **_without_none(subject=subject))
            else:  # the bound subject's memories and the general ones, never another subject's
                self._subject(subject)
                page = self._client.pool_memories(pool, limit=POOL_PAGE)
                found = [m for m in page if m.get("subject") in (None, self._bound_subject)][:limit]
        return {"pool": pool, "memories": found}

    def share_memory(
        self,
        *,
        agent: Agent,
        memory_id: Annotated[str, Field(description="the id of the agent's memory to share", min_length=1)],
        pool: PoolName,
    ) -> Shared:
        """Share one of the agent's memories into a shared pool its policy lets it write
        (pools_write): a copy whose provenance names the source, or, when the pool holds the
        same fact already, one more source for it. Returns "outcome" ("copied", "confirmed",
        "already shared") and the pool's "memory". Needs the memories:write scope."""
        agent_id = self._agent_id(agent)
        with api_errors():
            bound = self._bound_subject  # a subject's server shares only that subject's memories
            if bound is not None and self._client.get_memory(agent_id, memory_id).get("subject") != bound:
                raise ToolError(f"memory {memory_id} is not subject {self._bound_subject!r}'s")
            return self._client.share_memory(agent_id, memory_id, pool)

    def pool_proposals(
        self,
        *,
        pool: PoolName,
        status: Annotated[
            Literal["open", "approved", "rejected", "all"], Field(description="which proposals (default: open)")
        ] = "open",
        limit: Annotated[int, Field(description="at most this many, oldest first", ge=1, le=1000)] = 100,
    ) -> PoolProposals:
        """What several agents learnt independently, proposed to a shared pool and waiting
        for a decision: each proposal's "id", "text", "kind", proposing "agent_id", "sources"
        and "status". Needs the memories:read scope and a key that reaches the pool."""
        with api_errors(f"pool {pool!r} does not exist, or this server's key does not reach it"):
            return {"pool": pool, "proposals": self._client.pool_proposals(pool, status=status, limit=limit)}

    def approve_proposal(self, *, pool: PoolName, proposal_id: ProposalId, reason: Reason = "") -> ProposalDecided:
        """Approve a proposal: its memory is shared into the pool with every source in its
        provenance. Returns the "proposal", the "outcome" and the pool's "memory"; approving
        again returns the same memory. A rejected proposal cannot be approved. Needs the
        memories:write scope."""
        with api_errors(f"no such proposal in pool {pool!r}, or this server's key does not reach it"):
            return self._client.approve_pool_proposal(pool, proposal_id, reason)

    def reject_proposal(self, *, pool: PoolName, proposal_id: ProposalId, reason: Reason = "") -> ProposalDecided:
        """Reject a proposal for good: the fact is not proposed to this pool again, nor shared
        into it automatically. Returns the "proposal". An approved proposal cannot be
        rejected. Needs the memories:write scope."""
        with api_errors(f"no such proposal in pool {pool!r}, or this server's key does not reach it"):
            return self._client.reject_pool_proposal(pool, proposal_id, reason)


READ_ONLY = ToolAnnotations(read_only_hint=True)
TOOLS: dict[str, ToolAnnotations] = {
    "remember": ToolAnnotations(read_only_hint=False, destructive_hint=False),
    "recall": READ_ONLY,
    "context": READ_ONLY,
    "forget": ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    "open_session": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    "working_memory": ToolAnnotations(read_only_hint=False, destructive_hint=False),
    "plan": ToolAnnotations(read_only_hint=False, destructive_hint=True),
    "update_step": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    "recall_agents": READ_ONLY,
    "pools": READ_ONLY,
    "pool_memories": READ_ONLY,
    "share_memory": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    "pool_proposals": READ_ONLY,
    "approve_proposal": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    "reject_proposal": ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
}
# Not offered by a server bound to a subject: a decision writes general knowledge into a pool,
# and such a server writes that subject's memories only.
DECISIONS = frozenset({"approve_proposal", "reject_proposal"})


def listed(*, subject: str | None) -> list[str]:
    """The tools a server with this binding offers, in order."""
    return [name for name in TOOLS if subject is None or name not in DECISIONS]


def _served(method: Callable[..., Mapping[str, object]], agent: str | None) -> Callable[..., dict[str, Any]]:
    """The tool as the MCP SDK serves it, which builds the tool's schemas from its signature.
    Its answer is declared a JSON object, whichever named type the method answers: the MCP SDK
    would validate a TypedDict answer and drop the keys it does not name (and wrap a union in
    {"result": ...}), while the API's answer passes through whole. Bound to an agent, its
    `agent` argument is optional and defaults to the bound agent, and the input schema says so."""

    @functools.wraps(method)
    def tool(**kwargs: Any) -> dict[str, Any]:
        return dict(method(**kwargs))

    sig = inspect.signature(method, eval_str=True)
    described = Annotated[
        str, Field(description=f"this server is bound to agent {agent!r}: leave it out (any other agent is refused)")
    ]
    params = [
        p.replace(annotation=described, default=agent) if p.name == "agent" and agent is not None else p
        for p in sig.parameters.values()
    ]
    tool.__signature__ = sig.replace(parameters=params, return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    return tool


def build(client: Client, *, agent: str | None = None, subject: str | None = None) -> MCPServer[Any]:
    """The MCP server over `client`, bound to `agent` when given, and to `subject` (its
    writes are about that subject, its reads that subject's and the general memories)."""
    server: MCPServer[Any] = MCPServer(
        "memworker",
        title="memworker memory",
        instructions=INSTRUCTIONS
        + (f"\nThis server is bound to agent {agent!r}." if agent else "")
        + (f"\nIt acts for subject {subject!r}: its memories and sessions are that subject's." if subject else ""),
        version=version(),
        log_level="WARNING",
    )
    tools = Tools(client, agent, subject)
    for name in listed(subject=subject):
        server.add_tool(_served(getattr(tools, name), agent), name=name, annotations=TOOLS[name])
    return server


# --- HTTP: a bearer token of its own ---------------------------------------------------------


class BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>`, else
    401. The server acts with a tenant's API key, so reaching its port must not be enough:
    any local user (or a browser page, through a DNS rebinding) could otherwise use the key."""

    def __init__(self, app: Any, token: str) -> None:
        if not token:
            raise ValueError("an empty bearer token would let everyone in")
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            body = json.dumps({"error": "missing or wrong bearer token for this MCP server"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="memworker-mcp"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)

    def _allowed(self, scope: dict[str, Any]) -> bool:
        given = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(given[0], self._expected)


def http_app(server: MCPServer[Any], *, host: str, token: str | None) -> Any:
    """The streamable HTTP app at /mcp, behind BearerAuth unless token is None (--no-auth)."""
    app = server.streamable_http_app(host=host)
    return app if token is None else BearerAuth(app, token)
