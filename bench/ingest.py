"""Ingest throughput: episodes/s end to end through the API and the workers, next to the
embedder's own batched throughput measured in the same run.

Run:  python bench/ingest.py                     # 2,000 episodes, 20 agents, 1 worker, offline reflector
      python bench/ingest.py --episodes 500 --single 100 --paced 20     # quicker
      python bench/ingest.py --api-url URL --data-dir DIR               # against a running stack

Without --api-url it starts `memworker up --workers N` on a temporary data dir and free
ports and stops it at the end. It creates a fresh tenant (`memworker tenant create`),
generates realistic multi-sentence agent episodes deterministically (--seed; about half
given as user/assistant messages, about one sentence in five chit-chat), then:

1. bare embedder: the offline reflector (in this process) turns every episode into the
   items a worker would embed; memworker.models.embeddings.for_settings(Settings()).embed, the
   worker's embedder (the same model, backend, batch size and thread count), runs on those
   texts in batches of 64 while the stack is idle -> texts/s, and with the items per episode, the episodes/s
   ceiling of one worker's embedder;
2. batch path: --episodes minus --single episodes, POSTed to /episodes/batch in chunks of
   --chunk per agent (50), as fast as the API takes them, then waited until stored;
3. single path: --single episodes POSTed one by one to /episodes, then waited;
4. paced: --paced single episodes at --paced-rate per second (an unloaded system), for
   the latency of a lone episode;
5. the bare embedder again (the ceiling uses the better of the two runs);
6. overflow check: one batch request of --overflow episodes (more than the batch max) to
   an idle stack, counting what is stored and what is still queued up to a minute later.

Throughput is episodes / (last stored_at - first created_at), and latency is stored_at -
created_at per episode, both read from the episodes table through the owner URL in
stack.json (created_at is the accepting transaction's start, i.e. just before the 202;
stored_at is the start of the transaction that stores it). It prints a markdown table and
writes bench/results/ingest.md."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stack,
    TextMaker,
    add_stack_args,
    command_line,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    owner_connect,
    progress,
    stack_from_args,
    summary,
    write_report,
)

from memworker import Client  # noqa: E402

EMBED_BATCH = 64
TARGET_SHARE = 0.60
LATE_S = 60.0


# --- workload -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Work:
    agent: str
    body: dict[str, Any]


def make_workload(n: int, agents: int, seed: int, prefix: str) -> list[Work]:
    """n episodes spread round-robin over the agents; about half as message lists."""
    maker = TextMaker(seed)
    return [
        Work(f"{prefix}-{i % agents:03d}", maker.episode_body(as_messages=maker.rng.random() < 0.5)) for i in range(n)
    ]


# --- the bare embedder -----------------------------------------------------------------------


@dataclass
class EmbedderFigures:
    runs: list[float]  # texts/s, measured before and after the ingest phases
    items_per_episode: float
    sample: int

    @property
    def texts_per_s(self) -> float:
        """The best of the runs: the ceiling the worker is compared with (conservative)."""
        return max(self.runs)

    @property
    def episodes_per_s(self) -> float:
        return self.texts_per_s / self.items_per_episode if self.items_per_episode else float("nan")


def reflected_texts(work: list[Work]) -> list[list[str]]:
    """What the offline reflector makes of each episode: the texts a worker embeds."""
    from memworker.ingest.intake import render
    from memworker.reflection import Episode, OfflineReflector

    reflector = OfflineReflector()
    out = []
    for w in work:
        msgs = w.body.get("messages")
        episode = Episode(render(msgs), msgs) if msgs else Episode(w.body["content"])
        out.append([item.text for item in reflector.reflect(episode).items])
    return out


def measure_embedder(items: list[list[str]], sample: int, figures: EmbedderFigures | None = None) -> EmbedderFigures:
    """Texts/s of the bare embedder on the reflected texts, batches of 64 (added to figures)."""
    from memworker.models.embeddings import for_settings
    from memworker.settings import Settings

    # the worker's model, backend, batch size and thread count: the ceiling one worker can reach
    embedder = for_settings(Settings())
    texts = [t for per in items for t in per][:sample]
    embedder.embed(texts[:EMBED_BATCH])  # warm-up
    started = time.perf_counter()
    for i in progress(range(0, len(texts), EMBED_BATCH), desc="bare embedder", unit="batch"):
        embedder.embed(texts[i : i + EMBED_BATCH])
    rate = len(texts) / (time.perf_counter() - started)
    if figures is not None:
        figures.runs.append(rate)
        return figures
    return EmbedderFigures([rate], sum(len(per) for per in items) / len(items), len(texts))


# --- posting ----------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    episode_ids: list[str] = field(default_factory=list)
    request_s: list[float] = field(default_factory=list)  # client-side time per POST
    post_wall_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    waited_s: float = 0.0


def post_batches(client: Client, work: list[Work], chunk: int) -> Phase:
    phase = Phase(f"batch (chunks of {chunk})")
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for w in work:
        by_agent.setdefault(w.agent, []).append(w.body)
    requests = []
    for start in range(0, max(len(v) for v in by_agent.values()), chunk):
        requests += [
            (agent, bodies[start : start + chunk])
            for agent, bodies in by_agent.items()
            if bodies[start : start + chunk]
        ]
    started = time.perf_counter()
    for agent, bodies in progress(requests, desc="POST batch", unit="req"):
        t = time.perf_counter()
        phase.episode_ids += [e["episode_id"] for e in client.add_episodes(agent, bodies)]
        phase.request_s.append(time.perf_counter() - t)
    phase.post_wall_s = time.perf_counter() - started
    return phase


def post_singles(client: Client, work: list[Work], name: str, rate: float | None = None) -> Phase:
    """One POST per episode, back to back, or at `rate` per second."""
    phase = Phase(name)
    started = time.perf_counter()
    for i, w in enumerate(progress(work, desc=f"POST {name}", unit="ep")):
        if rate:
            time.sleep(max(0.0, started + i / rate - time.perf_counter()))
        t = time.perf_counter()
        phase.episode_ids.append(client.add_episode(w.agent, **w.body)["episode_id"])
        phase.request_s.append(time.perf_counter() - t)
    phase.post_wall_s = time.perf_counter() - started
    return phase


# --- waiting and reading the record --------------------------------------------------------------


def wait_stored(conn: Any, phase: Phase, timeout: float) -> None:
    """Poll the episodes table until every episode of the phase is stored or dead (or timeout)."""
    started = time.perf_counter()
    total = len(phase.episode_ids)
    bar = progress(total=total, desc=f"stored ({phase.name})", unit="ep")
    done = 0
    while time.perf_counter() - started < timeout:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status IN ('stored', 'dead')) AS done "
            "FROM episodes WHERE id = ANY(%s::uuid[])",
            (phase.episode_ids,),
        ).fetchone()
        bar.update(row["done"] - done)
        done = row["done"]
        if done >= total:
            break
        time.sleep(0.5)
    bar.close()
    phase.waited_s = time.perf_counter() - started
    phase.rows = conn.execute(
        "SELECT id, status, attempts, created_at, enqueued_at, stored_at, cardinality(memory_ids) AS n_memories "
        "FROM episodes WHERE id = ANY(%s::uuid[])",
        (phase.episode_ids,),
    ).fetchall()


@dataclass
class PhaseFigures:
    name: str
    episodes: int
    stored: int
    not_stored: int
    episodes_per_s: float
    latency: dict[str, float]
    request_ms: dict[str, float]
    accept_per_s: float
    memories_per_episode: float
    max_attempts: int
    resent: int  # re-sent by the reconciler (enqueued_at moved past created_at)
    late: int  # stored more than LATE_S after acceptance


def figures(phase: Phase) -> PhaseFigures:
    stored = [r for r in phase.rows if r["status"] == "stored"]
    lat = [(r["stored_at"] - r["created_at"]).total_seconds() for r in stored]
    rate = float("nan")
    if stored:
        first = min(r["created_at"] for r in phase.rows)
        last = max(r["stored_at"] for r in stored)
        rate = len(stored) / max((last - first).total_seconds(), 1e-9)
    resent = sum(
        1 for r in phase.rows if r["enqueued_at"] and (r["enqueued_at"] - r["created_at"]).total_seconds() > 1.0
    )
    return PhaseFigures(
        phase.name,
        len(phase.episode_ids),
        len(stored),
        len(phase.episode_ids) - len(stored),
        rate,
        summary(lat),
        summary([s * 1000 for s in phase.request_s]),
        len(phase.episode_ids) / phase.post_wall_s if phase.post_wall_s else float("nan"),
        sum(r["n_memories"] for r in stored) / len(stored) if stored else float("nan"),
        max((r["attempts"] for r in phase.rows), default=0),
        resent,
        sum(1 for x in lat if x > LATE_S),
    )


def worker_task_stats(stack: Stack, batch_max: int) -> str:
    """How the worker batched: ingest tasks that stored something, episodes per such task,
    and tasks that found nothing left to claim (from the workers' logs, when we have them)."""
    if stack.data_dir is None or not (stack.data_dir / "logs").exists():
        return "worker logs not available (external stack)"
    sizes: list[int] = []
    empty = 0
    for log in sorted((stack.data_dir / "logs").glob("worker*.log")):
        for m in re.finditer(
            r"ingest tenant=\S+ stored=(\d+) failed=(\d+) dead=(\d+) skipped=(\d+)", log.read_text(errors="replace")
        ):
            if int(m.group(1)):
                sizes.append(int(m.group(1)))
            else:
                empty += 1
    if not sizes:
        return "no ingest task lines found in the worker logs"
    return (
        f"{len(sizes)} ingest tasks stored episodes, {sum(sizes) / len(sizes):.1f} per task on average, "
        f"max {max(sizes)} (claims of at most MEMWORKER_INGEST_BATCH_MAX = {batch_max} at a time); "
        f"{empty} tasks found nothing left to claim (an earlier task's batch had taken their episodes)"
    )


@dataclass
class OverflowCheck:
    """One batch request larger than MEMWORKER_INGEST_BATCH_MAX on an idle system."""

    size: int
    stored: int
    queued: int
    waited_s: float


def overflow_check(client: Client, conn: Any, work: list[Work], wait_s: float) -> OverflowCheck:
    """POST the episodes as one batch to one agent and count what is stored after wait_s.

    The API publishes one task naming every id and a worker claims at most ingest_batch_max
    at a time; the task must come back for the rest (before commit c3e1366 it did not, and
    the rest waited MEMWORKER_EPISODE_LEASE_S for the reconciler, which again claimed 32)."""
    agent = "ingest-overflow"
    ids = [e["episode_id"] for e in client.add_episodes(agent, [w.body for w in work])]
    started = time.perf_counter()
    while True:
        time.sleep(1.0)
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'stored') AS stored, "
            "count(*) FILTER (WHERE status = 'queued') AS queued FROM episodes "
            "WHERE id = ANY(%s::uuid[])",
            (ids,),
        ).fetchone()
        if row["stored"] == len(ids) or time.perf_counter() - started > wait_s:
            return OverflowCheck(len(ids), row["stored"], row["queued"], time.perf_counter() - started)


# --- report ------------------------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    emb: EmbedderFigures,
    phases: list[PhaseFigures],
    stack: Stack,
    load_before: str,
    tasks_note: str,
    overflow: OverflowCheck | None,
    batch_max: int,
) -> str:
    ceiling = emb.episodes_per_s
    main = phases[0]
    share = main.episodes_per_s / ceiling if ceiling else float("nan")
    head = md_table(
        ["measure", "value"],
        [
            ["bare embedder, batch 64 (texts/s): before / after the phases", " / ".join(fmt(r) for r in emb.runs)],
            ["items embedded per episode (offline reflector)", fmt(emb.items_per_episode, 2)],
            ["embedder ceiling (episodes/s) = best texts/s / items per episode", fmt(ceiling)],
            [f"end to end, {main.name}, {stack.workers} worker(s) (episodes/s)", fmt(main.episodes_per_s)],
            [
                "share of the embedder ceiling (target >= 60%)",
                f"{share:.0%} ({'meets' if share >= TARGET_SHARE else 'misses'} the target)",
            ],
        ],
    )
    rows = []
    for p in phases:
        lat = p.latency
        rows.append(
            [
                p.name,
                p.episodes,
                p.stored,
                fmt(p.episodes_per_s),
                f"{p.episodes_per_s / ceiling:.0%}" if ceiling else "n/a",
                fmt(lat["p50"], 2),
                fmt(lat["p95"], 2),
                fmt(lat["max"], 2),
                fmt(p.request_ms["p50"]),
                fmt(p.accept_per_s),
                fmt(p.memories_per_episode, 2),
                p.resent,
                p.late,
            ]
        )
    table = md_table(
        [
            "path",
            "episodes",
            "stored",
            "episodes/s",
            "of ceiling",
            "202->stored p50 (s)",
            "p95 (s)",
            "max (s)",
            "POST p50 (ms)",
            "accepted/s",
            "memories/episode",
            "re-sent by reconciler",
            f"stored > {LATE_S:.0f}s late",
        ],
        rows,
    )
    lines = [
        "# Ingest throughput",
        "",
        f"{args.episodes + args.paced} episodes over {args.agents} agents, offline reflector, "
        f"{stack.workers} worker (concurrency 1), seed {args.seed}.",
        "",
        head,
        "",
        table,
        "",
        "- episodes/s: stored episodes / (last stored_at - first created_at) of the phase.",
        "- re-sent by reconciler: enqueued_at moved past created_at, i.e. the reconciler published the",
        "  episode again because it had been queued longer than MEMWORKER_EPISODE_LEASE_S.",
        "- 202->stored: stored_at - created_at from the episodes table. The batch and single phases post",
        "  faster than one worker drains, so their latency is mostly queueing; the paced phase shows a",
        "  lone episode on an otherwise idle stack.",
        f"- bare embedder: {emb.sample} reflected texts in batches of {EMBED_BATCH} in the benchmark process "
        "while the stack was idle (same model, same thread count as a worker); the ceiling uses the better run.",
        f"- worker batching: {tasks_note}.",
    ]
    if overflow is not None:
        lines.append(
            f"- batch larger than MEMWORKER_INGEST_BATCH_MAX ({batch_max}): one request of {overflow.size} episodes "
            f"to an idle stack had {overflow.stored} stored and {overflow.queued} still queued after "
            f"{overflow.waited_s:.0f}s. {'Still queued: the surplus waits for the reconciler (MEMWORKER_EPISODE_LEASE_S).' if overflow.queued else 'All stored: the task came back for the surplus.'}"
        )
    bad = [p for p in phases if p.not_stored]
    if bad:
        lines.append("- NOT STORED within the timeout: " + ", ".join(f"{p.name}: {p.not_stored}" for p in bad))
    lines += ["", "## Environment", "", environment_note(load_before, command_line(), stack)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import os

    from memworker.settings import Settings

    batch_max = Settings.from_env(os.environ).ingest_batch_max
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=2000, help="episodes for the batch + single paths")
    p.add_argument("--single", type=int, default=200, help="of those, how many go through the single endpoint")
    p.add_argument("--paced", type=int, default=30, help="extra single episodes posted at --paced-rate (0: skip)")
    p.add_argument("--paced-rate", type=float, default=1.0, help="episodes per second in the paced phase")
    p.add_argument("--agents", type=int, default=20)
    p.add_argument("--chunk", type=int, default=50, help="episodes per batch request")
    p.add_argument(
        "--overflow",
        type=int,
        default=100,
        help="size of one extra batch request checking what happens above the batch max (0: skip)",
    )
    p.add_argument("--overflow-wait", type=float, default=120.0, help="seconds the overflow check waits at most")
    p.add_argument("--workers", type=int, default=1, help="worker processes of the stack we start")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--embed-sample", type=int, default=1024, help="texts for the bare embedder measure")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a phase to be stored")
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before = loadavg()

    work = make_workload(args.episodes + args.paced + args.overflow, args.agents, args.seed, "ingest")
    batch_work = work[: args.episodes - args.single]
    single_work = work[args.episodes - args.single : args.episodes]
    paced_work = work[args.episodes : args.episodes + args.paced]
    overflow_work = work[args.episodes + args.paced :]
    items = reflected_texts(work[: args.episodes + args.paced])

    with stack_from_args(args, workers=args.workers, raise_limits=True) as stack:
        tenant_id, key = create_tenant(stack, f"bench-ingest-{int(time.time())}")
        emb = measure_embedder(items, args.embed_sample)
        print(f"bare embedder: {emb.runs[0]:.1f} texts/s, {emb.items_per_episode:.2f} items/episode", flush=True)
        conn = owner_connect(stack, tenant_id)
        phases: list[PhaseFigures] = []
        overflow = None
        with Client(stack.api_url, key, timeout=120) as client:
            runs: list[Callable[[], Phase]] = [
                lambda: post_batches(client, batch_work, args.chunk),
                lambda: post_singles(client, single_work, "single"),
                lambda: post_singles(client, paced_work, f"paced single ({args.paced_rate:g}/s)", args.paced_rate),
            ]
            for sizes, run in zip((batch_work, single_work, paced_work), runs, strict=True):
                if not sizes:
                    continue
                phase = run()
                wait_stored(conn, phase, args.timeout)
                phases.append(figures(phase))
                f = phases[-1]
                print(
                    f"{f.name}: {f.stored}/{f.episodes} stored, {f.episodes_per_s:.1f} episodes/s, "
                    f"latency p50 {f.latency['p50']:.2f}s p95 {f.latency['p95']:.2f}s",
                    flush=True,
                )
            measure_embedder(items, args.embed_sample, emb)
            print(f"bare embedder again: {emb.runs[-1]:.1f} texts/s", flush=True)
            if overflow_work:
                overflow = overflow_check(client, conn, overflow_work, args.overflow_wait)
                print(
                    f"overflow check: {overflow.stored}/{overflow.size} stored, {overflow.queued} queued "
                    f"after {overflow.waited_s:.0f}s",
                    flush=True,
                )
        conn.close()
        text = report(args, emb, phases, stack, load_before, worker_task_stats(stack, batch_max), overflow, batch_max)
    print()
    print(text)
    print(f"\nwritten to {write_report('ingest.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
