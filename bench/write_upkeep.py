"""What index upkeep costs a write, A/B in one sitting: memories written through
memworker.storage.store.write_memory (the one write path of ingest, direct writes and sleep:
the row, its postings, the event). Default: into one small agent, with the impact-ordered
postings' index (sql/0012: memory_terms_impact) dropped (A) and in place (B). With --large N:
into an agent of N memories that is in the HNSW index (large_agents), with that index built
as pgvector's default graph (A: m 16, ef_construction 64) and as shipped (B: sql/0017).

Run:  python bench/write_upkeep.py                       # 10 rounds of 100 memories
      python bench/write_upkeep.py --large 20000 --rounds 3

It starts `memworker up` on a temporary data dir (or uses --api-url/--data-dir: it drops and
recreates an index, so only on a stack of its own), creates a tenant, and writes as the app
role over a pooled connection, 20 memories per transaction, with texts from the bench
vocabulary (bench/_common.TextMaker, each made unique) and vectors made from their terms
(recall_latency.text_vector). Rounds alternate A B, B A, ... so a noisy minute and the
growing tables hit both sides alike. Embedding is not part of it: the share of an episode's
ingest is smaller still. Writes bench/results/write_upkeep.md (write_upkeep_hnsw.md with --large)."""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    TextMaker,
    add_stack_args,
    command_line,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    owner_connect,
    stack_from_args,
    write_report,
)
from recall_latency import text_vector  # noqa: E402

INDEX = "memory_terms_impact"
ANN = "memories_ann"
PER_TX = 20


def set_index(stack, indexdef: str, present: bool) -> None:  # type: ignore[no-untyped-def]
    with owner_connect(stack) as conn:
        conn.execute(f"DROP INDEX IF EXISTS memworker.{INDEX}")
        if present:
            conn.execute(indexdef)


def set_graph(stack, indexdef: str, shipped: bool) -> None:  # type: ignore[no-untyped-def]
    """memories_ann as shipped (B) or with pgvector's default graph (A): the same index
    without its WITH (...) options."""
    with owner_connect(stack) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(f"DROP INDEX IF EXISTS memworker.{ANN}")
        conn.execute(indexdef if shipped else re.sub(r" WITH \([^)]*\)", "", indexdef))


def write_round(stack, tenant_id: str, agent: str, n: int, maker: TextMaker, rng: np.random.Generator) -> float:  # type: ignore[no-untyped-def]
    """Memories per second for n writes."""
    from memworker import memories
    from memworker.storage import db, store

    tid = uuid.UUID(tenant_id)
    texts = [f"{maker.sentence()} {random.randrange(10**9)}" for _ in range(n)]
    vectors = [text_vector(t, rng) for t in texts]
    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=1, name="bench-write-upkeep")
    try:
        started = time.perf_counter()
        for i in range(0, n, PER_TX):
            with db.tenant_tx(pool, tid) as conn:
                store.ensure_agent(conn, tenant_id=tid, agent_id=agent)
                for text, vec in zip(texts[i : i + PER_TX], vectors[i : i + PER_TX], strict=True):
                    store.write_memory(
                        conn,
                        tenant_id=tid,
                        agent_id=agent,
                        draft=memories.Draft(text),
                        embedding=vec,
                        source_key=f"upkeep:{uuid.uuid4()}",
                    )
        return n / (time.perf_counter() - started)
    finally:
        pool.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10, help="rounds per side")
    p.add_argument("--memories", type=int, default=100, help="memories written per round")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--large", type=int, default=0, help="A/B of the HNSW graph on an agent of this many memories")
    p.add_argument("--no-write", action="store_true")
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before = loadavg()
    random.seed(args.seed)
    maker, rng = TextMaker(args.seed), np.random.default_rng(args.seed)
    rates: dict[str, list[float]] = {"A": [], "B": []}
    with stack_from_args(args) as stack:
        tenant_id, _ = create_tenant(stack, f"write-upkeep-{random.randrange(10**6)}")
        with owner_connect(stack) as conn:
            indexdef = str(
                conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (INDEX,)).fetchone()["indexdef"]
            )
        write_round(stack, tenant_id, args.memories, maker, rng)  # warm-up: the agent, the caches
        try:
            for r in range(args.rounds):
                for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                    set_index(stack, indexdef, present=side == "B")
                    rates[side].append(write_round(stack, tenant_id, args.memories, maker, rng))
                    print(f"round {r + 1} {side}: {rates[side][-1]:.1f} memories/s", flush=True)
        finally:
            set_index(stack, indexdef, present=True)
    a, b = statistics.median(rates["A"]), statistics.median(rates["B"])
    labels = (
        ("A: HNSW graph m 16, ef_construction 64", "B: m 32, ef_construction 128 (as shipped)")
        if args.large
        else ("A: without the impact index", "B: with it (as shipped)")
    )
    rows = [
        [label, fmt(statistics.median(rates[side]), 1), fmt(min(rates[side]), 1), fmt(max(rates[side]), 1)]
        for label, side in zip(labels, "AB", strict=True)
    ]
    text = "\n".join(
        [
            f"# Writes {'into a large agent, two HNSW graphs' if args.large else 'with and without the impact-ordered postings index'} (A/B in one sitting)",
            "",
            environment_note(load_before, command_line(), stack),
            "",
            md_table(["side", "memories/s (median)", "min", "max"], rows),
            "",
            f"- B / A: {b / a:.3f} ({args.rounds} rounds of {args.memories} memories per side, alternating; "
            f"{PER_TX} memories per transaction, "
            + (f"an agent of {args.large:,} memories in the HNSW index" if args.large else "one small agent")
            + ", no embedding).",
            "",
        ]
    )
    print(text)
    if not args.no_write:
        write_report("write_upkeep_hnsw.md" if args.large else "write_upkeep.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
