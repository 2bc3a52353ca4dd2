"""The retention sweep of one growing agent: how long the sweep takes at 1,000, 10,000 and
50,000 memories, on natural text and on repetitive small-vocabulary text, and which phases
take the time.

Run:  python bench/sweep_scale.py                         # sizes 1000,10000,50000
      python bench/sweep_scale.py --sizes 1000,10000 --writes 500

It starts `memworker up` (1 worker) on a temporary data dir, with the two agents of
bench/write_scale.py (natural LoCoMo turns; sentences over a vocabulary of 40 words). Each agent
is filled up to the next size by binary COPY as write_scale.py does, and the filled rows are
left as an agent swept every hour leaves them: checked by the last sweep (retention_done_at
after their last change) and decayed within the last day. Then --writes memories go in by
POST .../memories/batch (500 a time), and the agent is swept twice in this process
(memworker.lifecycle.retention.sweep_agent): the sweep after the writes (it checks them for
merges and contradictions) and the next one, with nothing new (an idle hourly tick).
With --unchecked the filled rows are left as a bulk import leaves them, never checked (the agent's
mark cleared): the sweeps then show one run's bounded share of that pass (retention.REPAIR_PER_RUN).
Writes bench/results/sweep_scale.md.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

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
from write_scale import STYLES, Texts, build_index, direct_rate, drop_index, prefill  # noqa: E402

from memworker import Client  # noqa: E402
from memworker.lifecycle import retention  # noqa: E402
from memworker.recall import hybrid as recall  # noqa: E402
from memworker.storage import db  # noqa: E402


def sweep(stack: Any, tenant_id: str, agent: str) -> tuple[float, retention.Report]:
    pool = db.open_pool(stack.info["database_url"], min_size=1, max_size=2, name="bench-sweep-scale")
    try:
        started = time.perf_counter()
        report = retention.sweep_agent(pool, tenant_id=uuid.UUID(tenant_id), agent_id=agent, trigger="bench")
        return time.perf_counter() - started, report
    finally:
        pool.close()


def phases(report: retention.Report) -> str:
    slow = sorted(report.phase_ms.items(), key=lambda kv: -kv[1])[:3]
    return f"{report.status}; " + ", ".join(f"{k} {v / 1000:.1f} s" for k, v in slow)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,50000")
    p.add_argument("--writes", type=int, default=500, help="memories written through the API per size")
    p.add_argument("--styles", default=",".join(STYLES))
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--unchecked", action="store_true", help="leave the filled rows unchecked (a bulk import)")
    p.add_argument("--no-write", action="store_true")
    add_stack_args(p)
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    styles = [s for s in args.styles.split(",") if s]
    load_before = loadavg()
    rows: list[list[str]] = []
    with stack_from_args(args, raise_limits=True) as stack:
        tenant_id, key = create_tenant(stack, f"sweep-scale-{random.randrange(10**6)}")
        texts = {s: Texts(s, args.seed + i) for i, s in enumerate(STYLES)}
        agents = {s: f"{s}-agent" for s in styles}
        with Client(stack.api_url, key, timeout=600) as client:
            for s in styles:
                client.add_memory(agents[s], texts[s].next())  # creates the agent
            have = dict.fromkeys(styles, 1)
            for size in sizes:
                indexdef = drop_index(stack)
                for s in styles:
                    prefill(stack, tenant_id, agents[s], texts[s], max(0, size - have[s]), size > recall.EXACT_MAX,
                            args.seed)  # fmt: skip
                    have[s] = max(have[s], size)
                build_index(stack, indexdef)
                for s in styles:
                    if args.unchecked:
                        with owner_connect(stack, tenant_id) as conn:
                            conn.execute(
                                "UPDATE agents SET retention_done_at = NULL WHERE tenant_id = %s AND id = %s",
                                (uuid.UUID(tenant_id), agents[s]),
                            )
                    rate = direct_rate(client, agents[s], texts[s], args.writes)
                    have[s] += args.writes
                    after_s, after = sweep(stack, tenant_id, agents[s])
                    idle_s, idle = sweep(stack, tenant_id, agents[s])
                    print(s, size, after_s, after.phase_ms, idle_s, idle.phase_ms, flush=True)
                    rows.append(
                        [
                            s,
                            f"{size:,}",
                            fmt(rate, 1),
                            f"{fmt(after_s, 2)} ({phases(after)})",
                            f"{after.merged} / {after.superseded} / {after.reviews} / {after.decayed}",
                            f"{fmt(idle_s, 2)} ({phases(idle)})",
                        ]
                    )
        table = md_table(
            [
                "text",
                "memories in the agent",
                "direct writes/s",
                "sweep after the writes, s (slowest phases)",
                "merged / superseded / reviews / decayed",
                "next sweep, nothing new, s",
            ],
            rows,
        )
        text = "\n".join(
            [
                "# The retention sweep of one growing agent",
                "",
                environment_note(load_before, command_line(), stack),
                "",
                table,
                "",
                f"- per size: the agent filled by COPY as an hourly-swept agent is (checked, decayed within the "
                f"day), then {args.writes} memories by POST .../memories/batch, then two sweeps."
                + (
                    " With --unchecked: the filled rows never checked (as after a bulk import)."
                    if args.unchecked
                    else ""
                ),
                f"- one run checks at most {retention.REPAIR_PER_RUN:,} fresh memories for merges and contradictions;"
                " an unfinished pass goes on in the next run.",
                "",
            ]
        )
        print(text)
        if not args.no_write:
            write_report("sweep_scale.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
