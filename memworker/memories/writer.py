"""The one writer of memories: every path that creates a memory (a direct write, ingest's
items and turns, sleep's insights, conclusions and summaries, a share into a pool) writes it
here. What differs per path is a parameter: whether the owner's policy redacts it, whether
governance checks what is new. Idempotency is the source key's: a key stored already (a retry,
the same idempotency key) writes nothing and answers the first write's id.

A restore (memworker/portability/restore.py) writes an export's rows as they were, in bulk
statements of its own: no redaction, governance or new event to decide."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np

from memworker.domain import memories, redact
from memworker.domain.policy import Policy
from memworker.lifecycle import governance
from memworker.storage import store
from memworker.storage.db import Conn

# Embeds texts in one batch, one vector each, in order.
Embed = Callable[[list[str]], Sequence[np.ndarray]]


@dataclass(frozen=True)
class Entry:
    """One memory to write: its draft, vector and source key (unique per tenant)."""

    draft: memories.Draft
    embedding: np.ndarray
    source_key: str
    session_id: str | None = None


@dataclass(frozen=True)
class Written:
    """A memory the writer stored, or found stored under its source key (new False)."""

    id: UUID
    new: bool
    draft: memories.Draft


def redacted(entries: Sequence[Entry], embed: Embed | None = None) -> list[Entry]:
    """The entries with their text, metadata, entities and topics redacted. A text that changed
    is embedded again (in one batch, when embed is given; else its vector stays), and the flags
    its old text gave it are those of the new text (flags of another origin stay)."""
    out = []
    for e in entries:
        d = e.draft
        text = redact.redact(d.text)
        flags = memories.flags_for(text) if text != d.text and d.flags == memories.flags_for(d.text) else d.flags
        draft = dataclasses.replace(
            d,
            text=text,
            metadata=redact.redact_value(d.metadata),
            entities=tuple(redact.redact_value(list(d.entities))),
            topics=tuple(redact.redact_value(list(d.topics))),
            flags=flags,
        )
        out.append(dataclasses.replace(e, draft=draft))
    changed = [i for i, (e, r) in enumerate(zip(entries, out, strict=True)) if e.draft.text != r.draft.text]
    if changed and embed is not None:
        for i, vec in zip(changed, embed([out[i].draft.text for i in changed]), strict=True):
            out[i] = dataclasses.replace(out[i], embedding=vec)
    return out


def write(
    conn: Conn,
    *,
    tenant_id: UUID,
    owner: str,
    entries: Sequence[Entry],
    policy: Policy | None = None,
    actor: str = "system",
    reason: str = "",
    redact_pii: bool = False,
    embed: Embed | None = None,
) -> list[Written]:
    """Write the entries to an owner (an agent, or a pool by its owner id) in the caller's
    transaction, one answer per entry in order. With the owner's policy: governance checks
    what is new (`check`), and with redact_pii the entries are redacted first when the policy
    says so (`redacted`, embed for the texts that change). Without one (a path that governs
    a whole batch itself, or writes what needs no check): the rows only."""
    if policy is not None and redact_pii and policy.redact_pii:
        entries = redacted(entries, embed)
    out = []
    for e in entries:
        mid, new = store.write_memory(
            conn,
            tenant_id=tenant_id,
            agent_id=owner,
            draft=e.draft,
            embedding=e.embedding,
            source_key=e.source_key,
            session_id=e.session_id,
            actor=actor,
            reason=reason,
        )
        out.append(Written(mid, new, e.draft))
    if policy is not None:
        check(conn, tenant_id=tenant_id, owner=owner, written=out, policy=policy, actor=actor)
    return out


def check(
    conn: Conn,
    *,
    tenant_id: UUID,
    owner: str,
    written: Sequence[Written],
    policy: Policy,
    actor: str,
    decided: Collection[tuple[UUID, UUID]] = frozenset(),
) -> None:
    """Governance over what is new among written (an earlier write under the same source key
    stands as it was checked): supersede, or queue the contradiction for review; the pairs
    in decided (new, known) were judged already (ingest's LLM reflector) and are left alone."""
    governance.check_new(
        conn,
        tenant_id=tenant_id,
        agent_id=owner,
        written=[(w.id, w.draft) for w in written if w.new],
        policy=policy,
        actor=actor,
        decided=decided,
    )
