"""Policy: the tunable rules, with defaults here, tenant overrides in tenants.policy and
agent overrides in agents.policy (agent wins). Unknown or bad fields are rejected by name."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from memworker import errors, memories


@dataclass(frozen=True)
class Policy:
    # recall: weights of the min-max-normalised signals, and the bounded priors (seed 000)
    recall_tiers: tuple[str, ...] = ("L0", "L1", "L2", "L3")  # the hot path searched by default
    recall_bm25_weight: float = 0.5  # even: see bench/results/locomo_recall.md
    recall_vector_weight: float = 0.5
    recall_prior_weight: float = 0.03  # priors re-order near-ties; they never overrule relevance
    recall_vector_floor: float = 0.15  # cosine below this with no term match = not relevant
    recall_candidates: int = 60  # per signal, before fusion
    # ingest
    dedup_similarity: float = 0.95  # cosine at or above this with an existing memory = duplicate
    # lifecycle: time to live per tier in hours; None = never expires
    ttl_l0_hours: float | None = 6
    ttl_l1_hours: float | None = 7 * 24
    ttl_l2_hours: float | None = 30 * 24
    ttl_l3_hours: float | None = None

    @classmethod
    def resolve(cls, *layers: dict[str, Any] | None) -> Policy:
        """Defaults, then each override layer in turn. Raises InvalidInput naming the field."""
        values: dict[str, Any] = {}
        for layer in layers:
            values.update(layer or {})
        return cls.validated(values)

    @classmethod
    def validated(cls, values: dict[str, Any]) -> Policy:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        clean: dict[str, Any] = {}
        for name, value in values.items():
            if name not in fields:
                raise errors.InvalidInput(f"policy: unknown field {name!r}")
            clean[name] = _check(name, value, getattr(cls, name))
        policy = cls(**clean)
        if policy.recall_bm25_weight + policy.recall_vector_weight <= 0:
            raise errors.InvalidInput("policy: recall_bm25_weight + recall_vector_weight must be > 0")
        return policy

    def ttl_hours(self, tier: str) -> float | None:
        return getattr(self, f"ttl_{tier.lower()}_hours")  # type: ignore[no-any-return]

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def _check(name: str, value: Any, default: Any) -> Any:
    if name == "recall_tiers":
        if not isinstance(value, (list, tuple)) or not value or any(t not in memories.TIERS for t in value):
            raise errors.InvalidInput(f"policy: {name} must be a non-empty list of {list(memories.TIERS)}")
        return tuple(value)
    if name.startswith("ttl_"):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise errors.InvalidInput(f"policy: {name} must be a positive number of hours or null")
        return float(value)
    if isinstance(default, int) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise errors.InvalidInput(f"policy: {name} must be a positive integer")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise errors.InvalidInput(f"policy: {name} must be a number between 0 and 1")
        return float(value)
    return value
