"""Prometheus metrics. In a process with PROMETHEUS_MULTIPROC_DIR set (memworker up sets it
for every child) values are aggregated across processes on scrape."""
from __future__ import annotations

import os

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, multiprocess

HTTP_SECONDS = Histogram("memworker_http_request_seconds", "API request latency",
                         ["route", "method", "status"])
RECALL_SECONDS = Histogram("memworker_recall_seconds", "Server-side recall latency",
                           buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2))
EPISODES = Counter("memworker_episodes_total", "Episodes by outcome", ["outcome"])


def registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        reg = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg)
        return reg
    return REGISTRY
