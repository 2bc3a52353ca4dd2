"""Working memory: a session's whiteboard. Pure functions over its JSON document,
no I/O; memworker/sessions/session.py loads and stores it.

The document: {"goal", "intent", "goal_seq", "intent_seq", "items", "next_id", "pruned"}.
Goal and latest intent are single fields and never pruned. Items are constraints,
decisions, open questions and candidate memories, each {"id", "kind", "text", "memory_id",
"refs", "seq", "created_at", "updated_at"}: `seq` is the session revision that last stated
or touched the item (recency), `refs` how often it was stated again, touched, or was
relevant to a context call (how referenced it is). Past max_items the list is pruned to
prune_to, keeping the most referenced and the most recent."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict, cast

from memworker import errors
from memworker.domain import memories, tokens
from memworker.domain.memories import Word
from memworker.schemas import WorkingItemOut


class ItemKind(Word):
    """What a working-memory item is; a candidate may pin a long-term memory instead of a text."""

    CONSTRAINT = "constraint"
    DECISION = "decision"
    QUESTION = "question"
    CANDIDATE = "candidate"


KINDS = tuple(ItemKind)
SECTION = {
    ItemKind.CONSTRAINT: "constraints",
    ItemKind.DECISION: "decisions",
    ItemKind.QUESTION: "open_questions",
    ItemKind.CANDIDATE: "candidates",
}
MAX_TEXT = 500  # a whiteboard line, not a document
UNSET: Any = object()  # "leave unchanged" (None clears goal or intent)


class Item(TypedDict):
    """A working-memory item as the document stores it."""

    id: int
    kind: str
    text: str | None
    memory_id: str | None
    refs: int
    seq: int
    created_at: str
    updated_at: str


class Document(TypedDict):
    """Working memory's document as the session row stores it."""

    goal: str | None
    intent: str | None
    goal_seq: int
    intent_seq: int
    items: list[Item]
    next_id: int
    pruned: int


class View(TypedDict):
    """The document grouped by kind, for GET .../working."""

    goal: str | None
    intent: str | None
    constraints: list[WorkingItemOut]
    decisions: list[WorkingItemOut]
    open_questions: list[WorkingItemOut]
    candidates: list[WorkingItemOut]
    items: int
    pruned_total: int


class Changed(TypedDict):
    """The part of the document written after a revision (what a flush has not covered)."""

    goal: str | None
    intent: str | None
    items: list[Item]


@dataclass(frozen=True)
class NewItem:
    kind: str
    text: str | None = None
    memory_id: str | None = None  # a long-term memory pinned to the session (text looked up live)


@dataclass(frozen=True)
class Patch:
    goal: Any = UNSET
    intent: Any = UNSET
    add: tuple[NewItem, ...] = ()
    remove: tuple[int, ...] = ()
    touch: tuple[int, ...] = ()


@dataclass
class Report:
    added: list[int] = field(default_factory=list)
    restated: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, list[int]]:
        return {"added": self.added, "restated": self.restated, "removed": self.removed, "pruned": self.pruned}


def empty() -> Document:
    return {"goal": None, "intent": None, "goal_seq": 0, "intent_seq": 0, "items": [], "next_id": 1, "pruned": 0}


def normalised(doc: Mapping[str, Any] | None) -> Document:
    """A stored document with every field present (an empty one for {} or None)."""
    return cast(Document, {**empty(), **copy.deepcopy(dict(doc or {}))})


def validate_item(item: NewItem) -> None:
    """Raises InvalidInput for a bad kind, blank or overlong text, or a candidate with neither."""
    if item.kind not in KINDS:
        raise errors.InvalidInput(f"working item kind must be one of {list(KINDS)}")
    if item.memory_id is not None and item.kind != ItemKind.CANDIDATE:
        raise errors.InvalidInput("only a 'candidate' item may pin a memory_id")
    if item.memory_id is None and (item.text is None or not item.text.strip()):
        raise errors.InvalidInput("a working item needs a text (or, for a candidate, a memory_id)")
    if item.text is not None and len(item.text) > MAX_TEXT:
        raise errors.InvalidInput(f"a working item is at most {MAX_TEXT} characters")


def apply(
    doc: Mapping[str, Any], patch: Patch, *, revision: int, now: datetime, max_items: int, prune_to: int
) -> tuple[Document, Report]:
    """The document after the patch (a copy) and what changed. `revision` is the session
    revision this change creates. Raises InvalidInput for an unknown item id."""
    out = normalised(doc)
    report = Report()
    at = now.isoformat()
    if patch.goal is not UNSET:
        out["goal"], out["goal_seq"] = _clean(patch.goal), revision
    if patch.intent is not UNSET:
        out["intent"], out["intent_seq"] = _clean(patch.intent), revision
    by_id = {i["id"]: i for i in out["items"]}
    for item_id in (*patch.remove, *patch.touch):
        if item_id not in by_id:
            raise errors.InvalidInput(f"no working item {item_id} in this session")
    out["items"] = [i for i in out["items"] if i["id"] not in set(patch.remove)]
    report.removed = list(patch.remove)
    for i in out["items"]:
        if i["id"] in patch.touch:
            i["refs"] += 1
            i["seq"], i["updated_at"] = revision, at
    for new in patch.add:
        validate_item(new)
        same = next((i for i in out["items"] if _same(i, new)), None)
        if same is not None:  # stated again: one item, referenced once more
            same["refs"] += 1
            same["seq"], same["updated_at"] = revision, at
            report.restated.append(same["id"])
            continue
        item: Item = {
            "id": out["next_id"],
            "kind": new.kind,
            "text": _clean(new.text),
            "memory_id": new.memory_id,
            "refs": 1,
            "seq": revision,
            "created_at": at,
            "updated_at": at,
        }
        out["next_id"] += 1
        out["items"].append(item)
        report.added.append(item["id"])
    kept, dropped = prune(out["items"], max_items=max_items, keep=prune_to)
    out["items"] = kept
    out["pruned"] += len(dropped)
    report.pruned = [i["id"] for i in dropped]
    return out, report


def prune(items: list[Item], *, max_items: int, keep: int) -> tuple[list[Item], list[Item]]:
    """(kept, dropped). Nothing happens until there are more than max_items; then `keep`
    stay: the most referenced half (ties: the more recent), then the most recent of the rest.
    Kept items keep their order."""
    if len(items) <= max_items:
        return list(items), []
    keep = min(keep, max_items)
    by_refs = sorted(items, key=lambda i: (-i["refs"], -i["seq"], -i["id"]))
    chosen = {i["id"] for i in by_refs[: keep // 2]}
    for i in sorted(items, key=lambda i: (-i["seq"], -i["id"])):
        if len(chosen) >= keep:
            break
        chosen.add(i["id"])
    return [i for i in items if i["id"] in chosen], [i for i in items if i["id"] not in chosen]


def referenced(doc: Mapping[str, Any], item_ids: list[int]) -> Document:
    """A copy with refs + 1 on the given items (they were relevant to a context call). Their
    recency is left alone: being recalled is not being restated."""
    out = normalised(doc)
    ids = set(item_ids)
    for i in out["items"]:
        if i["id"] in ids:
            i["refs"] += 1
    return out


def view(doc: Mapping[str, Any]) -> View:
    """The document grouped by kind, for GET .../working."""
    d = normalised(doc)

    def of(kind: str) -> list[WorkingItemOut]:
        return [_public(i) for i in d["items"] if i["kind"] == kind]

    return {
        "goal": d["goal"],
        "intent": d["intent"],
        "constraints": of(ItemKind.CONSTRAINT),
        "decisions": of(ItemKind.DECISION),
        "open_questions": of(ItemKind.QUESTION),
        "candidates": of(ItemKind.CANDIDATE),
        "items": len(d["items"]),
        "pruned_total": d["pruned"],
    }


def changed_since(doc: Mapping[str, Any], revision: int) -> Changed:
    """The part of the document written after `revision` (what a flush has not covered)."""
    d = normalised(doc)
    return {
        "goal": d["goal"] if d["goal_seq"] > revision else None,
        "intent": d["intent"] if d["intent_seq"] > revision else None,
        "items": [i for i in d["items"] if i["seq"] > revision],
    }


def relevance(text: str, query_terms: set[str]) -> float:
    """Share of the query's terms (stemmed) that the text contains, 0..1."""
    if not query_terms:
        return 0.0
    return len(query_terms & set(tokens.tokenize(text))) / len(query_terms)


def render_lines(doc: Mapping[str, Any]) -> list[str]:
    """Plain sentences for distillation (archive, flush), the weightiest first: goal,
    decisions, constraints, points worth remembering, open questions. The latest intent is
    left out (it is stale by the time anything is distilled), and so are candidates pinned
    to a memory (already long-term memory)."""
    d = normalised(doc)
    lines = [f"The session goal was: {_sentence(d['goal'])}"] if d["goal"] else []
    label = {
        ItemKind.DECISION: "Decided",
        ItemKind.CONSTRAINT: "Constraint",
        ItemKind.CANDIDATE: "Worth remembering",
        ItemKind.QUESTION: "Open question",
    }
    for kind in label:
        lines += [f"{label[kind]}: {_sentence(t)}" for i in d["items"] if i["kind"] == kind and (t := i.get("text"))]
    return lines


def scrub(doc: Mapping[str, Any], found: Callable[[str | None], bool]) -> tuple[Document, int]:
    """A copy without what forget erases: a goal or intent for which found() is true is
    cleared, such an item removed (a whiteboard line is one statement: what is left of it
    would not say what it said). Returns (document, how many texts went)."""
    out = normalised(doc)
    gone = 0
    if found(out["goal"]):
        out["goal"] = None
        gone += 1
    if found(out["intent"]):
        out["intent"] = None
        gone += 1
    kept = [i for i in out["items"] if not found(i.get("text"))]
    gone += len(out["items"]) - len(kept)
    out["items"] = kept
    return out, gone


def _public(item: Item) -> WorkingItemOut:
    return {
        "id": item["id"],
        "text": item["text"],
        "memory_id": item["memory_id"],
        "refs": item["refs"],
        "created_at": item["created_at"],
        "updated_at": item["updated_at"],
    }


def _same(item: Item, new: NewItem) -> bool:
    if item["kind"] != new.kind:
        return False
    if new.memory_id is not None or item.get("memory_id") is not None:
        return bool(item.get("memory_id") == new.memory_id)
    return memories.normalise(item["text"] or "") == memories.normalise(new.text or "")


def _clean(text: Any) -> str | None:
    if text is None:
        return None
    return " ".join(str(text).split()) or None


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?", "。", "！", "？")) else text + "."
