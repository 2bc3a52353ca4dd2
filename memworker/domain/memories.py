"""Pure domain: the Memory value, limits, the domain's words (kinds, tiers, episode statuses),
text normalisation. No I/O."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

MAX_TEXT_CHARS = 280  # summarize, don't hoard: a durable memory is tweet-sized


class Word(StrEnum):
    """A word of the domain with a fixed set of values (the one list of them: the API's
    schemas, the CLI's choices, the console's filters and sql/schema.sql's checks follow it).
    A member is its plain string: it compares, hashes, formats and encodes (JSON, SQL) as the
    value, and reads as the value in a validation error ('L1', not <Tier.L1: 'L1'>)."""

    def __repr__(self) -> str:
        return repr(self.value)


class Kind(Word):
    """What a memory is."""

    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    METHOD = "method"
    CONCLUSION = "conclusion"
    EVENT = "event"
    INSIGHT = "insight"
    SUMMARY = "summary"
    TURN = "turn"  # the episodic layer: one message as it was said (memworker/domain/episodic.py); ingest only


class Tier(Word):
    """How long a memory is meant to live: L0 short-lived .. L2 durable; L3 core, changed only
    through the audited promote call."""

    L0 = "L0"
    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


class EpisodeStatus(Word):
    """Where an accepted episode is: queued, claimed by a worker (processing), its memories
    stored, failed (to be retried) or dead (out of attempts)."""

    QUEUED = "queued"
    PROCESSING = "processing"
    STORED = "stored"
    FAILED = "failed"
    DEAD = "dead"


class Trust(Word):
    """Where a memory came from, as recall reports it: reflected from an episode, written
    through the API, built by sleep from other memories, or shared into a pool."""

    EPISODE = "episode"
    API = "api"
    CONSOLIDATION = "consolidation"
    POOL = "pool"


# The words as tuples, for `value in KINDS` with a plain str (an Enum's own `in` wants a member).
KINDS: tuple[Kind, ...] = tuple(Kind)
TIERS: tuple[Tier, ...] = tuple(Tier)
EPISODE_STATUSES: tuple[EpisodeStatus, ...] = tuple(EpisodeStatus)
AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
# A subject (the person or entity a memory is about: an end user, a customer, a peer agent)
# is named in the agent-id alphabet; sql/0010_subjects.sql checks the same pattern.
SUBJECT = AGENT_ID
SUBJECT_PATTERN = AGENT_ID.pattern
# A shared pool is stored as an agent row 'pool~<name>': '~' is in no agent id, so no agent can
# be named like a pool (memworker/fleet/pools.py).
POOL_PREFIX = "pool~"


def pool_owner(name: str) -> str | None:
    """The agents row of pool `name`; None for a name outside the agent-id alphabet."""
    return POOL_PREFIX + name if AGENT_ID.fullmatch(name) else None


def pool_of(owner: str) -> str | None:
    """The pool an agents row is, or None for an agent."""
    return owner[len(POOL_PREFIX) :] if owner.startswith(POOL_PREFIX) else None


def text_problem(text: str) -> str | None:
    """Why a memory's text cannot be stored (blank, or over MAX_TEXT_CHARS), or None: the one
    statement of the rule for every way a text comes in (a write, a change, an import's line)."""
    if len(text) > MAX_TEXT_CHARS:
        return (
            f"memory text is {len(text)} characters; the limit is {MAX_TEXT_CHARS} "
            "(summarize, don't hoard: send long material as an episode)"
        )
    if not text.strip():
        return "memory text must not be blank"
    return None


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Text cut to the limit at a word boundary where possible, marked with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def normalise(text: str) -> str:
    """The form two texts share when they say the same thing (exact dedup)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"\w+", folded))


# A word with its inner dots, hyphens, slashes, colons and underscores kept: 'srv47.example.net',
# 'v1.2.3', 'JIRA-4411', '10.0.0.1:8080' are one token (a trailing full stop is not part of it).
_COMPOUND = re.compile(r"\w+(?:[.\-/:]\w+)*")


def identifiers(text: str) -> frozenset[str]:
    """The tokens that name one thing exactly: any word with a digit in it, numbers, ids
    ('INV2024001'), hostnames ('srv47.example.net'), versions ('3.11'), tickets ('OPS-12').
    Case-folded (ids and hostnames are compared without case)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return frozenset(t for t in _COMPOUND.findall(folded) if any(c.isdigit() for c in t))


def says_the_same(a: str, b: str, *, min_jaccard: float = 0.5) -> bool:
    """The lexical half of near-duplicate detection (the other half is cosine): the same
    identifiers (numbers, ids, hostnames, versions: exactly), and most words shared.
    Embeddings alone merge 'ticket 1' with 'ticket 11', and INV2024001 with INV2024002."""
    if identifiers(a) != identifiers(b):
        return False
    ta, tb = set(normalise(a).split()), set(normalise(b).split())
    union = ta | tb
    return bool(union) and len(ta & tb) / len(union) >= min_jaccard


def subject_of(messages: list[dict[str, Any]] | None, indexes: tuple[int, ...], default: str | None) -> str | None:
    """The subject of what an episode's messages `indexes` said: the one subject those
    messages name (a message without one is the episode's), else the episode's own. Messages
    of two different subjects give the episode's subject: such an item is not one person's."""
    named = {(messages[i].get("subject") or default) for i in indexes if messages and 0 <= i < len(messages)}
    return named.pop() if len(named) == 1 else default


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode()).hexdigest()


@dataclass(frozen=True)
class Draft:
    """A memory before it is stored: what a reflector or a direct write proposes."""

    text: str
    kind: Kind = Kind.FACT
    confidence: float = 0.7
    salience: float = 0.5
    tier: Tier = Tier.L1
    entities: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    provenance: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    flags: tuple[str, ...] = ()
    trust: str = Trust.EPISODE  # where it came from
    subject: str | None = None  # None: the agent's general knowledge
    # what BM25 indexes when it is not the text itself: the first part of a split message
    # indexes its whole message, the others nothing (memworker/domain/episodic.py); None: the text
    index_text: str | None = None
    parts: int = 1  # the parts of the message this memory is one of (a split message's turns)

    def __post_init__(self) -> None:
        # a kind or tier given as its plain string (a row, a reflector's item) is the enum's
        # member: ValueError for a word the domain does not have
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "tier", Tier(self.tier))


@dataclass(frozen=True)
class Memory:
    id: str
    agent_id: str
    text: str
    kind: Kind
    tier: Tier
    salience: float
    confidence: float
    access_count: int
    created_at: datetime
    metadata: dict[str, Any]
    provenance: list[str]
    session_id: str | None = None
    entities: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    expires_at: datetime | None = None
    last_access_at: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    flags: list[str] = field(default_factory=list)
    trust: str = Trust.EPISODE
    subject: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Memory:
        return cls(
            id=str(row["id"]),
            agent_id=row["agent_id"],
            text=row["text"],
            kind=Kind(row["kind"]),
            tier=Tier(row["tier"]),
            salience=float(row["salience"]),
            confidence=float(row["confidence"]),
            access_count=row["access_count"],
            created_at=row["created_at"],
            metadata=row["metadata"],
            provenance=list(row["provenance"]),
            session_id=row.get("session_id"),
            entities=list(row.get("entities") or []),
            topics=list(row.get("topics") or []),
            expires_at=row.get("expires_at"),
            last_access_at=row.get("last_access_at"),
            valid_to=row.get("valid_to"),
            superseded_by=str(row["superseded_by"]) if row.get("superseded_by") else None,
            flags=list(row.get("flags") or []),
            trust=row.get("trust") or Trust.EPISODE,
            subject=row.get("subject"),
        )


# Text that reads as instructions to the agent rather than facts about the world
# (memory poisoning: MINJA, AgentPoison). Flagged on write; recall reports the flag.
# Matched on `fold(text)`: NFKC, no format characters, confusables mapped, one space.
_INSTRUCTION = re.compile(
    r"\bignore (?:(?:all|any|the|your|of|these|those|my) )*(?:previous|prior|above|earlier|preceding|"
    r"system|original|former) (?:instructions?|prompts?|rules|directions|directives|guidelines|messages?)|"
    r"\bignore (?:all|any|your) (?:instructions|rules|guidelines)\b|"
    r"\bdisregard (?:(?:all|any|the|your|of) )*(?:previous|prior|system|above|earlier|preceding|instructions)|"
    r"\bforget (?:everything|all)(?: of)? (?:you|you've|that|above|before|previous|prior|your|instructions)\b|"
    r"\bforget (?:all |about )?(?:your|the|previous|prior) (?:instructions|rules|guidelines|training)\b|"
    r"\bfrom now on,? (?:you|your|always|never|ignore|respond|reply|answer|act|pretend|only|do not|don't)\b|"
    r"\byou are now\b|\bnew instructions?:|\bsystem prompt|<\|?(?:system|im_start|im_end)\|?>|"
    r"#+ ?(?:instructions?|system|response|input) ?:|"
    r"\[/?inst\]|</?tool_call>|\"tool_calls?\" ?:|\bfunction_call\b|"
    r"\"(?:name|function|tool)\" ?: ?\"[^\"]*\" ?, ?\"(?:arguments|parameters|args|input)\" ?:|"
    r"\"type\" ?: ?\"(?:function|tool_use)\"|"
    r"\b(?:always|must) (?:respond|reply|answer|call|execute|run)\b|"
    r"忽略(?:之前|以上|先前)的?(?:指令|指示)",
)
# A role marker opening a line: a transcript of a prompt pasted into memory ("system: ...").
_ROLE_LINE = re.compile(r"^\W{0,3}(?:system|assistant|developer)\s*:", re.MULTILINE)
# Latin look-alikes (Cyrillic, Greek) that NFKC leaves alone: 'іgnоrе' -> 'ignore'.
_CONFUSABLES = str.maketrans(
    "аеорсухіјѕԁһԛԝԍνοαειτκρɡᴜ",  # Cyrillic, then Greek, then Latin oddities (script g, small-cap u)
    "aeopcyxijsdhqwgvoaeitkpgu",
)


def fold(text: str) -> str:
    """Text as the injection detector reads it: NFKC, case-folded, format characters (zero-
    width spaces, joiners, bidi marks, soft hyphens) dropped, common Cyrillic/Greek look-alikes
    mapped to Latin, runs of spaces and tabs made one space (newlines kept for role markers)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = "".join(c for c in folded if unicodedata.category(c) != "Cf").translate(_CONFUSABLES)
    return "\n".join(" ".join(line.split()) for line in folded.splitlines())


def flags_for(text: str) -> tuple[str, ...]:
    """('instruction',) when text tries to steer the agent; () otherwise."""
    folded = fold(text)
    if _ROLE_LINE.search(folded) or _INSTRUCTION.search(" ".join(folded.split())):
        return ("instruction",)
    return ()
