"""Request bodies of the HTTP API. Unknown fields are rejected (extra='forbid')."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Kind = Literal["fact", "preference", "decision", "method", "conclusion", "event", "insight", "summary"]
Tier = Literal["L0", "L1", "L2", "L3"]
WritableTier = Literal["L0", "L1", "L2"]  # L3 only through the audited promote call
MetaValue = str | int | float | bool | None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Message(Strict):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1)


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
    kinds: list[Kind] | None = Field(default=None, min_length=1)
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, MetaValue] | None = None
    explain: bool = False
