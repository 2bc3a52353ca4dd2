"""What 60 days of the lifecycle leave of an agent, measured honestly: LoCoMo conversations
posted as episodes through the HTTP API of a default `memworker up`, each beside a frozen twin
(the same episodes, policy retention_enabled and consolidation_enabled false).

Questions (categories 1-4 with evidence) are split by index: the even ones are "asked" on days
0, 15, 30 and 45 of the live agent, as an agent in use would be asked (a recall bumps access
counts, which feed the ranking's priors and used to exempt a memory from forgetting); the odd
ones are "never asked" before the end. The twin is asked every question on day 0 (its figure is
the episodes path's day-0 recall) and again at the end; it holds still, so its answers are the
reference. Then, for day d = 1..days, the beat's two tasks are sent through the product's
publisher with window = start + d days (tasks.publish.Publisher.sweep "consolidation_sweep" and
"retention_tick"), and each day is waited for through the API (the agents' retention run of that
clock finished, none of their consolidation runs queued or running). On day `days` every
question is asked of both agents: R@10 of each half, live / twin, by category.

Also reported: live rows (GET memories) by tier and kind on days 0, 7, 30 and `days`; what the
sleep passes wrote (summaries, turns they carry, items merged into them, insights, conclusions)
and what retention removed, by rule.

Episodes, speakers, dates and the R@10 definition are those of bench/episodes_recall.py (reused
from there): a memory covers the LoCoMo dia_ids its provenance names (episode:<id>#m<i,j>).

Run:  python bench/lifecycle.py                     # all 10 conversations (target: under 40 min)
      python bench/lifecycle.py --conversations 2   # a quick run (the report says it is a subset)
Options: --days D (60), --timeout S, --day-timeout S, --data PATH, and the stack options of
bench/_common. Writes bench/results/lifecycle.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tasks/ (the publisher)

from _common import (  # noqa: E402
    Stack,
    add_stack_args,
    command_line,
    environment_note,
    loadavg,
    md_table,
    progress,
    run_key,
    stack_from_args,
    write_report,
)
from episodes_recall import (  # noqa: E402
    DATA,
    Answer,
    Conversation,
    K,
    Mapper,
    Store,
    load,
    mean,
    post_episodes,
    read_store,
    wait_stored,
)
from reflect_vs_raw import CATEGORIES  # noqa: E402

from memworker import Client  # noqa: E402
from memworker.lifecycle import retention  # noqa: E402

FINAL_RETENTION = {"done", "partial", "skipped", "failed", "duplicate"}
OPEN_RUNS = {"queued", "running"}
ASKED_DAYS = (0, 15, 30, 45)
SNAPSHOT_DAYS = (0, 7, 30)
SLEEP_COUNTS = ("summaries_written", "turns_distilled", "items_absorbed", "insights_written", "conclusions_written")


@dataclass
class Run:
    convs: list[Conversation]
    live: dict[str, str]  # sample_id -> agent
    twin: dict[str, str]
    mappers: dict[str, Mapper] = field(default_factory=dict)
    answers: dict[tuple[str, int, str], list[tuple[int, Answer]]] = field(default_factory=dict)  # (who, day, half)
    stores: dict[int, dict[str, Store]] = field(default_factory=dict)  # day -> sample -> live store
    twin_store: dict[str, Store] = field(default_factory=dict)
    retention: Counter[str] = field(default_factory=Counter)
    sleep: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    days: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def half_of(i: int) -> str:
    return "asked" if i % 2 == 0 else "never"


def ask(
    client: Client, agent: str, conv: Conversation, mapper: Mapper, halves: Sequence[str]
) -> list[tuple[int, Answer]]:
    out = []
    for i, q in enumerate(conv.questions):
        if half_of(i) not in halves:
            continue
        resp = client.recall(agent, q.text, k=K)
        hits = tuple(mapper.covers(m) for m in resp["memories"])
        out.append((i, Answer(conv.index, q.category, q.evidence, hits, float(resp["took_ms"]))))
    return out


def evaluate(client: Client, run: Run, who: str, day: int, halves: Sequence[str]) -> None:
    agents = run.live if who == "live" else run.twin
    for conv in progress(run.convs, desc=f"{who} recall day {day}", unit="conv"):
        agent = agents[conv.sample_id]
        for i, a in ask(client, agent, conv, run.mappers[agent], halves):
            run.answers.setdefault((who, day, half_of(i)), []).append((i, a))


def snapshot(client: Client, run: Run, day: int) -> None:
    run.stores[day] = {
        c.sample_id: read_store(client, run.live[c.sample_id], run.mappers[run.live[c.sample_id]]) for c in run.convs
    }


def write(stack: Stack, key: str, run: Run, args: argparse.Namespace, max_bytes: int) -> None:
    with Client(stack.api_url, key, timeout=600) as client:
        for conv in run.convs:
            client.set_policy(
                {"retention_enabled": False, "consolidation_enabled": False}, agent_id=run.twin[conv.sample_id]
            )
        started = time.perf_counter()
        n = 0
        for conv in progress(run.convs, desc="POST episodes", unit="conv"):
            for variant, agent in (("live", run.live[conv.sample_id]), ("twin", run.twin[conv.sample_id])):
                eps = post_episodes(client, agent, conv, variant, max_bytes)
                run.mappers[agent] = Mapper(eps)
                n += len(eps)
        wait = wait_stored(client, [*run.live.values(), *run.twin.values()], n, args.timeout, "episodes stored")
        if wait["timed_out"]:
            run.notes.append(f"not every episode was stored within --timeout: {wait['statuses']}")
        run.seconds["write"] = time.perf_counter() - started


def wait_day(client: Client, agents: Sequence[str], window: datetime, deadline: float, run: Run) -> bool:
    """Until every agent's retention run at this clock is final and no pass is open."""
    pending = set(agents)
    while pending and time.monotonic() < deadline:
        for agent in sorted(pending):
            mine = [
                r
                for r in client.retention_runs(agent, limit=5)
                if r.get("clock") and datetime.fromisoformat(r["clock"]) == window
            ]
            if mine and mine[0]["status"] in FINAL_RETENTION:
                pending.discard(agent)
                for k in retention.COUNTS:
                    run.retention[k] += int(mine[0].get(k) or 0)
        if pending:
            time.sleep(0.3)
    while time.monotonic() < deadline:
        if not any(r["status"] in OPEN_RUNS for a in agents for r in client.consolidation_runs(a, limit=20)):
            return not pending
        time.sleep(0.5)
    return False


def redis_url_of(stack: Stack) -> str | None:
    from memworker.settings import Settings

    return stack.info.get("redis_url") or Settings.from_env(os.environ).redis_url


def age(stack: Stack, key: str, run: Run, days: int, day_timeout: float) -> None:
    from memworker.settings import Settings
    from tasks.publish import Publisher

    redis_url = redis_url_of(stack)
    if not redis_url:
        raise SystemExit("the lifecycle needs the stack's Redis URL: give --data-dir or set MEMWORKER_REDIS_URL")
    agents = list(run.live.values())
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    publisher = Publisher.for_settings(Settings(redis_url=redis_url))
    started = time.perf_counter()
    late = 0
    try:
        with Client(stack.api_url, key, timeout=600) as client:
            for day in progress(range(1, days + 1), desc="simulated days", unit="day"):
                window = start + timedelta(days=day)
                publisher.sweep("consolidation_sweep", window.isoformat())
                publisher.sweep("retention_tick", window.isoformat())
                if not wait_day(client, agents, window, time.monotonic() + day_timeout, run):
                    run.notes.append(f"day {day}: not finished within --day-timeout {day_timeout:.0f} s")
                    late += 1
                    if late >= 2:
                        run.notes.append(f"**aging stopped after day {day}: two late days in a row**")
                        break
                else:
                    late = 0
                run.days = day
                if day in SNAPSHOT_DAYS:
                    snapshot(client, run, day)
                if day in ASKED_DAYS and day < days:
                    evaluate(client, run, "live", day, ["asked"])
    finally:
        publisher.close()
    run.seconds["aging"] = time.perf_counter() - started


def sleep_totals(client: Client, run: Run) -> None:
    for agent in run.live.values():
        for r in client.consolidation_runs(agent, limit=200):
            rep = r.get("report") or r
            run.sleep[f"passes {r['status']}"] += 1
            for k in SLEEP_COUNTS:
                run.sleep[k] += int(rep.get(k) or r.get(k) or 0)


# --- the report -----------------------------------------------------------------------------------


def r10(run: Run, who: str, day: int, half: str, category: int | None = None) -> tuple[float, int]:
    got = [a for _, a in run.answers.get((who, day, half), []) if category in (None, a.category)]
    return mean([a.recall_at(K) for a in got]), len(got)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b == b and b > 0 else "n/a"


def recall_rows(run: Run) -> list[list[Any]]:
    rows = []
    end = run.days
    for half, label in (("asked", "asked on days 0/15/30/45"), ("never", "never asked before the end")):
        for cat in (None, *CATEGORIES):
            live, n = r10(run, "live", end, half, cat)
            twin, _ = r10(run, "twin", end, half, cat)
            name = "all" if cat is None else f"{cat} {CATEGORIES[cat]}"
            spread = [
                mean([a.turns(K) for _, a in run.answers.get((who, end, half), []) if cat in (None, a.category)])
                for who in ("twin", "live")
            ]
            live5 = mean(
                [a.recall_at(5) for _, a in run.answers.get(("live", end, half), []) if cat in (None, a.category)]
            )
            rows.append(
                [
                    label if cat is None else "",
                    name,
                    n,
                    f"{twin:.3f}",
                    f"{live:.3f}",
                    ratio(live, twin),
                    f"{spread[0]:.1f} / {spread[1]:.1f}",
                    f"{live5:.3f} ({ratio(live5, twin)})",
                ]
            )
    return rows


def store_rows(run: Run) -> list[list[Any]]:
    out = []
    base = sum(s.rows for s in run.stores.get(0, {}).values())
    for day in sorted(run.stores):
        stores = run.stores[day].values()
        rows = sum(s.rows for s in stores)
        tiers: Counter[str] = sum((s.tiers for s in stores), Counter())
        kinds: Counter[str] = sum((s.kinds for s in stores), Counter())
        covered = sum(len(s.covered) for s in stores)
        out.append(
            [
                day,
                f"{rows:,}",
                ratio(rows, base),
                ", ".join(f"{k} {v}" for k, v in sorted(tiers.items())),
                ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
                f"{covered:,}",
            ]
        )
    return out


def report(run: Run, args: argparse.Namespace, total: int, load_before: str, stack: Stack) -> str:
    n_turns = sum(len(c.turns) for c in run.convs)
    subset = f" (a subset: the first {len(run.convs)} of {total})" if len(run.convs) < total else ""
    day0 = run.answers.get(("twin", 0, "asked"), []) + run.answers.get(("twin", 0, "never"), [])
    twin0 = mean([a.recall_at(K) for _, a in day0])
    base = sum(s.rows for s in run.stores.get(0, {}).values())
    last = sum(s.rows for s in run.stores.get(run.days, {}).values())
    never = r10(run, "live", run.days, "never")[0] / r10(run, "twin", run.days, "never")[0]
    asked = r10(run, "live", run.days, "asked")[0] / r10(run, "twin", run.days, "asked")[0]
    lines = [
        "# The lifecycle on LoCoMo: 60 simulated days beside a frozen twin",
        "",
        f"{len(run.convs)} conversations{subset}, {n_turns:,} turns, "
        f"{sum(len(c.questions) for c in run.convs):,} questions; default policy and settings, offline reflector; "
        f"recall k={K}; {run.days} simulated days.",
        "",
        md_table(
            ["target", "measured", "goal"],
            [
                [f"live rows day {run.days} / day 0", f"{ratio(last, base)} ({last:,} / {base:,})", "<= 0.5"],
                ["never-asked R@10, live / twin", f"{never:.3f}", ">= 0.9"],
                ["asked R@10, live / twin", f"{asked:.3f}", ">= 0.95"],
                ["day-0 R@10 (twin, every question)", f"{twin0:.3f}", ">= .693 (all 10 conversations)"],
            ],
        ),
        "",
        f"## R@10 on day {run.days}",
        "",
        md_table(
            [
                "half",
                "category",
                "n",
                "twin",
                "live",
                "live / twin",
                "messages in top 10 (twin / live)",
                "live R@5 (/ twin R@10)",
            ],
            recall_rows(run),
        ),
        "",
        "- R@10: the share of a question's evidence messages named by the provenance of the 10 memories returned. A "
        "sleep summary names every message it carries (about two on LoCoMo), a turn one: part of the live agent's "
        "gain is that its top 10 covers more messages, not that it ranks better. The last column compares at "
        "about the same number of messages: the live agent's top 5 against the twin's top 10.",
        "",
        "## Live rows by tier and kind",
        "",
        md_table(["day", "rows", "/ day 0", "tiers", "kinds", "dia_ids covered"], store_rows(run)),
        "",
        "## What sleep wrote and retention removed (live agents, all days)",
        "",
        md_table(["count", "value"], [[k, f"{v:,}"] for k, v in sorted(run.sleep.items())]),
        "",
        md_table(["retention", "total"], [[k, f"{run.retention[k]:,}"] for k in retention.COUNTS if k != "scanned"]),
        "",
        f"- wall time: write {run.seconds.get('write', 0):.0f} s, aging {run.seconds.get('aging', 0):.0f} s, "
        f"total {run.seconds.get('total', 0):.0f} s.",
        *[f"- {n}" for n in run.notes],
        "- LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0 (/work/shared/benchdata/locomo/SOURCE.md).",
        "",
        "## Environment",
        "",
        environment_note(load_before, command_line(), stack),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations (a quick run)")
    p.add_argument("--days", type=int, default=60)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the episodes to be stored")
    p.add_argument("--day-timeout", type=float, default=600.0)
    p.add_argument("--data", type=Path, default=DATA)
    add_stack_args(p)
    args = p.parse_args(argv)
    from memworker.settings import Settings

    started = time.perf_counter()
    load_before = loadavg()
    total = len(json.loads(args.data.read_text()))
    convs = load(args.data, args.conversations)
    max_bytes = Settings.from_env(os.environ).max_content_bytes
    with stack_from_args(args, raise_limits=True) as stack:
        key, tag = run_key(stack, "lifecycle")
        prefix = "" if stack.process is not None else f"{tag}-"
        run = Run(
            convs,
            {c.sample_id: f"{prefix}live-{c.sample_id}" for c in convs},
            {c.sample_id: f"{prefix}twin-{c.sample_id}" for c in convs},
        )
        write(stack, key, run, args, max_bytes)
        with Client(stack.api_url, key, timeout=600) as client:
            early = Counter(r["status"] for a in run.live.values() for r in client.consolidation_runs(a, limit=200))
            run.notes.append(
                f"consolidation runs before the day-0 snapshot (the stack's beat): {dict(early) or 'none'}"
            )
            snapshot(client, run, 0)
            evaluate(client, run, "twin", 0, ["asked", "never"])
            evaluate(client, run, "live", 0, ["asked"])
        age(stack, key, run, args.days, args.day_timeout)
        with Client(stack.api_url, key, timeout=600) as client:
            snapshot(client, run, run.days)
            evaluate(client, run, "live", run.days, ["asked", "never"])
            evaluate(client, run, "twin", run.days, ["asked", "never"])
            sleep_totals(client, run)
        run.seconds["total"] = time.perf_counter() - started
        text = report(run, args, total, load_before, stack)
    print(text)
    print(f"\nwritten to {write_report('lifecycle.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
