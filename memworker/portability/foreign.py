"""Files from elsewhere, as the ordinary write's bodies (docs/export.md): a plain JSONL of
texts ({"text": ..., optional metadata, subject, kind, ...} per line) and LangGraph store items
(namespace, key, value, created_at, updated_at per line, as BaseStore.search gives them).
Each line becomes one memworker.schemas.MemoryIn, which the memories batch write takes through
redaction, dedup and governance like any other write. Pure: no I/O."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ValidationError

from memworker.domain import memories
from memworker.portability import format as fmt
from memworker.schemas import Kind, MemoryIn, Tier

# memworker/integrations/langgraph.py's layout of an item in a memory, so MemworkerStore reads
# an imported item as one it put itself
LG_ITEM, LG_NAMESPACE, LG_LEVEL, LG_DEPTH = "lg_item", "lg_namespace", "lg_ns_{}", "lg_depth"
LG_KEY, LG_VALUE, LG_INDEXED, LG_UPDATED = "lg_key", "lg_value", "lg_indexed", "lg_updated_at"
LG_KIND, LG_TIER = Kind.EVENT, Tier.L2  # MemworkerStore's defaults
LG_FIELDS = {"namespace", "key", "value", "created_at", "updated_at", "score"}


def plain(obj: Any) -> MemoryIn:
    """A plain line as a write; without an idempotency key of its own it gets one derived
    from what it says (text, kind, subject, metadata), so the same file twice writes nothing new.
    ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    try:
        body = MemoryIn.model_validate(obj)
    except ValidationError as exc:
        raise ValueError(fmt.why(exc)) from None
    problem = memories.text_problem(body.text)
    if problem:
        raise ValueError(problem)
    if body.idempotency_key is None:
        said = [body.text, body.kind, body.subject, body.metadata]
        body = body.model_copy(update={"idempotency_key": "import:" + _digest(said)})
    return body


def langgraph(obj: Any, *, subject: str | None = None) -> MemoryIn:
    """A LangGraph item as MemworkerStore would have put it (the whole value indexed, as its
    default fields=["$"]); ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    extra = sorted(obj.keys() - LG_FIELDS)
    if extra:
        raise ValueError(f"unknown fields {extra} (a LangGraph item has {sorted(LG_FIELDS)})")
    namespace, key, value = obj.get("namespace"), obj.get("key"), obj.get("value")
    if not isinstance(namespace, list) or not namespace or not all(isinstance(x, str) and x for x in namespace):
        raise ValueError("namespace: a non-empty list of non-empty strings")
    if not isinstance(key, str) or not key:
        raise ValueError("key: a non-empty string")
    if not isinstance(value, dict):
        raise ValueError("value: a JSON object")
    text = memories.clip(json.dumps(value)) or memories.clip("/".join((*namespace, key)))
    metadata = {
        LG_ITEM: True,
        LG_NAMESPACE: namespace,
        **{LG_LEVEL.format(i): label for i, label in enumerate(namespace)},
        LG_DEPTH: len(namespace),
        LG_KEY: key,
        LG_VALUE: value,
        LG_INDEXED: True,
        LG_UPDATED: obj.get("updated_at") or obj.get("created_at"),
    }
    # the store's own idempotency key for (namespace, key): a put after the import finds it
    scope = [namespace, key] + ([subject] if subject else [])
    idem = "lg:" + hashlib.sha256(json.dumps(scope).encode()).hexdigest()
    try:
        return MemoryIn.model_validate(
            {"text": text, "kind": LG_KIND, "tier": LG_TIER, "metadata": metadata, "idempotency_key": idem}
        )
    except ValidationError as exc:
        raise ValueError(fmt.why(exc)) from None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:40]
