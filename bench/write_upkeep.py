"""What index upkeep costs a write, A/B in one sitting: memories written through
memworker.storage.store.write_memory (the one write path of ingest, direct writes and sleep:
the row, its postings, the event). Default: into one small agent, with the impact-ordered
postings' index (sql/0012: memory_terms_impact) dropped (A) and in place (B). With --large N:
into an agent of N memories, outside the HNSW index (A: agents.ann off, its writes pay no
upkeep at all) and in it as shipped (B: its writes are stored pending, sql/0019); after each
B round, memworker.storage.large_agents.index moves that round's pending memories into the
graph (what the retention sweep does, off the write path), and its rate is reported too.
With --pk: into one small agent, the postings' primary key with nothing in its index (A) and with
the impact and tf in the key's index (B, sql/0019: INCLUDE (impact, tf)).

Run:  python bench/write_upkeep.py                       # 10 rounds of 100 memories
      python bench/write_upkeep.py --large 20000 --rounds 3
      python bench/write_upkeep.py --pk

It starts `memworker up` on a temporary data dir (or uses --api-url/--data-dir: it drops and
recreates an index, so only on a stack of its own), creates a tenant, and writes as the app
role over a pooled connection, 20 memories per transaction, with texts from the bench
vocabulary (bench/_common.TextMaker, each made unique) and vectors made from their terms
(recall_latency.text_vector). Rounds alternate A B, B A, ... so a noisy minute and the
growing tables hit both sides alike. Embedding is not part of it: the share of an episode's
ingest is smaller still. Writes bench/results/write_upkeep.md (write_upkeep_hnsw.md with --large, write_upkeep_pk.md with --pk)."""

from __future__ import annotations

import argparse
import random
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

from memworker.tenancy import service as tenancy

INDEX = "memory_terms_impact"
ANN = "memories_ann"
PER_TX = 20


def set_index(stack, indexdef: str, present: bool) -> None:  # type: ignore[no-untyped-def]
    with owner_connect(stack) as conn:
        conn.execute(f"DROP INDEX IF EXISTS memworker.{INDEX}")
        if present:
            conn.execute(indexdef)


def set_pk(stack, include: bool) -> None:  # type: ignore[no-untyped-def]
    """The postings' primary key with the impact and tf in its index (as shipped, sql/0019)
    or without."""
    with owner_connect(stack) as conn:
        conn.execute("ALTER TABLE memworker.memory_terms DROP CONSTRAINT memory_terms_pkey")
        conn.execute(
            "ALTER TABLE memworker.memory_terms ADD CONSTRAINT memory_terms_pkey"
            " PRIMARY KEY (tenant_id, agent_id, term, memory_id)" + (" INCLUDE (impact, tf)" if include else "")
        )


def set_upkeep(stack, tenant_id: str, agent: str, on: bool) -> None:  # type: ignore[no-untyped-def]
    """The large agent in the HNSW index (its writes stored pending), or out of it."""
    with owner_connect(stack) as conn:
        conn.execute(
            "UPDATE memworker.agents SET ann = %s, ann_ready = %s WHERE tenant_id = %s AND id = %s",
            (on, on, uuid.UUID(tenant_id), agent),
        )


def flush_rate(stack, tenant_id: str, agent: str) -> float:  # type: ignore[no-untyped-def]
    """Memories/s large_agents.index moves from pending into the graph."""
    from memworker.storage import db, large_agents

    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=1, name="bench-write-upkeep")
    try:
        started = time.perf_counter()
        moved = large_agents.index(pool, tenant_id=uuid.UUID(tenant_id), agent_id=agent)
        return moved / (time.perf_counter() - started)
    finally:
        pool.close()


def write_round(stack, tenant_id: str, agent: str, n: int, maker: TextMaker, rng: np.random.Generator) -> float:  # type: ignore[no-untyped-def]
    """Memories per second for n writes."""
    from memworker.domain import memories
    from memworker.storage import db, store

    tid = uuid.UUID(tenant_id)
    texts = [f"{maker.sentence()} {random.randrange(10**9)}" for _ in range(n)]
    vectors = [text_vector(t, rng) for t in texts]
    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=1, name="bench-write-upkeep")
    try:
        started = time.perf_counter()
        for i in range(0, n, PER_TX):
            with db.tenant_tx(pool, tid) as conn:
                tenancy.ensure_agent(conn, tenant_id=tid, agent_id=agent)
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


def prepare(stack, tenant_id: str, large: int, seed: int) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(the definition of the index the A/B switches, the agent written into); with large, the
    agent of that size loaded and the HNSW index built once after the load, as shipped."""
    with owner_connect(stack) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (ANN if large else INDEX,))
        indexdef = str(row.fetchone()["indexdef"])
    if not large:
        return indexdef, "upkeep"
    from agent_size import load_agent

    with owner_connect(stack) as conn:  # a bulk build after the load, not row by row
        conn.execute(f"DROP INDEX memworker.{ANN}")
    load_agent(stack, tenant_id, f"big-{large}", large, seed)
    with owner_connect(stack) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(indexdef)
    return indexdef, f"big-{large}"


def run_ab(stack, args: argparse.Namespace) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """Memories/s per round and side, the sides in turn."""
    maker, rng = TextMaker(args.seed), np.random.default_rng(args.seed)
    tenant_id, _ = create_tenant(stack, f"write-upkeep-{random.randrange(10**6)}")
    indexdef, agent = prepare(stack, tenant_id, args.large, args.seed)
    write_round(stack, tenant_id, agent, args.memories, maker, rng)  # warm-up: the agent, the caches
    rates: dict[str, list[float]] = {"A": [], "B": [], "flush": []}
    try:
        for r in range(args.rounds):
            for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                if args.large:
                    set_upkeep(stack, tenant_id, agent, side == "B")
                elif args.pk:
                    set_pk(stack, side == "B")
                else:
                    set_index(stack, indexdef, side == "B")
                rates[side].append(write_round(stack, tenant_id, agent, args.memories, maker, rng))
                print(f"round {r + 1} {side}: {rates[side][-1]:.1f} memories/s", flush=True)
                if args.large and side == "B":
                    rates["flush"].append(flush_rate(stack, tenant_id, agent))
    finally:
        if args.pk:
            set_pk(stack, True)  # leave the key as shipped
        elif not args.large:
            set_index(stack, indexdef, True)  # leave the index as shipped
    return rates


def report(args: argparse.Namespace, rates: dict[str, list[float]], note: str) -> str:
    labels = (
        ("A: the agent outside the HNSW index (no upkeep)", "B: in it, writes stored pending (as shipped)")
        if args.large
        else ("A: postings' primary key with nothing in its index", "B: with INCLUDE (impact, tf) (as shipped)")
        if args.pk
        else ("A: without the impact index", "B: with it (as shipped)")
    )
    rows = [
        [label, fmt(statistics.median(rates[side]), 1), fmt(min(rates[side]), 1), fmt(max(rates[side]), 1)]
        for label, side in zip(labels, "AB", strict=True)
    ]
    what = (
        "into a large agent, HNSW upkeep"
        if args.large
        else "with the impact and tf in the postings' primary key and without"
        if args.pk
        else "with and without the impact-ordered postings index"
    )
    where = f"an agent of {args.large:,} memories in the HNSW index" if args.large else "one small agent"
    ratio = statistics.median(rates["B"]) / statistics.median(rates["A"])
    return "\n".join(
        [
            f"# Writes {what} (A/B in one sitting)",
            "",
            note,
            "",
            md_table(["side", "memories/s (median)", "min", "max"], rows),
            "",
            f"- B / A: {ratio:.3f} ({args.rounds} rounds of {args.memories} memories per side, alternating; "
            f"{PER_TX} memories per transaction, {where}, no embedding).",
            *(
                [
                    f"- off the write path: large_agents.index moved each B round's pending memories into the "
                    f"graph at {statistics.median(rates['flush']):.1f} memories/s (median)."
                ]
                if rates["flush"]
                else []
            ),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10, help="rounds per side")
    p.add_argument("--memories", type=int, default=100, help="memories written per round")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--large", type=int, default=0, help="A/B of HNSW upkeep on an agent of this many memories")
    p.add_argument("--pk", action="store_true", help="A/B of the impact in the postings' primary key (small agent)")
    p.add_argument("--no-write", action="store_true")
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before = loadavg()
    random.seed(args.seed)
    with stack_from_args(args) as stack:
        rates = run_ab(stack, args)
    text = report(args, rates, environment_note(load_before, command_line(), stack))
    print(text)
    if not args.no_write:
        name = "write_upkeep_hnsw.md" if args.large else "write_upkeep_pk.md" if args.pk else "write_upkeep.md"
        write_report(name, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
