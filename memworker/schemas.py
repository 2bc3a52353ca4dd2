"""Request bodies of the HTTP API (unknown fields are rejected: extra='forbid') and its answers."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator, with_config
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from Python 3.12

from memworker import errors
from memworker.domain import memories
from memworker.settings import JSON_DEPTH_CEILING

# The domain's words (memworker/domain/memories.py): a filter may name every kind, tier and status.
Kind = memories.Kind
Tier = memories.Tier
EpisodeStatus = memories.EpisodeStatus
# A write names any kind but "turn" (the episodic layer, which only ingest writes)...
WritableKind = Literal[
    Kind.FACT, Kind.PREFERENCE, Kind.DECISION, Kind.METHOD, Kind.CONCLUSION, Kind.EVENT, Kind.INSIGHT, Kind.SUMMARY
]
# ... and any tier but L3, reached only through the audited promote call.
WritableTier = Literal[Tier.L0, Tier.L1, Tier.L2]
MetaValue = str | int | float | bool | None
# Every integer a request carries (a limit, a version, a revision, an item id, a token count)
# fits a Postgres integer (4 bytes): past it, the query the value reaches fails (a 500), so the
# edge refuses it first (a 422 that changes nothing; docs/input_limits.md).
PG_INT_MAX = 2**31 - 1
SUBJECT_DOC = "who or what this is about (an end user, a customer, a peer agent); absent: the agent's general knowledge"


def subject_field() -> Any:
    """A `subject` field: optional, in the agent-id alphabet (memories.SUBJECT)."""
    return Field(default=None, pattern=memories.SUBJECT_PATTERN, description=SUBJECT_DOC)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        # What Postgres (or the answer's JSON encoder) cannot take is bad input, not a 500.
        problem = json_problem(value, JSON_DEPTH_CEILING)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _readable_datetime(cls, value: Any) -> Any:
        # Stored as it is, a date must read back in every process and offset: checked in UTC.
        if isinstance(value, datetime):
            problem = datetime_problem(value)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("salience", "confidence", mode="after", check_fields=False)
    @classmethod
    def _representable(cls, value: float | None) -> float | None:
        # Stored as 4-byte reals: 1e-320 would underflow in Postgres, so round first.
        return None if value is None else round(value, 6)


_SURROGATE = re.compile("[\ud800-\udfff]")

# Every datetime a body carries must read back: Python's datetime ends at years 1 and 9999, so
# a value near those ends in one offset is out of range in another (0001-01-01T00:00+14:00 is
# in year 0 in UTC), and dates serve in arithmetic (TTLs, decay, windows). The accepted range,
# in UTC, is [EARLIEST_DATETIME, LATEST_DATETIME) (docs/input_limits.md); a naive value is UTC.
EARLIEST_DATETIME = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_DATETIME = datetime(9000, 1, 1, tzinfo=UTC)


def datetime_problem(value: datetime) -> str | None:
    """Why a datetime from a request cannot be stored and read back, or None."""
    aware = value if value.utcoffset() is not None else value.replace(tzinfo=UTC)
    if EARLIEST_DATETIME <= aware < LATEST_DATETIME:
        return None
    return (
        f"datetimes must be from {EARLIEST_DATETIME.isoformat()} up to (not including) "
        f"{LATEST_DATETIME.isoformat()} once converted to UTC"
    )


def json_problem(value: Any, max_depth: int) -> str | None:
    """Why a decoded JSON value cannot be stored and read back, or None: a NUL (Postgres text
    and jsonb refuse U+0000), a lone surrogate (not UTF-8: "\\ud800" decodes, but nothing
    can encode it), a NaN or infinity (not JSON: jsonb refuses it), or objects and arrays
    nested deeper than max_depth (the top one is level 1). Iterative: any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "text must not contain NUL (\\u0000) characters"
            if not item.isascii() and _SURROGATE.search(item):
                return "text must not contain lone surrogates (\\ud800-\\udfff): it is not valid UTF-8"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "numbers must be finite (NaN and Infinity are not JSON)"
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return f"nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
    return None


def check_metadata(value: dict[str, Any] | None, *, max_depth: int, max_bytes: int, what: str = "metadata") -> None:
    """Raises InvalidInput (422) for a free-form JSON object a caller sends that is deeper
    than max_depth levels, longer than max_bytes as compact JSON, or not storable."""
    if not value:
        return
    problem = json_problem(value, max_depth)
    if problem:
        raise errors.InvalidInput(f"{what}: {problem}")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > max_bytes:
        raise errors.InvalidInput(f"{what}: {size} bytes as JSON; the limit is {max_bytes}")


# A session item (memworker/sessions/items.py): its size as compact UTF-8 JSON, and how many
# one append takes (100 full items stay under MEMWORKER_MAX_BODY_BYTES); docs/input_limits.md.
MAX_SESSION_ITEM_BYTES = 65_536
MAX_SESSION_ITEMS_BATCH = 100


def session_item_problem(item: dict[str, Any]) -> str | None:
    """Why a session item is over its size, or None."""
    size = len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_SESSION_ITEM_BYTES:
        return f"{size} bytes as JSON; an item is at most {MAX_SESSION_ITEM_BYTES}"
    return None


class SessionItemsIn(Strict):
    """Items to append to a session's log, in order: each a JSON object kept as given
    (memworker/sessions/items.py checks each item's size)."""

    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_SESSION_ITEMS_BATCH)


class Message(Strict):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1)
    name: str | None = Field(default=None, min_length=1, max_length=128, description="who said it (the speaker)")
    occurred_at: datetime | None = Field(default=None, description="when it was said (default: the episode's)")
    subject: str | None = subject_field()


class EpisodeIn(Strict):
    content: str | None = None
    messages: list[Message] | None = Field(default=None, min_length=1, max_length=500)
    session_id: str | None = Field(default=None, min_length=1, max_length=128)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    subject: str | None = subject_field()

    @model_validator(mode="after")
    def _one_body(self) -> EpisodeIn:
        if (self.content is None) == (self.messages is None):
            raise ValueError("give exactly one of 'content' or 'messages'")
        if self.content is not None and not self.content.strip():
            raise ValueError("content must not be empty")
        return self


class EpisodeBatch(Strict):
    episodes: list[EpisodeIn] = Field(min_length=1)


class MemoryIn(Strict):
    text: str = Field(min_length=1)
    kind: WritableKind = Kind.FACT
    tier: WritableTier = Tier.L1
    salience: float = Field(default=0.5, ge=0, le=1)
    confidence: float = Field(default=0.7, ge=0, le=1)
    expires_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = Field(default=None, min_length=1, max_length=128)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    subject: str | None = subject_field()


class MemoryBatch(Strict):
    memories: list[MemoryIn] = Field(min_length=1)


class MemoryPatch(Strict):
    text: str | None = Field(default=None, min_length=1)
    kind: WritableKind | None = None
    tier: WritableTier | None = None
    salience: float | None = Field(default=None, ge=0, le=1)
    confidence: float | None = Field(default=None, ge=0, le=1)
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None


MAX_QUERY_CHARS = 4000  # a recall's or a context call's query


class RecallIn(Strict):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=5, ge=1, le=100)
    tiers: list[Tier] | None = Field(default=None, min_length=1)
    kinds: list[Kind] | None = Field(default=None, min_length=1)
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, MetaValue] | None = None
    explain: bool = False
    subject: str | None = subject_field()
    include_superseded: bool = Field(
        default=False,
        description="an audit: superseded memories still kept for history are ranked too, each with its "
        "valid_to and superseded_by",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # the one check of a recall's input the field constraints above do not make
        if not value.strip():
            raise ValueError("must not be blank")
        return value


AgentIdText = Annotated[str, StringConstraints(pattern=memories.AGENT_ID.pattern)]


class AgentsRecallIn(RecallIn):
    """A recall over several agents (POST /v1/recall): one ranked list, each hit naming its agent."""

    agents: list[AgentIdText] = Field(default_factory=list, max_length=50)
    pools: list[AgentIdText] = Field(default_factory=list, max_length=20, description="shared pools to rank in too")

    @model_validator(mode="after")
    def _names_one(self) -> AgentsRecallIn:
        if not self.agents and not self.pools:
            raise ValueError("name at least one agent or pool")
        return self


# --- answers --------------------------------------------------------------------------------
# The JSON each /v1 route answers with (its response_model), by name, so /openapi.json and /docs
# show it; the SDK's calls are checked against that document. TypedDicts, not models: an answer
# passes through as the route built it (a field it leaves out stays out, none is added with a
# default), and every one is open (extra='allow'): a field a route adds before its answer here
# names it is kept, never dropped. Dates are ISO 8601 strings, ids strings.

_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class MemoryOut(TypedDict):
    """A memory as reads and writes return it."""

    id: str
    agent_id: str
    text: str
    kind: str
    tier: str
    salience: float
    confidence: float
    access_count: int
    metadata: dict[str, Any]
    created_at: str
    provenance: list[str]
    session_id: str | None
    entities: list[str]
    topics: list[str]
    expires_at: str | None
    superseded_by: str | None
    flags: list[str]
    trust: str
    subject: str | None
    pool: NotRequired[str]  # a shared pool's memory: the pool's name


@with_config(_OPEN)
class MemoryList(TypedDict):
    memories: list[MemoryOut]
    next_cursor: NotRequired[str | None]  # lists: the next page's cursor; None on the last page


@with_config(_OPEN)
class Accepted(TypedDict):
    """An episode accepted (durable) and queued; duplicate: its idempotency key was seen before."""

    episode_id: str
    status: str
    duplicate: NotRequired[bool]


@with_config(_OPEN)
class AcceptedBatch(TypedDict):
    episodes: list[Accepted]


@with_config(_OPEN)
class EpisodeOut(TypedDict):
    episode_id: str
    agent_id: str
    session_id: str | None
    status: str
    attempts: int
    last_error: str | None
    memory_ids: list[str]
    created_at: str
    stored_at: str | None
    reflector: NotRequired[str | None]
    llm_calls: NotRequired[int]
    tokens_in: NotRequired[int]
    tokens_out: NotRequired[int]
    llm_ms: NotRequired[int]
    occurred_at: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]


@with_config(_OPEN)
class EpisodeList(TypedDict):
    episodes: list[EpisodeOut]


class LlmBudget(TypedDict):
    """The tenant's daily LLM budget (policy llm_tokens_per_day, null: no limit), its tokens spent
    this UTC day, and whether reflection and sleep run without the LLM until the day turns."""

    tokens_per_day: int | None
    spent_today: int
    paused: bool


@with_config(_OPEN)
class Usage(TypedDict):
    """Ingest's LLM use (the top-level counts) and the sleep passes' (`sleep`), for the tenant
    and per agent (each agent entry adds its agent_id); the tenant's daily budget (`llm_budget`,
    to a key that sees every agent: its spend is the whole tenant's)."""

    tenant: dict[str, Any]
    agents: list[dict[str, Any]]
    llm_budget: NotRequired[LlmBudget]


@with_config(_OPEN)
class Signals(TypedDict):
    bm25: float
    vector: float
    fused: float
    salience: float
    access: int
    freshness: float
    prior: float


@with_config(_OPEN)
class Holder(TypedDict):
    """An agent (agent_id) or a pool (pool) holding a recalled text, with its memory's id."""

    id: str
    agent_id: NotRequired[str]
    pool: NotRequired[str]


@with_config(_OPEN)
class Hit(TypedDict):
    """A recalled memory; signals and collapsed with explain; agent_id over several agents."""

    id: str
    text: str
    kind: str
    tier: str
    score: float
    metadata: dict[str, Any]
    created_at: str
    provenance: list[str]
    flags: list[str]
    trust: str
    subject: str | None
    agent_id: NotRequired[str]
    pool: NotRequired[str]  # over several agents: whose hit it is, an agent's or a pool's
    # over several agents (or an agent's pools): every holder of the same text, best-ranked first
    holders: NotRequired[list[Holder]]
    signals: NotRequired[Signals]
    collapsed: NotRequired[list[str]]
    # since when it holds: on a hit in conflict and on a superseded hit (include_superseded)
    valid_from: NotRequired[str]
    # the other live memories it is in an open review with, newest first; the newer of two
    # such hits ranks directly above the older
    conflicts_with: NotRequired[list[str]]
    valid_to: NotRequired[str]  # include_superseded: when it stopped being current
    superseded_by: NotRequired[str | None]  # include_superseded: the memory that replaced it, if one did


@with_config(_OPEN)
class Recalled(TypedDict):
    memories: list[Hit]
    took_ms: float


@with_config(_OPEN)
class RunQueued(TypedDict):
    run_id: str
    status: str


@with_config(_OPEN)
class RunOut(TypedDict):
    """A consolidation pass's report: its counts, and its steps and results lifted to the top."""

    run_id: str
    agent_id: str
    trigger: str
    status: str
    created_at: str
    finished_at: str | None
    items_reviewed: int
    connections_made: int
    insights_written: int
    conclusions_written: int
    skipped_reason: str | None
    error: str | None
    steps: dict[str, Any]


@with_config(_OPEN)
class RunList(TypedDict):
    runs: list[RunOut]


@with_config(_OPEN)
class ConsolidationStatus(TypedDict):
    """Whether consolidation is on for the agent, its gates, and failures (flagged: 3 in a row)."""

    agent_id: str
    enabled: bool
    flagged: bool
    consolidation_requested: bool
    consolidation_failures: int
    consolidation_last_error: str | None
    last_consolidated_at: str | None
    next_consolidation_at: str | None


@with_config(_OPEN)
class ProfileOut(TypedDict):
    """The agent's profile (or a subject's): its sections and the pass that wrote them."""

    agent_id: str
    version: NotRequired[int]
    sections: NotRequired[dict[str, Any]]


@with_config(_OPEN)
class WebhookOut(TypedDict):
    """A webhook (its signing secret only in the answer that creates it)."""

    webhook_id: str
    url: str
    events: list[str]
    agent_ids: list[str] | None
    description: str
    active: bool
    created_at: str
    secret: NotRequired[str]


@with_config(_OPEN)
class WebhookList(TypedDict):
    webhooks: list[WebhookOut]


@with_config(_OPEN)
class DeliveryList(TypedDict):
    """A webhook's deliveries, newest first: status, attempts, last HTTP status and error."""

    deliveries: list[dict[str, Any]]


@with_config(_OPEN)
class ArchiveOut(TypedDict):
    """An archive of a session (gzip JSONL); already_archived when archiving found one."""

    session_id: str
    version: int
    format_version: int
    bytes: int
    raw_bytes: int
    sha256: str
    counts: dict[str, Any]
    distill_episode_id: str | None
    created_at: str
    already_archived: NotRequired[bool]


@with_config(_OPEN)
class ArchiveList(TypedDict):
    archives: list[ArchiveOut]


@with_config(_OPEN)
class Restored(TypedDict):
    """A session reopened from an archive, and what came back."""

    session_id: str
    status: str
    from_version: int
    restored: dict[str, Any]


@with_config(_OPEN)
class History(TypedDict):
    """The supersede chain through a memory (oldest first) and its audit events."""

    memory_id: str
    asked: str
    versions: list[dict[str, Any]]
    events: list[dict[str, Any]]


@with_config(_OPEN)
class ReviewList(TypedDict):
    """Open (or resolved) contradictions, each with its newer and older memory."""

    reviews: list[dict[str, Any]]


@with_config(_OPEN)
class ReviewResolved(TypedDict):
    id: str
    status: str
    kept: str
    superseded: Any  # the memory superseded by the one kept; None when both are kept


@with_config(_OPEN)
class Forgotten(TypedDict):
    """The receipt of a forget: ids and counts per place the text was erased from, no text."""

    agent_id: str
    request: str
    at: str
    memories: dict[str, Any]
    turns: dict[str, Any]
    episodes: dict[str, Any]
    derived: dict[str, Any]
    not_found: list[str]


@with_config(_OPEN)
class PolicyOut(TypedDict):
    """The overrides at this level and the effective policy (an agent's: the tenant's overrides too)."""

    overrides: dict[str, Any]
    effective: dict[str, Any]
    tenant_overrides: NotRequired[dict[str, Any]]


@with_config(_OPEN)
class RetentionReport(TypedDict):
    """What one retention sweep did."""

    agent_id: str
    run_id: str | None
    status: str
    clock: str | None
    scanned: int
    expired: int
    decayed: int
    promoted: int
    merged: int
    superseded: int
    duration_ms: int
    skipped_reason: str | None
    error: str | None


@with_config(_OPEN)
class RetentionRuns(TypedDict):
    runs: list[dict[str, Any]]


@with_config(_OPEN)
class SessionUsage(TypedDict):
    """A session's context use: the estimate, the last reported share and the flush's state."""

    log_tokens: int
    last_context_tokens: int
    window_tokens: int
    estimated_use: float
    reported_use: float | None
    flush_at: float
    flush_armed: bool
    flush_count: int
    flushed_at: str | None
    last_flush_episode_id: str | None


@with_config(_OPEN)
class PlanResume(TypedDict):
    """Where to pick a plan up again: the last completed milestone, the next step, the progress."""

    last_completed_milestone: dict[str, Any] | None
    next_step: dict[str, Any] | None
    done: bool
    progress: int
    steps_done: int
    steps_total: int
    blocked: list[str]


@with_config(_OPEN)
class WorkingItemOut(TypedDict):
    """A working-memory item as reads show it (its kind is the list it is in)."""

    id: int
    text: str | None
    memory_id: str | None
    refs: int
    created_at: str
    updated_at: str


@with_config(_OPEN)
class SessionOut(TypedDict):
    """A session: status, goal, plan progress and context use; created on POST (false: it existed)."""

    session_id: str
    agent_id: str
    status: str
    metadata: dict[str, Any]
    subject: str | None
    goal: Any
    intent: Any
    revision: int
    working_items: int
    plan: PlanResume | None
    usage: SessionUsage
    archives: int
    created_at: str | None
    updated_at: str | None
    archived_at: str | None
    restored_at: str | None
    created: NotRequired[bool]


@with_config(_OPEN)
class SessionList(TypedDict):
    sessions: list[SessionOut]


@with_config(_OPEN)
class SessionItemOut(TypedDict):
    """One raw item of a session's log: its place in the session and the item as stored."""

    position: int
    item: dict[str, Any]
    created_at: str


@with_config(_OPEN)
class SessionItemList(TypedDict):
    """The session's items (the last `limit`, or all), oldest first."""

    session_id: str
    items: list[SessionItemOut]


@with_config(_OPEN)
class SessionItemsAdded(TypedDict):
    """The positions the appended items took, in the order given."""

    session_id: str
    positions: list[int]


@with_config(_OPEN)
class SessionItemPopped(TypedDict):
    """The session's last item, now deleted; item and position are null when it had none."""

    session_id: str
    position: int | None
    item: dict[str, Any] | None
    created_at: NotRequired[str]  # absent when there was no item


@with_config(_OPEN)
class SessionItemsCleared(TypedDict):
    session_id: str
    deleted: int


@with_config(_OPEN)
class WorkingOut(TypedDict):
    """Working memory grouped by kind (constraints, decisions, questions, candidates) with the
    plan's steps; after a PATCH, what changed."""

    session_id: str
    status: str
    revision: int
    goal: Any
    intent: Any
    items: int
    pruned_total: int
    steps: list[dict[str, Any]]
    changes: NotRequired[dict[str, Any]]
    constraints: list[WorkingItemOut]
    decisions: list[WorkingItemOut]
    open_questions: list[WorkingItemOut]
    candidates: list[WorkingItemOut]


@with_config(_OPEN)
class PlanOut(TypedDict):
    """The plan with each milestone's status and progress, and where to resume."""

    session_id: str
    revision: int
    milestones: list[dict[str, Any]]
    resume: PlanResume
    title: NotRequired[str | None]
    updated_at: NotRequired[str]


@with_config(_OPEN)
class ContextOut(TypedDict):
    """The runtime context packed under max_tokens, what it holds and what was dropped."""

    context: str
    sections: Any
    tokens: int
    max_tokens: int
    memory_ids: list[Any]
    dropped: dict[str, Any]
    section_tokens: dict[str, Any]
    tokenizer: str
    context_call_id: Any
    usage: Any  # the session's context use after this call; None without a session


@with_config(_OPEN)
class ContextUse(TypedDict):
    """A session's context use (reported, or the estimate), and whether it flushed the log."""

    use: float
    source: str
    threshold: float
    window_tokens: Any
    flushed: bool
    episode_id: str | None
    reason: str


@with_config(_OPEN)
class ContextCalls(TypedDict):
    context_calls: list[dict[str, Any]]


@with_config(_OPEN)
class PoolOut(TypedDict):
    pool: str
    created_at: str
    memories: int  # its live memories


@with_config(_OPEN)
class PoolList(TypedDict):
    pools: list[PoolOut]


@with_config(_OPEN)
class Shared(TypedDict):
    """A memory shared into a pool: the pool's memory, and whether it is a new copy or one more
    source for the same fact."""

    pool: str
    outcome: str
    memory: MemoryOut


@with_config(_OPEN)
class ProposalOut(TypedDict):
    """A fact several agents learnt, proposed to a pool, with its sources."""

    id: str
    pool: str
    agent_id: str
    memory_id: str
    text: str | None  # None once the proposing memory is gone (its other sources may be live)
    kind: str | None
    status: str


@with_config(_OPEN)
class ProposalList(TypedDict):
    proposals: list[ProposalOut]


@with_config(_OPEN)
class ProposalDecided(TypedDict):
    """A proposal approved (with the pool's memory and how it was shared) or rejected."""

    proposal: ProposalOut
    outcome: NotRequired[str]
    memory: NotRequired[Any]


# --- administration within a tenant: agents, subject requests, keys (memworker/fleet/admin.py,
# memworker/erase/agents.py, memworker/erase/subjects.py) ------------------------------------


class KeyIn(Strict):
    """A key to mint, within the minting key's own powers (its scopes, agents, pools, expiry)."""

    name: str = Field(default="", max_length=200)
    scopes: list[str] = Field(min_length=1, max_length=16, description="each of memworker.keys.SCOPES")
    agents: list[AgentIdText] | None = Field(
        default=None, max_length=1000, description="the agents it may touch; with pools absent too: every one"
    )
    pools: list[AgentIdText] | None = Field(
        default=None, max_length=1000, description="the shared pools it may read or write directly"
    )
    expires_at: datetime | None = Field(default=None, description="with a time zone, in the future; absent: never")


class SubjectForgetIn(Strict):
    keep_turns: bool = Field(
        default=False, description="keep the turns (messages kept verbatim) of the episodes this erases"
    )


@with_config(_OPEN)
class AgentOut(TypedDict):
    """An agent with what it holds: live memories (turns apart), episodes, sessions."""

    agent_id: str
    created_at: str
    memories: int
    turns: int
    episodes: int
    sessions: int
    last_activity_at: str


@with_config(_OPEN)
class AgentList(TypedDict):
    agents: list[AgentOut]
    next_cursor: str | None


@with_config(_OPEN)
class SubjectOut(TypedDict):
    """A subject one agent holds anything of, with its counts there."""

    subject: str
    memories: int
    turns: int
    episodes: int
    sessions: int
    last_activity_at: str


@with_config(_OPEN)
class SubjectList(TypedDict):
    subjects: list[SubjectOut]
    next_cursor: str | None


@with_config(_OPEN)
class AgentErased(TypedDict):
    """The receipt of an agent's erase: counts per place (and the ids of pool copies and
    proposals it reached elsewhere), no text."""

    agent_id: str
    at: str
    memories: int
    episodes: int
    sessions: int
    pool_copies: dict[str, Any]
    pool_proposals: dict[str, Any]


@with_config(_OPEN)
class SubjectForgotten(TypedDict):
    """The receipt of a subject request: each agent's and pool's forget receipt, the totals
    per place, and whether every holder was reached (else call again)."""

    subject: str
    at: str
    agents: list[dict[str, Any]]
    pools: list[dict[str, Any]]
    totals: dict[str, Any]
    complete: bool
    holders_left: int


@with_config(_OPEN)
class KeyOut(TypedDict):
    """An API key as listed (never its secret): agents and pools None when it reaches all."""

    id: str
    prefix: str
    name: str
    state: str  # active | expired | revoked
    scopes: list[str]
    agents: list[str] | None
    pools: list[str] | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None


@with_config(_OPEN)
class KeyCreated(KeyOut):
    api_key: str  # the secret, shown once


@with_config(_OPEN)
class KeyList(TypedDict):
    keys: list[KeyOut]


# --- export and import (docs/export.md) ------------------------------------------------------


@with_config(_OPEN)
class ImportReport(TypedDict):
    """What an import wrote: memories new and already there (the same file again writes
    nothing), vectors computed again (another model, or none in the file), and per record type
    of a memworker export its <type>_written / <type>_existing counts."""

    format: str  # memworker | jsonl | langgraph
    lines: int
    memories_written: int
    memories_existing: int
    reembedded: int
