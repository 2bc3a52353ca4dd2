"""Writes into one growing agent: the direct-write and episode-ingest rates at 1,000, 10,000 and
50,000 memories in the agent, on natural text and on repetitive small-vocabulary text, each as
a ratio to the rate at the first size (same run), and how long the agent's retention sweep then
takes.

Run:  python bench/write_scale.py                         # sizes 1000,10000,50000
      python bench/write_scale.py --sizes 1000,5000 --writes 500 --episodes 10

It starts `memworker up` (1 worker) on a temporary data dir. Two agents, one per text style:
  natural     LoCoMo turns (/work/shared/benchdata/locomo/locomo10.json), each joined to part of
              another so texts do not repeat;
  repetitive  short sentences over a vocabulary of 40 words, as templated agent logs are.
Each agent is filled up to the next size by binary COPY of realistic rows (memories with
vectors made from their terms, bench/recall_latency.text_vector, and their BM25 postings),
stamped as swept, and, past recall.EXACT_MAX, put into the HNSW index as
memworker.storage.large_agents.index leaves it (the index is dropped for the COPY and built once
after: a bulk build). Then, through the API: --writes memories by POST .../memories/batch, 500
a time (memories/s), and --episodes episodes of 4 messages (POST .../episodes, then waited until
stored: episodes/s through the worker: reflection, embedding, the duplicate lookup, the merge and
contradiction checks); then one retention sweep of the agent (memworker.lifecycle.retention.
sweep_agent in this process: the writes are what it checks). Writes bench/results/write_scale.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

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
    stack_from_args,
    write_report,
)
from recall_latency import copy_agent, text_vector  # noqa: E402

from memworker import Client  # noqa: E402

LOCOMO = Path("/work/shared/benchdata/locomo/locomo10.json")
VOCABULARY = (
    "user asked agent about order status shipping delay refund invoice payment card account login "
    "password reset email phone address update cancel subscription plan upgrade downgrade price "
    "discount coupon ticket escalated resolved pending support chat today tomorrow week"
).split()
STYLES = ("natural", "repetitive")


class Texts:
    """An endless, seeded source of one style's texts (never the same one twice)."""

    def __init__(self, style: str, seed: int) -> None:
        self.style, self.rng, self.n = style, random.Random(seed), 0
        self.turns: list[str] = []
        if style == "natural":
            data = json.loads(LOCOMO.read_text())
            self.turns = [
                t["text"]
                for conv in data
                for k, v in conv["conversation"].items()
                if k.startswith("session_") and isinstance(v, list)
                for t in v
                if t.get("text")
            ]

    def next(self) -> str:
        self.n += 1
        if self.style == "natural":
            a, b = self.rng.choice(self.turns), self.rng.choice(self.turns)
            return f"{a} {' '.join(b.split()[:6])}"[:280]
        words = self.rng.sample(VOCABULARY, self.rng.randint(5, 9))
        return " ".join(words)


def prefill(stack: Any, tenant_id: str, agent: str, texts: Texts, n: int, large: bool, seed: int) -> None:
    from memworker.domain.memories import content_hash
    from memworker.domain.tokens import term_frequencies

    tid = uuid.UUID(tenant_id)
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    mem_rows, term_rows = [], []
    for _ in range(n):
        text = texts.next()
        tf, doc_len = term_frequencies(text)
        mid = uuid.uuid4()
        created = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
        key = f"prefill:{agent}:{uuid.uuid4().hex}"
        mem_rows.append(
            (mid, tid, agent, text, "fact", "L1", 0.5, 0.7, created, created, [key], key, content_hash(text), doc_len,
             text_vector(text, rng))
        )  # fmt: skip
        term_rows += [(tid, agent, term, mid, c) for term, c in tf.items()]
    with owner_connect(stack, tenant_id) as conn:
        conn.execute(
            "UPDATE agents SET ann = %s, ann_ready = %s, retention_done_at = now() WHERE tenant_id = %s AND id = %s",
            (large, large, tid, agent),
        )
        if large:
            conn.execute("UPDATE memories SET ann = true WHERE tenant_id = %s AND agent_id = %s", (tid, agent))
        copy_agent(conn, mem_rows, term_rows)
        # as an agent swept every hour leaves its rows: changed before the last complete sweep
        # (COPY stamps updated_at with its own now(), after the retention_done_at set above, which
        # made every filled row "fresh" for the sweep) and decayed within the last day
        conn.execute(
            "UPDATE memories SET updated_at = created_at, decayed_at = now() - random() * interval '23 hours'"
            " WHERE tenant_id = %s AND id = ANY(%s)",
            (tid, [r[0] for r in mem_rows]),
        )
        conn.execute("UPDATE agents SET retention_done_at = now() WHERE tenant_id = %s AND id = %s", (tid, agent))


def drop_index(stack: Any) -> str:
    """Drop the HNSW index for a bulk load; returns its definition."""
    with owner_connect(stack) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_ann'").fetchone()
        conn.execute("DROP INDEX memworker.memories_ann")
    return str(row["indexdef"])


def build_index(stack: Any, indexdef: str) -> float:
    started = time.perf_counter()
    with owner_connect(stack) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(indexdef)
        for table in ("agents", "memories", "memory_terms"):
            conn.execute(f"VACUUM ANALYZE memworker.{table}")
    return time.perf_counter() - started


def direct_rate(client: Client, agent: str, texts: Texts, n: int) -> float:
    started = time.perf_counter()
    for i in range(0, n, 500):
        client.add_memories(agent, [{"text": texts.next(), "kind": "fact"} for _ in range(min(500, n - i))])
    return n / (time.perf_counter() - started)


def episode_rate(stack: Any, client: Client, tenant_id: str, agent: str, texts: Texts, n: int) -> float:
    bodies = [
        {"messages": [{"role": ("user", "assistant")[j % 2], "content": texts.next()} for j in range(4)]}
        for _ in range(n)
    ]
    ids = [e["episode_id"] for e in client.add_episodes(agent, bodies)]
    deadline = time.monotonic() + 900
    with owner_connect(stack, tenant_id) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status IN ('stored', 'dead')) AS done, max(stored_at) AS last,"
                " min(created_at) AS first FROM memworker.episodes WHERE id = ANY(%s)",
                (ids,),
            ).fetchone()
            if row["done"] == len(ids):
                return n / max(1e-3, (row["last"] - row["first"]).total_seconds())
            time.sleep(0.5)
    raise SystemExit(f"episodes of {agent} not stored in 15 minutes")


def sweep_s(stack: Any, tenant_id: str, agent: str) -> tuple[float, str]:
    """The sweep's seconds, and its status with its three longest phases."""
    from memworker.lifecycle import retention
    from memworker.storage import db

    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=2, name="bench-write-scale")
    try:
        started = time.perf_counter()
        report = retention.sweep_agent(pool, tenant_id=uuid.UUID(tenant_id), agent_id=agent, trigger="bench")
        slow = sorted(report.phase_ms.items(), key=lambda kv: -kv[1])[:3]
        return time.perf_counter() - started, f"{report.status}; " + ", ".join(f"{k} {v / 1000:.1f} s" for k, v in slow)
    finally:
        pool.close()


def main(argv: list[str] | None = None) -> int:
    from memworker.recall import hybrid as recall

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,50000")
    p.add_argument("--writes", type=int, default=1000, help="memories written through the API per size")
    p.add_argument("--episodes", type=int, default=20, help="episodes ingested per size")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--no-write", action="store_true")
    add_stack_args(p)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    load_before = loadavg()
    results: dict[tuple[str, int], dict[str, Any]] = {}
    with stack_from_args(args, raise_limits=True) as stack:
        tenant_id, key = create_tenant(stack, f"write-scale-{random.randrange(10**6)}")
        texts = {s: Texts(s, args.seed + i) for i, s in enumerate(STYLES)}
        agents = {s: f"{s}-agent" for s in STYLES}
        with Client(stack.api_url, key, timeout=600) as client:
            for s in STYLES:
                client.add_memory(agents[s], texts[s].next())  # creates the agent
            have = dict.fromkeys(STYLES, 1)
            for size in sizes:
                large = size > recall.EXACT_MAX
                indexdef = drop_index(stack)
                for s in STYLES:
                    prefill(stack, tenant_id, agents[s], texts[s], max(0, size - have[s]), large, args.seed)
                    have[s] = max(have[s], size)
                index_s = build_index(stack, indexdef)
                for s in STYLES:
                    r = results[(s, size)] = {"index_s": index_s}
                    r["direct"] = direct_rate(client, agents[s], texts[s], args.writes)
                    r["episodes"] = episode_rate(stack, client, tenant_id, agents[s], texts[s], args.episodes)
                    r["sweep_s"], r["sweep"] = sweep_s(stack, tenant_id, agents[s])
                    have[s] += args.writes + 4 * args.episodes
                    print(s, size, r, flush=True)
        rows = []
        for s in STYLES:
            base = results[(s, sizes[0])]
            for size in sizes:
                r = results[(s, size)]
                rows.append(
                    [
                        s,
                        f"{size:,}",
                        fmt(r["direct"], 1),
                        fmt(r["direct"] / base["direct"], 2),
                        fmt(r["episodes"], 2),
                        fmt(r["episodes"] / base["episodes"], 2),
                        f"{fmt(r['sweep_s'], 1)} ({r['sweep']})",
                    ]
                )
        table = md_table(
            [
                "text",
                "memories in the agent",
                "direct writes/s",
                f"/ at {sizes[0]:,}",
                "episodes/s",
                f"/ at {sizes[0]:,}",
                "sweep after the writes, s",
            ],
            rows,
        )
        text = "\n".join(
            [
                "# Writes into one growing agent",
                "",
                environment_note(load_before, command_line(), stack),
                "",
                table,
                "",
                f"- per size: {args.writes} memories by POST .../memories/batch (500 a time), {args.episodes} "
                "episodes of 4 messages (episodes/s: first accepted to last stored), then one retention sweep.",
                f"- past recall.EXACT_MAX ({recall.EXACT_MAX:,}) the agent is in the HNSW index (large_agents), "
                "so its writes also pay an HNSW insert.",
                "",
            ]
        )
        print(text)
        if not args.no_write:
            write_report("write_scale.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
