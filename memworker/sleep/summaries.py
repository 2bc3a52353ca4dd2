"""The distillation step of a consolidation pass, inside its transaction: the window's turns
become 'summary' memories (memworker.sleep.distil says how), each turn they carry points at its
summary (carried_by, read by retention's forgetting by value), and a reflected fact or event a
summary says in full is merged into it (the summary is the same knowledge with its context).

Windows are grouped by (subject, episode): no summary mixes two subjects or two conversations."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from memworker.domain import memories, tokens
from memworker.lifecycle import governance
from memworker.memories import writer
from memworker.models.embeddings import Embedder
from memworker.sleep import distil, profile
from memworker.sleep.synthesis import Item
from memworker.storage import sleep_db
from memworker.storage.db import Conn

# Descriptive items; preferences, decisions and methods stay apart.
ABSORBED_KINDS = (memories.Kind.FACT, memories.Kind.EVENT)
ABSORB_MIN_SHARE = 0.8  # of an item's terms a summary of its messages must hold
_SOURCE = re.compile(r"^(episode:[^#]+)(?:#m(\d+(?:,\d+)*))?$")


@dataclass
class Distilled:
    """What the step did, for the pass's report."""

    how: str  # rules | llm | rules (llm ...): why the rules stood in | none: why
    summary_ids: list[str] = field(default_factory=list)
    turns_distilled: int = 0
    items_absorbed: int = 0


def distil_window(
    conn: Conn,
    embedder: Embedder,
    ask: Callable[[str, str], str | None] | None,
    *,
    run_id: UUID,
    ids: dict[str, Any],
    window: list[Item],
) -> Distilled:
    """Summarise the window's turns, mark what they carry, absorb what they repeat. `ask` is
    the pass's one LLM call (None offline)."""
    said = [i for i in window if i.kind == memories.Kind.TURN]
    turns = [t for t in (_turn(i) for i in _current(conn, ids, said)) if t is not None]
    if not turns:
        return Distilled("none: no turns in the window")
    made, how = distil.with_llm(turns, ask) if ask is not None else (distil.distil(turns), "rules")
    out = Distilled(how)
    if not made:
        return out
    weights = {i.id: i.parts for i in said}
    parts = {(t.episode, t.message): weights[t.id] for t in turns}
    vectors = embedder.embed([s.text for s in made])
    carried_turns: list[str] = []
    carried_by: list[str] = []
    written: list[tuple[distil.Summary, UUID]] = []
    for n, (s, vec) in enumerate(zip(made, vectors, strict=True)):
        weight = min((parts.get((s.episode, m), 1) for m in s.messages), default=1)
        sid = _write(conn, run_id, ids, s, vec, n, "llm" if how == "llm" else "rules", weight)
        written.append((s, sid))
        carried_turns += s.carried
        carried_by += [str(sid)] * len(s.carried)
    out.summary_ids = [str(sid) for _, sid in written]
    out.turns_distilled = sleep_db.distil_carry(conn, turn_ids=carried_turns, summary_ids=carried_by, **ids)
    out.items_absorbed = _absorb(conn, ids, window, written)
    return out


def _current(conn: Conn, ids: dict[str, Any], said: list[Item]) -> list[Item]:
    """The turns whose reflected items are not all superseded: a summary never restates as
    current what a later statement changed (the turn itself stays, with its history)."""
    if not said:
        return said
    changed = set(
        sleep_db.superseded_sources(
            conn,
            sources=sorted({p for t in said for p in t.provenance}),
            since=min(t.created_at for t in said),
            until=max(t.created_at for t in said),
            **ids,
        )
    )
    return [t for t in said if not changed & set(t.provenance)]


def _turn(item: Item) -> distil.Turn | None:
    return distil.turn_of(item.id, item.text, item.provenance, item.metadata, item.subject)


def _write(
    conn: Conn, run_id: UUID, ids: dict[str, Any], s: distil.Summary, vector: Any, n: int, how: str, parts: int
) -> UUID:
    """parts: the fewest parts among the messages it names, so recall weighs a summary as it
    weighs them (a summary of a long answer pays the long answer's discount, as the items
    reflected from a message do: memworker.domain.episodic.item_parts)."""
    draft = memories.Draft(
        text=s.text,
        kind=memories.Kind.SUMMARY,
        tier=memories.Tier.L1,
        salience=distil.SALIENCE,
        confidence=distil.CONFIDENCE,
        provenance=(s.provenance,),
        flags=memories.flags_for(s.text),
        trust=memories.Trust.CONSOLIDATION,
        metadata={
            "run_id": str(run_id),
            "by": how,
            "speakers": s.speakers,
            "turns": len(s.carried),
            **({"occurred_at": s.occurred_at.isoformat()} if s.occurred_at else {}),
        },
        expires_at=None,  # the semantic layer is durable (docs/lifecycle.md)
        subject=s.subject,  # a summary never mixes subjects (distil groups by it)
        parts=parts,
    )
    done = writer.write(
        conn,
        tenant_id=ids["tenant_id"],
        owner=ids["agent_id"],
        entries=[writer.Entry(draft, vector, f"consolidation:{run_id}:summary:{n}")],
        reason=f"consolidation:{run_id}",
    )[0]
    mid, written = done.id, done.new
    if not written:  # one run's own keys inside its own transaction: cannot repeat
        raise RuntimeError(f"summary {n} of run {run_id} already exists")
    return mid


def _absorb(conn: Conn, ids: dict[str, Any], window: list[Item], written: list[tuple[distil.Summary, UUID]]) -> int:
    """Merge each descriptive item of the window into the summary that names all its messages
    and holds most of its words; what an item says is then found through its summary."""
    by_message: dict[tuple[str, int], list[tuple[set[str], UUID, set[int]]]] = defaultdict(list)
    for s, sid in written:
        entry = (set(tokens.tokenize(s.text)), sid, set(s.messages))
        for m in set(s.messages):
            by_message[(s.episode, m)].append(entry)
    now = datetime.now(UTC)
    absorbed = 0
    for item in window:
        if item.kind not in ABSORBED_KINDS or profile.section_of(item) is not None or "instruction" in item.flags:
            continue
        target = _container(item, by_message)
        if target is not None and governance.merge(
            conn,
            survivor_id=target,
            other_id=UUID(item.id),
            reason=f"said in full by the sleep summary {target}",
            actor="consolidation",
            now=now,
            **ids,
        ):
            absorbed += 1
    return absorbed


def _container(item: Item, by_message: dict[tuple[str, int], list[tuple[set[str], UUID, set[int]]]]) -> UUID | None:
    sources = [_SOURCE.match(p) for p in item.provenance]
    if not sources or any(m is None or m.group(2) is None for m in sources):
        return None
    wanted = [(m.group(1), int(x)) for m in sources if m is not None for x in (m.group(2) or "").split(",")]
    terms = set(tokens.tokenize(item.text))
    if not terms:
        return None
    episodes = {e for e, _ in wanted}
    if len(episodes) != 1:
        return None
    messages = {i for _, i in wanted}
    for summary_terms, sid, named in by_message.get(wanted[0], []):
        if messages <= named and len(terms & summary_terms) >= ABSORB_MIN_SHARE * len(terms):
            return sid
    return None


QUOTE_PREFIX = 30  # characters of an item's text that, found in a derived text, mean it is quoted


def sources(window: Iterable[Item], evidence: Iterable[str], quoting: str | None = None) -> tuple[str, ...]:
    """The episode messages the evidence came from, one 'episode:<id>#m<i,j>' per episode.
    With `quoting` (an extractive text: the offline insight or conclusion), only the evidence
    it quotes counts: the derived memory carries those messages' words, not the others'."""
    wanted = set(evidence)
    whole: set[str] = set()
    named: dict[str, set[int]] = defaultdict(set)
    folded = " ".join(quoting.split()) if quoting is not None else None
    for item in window:
        if item.id not in wanted:
            continue
        if folded is not None and " ".join(item.text.split())[:QUOTE_PREFIX] not in folded:
            continue
        for p in item.provenance:
            m = _SOURCE.match(p)
            if m is None:
                continue
            if m.group(2) is None:
                whole.add(m.group(1))
            else:
                named[m.group(1)].update(int(x) for x in m.group(2).split(","))
    out = sorted(whole)
    out += [f"{e}#m{','.join(str(i) for i in sorted(ms))}" for e, ms in sorted(named.items()) if e not in whole]
    return tuple(out)
