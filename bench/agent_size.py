"""Recall for one large agent: the recall statement's p50 at 1,000, 10,000 and 100,000
memories in one agent, each as a ratio to the 1,000-memory figure of the same run, and for the
agents past recall.EXACT_MAX (the bounded statement) how often its top 10 agrees with the exact
statement's.

Run:  python bench/agent_size.py                        # sizes 1000,10000,100000
      python bench/agent_size.py --sizes 1000,10000 --queries 100

It starts `memworker up` on a temporary data dir (or uses --api-url/--data-dir), loads one
agent per size under a fresh tenant with bench/recall_latency.py's loader (binary COPY of
memories with sentences from a fixed vocabulary and their BM25 postings), with vectors made
from each sentence's terms (recall_latency.text_vector: texts that share terms lie close, as
with a real embedder; random vectors would leave the vector side nothing to find). An agent
past recall.EXACT_MAX is loaded as memworker.storage.large_agents.index leaves it (ann, ann_ready),
and the HNSW index is dropped before the COPY and built once after it (a bulk build, much
faster than row by row; its time is reported); then VACUUM ANALYZE. It times
memworker.recall.hybrid.serve as the API calls it (the app role's pooled connection, the tenant
transaction, storage/queries/core.sql: recall, its hits' access bumps queued in Redis, default policy, the
statement recall picks by the agent's size) with a fresh vocabulary query each time and its
vector. Agreement: for --agree queries per large agent, the bounded and the exact statement
(recall.recall(path=...), which counts no access, so neither changes the other's priors), the share
of the exact top 10 the bounded one returns; their p50s are reported too.
Writes bench/results/agent_size.md."""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import redis

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
from recall_latency import K, Queries, agent_rows, copy_agent, text_vector  # noqa: E402


def load_agent(stack, tenant_id: str, agent: str, size: int, seed: int) -> float:  # type: ignore[no-untyped-def]
    from memworker.recall import hybrid as recall

    started = time.perf_counter()
    tid = uuid.UUID(tenant_id)
    large = size > recall.EXACT_MAX
    with owner_connect(stack, tenant_id) as conn:
        conn.execute(
            "INSERT INTO agents (tenant_id, id, ann, ann_ready) VALUES (%s, %s, %s, %s)", (tid, agent, large, large)
        )
        mem_rows, term_rows = agent_rows(tid, agent, size, size, seed, datetime.now(UTC), term_vectors=True)
        # a large agent's rows as large_agents.index leaves them: in the graph, none pending
        conn.execute(f"ALTER TABLE memworker.memories ALTER COLUMN ann SET DEFAULT {large}")
        try:
            copy_agent(conn, mem_rows, term_rows)
        finally:
            conn.execute("ALTER TABLE memworker.memories ALTER COLUMN ann SET DEFAULT false")
    return time.perf_counter() - started


def without_ann_index(stack) -> str:  # type: ignore[no-untyped-def]
    """Drop the HNSW index for the bulk load; returns its definition."""
    with owner_connect(stack) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_ann'").fetchone()
        conn.execute("DROP INDEX memworker.memories_ann")
    return str(row["indexdef"])


def build_ann_index(stack, indexdef: str) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    with owner_connect(stack) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(indexdef)
        for table in ("agents", "memories", "memory_terms"):
            conn.execute(f"VACUUM ANALYZE memworker.{table}")
    return time.perf_counter() - started


def _query(queries: Queries, rng: np.random.Generator) -> tuple[object, np.ndarray]:
    from memworker.recall import hybrid as recall

    text = queries.fresh()
    return recall.Query(text, K), text_vector(text, rng)


def statement_ms(stack, tenant_id: str, agent: str, queries: Queries, n: int, seed: int) -> list[float]:  # type: ignore[no-untyped-def]
    from memworker.domain.policy import Policy
    from memworker.recall import hybrid as recall
    from memworker.recall.stats import Stats
    from memworker.storage import bumps, db

    rng = np.random.default_rng(seed)
    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=1, name="bench-agent-size")
    access = bumps.Buffer(redis.Redis.from_url(stack.info["redis_url"]))  # recall's hits' access bumps
    stats = Stats()  # the agent's statistics cached as an API process caches them
    out = []
    try:
        for i in progress(range(n + 1), desc=f"recall {agent}", unit="q"):
            query, qvec = _query(queries, rng)
            t = time.perf_counter()
            recall.serve(
                pool,
                qvec,
                tenant_id=uuid.UUID(tenant_id),
                agent_id=agent,
                query=query,
                policy=Policy(),
                access=access,
                stats=stats,
            )
            if i:  # the first is a warm-up (and reads the agent's statistics)
                out.append((time.perf_counter() - t) * 1000)
    finally:
        pool.close()
        access.close()
        access.client.close()
    return out


def agreement(stack, tenant_id: str, agent: str, queries: Queries, n: int, seed: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(share of the exact top 10 the bounded statement returns, exact p50 ms, bounded p50 ms)."""
    from memworker.domain.policy import Policy
    from memworker.recall import hybrid as recall
    from memworker.recall.stats import Stats
    from memworker.storage import db

    rng = np.random.default_rng(seed)
    tid = uuid.UUID(tenant_id)
    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=1, name="bench-agent-size")
    shares: list[float] = []
    ms: dict[str, list[float]] = {"exact": [], "bounded": []}
    stats = Stats()
    try:
        for _ in progress(range(n), desc=f"agreement {agent}", unit="q"):
            query, qvec = _query(queries, rng)
            ids = {}
            for path in ("exact", "bounded"):
                t = time.perf_counter()
                with db.tenant_tx(pool, tid) as conn:
                    hits = recall.recall(
                        conn,
                        qvec,
                        tenant_id=tid,
                        agent_id=agent,
                        query=query,
                        policy=Policy(),
                        path=path,  # type: ignore[arg-type]
                        stats=stats,
                    )
                ms[path].append((time.perf_counter() - t) * 1000)
                ids[path] = [h["id"] for h in hits]
            if ids["exact"]:
                shares.append(len(set(ids["exact"]) & set(ids["bounded"])) / len(ids["exact"]))
    finally:
        pool.close()
    return sum(shares) / max(1, len(shares)), percentile(ms["exact"], 50), percentile(ms["bounded"], 50)


def main(argv: list[str] | None = None) -> int:
    from memworker.recall import hybrid as recall

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000", help="memories in the one agent, comma-separated")
    p.add_argument("--queries", type=int, default=200, help="recalls timed per size")
    p.add_argument("--rounds", type=int, default=3, help="sizes measured in turn this many times (noise)")
    p.add_argument("--agree", type=int, default=100, help="queries compared with the exact statement per large agent")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--no-write", action="store_true")
    p.add_argument(
        "--reuse",
        metavar="TENANT_ID",
        help="time the agents big-<size> this tenant holds already (a stack given by --data-dir that an "
        "earlier run loaded with --keep) instead of loading them",
    )
    add_stack_args(p)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    load_before = loadavg()
    with stack_from_args(args) as stack:
        agents = {size: f"big-{size}" for size in sizes}
        if args.reuse:
            tenant_id, load_s, index_s = args.reuse, dict.fromkeys(sizes, 0.0), 0.0
        else:
            tenant_id, _ = create_tenant(stack, f"agent-size-{random.randrange(10**6)}")
            print(f"tenant {tenant_id} (--reuse it with --data-dir and --keep)", flush=True)
            indexdef = without_ann_index(stack)
            load_s = {size: load_agent(stack, tenant_id, agents[size], size, args.seed) for size in sizes}
            index_s = build_ann_index(stack, indexdef)
        queries = Queries(args.seed)
        samples: dict[int, list[float]] = {size: [] for size in sizes}
        for r in range(args.rounds):  # in turn, so a noisy minute hits every size alike
            for size in sizes:
                samples[size] += statement_ms(stack, tenant_id, agents[size], queries, args.queries, args.seed + r)
        agree = {
            size: agreement(stack, tenant_id, agents[size], queries, args.agree, args.seed + 100)
            for size in sizes
            if size > recall.EXACT_MAX
        }
        base = percentile(samples[sizes[0]], 50)
        rows = [
            [
                f"{size:,}",
                "bounded" if size in agree else "exact",
                fmt(percentile(samples[size], 50), 2),
                fmt(percentile(samples[size], 95), 2),
                fmt(percentile(samples[size], 50) / base, 2),
                fmt(agree[size][1], 2) if size in agree else "",
                fmt(agree[size][0], 3) if size in agree else "",
                fmt(load_s[size], 1),
            ]
            for size in sizes
        ]
        table = md_table(
            [
                "memories in the agent",
                "statement",
                "p50 ms",
                "p95 ms",
                f"p50 / {sizes[0]:,}",
                "exact statement p50 ms",
                "top-10 agreement with exact",
                "load s",
            ],
            rows,
        )
        notes = [
            f"- the switch: recall.EXACT_MAX = {recall.EXACT_MAX:,} live memories; bounded: the pool (the rarest "
            f"query terms' postings in full up to {recall.POSTINGS_BUDGET:,}, the others' {recall.POSTINGS_PER_TERM} "
            f"best by impact) scored on every query term, its {recall.LEXICAL_CANDIDATES} best, the "
            f"{2 * policy_candidates()} nearest from HNSW (sql/0019: m 32, ef_construction 128; ef_search "
            f"{recall.EF_SEARCH}, iterative scan) and the agent's pending memories, all scored exactly.",
            f"- HNSW bulk build after the load, and VACUUM ANALYZE: {index_s:.1f} s.",
            f"- agreement and the exact p50 over {args.agree} other queries per large agent, both statements "
            "counting no access.",
        ]
        text = "\n".join(
            [
                "# Recall for one large agent",
                "",
                environment_note(load_before, command_line(), stack),
                "",
                table,
                "",
                *notes,
                "",
            ]
        )
        print(text)
        if not args.no_write:
            write_report("agent_size.md", text)
    return 0


def policy_candidates() -> int:
    from memworker.domain.policy import Policy

    return Policy().recall_candidates


if __name__ == "__main__":
    raise SystemExit(main())
