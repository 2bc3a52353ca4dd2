"""Request bodies of the HTTP API. Unknown fields are rejected (extra='forbid')."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Kind = Literal["fact", "preference", "decision", "method", "conclusion", "event", "insight", "summary"]
# Kinds a filter may name: also "turn", the episodic layer, which only ingest writes.
AnyKind = Literal["fact", "preference", "decision", "method", "conclusion", "event", "insight", "summary", "turn"]
Tier = Literal["L0", "L1", "L2", "L3"]
WritableTier = Literal["L0", "L1", "L2"]  # L3 only through the audited promote call
MetaValue = str | int | float | bool | None
EpisodeStatus = Literal["queued", "processing", "stored", "failed", "dead"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        # Postgres text and jsonb cannot hold U+0000: refuse it here as bad input, not a 500.
        if _has_nul(value):
            raise ValueError("text must not contain NUL (\\u0000) characters")
        return value

    @field_validator("salience", "confidence", mode="after", check_fields=False)
    @classmethod
    def _representable(cls, value: float | None) -> float | None:
        # Stored as 4-byte reals: 1e-320 would underflow in Postgres, so round first.
        return None if value is None else round(value, 6)


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


class Message(Strict):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1)
    name: str | None = Field(default=None, min_length=1, max_length=128, description="who said it (the speaker)")
    occurred_at: datetime | None = Field(default=None, description="when it was said (default: the episode's)")


class EpisodeIn(Strict):
    content: str | None = None
    messages: list[Message] | None = Field(default=None, min_length=1, max_length=500)
    session_id: str | None = Field(default=None, min_length=1, max_length=128)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

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
    kind: Kind = "fact"
    tier: WritableTier = "L1"
    salience: float = Field(default=0.5, ge=0, le=1)
    confidence: float = Field(default=0.7, ge=0, le=1)
    expires_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = Field(default=None, min_length=1, max_length=128)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class MemoryBatch(Strict):
    memories: list[MemoryIn] = Field(min_length=1)


class MemoryPatch(Strict):
    text: str | None = Field(default=None, min_length=1)
    kind: Kind | None = None
    tier: WritableTier | None = None
    salience: float | None = Field(default=None, ge=0, le=1)
    confidence: float | None = Field(default=None, ge=0, le=1)
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None


class RecallIn(Strict):
    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=5, ge=1, le=100)
    tiers: list[Tier] | None = Field(default=None, min_length=1)
    kinds: list[AnyKind] | None = Field(default=None, min_length=1)
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, MetaValue] | None = None
    explain: bool = False
