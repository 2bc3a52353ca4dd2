"""Prometheus metrics. In a process with PROMETHEUS_MULTIPROC_DIR set (memworker up sets it
for every child) values are aggregated across processes on scrape."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.core import GaugeMetricFamily

HTTP_SECONDS = Histogram("memworker_http_request_seconds", "API request latency", ["route", "method", "status"])
RECALL_SECONDS = Histogram(
    "memworker_recall_seconds",
    "Server-side recall latency",
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2),
)
EPISODES = Counter("memworker_episodes_total", "Episodes by outcome (accepted, stored, failed, dead)", ["outcome"])
QUERY_BATCH_SIZE = Histogram(
    "memworker_query_embedding_batch_size",
    "Query embeddings computed in one model call (concurrent recalls share one)",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
QUERY_BATCH_WAIT_SECONDS = Histogram(
    "memworker_query_embedding_wait_seconds",
    "Time a query waited for the batch before its own (0 when the model was free)",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
)
OVERLOAD_REJECTED = Counter(
    "memworker_overload_rejected_total", "Requests answered 503 because the API process was at its bound"
)
RECALL_EMPTY = Counter("memworker_recall_empty_total", "Recalls that found nothing relevant: a proxy for search misses")
TASK_SECONDS = Histogram(
    "memworker_task_seconds",
    "Celery task duration",
    ["task", "state"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
LLM_CALLS = Counter("memworker_llm_calls_total", "LLM calls by tenant and step", ["tenant", "step"])
LLM_TOKENS = Counter("memworker_llm_tokens_total", "LLM tokens by tenant and direction", ["tenant", "direction"])
LLM_BUDGET_PAUSED = Counter(
    "memworker_llm_budget_paused_total",
    "Episodes reflected and sleep passes run without the LLM because the tenant's daily budget was spent",
    ["tenant", "step"],
)
MEMORIES_WRITTEN = Counter("memworker_memories_written_total", "Memories written by ingest", ["how"])
LLM_UPDATE_DECISIONS = Counter(
    "memworker_llm_update_decisions_total",
    "The LLM reflector's decisions on known memories applied by ingest (dropped: invalid, the rules decided)",
    ["relation"],
)
# sleep (consolidation): pass latency, what a pass reads and writes (their
# ratio is the compression), and agents flagged after repeated failures
CONSOLIDATION_PASSES = Counter(
    "memworker_consolidation_passes_total", "Consolidation passes by outcome (done, skipped, failed, busy)", ["outcome"]
)
CONSOLIDATION_SECONDS = Histogram(
    "memworker_consolidation_seconds",
    "Duration of one consolidation pass",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
CONSOLIDATION_ITEMS = Counter(
    "memworker_consolidation_items_total", "Memories reviewed and written by consolidation passes", ["what"]
)
CONSOLIDATION_FLAGGED = Counter(
    "memworker_consolidation_flagged_total", "Times an agent reached the failure threshold (3 passes in a row)"
)
CONSOLIDATION_FLAGGED_AGENTS = Gauge(
    "memworker_consolidation_flagged_agents",
    "Agents whose last passes failed 3 or more times in a row",
    multiprocess_mode="mostrecent",
)

# read replicas (docs/scaling.md): where reads went, each replica's state as this process last
# probed it, and the access bumps they queue for the primary
READS = Counter(
    "memworker_reads_total",
    "Replica-eligible reads by where they ran (replica, primary) and why the primary (none, no_replica, behind, error)",
    ["target", "reason"],
)
REPLICA_UP = Gauge(
    "memworker_replica_up",
    "1 while a replica is served from, 0 while skipped (down or lagging)",
    ["replica"],
    multiprocess_mode="mostrecent",
)
REPLICA_LAG_SECONDS = Gauge(
    "memworker_replica_lag_seconds",
    "How far a replica's replay is behind the primary",
    ["replica"],
    multiprocess_mode="mostrecent",
)
ACCESS_BUMPS = Counter(
    "memworker_access_bumps_total", "Access bumps of recalls by outcome (queued, dropped, applied)", ["outcome"]
)


class FleetCollector:
    """Gauges read at scrape time from the systems of record: queue depth per queue (Redis)
    and memories per tier and kind (Postgres statistics). A failing source yields nothing."""

    def __init__(
        self, queue_depths: Callable[[], dict[str, int]], memory_estimates: Callable[[], list[tuple[str, str, float]]]
    ) -> None:
        self.queue_depths = queue_depths
        self.memory_estimates = memory_estimates

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queues = GaugeMetricFamily("memworker_queue_depth", "Messages waiting per Celery queue", labels=["queue"])
        try:
            for name, depth in self.queue_depths().items():
                queues.add_metric([name], depth)
        except Exception:  # a scrape must not fail because Redis is down; /healthz says so
            pass
        yield queues
        tiers = GaugeMetricFamily(
            "memworker_memories", "Memories per tier and per kind (planner estimate)", labels=["attribute", "value"]
        )
        try:
            for attribute, value, estimate in self.memory_estimates():
                tiers.add_metric([attribute, value], estimate)
        except Exception:  # likewise for Postgres
            pass
        yield tiers


def registry(extra: FleetCollector | None = None) -> CollectorRegistry:
    """What /metrics serves: every process's metrics (multiprocess mode) plus fleet gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        reg = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    else:
        reg = CollectorRegistry()
        for collector in list(REGISTRY._collector_to_names):  # this process's own metrics
            reg.register(collector)
    if extra is not None:
        reg.register(extra)
    return reg
