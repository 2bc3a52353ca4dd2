"""A subject request (POST /v1/subjects/{subject}/forget): one person's erase across every
agent and pool of the tenant, in one transaction, with one receipt.

It is the agent-level forget by subject (memworker/erase/forget.py), run for each holder:
each agent and pool with a memory, an episode or a session of the subject. Every guarantee
is forget's, per holder: its advisory lock, the hold on the episodes in flight, the budget
of plan searches, the scrub of sessions, archives, context calls and pending webhook
payloads, pool copies and proposals, the audit rows. Agents come before pools, so an agent's
erase takes its pool copies first. One transaction: a holder that stays busy (Unavailable)
undoes the whole request, so the receipt is exactly what happened or nothing happened.

At most MAX_HOLDERS holders per call: past it the receipt says `complete: false` with how
many holders it did not reach, and the same call again erases the next ones (those erased
hold nothing any more)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import NotRequired, TypeAlias, TypedDict, cast
from uuid import UUID

from memworker.erase import forget
from memworker.fleet import pools
from memworker.fleet import queries as admin_db
from memworker.lifecycle import governance
from memworker.storage.db import Conn

# Holders erased in one call: each is a forget with its own locks and searches, all held to
# the commit, so one call stays within a request's time.
MAX_HOLDERS = 100

# Counts per place, summed over receipts; a place with places of its own nests.
Totals: TypeAlias = dict[str, "int | Totals"]


class HolderReceipt(forget.Receipt):
    """One holder's forget receipt; a pool's names its pool."""

    pool: NotRequired[str]


class SubjectReceipt(TypedDict):
    """A subject request's receipt: each agent's and pool's, the totals per place, and
    whether every holder was reached (else call again)."""

    subject: str
    at: str
    agents: list[HolderReceipt]
    pools: list[HolderReceipt]
    totals: Totals
    complete: bool
    holders_left: int


def forget_subject(
    conn: Conn, *, tenant_id: UUID, subject: str, actor: str, keep_turns: bool = False, now: datetime | None = None
) -> SubjectReceipt:
    """Erase the subject from every agent and pool of the tenant (up to MAX_HOLDERS); the
    receipt: per holder forget's own, and the totals per place. InvalidInput for a bad
    subject; Unavailable (nothing erased) as forget raises it."""
    request = forget.Request(subject=subject, keep_turns=keep_turns)
    request.validate()
    now = now or governance.clock(conn)
    found = admin_db.subject_holders(conn, tenant_id=tenant_id, subject=subject, limit=MAX_HOLDERS + 1)
    holders: list[HolderReceipt] = []
    for agent_id in found[:MAX_HOLDERS]:
        receipt = forget.forget(conn, tenant_id=tenant_id, agent_id=agent_id, request=request, actor=actor, now=now)
        pool = pools.name_of(agent_id)
        holders.append(cast(HolderReceipt, receipt | ({"pool": pool} if pool is not None else {})))
    return SubjectReceipt(
        subject=subject,
        at=now.isoformat(),
        agents=[h for h in holders if "pool" not in h],
        pools=[h for h in holders if "pool" in h],
        totals=totals(holders),
        complete=len(found) <= MAX_HOLDERS,
        holders_left=max(0, len(found) - MAX_HOLDERS),
    )


def totals(receipts: list[HolderReceipt]) -> Totals:
    """The counts of several forget receipts summed per place ({"memories": 3, "scrubbed":
    {"sessions": 1, ...}, ...}): a place's `count`, or its number; ids and words left out."""
    out: Totals = {}
    for receipt in receipts:
        _add(out, receipt)
    return out


def _add(out: Totals, receipt: Mapping[str, object]) -> None:
    for place, value in receipt.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            out[place] = _count(out.get(place, 0)) + value
        elif isinstance(value, dict) and set(value) <= {"count", "ids", "policy"} and "count" in value:
            out[place] = _count(out.get(place, 0)) + value["count"]
        elif isinstance(value, dict):
            inner = out.setdefault(place, {})
            assert isinstance(inner, dict)  # a place is a count or places throughout
            _add(inner, value)


def _count(value: int | Totals) -> int:
    assert isinstance(value, int)  # a place is a count or places throughout
    return value
