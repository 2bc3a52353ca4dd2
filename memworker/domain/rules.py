"""Pure lifecycle rules: confidence growth and decay, promotion by
evidence, contradiction (supersede or review) and near-duplicate merge. No I/O: the write
path (memworker.lifecycle.governance) and the sweep (memworker.lifecycle.retention) apply them.

Why the contradiction rule is lexical: with no LLM in the loop it has to be deterministic
and it must not retire true memories. It only fires when two texts say the same thing about
the same subject with one value swapped ("The project uses Python 3.9" -> "... 3.11"), or
one of them negated; anything looser is left alone. See docs/lifecycle.md."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache

from memworker.domain import memories, statements, updates, voice
from memworker.domain.policy import Policy

TIER_RANK: dict[str, int] = {t: i for i, t in enumerate(memories.Tier)}
# The episodic layer is L0 (turns, scratch): raw material that goes by age, by being distilled
# or by the episodic cap. L1-L3 are the semantic layer (reflected items, sleep's summaries,
# insights, conclusions): durable, they leave by supersede, merge, forget or the value-ranked
# semantic cap, never by a clock: forget the episodic layer, keep the conclusions.
EPISODIC_TIERS = (memories.Tier.L0,)
PROTECTED_KINDS = (memories.Kind.INSIGHT, memories.Kind.CONCLUSION)  # never forgotten by decay or cap
DERIVED_KINDS = (memories.Kind.INSIGHT, memories.Kind.CONCLUSION)  # written by consolidation from evidence
# Kinds that state how things are (one current value): the only ones a newer memory can
# contradict. Two events on different dates are both true; insights are derived.
STATEFUL_KINDS = (memories.Kind.FACT, memories.Kind.PREFERENCE, memories.Kind.DECISION, memories.Kind.METHOD)
# ... and an event, which can change one of them: by the rule for two statements when the older
# is stateful ("still in negotiation" / "we signed it yesterday"), else only by the everyday rule
# when it says something changed ("Sam moved to Porto", "the launch slipped to May 2").
CHANGING_KINDS = (*STATEFUL_KINDS, memories.Kind.EVENT)


# --- confidence -------------------------------------------------------------------------


def grow_confidence(current: float, evidence: float, growth: float) -> float:
    """Confidence after a later episode confirmed the memory: at least the new evidence's,
    then `growth` of the remaining gap to 1.0 closed (so it approaches 1, never reaches it
    by repetition alone)."""
    base = max(current, evidence)
    return min(1.0, base + growth * (1.0 - base))


def decayed(value: float, days: float, half_life_days: float | None, floor: float = 0.0) -> float:
    """value after `days` without evidence, halving every half_life_days, never below floor
    (a value already under the floor stays where it is). The sweep's SQL uses this formula."""
    if half_life_days is None or days <= 0:
        return value
    return max(min(value, floor), value * math.pow(0.5, days / half_life_days))


# --- promotion ----------------------------------------------------------------------------


def promotion_reason(
    *, tier: str, access_count: int, confirmations: int, confidence: float, connected: bool, policy: Policy
) -> str | None:
    """Why an L1 memory has earned L2, or None. Evidence is any of: recalled often,
    connected by consolidation, or confirmed by a later episode with enough confidence.
    L2 -> L3 never happens here: only through the explicit, audited promote call."""
    if tier != memories.Tier.L1:
        return None
    if access_count >= policy.promote_min_recalls:
        return f"recalled {access_count} times"
    if connected:
        return "connected by consolidation"
    if confirmations > 0 and confidence >= policy.promote_min_confidence:
        return f"confirmed by {confirmations} later episode(s), confidence {confidence:.2f}"
    return None


# --- contradiction --------------------------------------------------------------------------

_WORD = re.compile(r"\d+(?:[.:/,-]\d+)*[a-z%]*|[^\W_]+")
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "nobody", "nothing"})
_AUXILIARIES = frozenset({"do", "does", "did"})  # "does not use X" vs "uses X"
# Words that change how something is said, not what: "now uses", "officially uses"; and
# "confirmed", which restates.
_FILLERS = updates.FILLERS | {"confirmed"}
# Verbs after which a changed word is a changed value ("is in Berlin" -> "is in Lisbon").
_SINGLE_VALUED = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "be",
        "prefers",
        "prefer",
        "preferred",
        "lives",
        "live",
        "located",
        "based",
        "hosted",
        "deployed",
        "called",
        "named",
        "scheduled",
        "moved",
        "switched",
        "changed",
        "became",
        "becomes",
        "equals",
        "set",
        "targets",
        "runs",
        "run",
        "uses",
        "use",
        "using",
        "costs",
        "cost",
        "requires",
        "require",
    ]
)
# Verbs after which only a changed number is a changed value ("has 3 nodes" -> "has 5 nodes").
_VALUE_VERBS = _SINGLE_VALUED | frozenset(
    [
        "has",
        "have",
        "had",
        "needs",
        "need",
        "takes",
        "take",
        "starts",
        "start",
        "begins",
        "begin",
        "ends",
        "end",
        "expires",
        "expire",
    ]
)
_SKIP = _NEGATIONS | _AUXILIARIES | _FILLERS
_MAX_SWAPPED = 2  # words that may differ after the verb
_SWAP_WINDOW = 4  # ... within the first few words after it


@lru_cache(maxsize=65_536)  # the sweep compares each memory with several others
def _parse(text: str) -> tuple[bool, tuple[str, ...]]:
    """(negated, the words that carry meaning): case-folded, fillers and negations dropped."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold().replace("n't", " not"))
    return any(w in _NEGATIONS for w in words), tuple(w for w in words if w not in _SKIP)


def _is_value(word: str) -> bool:
    return any(ch.isdigit() for ch in word)


def contradiction(older: str, newer: str) -> str | None:
    """How newer contradicts older about the same subject and attribute: 'value' (a number
    changed), 'swap' (a word after a single-valued verb changed), 'negation' (one says not),
    or None. The subject (everything before the verb) must be identical, so 'Ticket 4411
    is about SSO' never contradicts 'Ticket 4412 is about SSO'."""
    (neg_a, core_a), (neg_b, core_b) = _parse(older), _parse(newer)
    verb = next((i for i, w in enumerate(core_a) if w in _VALUE_VERBS), None)
    if verb is None or verb >= len(core_b) or core_a[: verb + 1] != core_b[: verb + 1]:
        return None
    if neg_a != neg_b:
        return "negation" if core_a == core_b and core_a[verb] in _SINGLE_VALUED else None
    tail_a, tail_b = core_a[verb + 1 :], core_b[verb + 1 :]
    if len(tail_a) != len(tail_b):
        return None
    diffs = [i for i, (x, y) in enumerate(zip(tail_a, tail_b, strict=True)) if x != y]
    if not diffs:
        return None
    if all(_is_value(tail_a[i]) and _is_value(tail_b[i]) for i in diffs):
        return "value"
    if core_a[verb] in _SINGLE_VALUED and len(diffs) <= _MAX_SWAPPED and max(diffs) < _SWAP_WINDOW:
        return "swap"
    return None


def changed(older: str, newer: str) -> str | None:
    """contradiction(), or a knowledge update it does not see (memworker.domain.updates:
    roles swapped, a negation or a value changed in a looser sentence), or 'denied' (the newer
    says what the older tells never happened). The same words reordered as a list ('uses
    Python and Go' / 'uses Go and Python') change nothing."""
    if updates.reordered(older, newer):
        return None
    if updates.denied(older, newer):
        return "denied"  # not a change: one of the two is false (judge opens a review)
    if not updates.apart(older, newer):
        strict = contradiction(older, newer) or updates.change(older, newer)
        if strict is not None:
            return strict
    return updates.revision(older, newer)  # judges each clause apart


@dataclass(frozen=True)
class Fact:
    """What the rules need to know about one live memory."""

    id: str
    text: str
    kind: str
    tier: str
    confidence: float
    created_at: datetime
    access_count: int = 0
    speaker: str | None = None  # who said it, when known

    @property
    def protected(self) -> bool:
        return self.kind in PROTECTED_KINDS


@dataclass(frozen=True)
class Verdict:
    action: str  # 'supersede' (older retired) or 'review' (a person decides)
    older: Fact
    newer: Fact
    reason: str


def ordered(a: Fact, b: Fact) -> tuple[Fact, Fact]:
    """(older, newer) by creation time, then id."""
    return (a, b) if (a.created_at, a.id) <= (b.created_at, b.id) else (b, a)


def _utterance(fact: Fact) -> Fact:
    """The fact as what its speaker said: a leading "Name: " label (statements.quoted) taken
    off its text and kept as its speaker when none is known; a text told in its speaker's name
    (voice.told_by) read in their words again, so the rules see "I", not a name in every
    statement one person made."""
    speaker, said = statements.quoted(fact.text)
    if speaker is None:
        name = voice.person(fact.speaker)
        return replace(fact, text=voice.as_said(fact.text, name)) if name else fact
    return replace(fact, text=said, speaker=fact.speaker or speaker)


def judge(older: Fact, newer: Fact, policy: Policy) -> Verdict | None:
    """Supersede when the newer contradicts the older and is sure enough; a contradiction
    it cannot resolve (unsure, or the older is canonical L3) goes to review; else None."""
    verdict = _judge(_utterance(older), _utterance(newer), policy)
    return None if verdict is None else replace(verdict, older=older, newer=newer)


def _judge(older: Fact, newer: Fact, policy: Policy) -> Verdict | None:
    if (
        older.speaker
        and newer.speaker
        and older.speaker != newer.speaker
        and (statements.first_person(older.text) or statements.first_person(newer.text))
    ):
        return None  # "I live in Paris" and "I live in Rome", said by two people
    if older.kind in CHANGING_KINDS and newer.kind in CHANGING_KINDS and updates.denied(older.text, newer.text):
        # "I've never met Bryan" beside "Bryan gave me advice at the festival": what happened
        # does not change, so one of them is false, and only a person can say which
        return Verdict("review", older, newer, "denied: the newer says this never happened")
    if older.kind in STATEFUL_KINDS and newer.kind in CHANGING_KINDS:
        # a state changed by what happened ("still in negotiation" / "we signed it yesterday")
        how = changed(older.text, newer.text)
    elif older.kind in CHANGING_KINDS and newer.kind in CHANGING_KINDS:
        how = updates.told_change(older.text, newer.text)
    else:
        return None
    if how is None:
        return None
    if older.tier == memories.Tier.L3:
        return Verdict("review", older, newer, f"{how} contradiction with a canonical (L3) memory")
    if updates.codes_changed(older.text, newer.text):
        return Verdict("review", older, newer, f"{how}: an identifier changed (another thing, or the same one changed)")
    if newer.confidence >= policy.supersede_min_confidence:
        return Verdict(
            "supersede", older, newer, f"{how} changed by a newer memory (confidence {newer.confidence:.2f})"
        )
    return Verdict(
        "review",
        older,
        newer,
        f"{how} contradiction; the newer memory's confidence {newer.confidence:.2f} is under "
        f"{policy.supersede_min_confidence:.2f}",
    )


# --- dedup ---------------------------------------------------------------------------------------


def confirms(older: str, newer: str, cosine: float, *, similarity: float, restated: float | None = None) -> bool:
    """newer is a confirmation of the live memory older (cosine apart), not a memory of its
    own: never when it changes older (a knowledge update) or sets it in another time ("was" /
    "is", "former"); else at cosine >= similarity with the same identifiers and most words
    (memories.says_the_same), or, with `restated`, at cosine >= restated when it says the same
    content words in other order or form (updates.restates: "does not use" / "never uses",
    "plan is Enterprise" / "is on the Enterprise plan") with the same identifiers. The lower bar
    is safe only because the change rules run first: swapped roles and changed values have
    the same words too."""
    if changed(older, newer) is not None or updates.timed_apart(older, newer):
        return False
    if cosine >= similarity and memories.says_the_same(newer, older):
        return True
    return (
        restated is not None
        and cosine >= restated
        and memories.identifiers(older) == memories.identifiers(newer)
        and updates.restates(older, newer)
    )


# --- merge -------------------------------------------------------------------------------------


def mergeable(a: Fact, b: Fact, cosine: float, policy: Policy) -> bool:
    """Near-duplicates: close vectors AND the same numbers and most words (cosine alone
    merges 'ticket 1' with 'ticket 11'), never two versions of a changed fact, never L3
    (canonical memories change only by an explicit call)."""
    return (
        cosine >= policy.merge_similarity
        and memories.Tier.L3 not in (a.tier, b.tier)
        and memories.says_the_same(a.text, b.text, min_jaccard=policy.merge_min_jaccard)
        and changed(*(x.text for x in ordered(a, b))) is None
        and not updates.timed_apart(a.text, b.text)  # what was and what is: both kept
    )


def survivor(a: Fact, b: Fact) -> tuple[Fact, Fact]:
    """(survivor, merged away): an insight or conclusion outlives an episodic item (it keeps
    its protection), then the higher tier, the more recalled, the more confident, the older."""

    def rank(f: Fact) -> tuple[bool, int, int, float, float]:
        return (f.protected, TIER_RANK[f.tier], f.access_count, f.confidence, -f.created_at.timestamp())

    return (a, b) if rank(a) >= rank(b) else (b, a)


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    cosine: float


@dataclass
class Plan:
    """What one look at candidate pairs decided."""

    supersede: list[Verdict] = field(default_factory=list)
    review: list[Verdict] = field(default_factory=list)
    merge: list[tuple[Fact, Fact, float]] = field(default_factory=list)  # (survivor, away, cosine)


def plan(pairs: Iterable[Pair], facts: dict[str, Fact], policy: Policy) -> Plan:
    """Contradictions first (a changed fact must never be merged into its old version),
    then merges, most similar first; a memory retired or merged away takes no further part."""
    out = Plan()
    seen: set[frozenset[str]] = set()
    unique: list[Pair] = []
    for p in pairs:
        key = frozenset((p.a, p.b))
        if p.a != p.b and key not in seen and p.a in facts and p.b in facts:
            seen.add(key)
            unique.append(p)
    gone: set[str] = set()
    for p in unique:
        verdict = judge(*ordered(facts[p.a], facts[p.b]), policy)
        if verdict is None:
            continue
        if verdict.action == "review":
            out.review.append(verdict)
        elif verdict.older.id not in gone and verdict.newer.id not in gone:
            out.supersede.append(verdict)
            gone.add(verdict.older.id)
    contradicting = {frozenset((v.older.id, v.newer.id)) for v in out.review + out.supersede}
    for p in sorted(unique, key=lambda x: -x.cosine):
        if p.a in gone or p.b in gone or frozenset((p.a, p.b)) in contradicting:
            continue
        fa, fb = facts[p.a], facts[p.b]
        if mergeable(fa, fb, p.cosine, policy):
            keep, away = survivor(fa, fb)
            out.merge.append((keep, away, p.cosine))
            gone.add(away.id)
    return out
