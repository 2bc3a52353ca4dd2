"""memworker as a CrewAI crew's memory (README.md): MemworkerStorage is crewai's StorageBackend
over memworker's HTTP API; memworker_memory builds a crewai Memory wired to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memworker_crewai.storage import MemworkerEmbedder, MemworkerError, MemworkerStorage

if TYPE_CHECKING:
    from crewai import Memory

__all__ = ["MemworkerEmbedder", "MemworkerError", "MemworkerStorage", "memworker_memory"]


def memworker_memory(base_url: str, api_key: str, *, agent_id: str, kind: str = "fact", **memory: Any) -> Memory:
    """A crewai Memory whose records are memworker memories of `agent_id`, with the storage's
    own embedder. consolidation_threshold defaults to 1.0 (crewai's LLM-driven merge on save is
    off: memworker dedupes and supersedes by itself); every other keyword goes to Memory."""
    from crewai import Memory

    storage = MemworkerStorage(base_url, api_key, agent_id=agent_id, kind=kind)
    memory.setdefault("consolidation_threshold", 1.0)
    return Memory(storage=storage, embedder=storage.embedder, **memory)
