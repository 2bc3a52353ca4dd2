"""Request bodies of the HTTP API. Unknown fields are rejected (extra='forbid')."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from memworker import errors, memories
from memworker.settings import JSON_DEPTH_CEILING

# The domain's words (memworker/memories.py): a filter may name every kind, tier and status.
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


class RecallIn(Strict):
    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=5, ge=1, le=100)
    tiers: list[Tier] | None = Field(default=None, min_length=1)
    kinds: list[Kind] | None = Field(default=None, min_length=1)
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, MetaValue] | None = None
    explain: bool = False
    subject: str | None = subject_field()


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
