"""What showing an LLM reflector the agent's nearest memories costs per episode: the
nearest_live query (memworker/ingest/neighbours.py, storage/queries/core.sql) against the
find_duplicate query the store transaction already runs once per reflected item, on one agent
of each size, as a ratio to find_duplicate in the same run.
Run:  python bench/known_memories.py                      # sizes 1000,15000
      python bench/known_memories.py --sizes 1000 --queries 50
It starts `memworker up` on a temporary data dir (or uses --api-url/--data-dir), loads one
agent per size with bench/recall_latency.py's loader (sentences from a fixed vocabulary, vectors
from their terms), all of them at most recall.EXACT_MAX, so nearest_live takes its exact
branch (the one past that size, a lexical probe like find_duplicate's, is not measured here),
then times both statements over the owner's connection bound to the tenant, with an episode of
three vocabulary sentences each time. Writes bench/results/known_memories.md."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
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
    stack_from_args,
    write_report,
)
from agent_size import load_agent  # noqa: E402
from recall_latency import Queries, text_vector  # noqa: E402


def time_agent(stack, tenant_id: str, agent: str, queries: int, seed: int) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    """Milliseconds of nearest_live and of find_duplicate, per episode."""
    from memworker.domain import memories, tokens
    from memworker.ingest import neighbours
    from memworker.storage import core_db, store

    rng = np.random.default_rng(seed)
    words = Queries(seed)
    tid = uuid.UUID(tenant_id)
    near, dup = [], []
    with owner_connect(stack, tenant_id) as conn:
        for _ in range(queries):
            episode = " ".join(words.fresh() + "." for _ in range(3))
            vec = text_vector(episode, rng)
            started = time.perf_counter()
            neighbours.nearest(conn, tenant_id=tid, agent_id=agent, subject=None, text=episode, vec=vec)
            near.append((time.perf_counter() - started) * 1000)
            item = episode.split(".")[0]
            started = time.perf_counter()
            core_db.find_duplicate(
                conn,
                tenant_id=tid,
                agent_id=agent,
                content_hash=memories.content_hash(item),
                embedding=vec,
                terms=sorted(set(tokens.tokenize(item))),
                probe_terms=store.DUPLICATE_PROBE_TERMS,
                per_term=store.CANDIDATE_POSTINGS,
                df_cap=store.DF_CAP,
                subject=None,
            )
            dup.append((time.perf_counter() - started) * 1000)
    return near, dup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,15000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    add_stack_args(parser)
    args = parser.parse_args(argv)
    load_before = loadavg()
    rows = []
    with stack_from_args(args) as stack:
        tenant_id, _ = create_tenant(stack, f"known-{uuid.uuid4().hex[:8]}")
        for size in (int(s) for s in args.sizes.split(",")):
            agent = f"known-{size}"
            load_agent(stack, tenant_id, agent, size, args.seed)
            with owner_connect(stack) as conn:
                conn.execute("VACUUM ANALYZE memworker.memories")
                conn.execute("VACUUM ANALYZE memworker.memory_terms")
            time_agent(stack, tenant_id, agent, 10, args.seed + 1)  # warm the caches
            near, dup = time_agent(stack, tenant_id, agent, args.queries, args.seed)
            p50n, p50d = percentile(near, 50), percentile(dup, 50)
            rows.append([f"{size:,}", fmt(p50n, 2), fmt(percentile(near, 95), 2), fmt(p50d, 2), fmt(p50n / p50d, 2)])
            print(rows[-1], flush=True)
        table = md_table(["memories", "nearest_live p50 ms", "p95 ms", "find_duplicate p50 ms", "ratio p50"], rows)
        text = (
            "# Known memories for the LLM reflector: the cost of the lookup\n\n"
            f"{table}\n\n{environment_note(load_before, command_line(), stack)}\n"
        )
        print(write_report("known_memories.md", text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
