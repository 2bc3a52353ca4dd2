"""Recall for one large agent: the recall statement's p50 at 1,000, 5,000 and 20,000 memories
in one agent, each as a ratio to the 1,000-memory figure of the same run.

Run:  python bench/agent_size.py                        # sizes 1000,5000,20000
      python bench/agent_size.py --sizes 1000,5000 --queries 100

It starts `memworker up` on a temporary data dir (or uses --api-url/--data-dir), loads one
agent per size under a fresh tenant with bench/recall_latency.py's loader (binary COPY of
memories with random unit vectors and sentences from a fixed vocabulary, and their BM25
postings; then ANALYZE), and times memworker.recall.serve as the API calls it (the app
role's pooled connection, the tenant transaction, storage/queries/core.sql: recall with the
access bump, default policy) with a random query vector and a fresh vocabulary query each
time. The 1,000-memory agents of the fleet benches are the baseline. Writes
bench/results/agent_size.md."""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    add_stack_args,
    command_line,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    owner_connect,
    percentile,
    progress,
    stack_from_args,
    write_report,
)
from recall_latency import K, Queries, agent_rows, copy_agent, unit_vectors  # noqa: E402


def load_agent(stack, tenant_id: str, agent: str, size: int, seed: int) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    tid = uuid.UUID(tenant_id)
    with owner_connect(stack, tenant_id) as conn:
        conn.execute("INSERT INTO agents (tenant_id, id) VALUES (%s, %s)", (tid, agent))
        mem_rows, term_rows = agent_rows(tid, agent, size, size, seed, datetime.now(UTC))
        copy_agent(conn, mem_rows, term_rows)
    with owner_connect(stack) as conn:
        for table in ("memories", "memory_terms"):
            conn.execute(f"ANALYZE memworker.{table}")
    return time.perf_counter() - started


def statement_ms(stack, tenant_id: str, agent: str, queries: Queries, n: int, seed: int) -> list[float]:  # type: ignore[no-untyped-def]
    from memworker import recall
    from memworker.policy import Policy
    from memworker.storage import db

    rng = np.random.default_rng(seed)
    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=1, name="bench-agent-size")
    out = []
    try:
        for i in progress(range(n + 1), desc=f"recall {agent}", unit="q"):
            query = recall.Query(queries.fresh(), K)
            qvec = unit_vectors(rng, 1)[0]
            t = time.perf_counter()
            recall.serve(pool, qvec, tenant_id=uuid.UUID(tenant_id), agent_id=agent, query=query, policy=Policy())
            if i:  # the first is a warm-up
                out.append((time.perf_counter() - t) * 1000)
    finally:
        pool.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,5000,20000", help="memories in the one agent, comma-separated")
    p.add_argument("--queries", type=int, default=200, help="recalls timed per size")
    p.add_argument("--rounds", type=int, default=3, help="sizes measured in turn this many times (noise)")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--no-write", action="store_true")
    add_stack_args(p)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    load_before = loadavg()
    with stack_from_args(args) as stack:
        tenant_id, _ = create_tenant(stack, f"agent-size-{random.randrange(10**6)}")
        agents = {size: f"big-{size}" for size in sizes}
        load_s = {size: load_agent(stack, tenant_id, agents[size], size, args.seed) for size in sizes}
        queries = Queries(args.seed)
        samples: dict[int, list[float]] = {size: [] for size in sizes}
        for r in range(args.rounds):  # in turn, so a noisy minute hits every size alike
            for size in sizes:
                samples[size] += statement_ms(stack, tenant_id, agents[size], queries, args.queries, args.seed + r)
        base = percentile(samples[sizes[0]], 50)
        rows = [
            [
                f"{size:,}",
                fmt(percentile(samples[size], 50), 2),
                fmt(percentile(samples[size], 95), 2),
                fmt(percentile(samples[size], 50) / base, 2),
                fmt(load_s[size], 1),
            ]
            for size in sizes
        ]
        table = md_table(["memories in the agent", "p50 ms", "p95 ms", f"p50 / {sizes[0]:,}", "load s"], rows)
        text = "\n".join(
            [
                "# Recall for one large agent",
                "",
                environment_note(load_before, command_line(), stack),
                "",
                table,
                "",
            ]
        )
        print(text)
        if not args.no_write:
            write_report("agent_size.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
