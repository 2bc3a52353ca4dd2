"""The agent profile: a per-agent document with five sections that
every consolidation pass updates in four steps (orient, gather, consolidate, prune), saved
as a new version inside the pass's transaction, so a save is atomic with the pass.

The steps are pure functions over the document and the window; load/save are the I/O."""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from memworker.domain.memories import Kind
from memworker.reflection import _kind as _kind_of  # the cues the offline reflector types with
from memworker.sleep.synthesis import Item, surface
from memworker.storage import sleep_db
from memworker.storage.db import Conn

SECTIONS = ("preferences", "project_state", "lessons", "decisions", "errors")
MAX_ENTRIES = 20  # per section: the most confident and most recently confirmed stay
KEEP_VERSIONS = 10  # older versions are deleted when a new one is saved
SAME_SUBJECT = 0.65  # cosine at or above this (MiniLM): two entries talk about the same thing

_ERROR = re.compile(
    r"\b(error|errors|fail(ed|s|ure)?|bug|exception|crash(ed)?|broke(n)?|outage|incident|"
    r"timeout|timed out|regression|rollback|rolled back)\b|报错|错误|失败|故障",
    re.I,
)
_PROJECT = re.compile(
    r"\b(project|milestone|release|released|deploy(ed)?|launch(ed)?|sprint|roadmap|"
    r"version|migrat\w*|status|progress|ticket|merged|shipped|blocked|deadline|"
    r"todo|phase|v\d+(\.\d+)*)\b|进度|项目|上线",
    re.I,
)

Similarity = Callable[[str, str], float]  # memory id, memory id -> cosine (0 when unknown)


def empty() -> dict[str, Any]:
    return {
        "version": 0,
        "updated_at": None,
        "run_id": None,
        "focus": [],
        "sections": {s: [] for s in SECTIONS},
        "last_pass": {},
    }


# --- orient → gather → consolidate → prune ---------------------------------------------------


def orient(window: list[Item]) -> list[str]:
    """The pass's focus: the window's commonest topics (recorded with the profile). Every
    pass gathers every section (no deep/shallow scope): a window is consolidated only
    once, so whatever a shallow pass skipped would never reach the profile."""
    counts = Counter(t for item in window for t in item.topics)
    stems = [t for t, n in counts.most_common(3) if n >= 2] or [t for t, _ in counts.most_common(1)]
    # topics are stems ('decemb', 'approv'): the focus is read by people, so it names each one
    # by the word the memories use most for it
    return [surface(t, window) for t in stems]


def section_of(item: Item) -> str | None:
    """The profile section an item belongs to, or None (it stays a plain memory)."""
    if item.kind in (Kind.INSIGHT, Kind.SUMMARY) or "instruction" in item.flags:
        return None  # derived, or text that tries to steer the agent: never profile material
    # 'fact' is also the default of a direct write: type it by the offline reflector's cues
    kind = _kind_of(item.text) if item.kind == Kind.FACT else item.kind
    if kind == Kind.PREFERENCE:
        return "preferences"
    if kind == Kind.DECISION:
        return "decisions"
    if _ERROR.search(item.text):
        return "errors"
    if kind in (Kind.METHOD, Kind.CONCLUSION):
        return "lessons"
    if _PROJECT.search(item.text):
        return "project_state"
    return None


def gather(window: list[Item]) -> dict[str, list[Item]]:
    out: dict[str, list[Item]] = {s: [] for s in SECTIONS}
    for item in window:
        section = section_of(item)
        if section:
            out[section].append(item)
    return out


def consolidate(
    document: dict[str, Any], gathered: dict[str, list[Item]], similar: Similarity, now: datetime
) -> tuple[dict[str, Any], Counter[str]]:
    """Merge the gathered items into a copy of the document. An item about the same subject
    as an entry (the same memory, or cosine >= SAME_SUBJECT) conflicts with it: the newer
    wins unless the older is more confident; a winner that was already there is confirmed."""
    doc = copy.deepcopy(document)
    counts: Counter[str] = Counter()
    for section, items in gathered.items():
        entries: list[dict[str, Any]] = doc["sections"].setdefault(section, [])
        for item in sorted(items, key=lambda i: (i.created_at, i.id)):
            new = _entry(item, now)
            match = next(
                (e for e in entries if e["memory_id"] == item.id or similar(e["memory_id"], item.id) >= SAME_SUBJECT),
                None,
            )
            if match is None:
                entries.append(new)
                counts["added"] += 1
            elif match["memory_id"] == item.id or _wins(new, match):
                entries[entries.index(match)] = new
                counts["updated" if match["memory_id"] == item.id else "replaced"] += 1
            else:
                match["confirmed_at"] = now.isoformat()
                counts["kept_older"] += 1
    return doc, counts


def prune(
    document: dict[str, Any], *, live_ids: set[str], now: datetime, min_confidence: float, stale_days: int
) -> tuple[dict[str, Any], Counter[str]]:
    """Drop entries whose memory is gone (deleted, expired, superseded), entries not confirmed
    for stale_days, entries under min_confidence, and the weakest past MAX_ENTRIES."""
    doc = copy.deepcopy(document)
    counts: Counter[str] = Counter()
    cutoff = now - timedelta(days=stale_days)
    for section in SECTIONS:
        kept = []
        for e in doc["sections"].get(section, []):
            if e["memory_id"] not in live_ids:
                counts["gone"] += 1
            elif datetime.fromisoformat(e["confirmed_at"]) < cutoff:
                counts["stale"] += 1
            elif e["confidence"] < min_confidence:
                counts["low_confidence"] += 1
            else:
                kept.append(e)
        kept.sort(key=lambda e: (e["confidence"], e["confirmed_at"]), reverse=True)
        if len(kept) > MAX_ENTRIES:
            counts["over_cap"] += len(kept) - MAX_ENTRIES
            kept = kept[:MAX_ENTRIES]
        doc["sections"][section] = sorted(kept, key=lambda e: e["at"])
    return doc, counts


def update(
    document: dict[str, Any],
    window: list[Item],
    *,
    similar: Similarity,
    live_ids: set[str],
    now: datetime,
    min_confidence: float,
    stale_days: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The four steps; returns (new document, what changed). Unchanged sections mean no new
    version is needed (the caller compares)."""
    focus = orient(window)
    gathered = gather(window)
    merged, merge_counts = consolidate(document, gathered, similar, now)
    new_ids = {i.id for items in gathered.values() for i in items}
    pruned, prune_counts = prune(
        merged, live_ids=live_ids | new_ids, now=now, min_confidence=min_confidence, stale_days=stale_days
    )
    pruned["focus"] = focus
    summary = {"gathered": sum(len(v) for v in gathered.values()), **merge_counts, "pruned": dict(prune_counts)}
    return pruned, summary


def _entry(item: Item, now: datetime) -> dict[str, Any]:
    return {
        "text": item.text,
        "memory_id": item.id,
        "kind": item.kind,
        "confidence": round(item.confidence, 4),
        "at": item.created_at.isoformat(),
        "confirmed_at": now.isoformat(),
    }


def _wins(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """In a conflict the newer entry wins unless the older one is more confident."""
    newer, older = (new, old) if new["at"] >= old["at"] else (old, new)
    winner = newer if newer["confidence"] >= older["confidence"] else older
    return winner is new


# --- storage ----------------------------------------------------------------------------------


def load(conn: Conn, *, tenant_id: UUID, agent_id: str, version: int | None = None) -> dict[str, Any]:
    """The latest (or the given) version; an empty version-0 document when there is none."""
    doc = sleep_db.profile(conn, tenant_id=tenant_id, agent_id=agent_id, version=version)
    return empty() if doc is None else doc


def save(conn: Conn, *, tenant_id: UUID, agent_id: str, document: dict[str, Any], run_id: UUID, now: datetime) -> int:
    """Store the document as the next version (in the caller's transaction) and delete all but
    the last KEEP_VERSIONS; returns the new version number."""
    version = int(document.get("version") or 0) + 1
    doc = {**document, "version": version, "updated_at": now.isoformat(), "run_id": str(run_id)}
    sleep_db.profile_insert(conn, tenant_id=tenant_id, agent_id=agent_id, version=version, document=doc, run_id=run_id)
    sleep_db.profile_prune_versions(conn, tenant_id=tenant_id, agent_id=agent_id, below=version - KEEP_VERSIONS + 1)
    return version


def same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two documents hold the same entries (ignoring confirmation times)."""

    def key(doc: dict[str, Any]) -> list[Any]:
        return [
            sorted((e["memory_id"], e["text"], e["confidence"]) for e in doc["sections"].get(s, [])) for s in SECTIONS
        ]

    return key(a) == key(b)
