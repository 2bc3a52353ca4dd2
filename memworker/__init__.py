"""memworker: a memory service for fleets of LLM agents."""

from __future__ import annotations

from memworker.sdk import AsyncClient, Client, enqueue_in_cluster

__all__ = ["AsyncClient", "Client", "enqueue_in_cluster"]
__version__ = "0.1.0"
