"""Policy: the tunable rules, with defaults here, tenant overrides in tenants.policy and
agent overrides in agents.policy (agent wins). Unknown or bad fields are rejected by name."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from memworker import errors
from memworker.domain import memories, redact


@dataclass(frozen=True)
class Policy:
    # recall: weights of the min-max-normalised signals, and the bounded priors
    recall_tiers: tuple[str, ...] = memories.TIERS  # the hot path searched by default: every tier
    recall_bm25_weight: float = 0.5  # even: see bench/results/locomo_recall.md
    recall_vector_weight: float = 0.5
    recall_prior_weight: float = 0.03  # priors re-order near-ties; they never overrule relevance
    recall_vector_floor: float = 0.15  # cosine below this with no term match = not relevant
    recall_candidates: int = 60  # per signal, before fusion
    # A message stored in n parts (a long one, memworker/domain/episodic.py) repeats the words
    # and topic of the short message it answers and outranks the short one that says the fact:
    # its fused score is lowered by this times ln(n / 2) past two parts (0: off). Measured on
    # long assistant answers beside short user messages (BEAM R@10 0.563 without, 0.658 with
    # 0.2 in an offline replay); a message of up to two parts (about 560 characters) is
    # untouched (docs/episodes.md).
    recall_part_discount: float = 0.2
    # A hit whose source messages are all covered by higher-ranked hits (an item and the turn it
    # came from) gives up its slot: explain lists it under the hit that covers it.
    recall_collapse: bool = True
    # fleet: the tenant's shared pools (memworker/fleet/pools.py) this agent's recall and context read
    # beside its own memories, and those it may share (promote) its memories into
    pools_read: tuple[str, ...] = ()
    pools_write: tuple[str, ...] = ()
    # what sleep does with the general facts, methods and lessons this agent and another agent
    # of the tenant learnt independently (in any words dedup takes for the same fact:
    # memworker/fleet/matches.py), for each pools_write pool: 'review'
    # queues a proposal a person approves or rejects (nothing reaches the pool before), 'auto'
    # shares at once, 'off' neither. Both agents' memories are its sources.
    pools_propose: str = "review"
    # ingest: the episodic layer (docs/episodes.md). On, every informative message of an episode
    # is also kept as a 'turn' memory (L0) beside the reflected items; off, only the items.
    episodic_layer: bool = True
    # LLM spend: the tenant's tokens (in + out) per UTC day, reflection and sleep together; once
    # spent, reflection falls back to the offline rules and sleep passes run without the LLM until
    # the day turns. None: no limit. The tenant's value counts (the budget is the tenant's; an
    # agent's own value is ignored).
    llm_tokens_per_day: int | None = None
    # ingest
    dedup_similarity: float = 0.95  # cosine at or above this with an existing memory = duplicate
    # ... or at or above this when it says the same content words otherwise (reordered, a
    # negation or filler said another way) and no knowledge-update rule sees a change
    dedup_restated_similarity: float = 0.85
    # safety: memory poisoning and personal data
    hold_back_flagged: bool = False  # True: memories that read as instructions never come back
    redact_pii: bool = False  # True: emails, phones, keys, card numbers masked before the LLM and storage
    # lifecycle: time to live per tier in hours; None = never expires
    # L0 is the episodic layer (turns, scratch); L1-L3 the semantic layer, durable: it leaves by
    # supersede, merge, an explicit forget or the value-ranked cap, never by a clock (docs/lifecycle.md)
    ttl_l0_hours: float | None = 6
    ttl_l1_hours: float | None = None
    ttl_l2_hours: float | None = None
    ttl_l3_hours: float | None = None
    # lifecycle governance: decay, forgetting, cap, promotion, merge, supersede
    # (docs/lifecycle.md). Any *_days may be null: that rule is off.
    retention_enabled: bool = True  # False: the sweep leaves this agent's memories alone
    decay_days: float | None = 30.0  # episodic (L0) scratch items older than this, never recalled, go
    distilled_keep_days: float | None = 7.0  # a turn a sleep summary carries goes this long after distillation
    unused_days: float | None = 90.0  # episodic items (turns included) not accessed for this long go
    max_episodic: int = 5000  # live episodic (L0) items per agent, a split message once; the distilled go first
    max_semantic: int = 50000  # live L1 semantic items per agent; the least valuable go first
    salience_decay_after_days: float | None = 7.0  # never-recalled episodic items then lose salience
    salience_half_life_days: float | None = 30.0
    confidence_half_life_days: float | None = 180.0  # confidence without new evidence halves this slowly
    confidence_floor: float = 0.1  # decay never takes confidence below this
    confidence_growth: float = 0.2  # a confirming episode closes this share of the gap to 1.0
    promote_min_recalls: int = 3  # L1 -> L2 once recalled this often ...
    promote_min_confidence: float = 0.8  # ... or confirmed by a later episode and this confident
    merge_similarity: float = 0.85  # near-duplicates: cosine at or above this ...
    merge_min_jaccard: float = 0.5  # ... and at least this share of their words in common
    # a newer memory this sure retires the one it changes: a plain statement is 0.7, a hedged one 0.5
    supersede_min_confidence: float = 0.7
    superseded_keep_days: float | None = 90.0  # retired versions stay for history this long
    retention_batch: int = 500  # rows per short transaction in the retention sweep
    retention_statement_timeout_s: int = 60  # a sweep statement running longer is cancelled (1 s to a day)
    # sleep: per-agent consolidation passes (docs/consolidation.md)
    consolidation_enabled: bool | None = None  # None: on with the offline reflector, off with a paid LLM
    consolidation_interval_minutes: int = 30  # time gate: minutes since the last pass
    consolidation_sessions_gate: int = 5  # session gate: sessions ended since the last pass
    consolidation_quiet_minutes: int = 3  # taken only after this long without an episode
    consolidation_window_size: int = 200  # at most this many unconsolidated memories per pass
    consolidation_min_items: int = 3  # fewer waiting: the pass is skipped with a reason
    consolidation_max_connections: int = 5
    consolidation_similarity: float = 0.6  # offline connections: cosine at or above this links two memories
    consolidation_conclusion_min_items: int = 3  # memories sharing a topic before one conclusion is drawn
    consolidation_rerate: bool = True  # +0.1 per connection, +0.05 if recalled since the last pass
    consolidation_extract_metadata: bool = True  # entities and topics written back to the window
    consolidation_profile_min_confidence: float = 0.4  # profile entries below this are pruned
    consolidation_profile_stale_days: int = 90  # profile entries not confirmed for this long are pruned
    # sessions: working memory, runtime context, context flush, rumination (docs/sessions.md)
    working_max_items: int = 50  # past this many working-memory items ...
    working_prune_to: int = 30  # ... prune to this many: the most referenced and the most recent
    context_max_tokens: int = 4000  # default budget of a runtime context (MiniLM WordPiece tokens)
    context_recall_k: int = 20  # memories recalled for a context before packing to the budget
    context_flush_at: float = 0.7  # context use at or above this distils the session log
    session_window_tokens: int = 32768  # the client model's window when the session names none
    rumination_enabled: bool = False  # the daily pass over yesterday's archived sessions

    @classmethod
    def resolve(cls, *layers: dict[str, Any] | None, stored: bool = False) -> Policy:
        """Defaults, then each override layer in turn. Raises InvalidInput naming the field.
        stored: the layers were saved before the knobs had upper bounds; a number past its
        bound then reads as the bound instead of failing every use of the agent."""
        values: dict[str, Any] = {}
        for layer in layers:
            values.update(layer or {})
        return cls.validated(values, clamp=stored)

    @classmethod
    def validated(cls, values: dict[str, Any], *, clamp: bool = False) -> Policy:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        clean: dict[str, Any] = {}
        for name, value in values.items():
            if name not in fields:
                raise errors.InvalidInput(f"policy: unknown field {name!r}")
            default = getattr(cls, name)
            clean[name] = _check(name, _clamped(name, value, default) if clamp else value, default)
        policy = cls(**clean)
        if policy.working_prune_to >= policy.working_max_items:
            raise errors.InvalidInput("policy: working_prune_to must be below working_max_items")
        if policy.recall_bm25_weight + policy.recall_vector_weight <= 0:
            raise errors.InvalidInput("policy: recall_bm25_weight + recall_vector_weight must be > 0")
        return policy

    def ttl_hours(self, tier: str) -> float | None:
        return cast("float | None", getattr(self, f"ttl_{tier.lower()}_hours"))

    def redacted(self, text: str) -> str:
        """A text as this policy stores it: PII masked when redact_pii is on (reasons, queries)."""
        return redact.redact(text) if self.redact_pii else text

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


_LIFECYCLE_DAYS = frozenset(
    {
        "decay_days",
        "distilled_keep_days",
        "unused_days",
        "salience_decay_after_days",
        "salience_half_life_days",
        "confidence_half_life_days",
        "superseded_keep_days",
    }
)


# Upper bounds of the knobs: each a value past which the knob means nothing more (a recall
# over more candidates than any agent holds, a window no model has) while it could still
# exhaust the server (a scan per recall) or overflow a Postgres int or interval (a 500).
# An integer knob not named here stops at INT_CEILING; *_days at 100 years; ttl_* at 1,000,000
# hours (114 years). docs/input_limits.md.
INT_CEILING = 1_000_000
RECALL_CANDIDATES_MAX = 1_000
_INT_MAX = {
    "recall_candidates": RECALL_CANDIDATES_MAX,
    "max_episodic": 10_000_000,
    "max_semantic": 10_000_000,
    "retention_batch": 10_000,
    "retention_statement_timeout_s": 86_400,  # a day: past it, no limit is meant
    "consolidation_interval_minutes": 525_600,  # a year
    "consolidation_quiet_minutes": 525_600,
    "consolidation_window_size": 5_000,
    "consolidation_min_items": 5_000,
    "consolidation_max_connections": 100,
    "consolidation_conclusion_min_items": 1_000,
    "consolidation_profile_stale_days": 36_500,
    "working_max_items": 1_000,
    "working_prune_to": 1_000,
    "context_max_tokens": 1_000_000,  # the most a context call may ask for
    "context_recall_k": 100,  # the most a recall may ask for
    "session_window_tokens": 10_000_000,  # the most a session may name
}
# Lower bounds above 1: a context budget must hold the context's frame (its header and
# closing lines, about 50 tokens), and a window as small as any a session may name.
_INT_MIN = {"context_max_tokens": 256, "session_window_tokens": 256}
DAYS_MAX = 36_500.0
TTL_HOURS_MAX = 1_000_000.0


def _ceiling(name: str, default: Any) -> float | None:
    """The upper bound of a numeric knob, or None (no bound: booleans, shares in [0, 1])."""
    if name in _LIFECYCLE_DAYS:
        return DAYS_MAX
    if name.startswith("ttl_"):
        return TTL_HOURS_MAX
    if isinstance(default, int) and not isinstance(default, bool):
        return _INT_MAX.get(name, INT_CEILING)
    return None


def _clamped(name: str, value: Any, default: Any) -> Any:
    """A stored number moved inside the bounds it may predate (anything else as it is)."""
    ceiling = _ceiling(name, default)
    if ceiling is None or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if value > ceiling:
        return int(ceiling) if isinstance(default, int) else ceiling
    return max(value, _INT_MIN[name]) if name in _INT_MIN and value > 0 else value


MAX_POOLS = 20  # pools one agent reads or writes
LLM_TOKENS_PER_DAY_MAX = 10**12
PROPOSE_MODES = ("review", "auto", "off")


def _check(name: str, value: Any, default: Any) -> Any:
    if name == "pools_propose":
        if isinstance(value, bool):  # the field's earlier form: on meant share at once
            return "auto" if value else "off"
        if value not in PROPOSE_MODES:
            raise errors.InvalidInput(f"policy: {name} must be one of {list(PROPOSE_MODES)}")
        return value
    if name in ("pools_read", "pools_write"):
        if (
            not isinstance(value, (list, tuple))
            or len(value) > MAX_POOLS
            or any(not isinstance(v, str) or not memories.AGENT_ID.fullmatch(v) for v in value)
        ):
            raise errors.InvalidInput(
                f"policy: {name} must be a list of at most {MAX_POOLS} pool names (letters, digits and ._:@-)"
            )
        return tuple(dict.fromkeys(value))
    if name == "recall_tiers":
        if not isinstance(value, (list, tuple)) or not value or any(t not in memories.TIERS for t in value):
            raise errors.InvalidInput(f"policy: {name} must be a non-empty list of {list(memories.TIERS)}")
        return tuple(value)
    if name == "llm_tokens_per_day":
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LLM_TOKENS_PER_DAY_MAX
        ):
            raise errors.InvalidInput(
                f"policy: {name} must be null (no limit) or an integer from 1 to {LLM_TOKENS_PER_DAY_MAX}"
            )
        return value
    if name == "consolidation_enabled":
        if value is not None and not isinstance(value, bool):
            raise errors.InvalidInput(f"policy: {name} must be true, false or null (the default)")
        return value
    if name in _LIFECYCLE_DAYS or name.startswith("ttl_"):
        return _check_span(name, value)
    return _check_by_type(name, value, default)


def _check_span(name: str, value: Any) -> float | None:
    """A lifecycle rule's days or a tier's TTL hours: positive and bounded, or null (off)."""
    if value is None:
        return None
    if name in _LIFECYCLE_DAYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= DAYS_MAX:
            raise errors.InvalidInput(
                f"policy: {name} must be a positive number of days up to {DAYS_MAX:.0f}, or null (rule off)"
            )
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= TTL_HOURS_MAX:
        raise errors.InvalidInput(
            f"policy: {name} must be a positive number of hours up to {TTL_HOURS_MAX:.0f}, or null"
        )
    return float(value)


def _check_by_type(name: str, value: Any, default: Any) -> Any:
    """A field without a rule of its own: checked against its default's type and the bounds."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise errors.InvalidInput(f"policy: {name} must be true or false")
        return value
    if isinstance(default, int):
        floor, ceiling = _INT_MIN.get(name, 1), _INT_MAX.get(name, INT_CEILING)
        if isinstance(value, bool) or not isinstance(value, int) or not floor <= value <= ceiling:
            raise errors.InvalidInput(f"policy: {name} must be an integer from {floor} to {ceiling}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise errors.InvalidInput(f"policy: {name} must be a number between 0 and 1")
        return float(value)
    return value


class PolicyCache:
    """Effective policies by (tenant, agent), kept ttl_s, so recall's hot path spends no
    round trip on them. A change made through this process is seen at once (forget); one
    made elsewhere (another API process, the CLI) within ttl_s. Failures are never cached."""

    def __init__(self, ttl_s: float = 10.0, size: int = 100_000) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._entries: dict[tuple[str, str], tuple[float, Policy]] = {}
        self._lock = threading.Lock()

    def get(self, tenant_id: Any, agent_id: str, load: Callable[[], Policy]) -> Policy:
        key = (str(tenant_id), agent_id)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
        if entry and entry[0] > now:
            return entry[1]
        policy = load()
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[key] = (now + self.ttl_s, policy)
        return policy

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def forget(self, tenant_id: Any, agent_id: str | None = None) -> None:
        """Drop one agent's entry, or (agent_id None) every entry of the tenant."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == str(tenant_id) and agent_id in (None, k[1])]:
                del self._entries[key]
