"""What /context packs for a question: LoCoMo dev conversations through a default `memworker up`.

One agent per conversation (dev only: conversations 1-5; default 2 and 3), sessions posted as
episodes as bench/episodes_recall.py posts them. Then for every category 1-4 question:

  recall   POST recall, k = the context's recall k (policy context_recall_k, 20): each hit's
           score relative to the best (score / top) and whether it covers an evidence dia_id;
           per relative floor F, the share of evidence hits at or above F (kept) and of the
           other hits below it (dropped): where the context's relevance floor goes;
  context  POST context (default budget): memories packed, sentences said twice in the
           memories section's lines (normalised, a turn's "Speaker (date): " head left out), the
           share of packed memories covering no evidence, tokens against the budget, and
           R@all (the share of the question's evidence dia_ids the packed memories cover).

Run:  python bench/context_packing.py [--conversations 2,3]
Writes $MEMWORKER_BENCH_RESULTS/context_packing.md (default bench/results/)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_stack_args, environment_note, loadavg, md_table, run_key, stack_from_args, write_report
from episodes_recall import DATA, Mapper, client_for, load, post_episodes, wait_stored

from memworker.domain import memories

FLOORS = (0.0, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
_HEAD = re.compile(r"^[^:()]{1,80} \([^)]*\): ")
_SENT = re.compile(r"(?<=[.!?])\s+")
_LINE = re.compile(r'^\[\d+\] \([^)]*\) (".*?")(?: previously: ".*")?$')


def sentences(text: str) -> list[str]:
    body = _HEAD.sub("", text, count=1)
    return [memories.normalise(s) for s in _SENT.split(body) if len(s.strip()) > 3]


def packed_lines(section: str) -> list[str]:
    """The memory texts as the context's memories section shows them (JSON strings)."""
    out = []
    for line in section.splitlines():
        start = line.find(') "')
        if start >= 0:
            out.append(json.JSONDecoder().raw_decode(line[start + 2 :])[0])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conversations", default="2,3", help="dev conversations (1-5), comma-separated")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--show", type=int, default=0, help="print up to N contexts that say a sentence twice")
    add_stack_args(p)
    args = p.parse_args()
    wanted = [int(x) for x in args.conversations.split(",")]
    if any(not 1 <= n <= 5 for n in wanted):
        raise SystemExit("dev conversations only: 1-5")
    from memworker.settings import Settings

    load_before = loadavg()
    convs = [c for c in load(DATA, max(wanted)) if c.index + 1 in wanted]
    max_bytes = Settings.from_env(os.environ).max_content_bytes
    rel: list[tuple[float, bool]] = []
    examples: list[list[str]] = []
    ctx: list[dict[str, Any]] = []
    with stack_from_args(args, raise_limits=True) as stack:
        key, tag = run_key(stack, "context")
        with client_for(stack, key) as client:
            mappers = {}
            for conv in convs:
                agent = f"ctx{tag}-{conv.sample_id}"
                mappers[agent] = Mapper(post_episodes(client, agent, conv, "episodes", max_bytes))
            total = sum(len(m.episodes) for m in mappers.values())
            wait_stored(client, list(mappers), total, args.timeout, "episodes stored")
            for conv in convs:
                agent = f"ctx{tag}-{conv.sample_id}"
                mapper = mappers[agent]
                for q in conv.questions:
                    ev = set(q.evidence)
                    hits = client.recall(agent, q.text, k=20)["memories"]
                    top = max((h["score"] for h in hits), default=0.0) or 1.0
                    rel += [(h["score"] / top, bool(mapper.covers(h) & ev)) for h in hits]
                    out = client.context(agent, q.text)
                    by_id = {h["id"]: h for h in hits}
                    packed = [by_id.get(str(i)) or client.get_memory(agent, str(i)) for i in out["memory_ids"]]
                    lines = packed_lines(out["sections"]["memories"])
                    said = [s for line in lines for s in set(sentences(line))]
                    twice = {s for s in said if said.count(s) > 1}
                    if twice and len(examples) < args.show:
                        examples.append([line for line in lines if twice & set(sentences(line))])
                    covered = set().union(*(mapper.covers(m) for m in packed)) if packed else set()
                    ctx.append(
                        {
                            "packed": len(packed),
                            "twice": len(said) - len(set(said)),
                            "off": sum(1 for m in packed if not (mapper.covers(m) & ev)),
                            "tokens": out["tokens"],
                            "max_tokens": out["max_tokens"],
                            "recall": len(covered & ev) / len(ev) if ev else 0.0,
                        }
                    )
    for e in examples:
        print("said twice:", *e, sep="\n  ")
    text = report(rel, ctx, wanted, load_before, stack)
    print(text)
    print(f"\nwritten to {write_report('context_packing.md', text)}")
    return 0


def report(rel: list[tuple[float, bool]], ctx: list[dict[str, Any]], wanted: list[int], load: str, stack: Any) -> str:
    ev = [r for r, e in rel if e]
    other = [r for r, e in rel if not e]
    rows = [
        [
            f"{f:.2f}",
            f"{sum(r >= f for r in ev) / max(1, len(ev)):.3f}",
            f"{sum(r < f for r in other) / max(1, len(other)):.3f}",
        ]
        for f in FLOORS
    ]
    n = max(1, len(ctx))

    def mean(key: str) -> float:
        return sum(float(c[key]) for c in ctx) / n

    over = sum(1 for c in ctx if c["tokens"] > c["max_tokens"])
    lines = [
        "# /context packing on LoCoMo dev conversations",
        "",
        f"conversations {','.join(map(str, wanted))}; {len(ctx)} questions (categories 1-4); "
        f"{len(ev)} evidence hits and {len(other)} others among recall's top 20",
        "",
        "## Relative score floor (recall k=20, score / top)",
        "",
        md_table(["floor", "evidence hits kept", "other hits dropped"], rows),
        "",
        "## What the context packed (default budget)",
        "",
        md_table(
            [
                "memories packed",
                "sentences said twice",
                "packed covering no evidence",
                "tokens",
                "over budget",
                "R@all",
            ],
            [
                [
                    f"{mean('packed'):.2f}",
                    f"{mean('twice'):.2f}",
                    f"{mean('off'):.2f}",
                    f"{mean('tokens'):.0f}",
                    str(over),
                    f"{mean('recall'):.3f}",
                ]
            ],
        ),
        "",
        environment_note(load, "python bench/context_packing.py " + " ".join(sys.argv[1:]), stack),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
