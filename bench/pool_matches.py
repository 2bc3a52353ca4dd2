"""Pool proposals: which statements of two agents sleep takes for one fact learnt
independently (memworker/fleet/matches.py), and what the search costs as the fleet grows.

    python bench/pool_matches.py [--fillers 40] [--per-agent 50] [--api-url URL --data-dir DIR]

1. Rates: each pair of tests/data/knowledge_updates.jsonl (swapped roles, negations, changed
   values, paraphrases, near misses) split across two new agents of one tenant, the older
   statement in one and the newer in the other, written through the API (real embeddings);
   then matches.findings over the newer agent's memory, as the agent's sleep pass asks it.
   Per shape: how often the other agent's statement was found to be the same fact (a
   paraphrase should be; an update or a near miss never), against the exact-words rule (the
   same normalised text) on the same pairs.
2. Cost: matches.findings over an agent's 64 memories with one other agent in the tenant,
   then after `fillers` agents of `per_agent` generated memories each joined (the same
   vocabulary); the median of 5 runs each, and the ratio.

Prints the figures and writes bench/results/pool_matches.md."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
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
from bench.knowledge_updates import SHAPES, load_pairs
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.fleet import matches
from memworker.sdk import Client


def rates(client: Client, conn: Any, tenant_id: str) -> tuple[list[list[Any]], list[str]]:
    """Per shape: pairs, found by the match, found by exact words; and the pairs judged wrong."""
    policy, found, exact, total, wrong = Policy(), Counter[str](), Counter[str](), Counter[str](), []
    for i, p in enumerate(load_pairs()):
        older = client.add_memory(f"older-{i}", p["older"], kind="fact")
        newer = client.add_memory(f"newer-{i}", p["newer"], kind="fact")
        got = matches.findings(
            conn, tenant_id=UUID(tenant_id), agent_id=f"newer-{i}", ids=[UUID(newer["id"])], policy=policy
        )
        same = any(f"memory:older-{i}/{older['id']}" in f.others for f in got)
        total[p["shape"]] += 1
        found[p["shape"]] += same
        exact[p["shape"]] += memories.content_hash(p["older"]) == memories.content_hash(p["newer"])
        if same != (p["shape"] == "paraphrase"):
            wrong.append(f"{p['shape']}: {p['older']!r} / {p['newer']!r}")
    rows = [
        [
            shape,
            "same fact" if shape == "paraphrase" else "another fact",
            total[shape],
            f"{100 * found[shape] / total[shape]:.0f} %",
            f"{100 * exact[shape] / total[shape]:.0f} %",
        ]
        for shape in SHAPES
        if total[shape]
    ]
    return rows, wrong


def _timed(conn: Any, tenant_id: str, agent: str, ids: list[UUID]) -> float:
    """Median ms of one pass's search over ids (5 runs)."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        matches.findings(conn, tenant_id=UUID(tenant_id), agent_id=agent, ids=ids, policy=Policy())
        runs.append(1000 * (time.perf_counter() - t0))
    return statistics.median(runs)


def cost(client: Client, conn: Any, tenant_id: str, fillers: int, per_agent: int) -> list[list[Any]]:
    """The search's time over 64 memories with 1 other agent, then with 1 + fillers."""
    maker = TextMaker(7)
    texts = list(dict.fromkeys(maker.sentence() for _ in range(400)))[:64]
    mine = client.add_memories("probe", [{"text": t, "kind": "fact"} for t in texts])
    client.add_memories("twin", [{"text": t, "kind": "fact"} for t in texts[::2]])  # half learnt by another
    ids = [UUID(m["id"]) for m in mine]
    alone = _timed(conn, tenant_id, "probe", ids)
    for n in range(fillers):
        client.add_memories(f"filler-{n}", [{"text": maker.sentence(), "kind": "fact"} for _ in range(per_agent)])
    fleet = _timed(conn, tenant_id, "probe", ids)
    peers = min(matches.MAX_PEERS, 1 + fillers)
    return [
        ["1 other agent", len(ids), fmt(alone), fmt(alone / len(ids), 2), "1.0"],
        [
            f"{1 + fillers} other agents ({peers} searched)",
            len(ids),
            fmt(fleet),
            fmt(fleet / len(ids), 2),
            fmt(fleet / alone),
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fillers", type=int, default=40, help="agents added for the cost figure")
    parser.add_argument("--per-agent", type=int, default=50, help="generated memories per added agent")
    add_stack_args(parser)
    args = parser.parse_args()
    load = loadavg()
    with stack_from_args(args, raise_limits=True) as stack:
        tag = int(time.time())
        tenant_id, key = create_tenant(stack, f"bench-pool-rates-{tag}")
        client = Client(stack.api_url, key, timeout=120)
        with owner_connect(stack, tenant_id) as conn:
            rate_rows, wrong = rates(client, conn, tenant_id)
        tenant_id, key = create_tenant(stack, f"bench-pool-cost-{tag}")
        client = Client(stack.api_url, key, timeout=120)
        with owner_connect(stack, tenant_id) as conn:
            cost_rows = cost(client, conn, tenant_id, args.fillers, args.per_agent)
        rate_table = md_table(["shape", "should be", "pairs", "found the same (match)", "exact words"], rate_rows)
        cost_table = md_table(["tenant", "memories searched", "ms per pass", "ms per memory", "x 1 agent"], cost_rows)
        report = "\n\n".join(
            [
                "# Pool proposals: the same fact learnt by two agents",
                environment_note(load, command_line(), stack),
                "## Which statements are taken for one fact (tests/data/knowledge_updates.jsonl)",
                rate_table,
                "Judged wrong:\n" + ("\n".join(f"- {w}" for w in wrong) if wrong else "- none"),
                "## Search cost per pass (median of 5 runs)",
                cost_table,
            ]
        )
        print(report)
        print(f"written: {write_report('pool_matches.md', report)}")


if __name__ == "__main__":
    main()
