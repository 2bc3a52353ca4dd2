"""Fair ingest: one tenant's backlog of thousands against another tenant's paced episodes,
through the HTTP API of `memworker up` (default settings, offline reflector, 1 worker).

Run:  python bench/fair_ingest.py                          # 3,000-episode backlog, 1 episode / 2 s
      python bench/fair_ingest.py --backlog 600 --alone 5  # quicker
      python bench/fair_ingest.py --api-url URL --data-dir DIR   # against a running stack

Two tenants, "backlog" and "paced", created with `memworker tenant create`. In one run:

1. paced alone: --alone episodes of the paced tenant, one every --every seconds, on an idle
   stack -> their episode-to-stored time (p50/p95);
2. backlog alone: the backlog tenant POSTs --backlog episodes in batch requests of --chunk
   (as fast as the API takes them) and they are waited until stored -> its episodes/s;
3. together: the same backlog again (the same texts, to other agents of the same tenant, so
   deduplication does the same work) while the paced tenant POSTs one episode every --every
   seconds from the moment the backlog starts until it has drained -> the paced tenant's
   episode-to-stored p50/p95 under the backlog (target: p95 <= --target-p95, 5 s), and the
   backlog tenant's episodes/s as a ratio to phase 2 (it must not collapse).

Episode-to-stored is stored_at - created_at from the episodes table (created_at: the accepting
transaction, just before the 202; stored_at: the transaction that stores it). Throughput is
stored episodes / (last stored_at - first created_at). Writes bench/results/fair_ingest.md."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
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
    stack_from_args,
    summary,
    write_report,
)

from memworker import Client  # noqa: E402

BACKLOG_AGENTS = 10


def bodies(n: int, seed: int) -> list[dict[str, Any]]:
    maker = TextMaker(seed)
    return [maker.episode_body(as_messages=maker.rng.random() < 0.5) for _ in range(n)]


def rows(conn: Any, ids: list[str]) -> list[dict[str, Any]]:
    return list(
        conn.execute(
            "SELECT id, status, created_at, stored_at FROM episodes WHERE id = ANY(%s::uuid[])", (ids,)
        ).fetchall()
    )


def not_done(conn: Any, ids: list[str]) -> int:
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE status NOT IN ('stored', 'dead')) AS n FROM episodes WHERE id = ANY(%s::uuid[])",
        (ids,),
    ).fetchone()
    return int(row["n"])


def latencies(conn: Any, ids: list[str]) -> list[float]:
    return [(r["stored_at"] - r["created_at"]).total_seconds() for r in rows(conn, ids) if r["status"] == "stored"]


def throughput(conn: Any, ids: list[str]) -> tuple[int, float, float]:
    """(stored, episodes/s, seconds from the first accept to the last store)."""
    rs = rows(conn, ids)
    stored = [r for r in rs if r["status"] == "stored"]
    if not stored:
        return 0, float("nan"), float("nan")
    span = (max(r["stored_at"] for r in stored) - min(r["created_at"] for r in rs)).total_seconds()
    return len(stored), len(stored) / max(span, 1e-9), span


def post_backlog(client: Client, work: list[dict[str, Any]], chunk: int, prefix: str) -> list[str]:
    """The backlog in batch requests of `chunk`, round-robin over BACKLOG_AGENTS agents."""
    ids: list[str] = []
    for n, start in enumerate(range(0, len(work), chunk)):
        agent = f"{prefix}-{n % BACKLOG_AGENTS:02d}"
        ids += [e["episode_id"] for e in client.add_episodes(agent, work[start : start + chunk])]
    return ids


def wait_done(conn: Any, ids: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not_done(conn, ids) and time.monotonic() < deadline:
        time.sleep(0.5)


class Pacer(threading.Thread):
    """Posts one episode every `every` seconds (its own client) until stopped or `count` posted."""

    def __init__(self, client: Client, work: list[dict[str, Any]], every: float, agent: str) -> None:
        super().__init__(daemon=True)
        self.client, self.work, self.every, self.agent = client, work, every, agent
        self.ids: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            for i, body in enumerate(self.work):
                if self.stop.wait(max(0.0, started + i * self.every - time.monotonic())):
                    return
                self.ids.append(self.client.add_episode(self.agent, **body)["episode_id"])
        except BaseException as exc:  # reported by the main thread
            self.error = exc


@dataclass
class Figures:
    paced_alone: dict[str, float]
    paced_together: dict[str, float]
    backlog_alone: tuple[int, float, float]
    backlog_together: tuple[int, float, float]
    load: list[tuple[str, str]]


def run(stack: Stack, args: argparse.Namespace) -> Figures:
    backlog_tenant, backlog_key = create_tenant(stack, f"bench-fair-backlog-{int(time.time())}")
    paced_tenant, paced_key = create_tenant(stack, f"bench-fair-paced-{int(time.time())}")
    backlog_conn, paced_conn = owner_connect(stack, backlog_tenant), owner_connect(stack, paced_tenant)
    backlog_work = bodies(args.backlog, args.seed)
    paced_work = bodies(args.alone + 10_000, args.seed + 1)
    load = [("start", loadavg())]
    with Client(stack.api_url, backlog_key, timeout=120) as big, Client(stack.api_url, paced_key, timeout=60) as small:
        # 1. the paced tenant alone
        pacer = Pacer(small, paced_work[: args.alone], args.every, "paced-alone")
        pacer.run()  # in this thread
        if pacer.error:
            raise pacer.error
        wait_done(paced_conn, pacer.ids, args.timeout)
        paced_alone = summary(latencies(paced_conn, pacer.ids))
        load.append(("after paced alone", loadavg()))
        print(f"paced alone: p50 {paced_alone['p50']:.2f}s p95 {paced_alone['p95']:.2f}s", flush=True)

        # 2. the backlog alone
        ids = post_backlog(big, backlog_work, args.chunk, "backlog-alone")
        wait_done(backlog_conn, ids, args.timeout)
        backlog_alone = throughput(backlog_conn, ids)
        load.append(("after backlog alone", loadavg()))
        print(f"backlog alone: {backlog_alone[0]} stored, {backlog_alone[1]:.1f} episodes/s", flush=True)

        # 3. together: the paced tenant posts from the start of the backlog until it has drained
        pacer = Pacer(small, paced_work[args.alone :], args.every, "paced-together")
        pacer.start()
        ids = post_backlog(big, backlog_work, args.chunk, "backlog-together")
        wait_done(backlog_conn, ids, args.timeout)
        pacer.stop.set()
        pacer.join()
        if pacer.error:
            raise pacer.error
        wait_done(paced_conn, pacer.ids, args.timeout)
        backlog_together = throughput(backlog_conn, ids)
        paced_together = summary(latencies(paced_conn, pacer.ids))
        load.append(("after together", loadavg()))
        print(
            f"together: paced p50 {paced_together['p50']:.2f}s p95 {paced_together['p95']:.2f}s "
            f"(n={paced_together['n']:.0f}); backlog {backlog_together[1]:.1f} episodes/s",
            flush=True,
        )
    backlog_conn.close()
    paced_conn.close()
    return Figures(paced_alone, paced_together, backlog_alone, backlog_together, load)


def report(args: argparse.Namespace, f: Figures, stack: Stack, load_before: str) -> str:
    ratio = f.backlog_together[1] / f.backlog_alone[1] if f.backlog_alone[1] else float("nan")
    meets = f.paced_together["p95"] <= args.target_p95
    lat = md_table(
        [f"paced tenant (1 episode every {args.every:g} s)", "episodes", "p50 (s)", "p95 (s)", "max (s)"],
        [
            [name, f"{s['n']:.0f}", fmt(s["p50"], 2), fmt(s["p95"], 2), fmt(s["max"], 2)]
            for name, s in (
                ("alone (idle stack)", f.paced_alone),
                (f"with a {args.backlog}-episode backlog of another tenant", f.paced_together),
            )
        ],
    )
    thr = md_table(
        ["backlog tenant", "stored", "episodes/s", "first accept -> last stored (s)"],
        [
            [name, t[0], fmt(t[1]), fmt(t[2])]
            for name, t in (("alone", f.backlog_alone), ("with the paced tenant", f.backlog_together))
        ],
    )
    return "\n".join(
        [
            "# Fair ingest",
            "",
            f"A tenant with a {args.backlog}-episode backlog (batch requests of {args.chunk}) and another "
            f"tenant posting one episode every {args.every:g} s, through the API of `memworker up` "
            f"({stack.workers} worker, default settings, offline reflector), seed {args.seed}.",
            "",
            lat,
            "",
            thr,
            "",
            f"- paced tenant's episode-to-stored p95 under the backlog: {fmt(f.paced_together['p95'], 2)} s "
            f"({'meets' if meets else 'misses'} the target <= {args.target_p95:g} s).",
            f"- backlog tenant's throughput with the paced tenant / alone: {ratio:.2f}.",
            "- episode-to-stored: stored_at - created_at (episodes table); throughput: stored / (last "
            "stored_at - first created_at).",
            "- load average (1/5/15 min) through the run: " + "; ".join(f"{k}: {v}" for k, v in f.load),
            "",
            "## Environment",
            "",
            environment_note(load_before, command_line(), stack),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backlog", type=int, default=3000, help="episodes of the backlog tenant")
    p.add_argument("--chunk", type=int, default=250, help="episodes per batch request of the backlog")
    p.add_argument("--every", type=float, default=2.0, help="seconds between the paced tenant's episodes")
    p.add_argument("--alone", type=int, default=20, help="paced episodes on the idle stack (phase 1)")
    p.add_argument("--target-p95", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for a phase to be stored")
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before = loadavg()
    with stack_from_args(args) as stack:
        figures = run(stack, args)
        text = report(args, figures, stack, load_before)
    print()
    print(text)
    print(f"\nwritten to {write_report('fair_ingest.md', text)}")
    return 0 if figures.paced_together["p95"] <= args.target_p95 else 1


if __name__ == "__main__":
    sys.exit(main())
