"""What the bounded recall statement reads of a large agent besides the query (its live-memory
count and average length, each term's document frequency), cached for STATS_TTL_S per process:
an object the process's resources hold (runtime.Resources.recall_stats), passed to recall."""

from __future__ import annotations

import threading
import time
from uuid import UUID

from memworker.storage import core_db
from memworker.storage.db import Conn

# A large agent's document count and average length are read once per process and minute:
# BM25 over a bounded candidate set needs them for the whole agent.
STATS_TTL_S = 60.0
STATS_MAX = 4_096


class Stats:
    """The cache: per (tenant, agent, subject) the agent's statistics, per (tenant, agent,
    term) a document frequency, each with when it was read; emptied when it grows past
    STATS_MAX entries (STATS_MAX * 16 terms). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._agents: dict[tuple[UUID, str, str | None], tuple[float, core_db.RecallStats]] = {}
        self._dfs: dict[tuple[UUID, str, str], tuple[float, float]] = {}

    def agent(self, conn: Conn, tenant_id: UUID, agent_id: str, subject: str | None) -> core_db.RecallStats:
        """The agent's live-memory count and average length as recall sees them, at most
        STATS_TTL_S old (one scan of the agent per process and minute)."""
        key = (tenant_id, agent_id, subject)
        now = time.monotonic()
        cached = self._agents.get(key)
        if cached is not None and now - cached[0] < STATS_TTL_S:
            return cached[1]
        stats = core_db.recall_stats(conn, tenant_id=tenant_id, agent_id=agent_id, subject=subject)
        with self._lock:
            if len(self._agents) >= STATS_MAX:
                self._agents.clear()
            self._agents[key] = (now, stats)
        return stats

    def fresh_dfs(self, tenant_id: UUID, agent_id: str, terms: list[str]) -> dict[str, float]:
        """The terms' document frequencies read within STATS_TTL_S."""
        now = time.monotonic()
        return {t: c[1] for t in terms if (c := self._dfs.get((tenant_id, agent_id, t))) and now - c[0] < STATS_TTL_S}

    def keep_dfs(self, tenant_id: UUID, agent_id: str, counted: dict[str, float]) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._dfs) >= STATS_MAX * 16:
                self._dfs.clear()
            for term, df in counted.items():
                self._dfs[(tenant_id, agent_id, term)] = (now, df)
