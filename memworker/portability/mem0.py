"""Mem0 exports (docs/export.md): what Mem0's `Memory.get_all(filters=...)` answers,
{"results": [{"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id",
"agent_id", "run_id", "actor_id", "role", "attributed_to", "expiration_date"}, ...]}, saved as
JSON. A file holds one such answer or several (one per user, say), each pretty-printed or on a
line of its own. Each memory becomes one memworker.schemas.MemoryIn, written through the
ordinary batch write like a plain JSONL line; its Mem0 id is its idempotency key, so the same
file again writes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memworker import errors
from memworker.domain import memories
from memworker.portability import format as fmt
from memworker.schemas import MemoryIn

MEM0 = "mem0"
# A Mem0 answer is one JSON document, parsed whole (not line by line): a file is held in memory
# once, so it is bounded well below an import's own limit.
MAX_BYTES = 512 * 1024**2
# The start of a get_all answer, compact or pretty-printed
_START = re.compile(rb'\A\s*\{\s*"results"\s*:')
# A memory's fields that Mem0 itself sets; each is kept in metadata as mem0_<field>. Any other
# field a Mem0 version adds is kept the same way; "score" (a search's) is not a memory's.
_KEPT = ("id", "hash", "created_at", "updated_at", "user_id", "agent_id", "run_id", "actor_id", "role", "attributed_to")
_IGNORED = {"memory", "metadata", "score", "expiration_date"}
PREFIX = "mem0_"
IDEMPOTENCY = "mem0:"  # + the Mem0 id


def looks_like(path: Path) -> bool:
    """Whether the file starts as a get_all answer does."""
    with path.open("rb") as f:
        return _START.match(f.read(4096)) is not None


def items(path: Path) -> Iterator[tuple[str, Any]]:
    """(where, memory) for each memory of each answer in the file; InvalidInput names the first
    thing in it that is not a get_all answer."""
    if path.stat().st_size > MAX_BYTES:
        raise errors.InvalidInput(f"a Mem0 file is at most {MAX_BYTES} bytes (it is parsed whole)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidInput(f"byte {exc.start}: not UTF-8") from None
    docs = list(_documents(text))
    if not docs:
        raise errors.InvalidInput("the file holds no lines")
    for d, (line, doc) in enumerate(docs, 1):
        where = f"line {line}: " if len(docs) > 1 else ""
        results = doc.get("results") if isinstance(doc, dict) else None
        if not isinstance(results, list):
            raise errors.InvalidInput(
                f'{where}answer {d} is not a Mem0 get_all answer: {{"results": [...]}} with a list of memories'
            )
        for i, item in enumerate(results):
            yield f"{where}results[{i}]", item


def _documents(text: str) -> Iterator[tuple[int, Any]]:
    """(line it starts on, value) for each JSON value in the text, one after another."""
    decoder = json.JSONDecoder()
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos == end:
            return
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise errors.InvalidInput(f"line {exc.lineno}, column {exc.colno}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise errors.InvalidInput(f"line {line}: nested too deeply") from None
        yield line, value


def memory(obj: Any) -> MemoryIn:
    """A Mem0 memory as a write: its text (clipped to memworker's limit, the whole text then kept
    in metadata as mem0_memory), its user_id as the subject, its metadata with Mem0's own fields
    added as mem0_<field>, its expiration_date as expires_at (the end of that day, UTC), and its
    id as the idempotency key. ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object (a Mem0 memory)")
    mid, said = obj.get("id"), obj.get("memory")
    if not isinstance(mid, str) or not mid.strip() or len(mid) > 190:
        raise ValueError("id: a non-empty string of at most 190 characters (Mem0's memory id)")
    if not isinstance(said, str) or not said.strip():
        raise ValueError("memory: a non-empty string (the memory's text)")
    user = obj.get("user_id")
    if user is not None and (not isinstance(user, str) or not memories.AGENT_ID.match(user)):
        raise ValueError(
            "user_id: a subject name, 1 to 128 of letters, digits and . _ : @ - starting with a letter or digit"
        )
    own = obj.get("metadata")
    if own is not None and not isinstance(own, dict):
        raise ValueError("metadata: a JSON object or null")
    for field in ("created_at", "updated_at"):
        _check_date(field, obj.get(field))
    metadata: dict[str, Any] = dict(own or {})
    extra = sorted(obj.keys() - _IGNORED - set(_KEPT))
    for field in (*_KEPT, *extra):
        if obj.get(field) is not None:
            metadata[PREFIX + field] = obj[field]
    text = memories.clip(said)
    if text != said:
        metadata[PREFIX + "memory"] = said
    body = {
        "text": text,
        "metadata": metadata,
        "subject": user,
        "expires_at": _expiry(obj.get("expiration_date")),
        "idempotency_key": IDEMPOTENCY + mid,
    }
    try:
        return MemoryIn.model_validate(body)
    except ValidationError as exc:
        raise ValueError(fmt.why(exc)) from None


def _check_date(field: str, value: Any) -> None:
    if value is None:
        return
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}: an ISO 8601 date and time or null, not {value!r}") from None


def _expiry(value: Any) -> datetime | None:
    """Mem0 hides a memory from the day after its expiration_date (YYYY-MM-DD) on."""
    if value is None:
        return None
    try:
        day = date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"expiration_date: a date YYYY-MM-DD or null, not {value!r}") from None
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)
