"""Prometheus metrics. In a process with PROMETHEUS_MULTIPROC_DIR set (memworker up sets it
for every child) values are aggregated across processes on scrape."""
from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess

HTTP_SECONDS = Histogram("memworker_http_request_seconds", "API request latency",
                         ["route", "method", "status"])
RECALL_SECONDS = Histogram("memworker_recall_seconds", "Server-side recall latency",
                           buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2))
EPISODES = Counter("memworker_episodes_total", "Episodes by outcome", ["outcome"])
# sleep (consolidation): seed 001's metrics: pass latency, what a pass reads and writes (their
# ratio is the compression), and agents flagged after repeated failures
CONSOLIDATION_PASSES = Counter("memworker_consolidation_passes_total",
                               "Consolidation passes by outcome (done, skipped, failed, busy)", ["outcome"])
CONSOLIDATION_SECONDS = Histogram("memworker_consolidation_seconds", "Duration of one consolidation pass",
                                  buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
CONSOLIDATION_ITEMS = Counter("memworker_consolidation_items_total",
                              "Memories reviewed and written by consolidation passes", ["what"])
CONSOLIDATION_FLAGGED = Counter("memworker_consolidation_flagged_total",
                                "Times an agent reached the failure threshold (3 passes in a row)")
CONSOLIDATION_FLAGGED_AGENTS = Gauge("memworker_consolidation_flagged_agents",
                                     "Agents whose last passes failed 3 or more times in a row",
                                     multiprocess_mode="mostrecent")


def registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        reg = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg)
        return reg
    return REGISTRY
