"""Poison episodes beside healthy traffic: another tenant's 202 -> stored latency with and
without poison flowing, measured in the same run on one stack (the fault harness: embedded
Postgres and Redis, the API, 2 workers of concurrency 1, beat; offline reflector).

    python bench/poison.py [--seconds 60] [--rate 2] [--poison-rates 0.5,2]

Phase "baseline": tenant alice posts normal episodes at --rate per second for --seconds.
Then one phase per poison rate: the same again, while tenant charlie posts huge episodes
(~30 KB, near the 32 KB limit) at that rate that always fail to store (a trigger raises on
their memories, as in tests/faults/test_faults.py), so every one is claimed, reflected and
embedded MEMWORKER_EPISODE_MAX_ATTEMPTS times, with backoff, before it goes dead.

Prints the figures and writes bench/results/poison.md; docs/faults.md states the bound they
are held to."""

from __future__ import annotations

import argparse
import random
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    command_line,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    write_report,
)
from tests.faults.harness import FaultStack, HistoryClient, episode_text

MAX_ATTEMPTS = 5
# docs/faults.md: with poison at up to a quarter of another tenant's rate, that tenant's p95
# rises by at most BOUND_S; a phase with more poison is reported, not judged.
BOUND_S, BOUND_POISON_SHARE = 3.0, 0.25
POISON_SQL = """
    CREATE OR REPLACE FUNCTION memworker.poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.text LIKE '%POISON%' THEN RAISE EXCEPTION 'poison pill'; END IF; RETURN NEW; END $$;
    CREATE TRIGGER poison BEFORE INSERT ON memworker.memories FOR EACH ROW EXECUTE FUNCTION memworker.poison();
"""


def poison_text(i: int, size: int = 30_000) -> str:
    """Every sentence says POISON, so whichever the reflector keeps makes the store fail."""
    rng = random.Random(i)
    out: list[str] = []
    n = 0
    while n < size:
        s = (
            f"POISON record {i}-{len(out)}: the {rng.choice(['billing', 'search', 'ledger', 'auth'])} batch "
            f"carried a malformed payload of {rng.randrange(10_000)} bytes from node {rng.randrange(40)}. "
        )
        out.append(s)
        n += len(s)
    return "".join(out)[:size]


def paced(
    client: HistoryClient, tenant: str, rate: float, seconds: float, prefix: str, text: Callable[[int], str] | None
) -> threading.Thread:
    """Post at a steady rate (by schedule, so a slow answer does not lower it) in a thread."""

    def run() -> None:
        rng = random.Random(prefix)
        start = time.monotonic()
        for i in range(int(rate * seconds)):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            content = text(i) if text else episode_text(rng, i)
            client.post(tenant, f"{prefix}-agent-{i % 5}", content, f"{prefix}-{i}")

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


TASK_LINE = re.compile(
    r"Task memworker\.ingest\[[^\]]+\] succeeded in ([\d.]+)s: \{'stored': (\d+), "
    r"'failed': (\d+), 'dead': (\d+)"
)


def log_sizes(stack: FaultStack) -> list[int]:
    return [(stack.dir / f"worker{i}.log").stat().st_size for i in range(len(stack.workers))]


def worker_time(stack: FaultStack, since: list[int]) -> tuple[float, float, float]:
    """Seconds the workers spent on ingest tasks that stored episodes and on tasks that only
    failed them (poison), since the given log offsets; and the longest poison task."""
    normal = poison = longest = 0.0
    for i, offset in enumerate(since):
        with open(stack.dir / f"worker{i}.log", "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        for took, stored, failed, dead in TASK_LINE.findall(text):
            if int(stored):
                normal += float(took)
            elif int(failed) + int(dead):
                poison += float(took)
                longest = max(longest, float(took))
    return normal, poison, longest


def latencies(stack: FaultStack, prefix: str) -> list[float]:
    """stored_at - created_at (the database's clock) of the phase's stored episodes."""
    rows = stack.query(
        "SELECT extract(epoch FROM stored_at - created_at)::float8 FROM memworker.episodes "
        "WHERE idempotency_key LIKE %s AND status = 'stored'",
        f"{prefix}-%",
    )
    return [r[0] for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    ap.add_argument("--rate", type=float, default=2.0, help="alice's normal episodes per second")
    ap.add_argument(
        "--poison-rates",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[0.5, 2.0],
        help="charlie's poison episodes per second, one phase each (comma-separated)",
    )
    args = ap.parse_args()
    load_before = loadavg()
    stack = FaultStack(lease_s=60, max_attempts=MAX_ATTEMPTS)  # offline reflector: huge costs real CPU
    try:
        stack.start_fleet()
        with psycopg.connect(stack.owner_url) as conn:
            conn.execute(POISON_SQL)
        client = HistoryClient(stack.api_url, stack.tenants, timeout_s=30)

        warm = paced(client, "alice", args.rate, 10, "warm", None)
        warm.join()
        stack.wait_drained([op.key for op in client.ops], timeout=300)

        print("baseline ...", flush=True)
        offsets, started = log_sizes(stack), time.monotonic()
        paced(client, "alice", args.rate, args.seconds, "base", None).join()
        stack.wait_drained([op.key for op in client.ops if op.key.startswith("base-")], timeout=600)
        busy = worker_time(stack, offsets)
        base_util = (busy[0] + busy[1]) / (2 * (time.monotonic() - started))

        base = latencies(stack, "base")
        rows = [
            [
                "baseline: alice alone",
                "-",
                len(base),
                fmt(percentile(base, 50), 2),
                fmt(percentile(base, 95), 2),
                fmt(max(base), 2),
                "-",
                "-",
                "-",
                f"{base_util:.0%} / 0%",
                "-",
                "-",
            ]
        ]
        verdicts = []
        for k, rate in enumerate(args.poison_rates):
            print(f"poison at {rate:g}/s ...", flush=True)
            offsets, started = log_sizes(stack), time.monotonic()
            normal = paced(client, "alice", args.rate, args.seconds, f"mix{k}", None)
            poison = paced(client, "charlie", rate, args.seconds, f"poison{k}", poison_text)
            normal.join()
            poison.join()
            stack.wait_drained([op.key for op in client.ops if op.key.startswith(f"mix{k}-")], timeout=600)
            stack.wait_drained([op.key for op in client.ops if op.key.startswith(f"poison{k}-")], timeout=1800)
            normal_s, poison_s, longest = worker_time(stack, offsets)
            span = 2 * (time.monotonic() - started)
            mix = latencies(stack, f"mix{k}")
            ((dead, stored, lo, hi, attempts),) = stack.query(
                "SELECT count(*) FILTER (WHERE status = 'dead'), count(*) FILTER (WHERE status = 'stored'), "
                "min(attempts), max(attempts), sum(attempts) FROM memworker.episodes WHERE idempotency_key LIKE %s",
                f"poison{k}-%",
            )
            to_dead = [
                r[0]
                for r in stack.query(
                    "SELECT extract(epoch FROM enqueued_at - created_at)::float8 FROM memworker.episodes "
                    "WHERE idempotency_key LIKE %s AND status = 'dead'",
                    f"poison{k}-%",
                )
            ]
            p95 = percentile(mix, 95)
            bound = percentile(base, 95) + BOUND_S
            in_scope = rate <= BOUND_POISON_SHARE * args.rate
            met = p95 <= bound and (lo, hi) == (MAX_ATTEMPTS, MAX_ATTEMPTS) and not stored
            if in_scope:
                verdicts.append(met)
            rows.append(
                [
                    f"alice while charlie's poison flows at {rate:g}/s",
                    f"{dead} / {stored}",
                    len(mix),
                    fmt(percentile(mix, 50), 2),
                    fmt(p95, 2),
                    fmt(max(mix), 2),
                    f"{lo} / {hi}",
                    attempts,
                    f"{fmt(percentile(to_dead, 50), 1)} / {fmt(max(to_dead), 1)}",
                    f"{normal_s / span:.0%} / {poison_s / span:.0%}",
                    fmt(longest, 1),
                    f"{fmt(bound, 2)}: {'met' if met else 'NOT MET'}"
                    if in_scope
                    else f"{fmt(bound, 2)}: out of its scope ({'met' if met else 'not met'})",
                ]
            )

        refused = [op for op in client.ops if op.state != "ok"]
        size = len(poison_text(0).encode())
        text = "\n".join(
            [
                "# Poison episodes beside another tenant's traffic",
                "",
                (
                    f"alice posts normal episodes at {args.rate:g}/s for {args.seconds:g} s per phase: first alone "
                    f"(baseline), then while charlie posts huge poison episodes ({size:,} bytes, every sentence fails "
                    f"to store) at each rate below; 2 workers of concurrency 1, offline reflector, max attempts "
                    f"{MAX_ATTEMPTS}. All phases in one run, on one stack."
                ),
                "",
                md_table(
                    [
                        "phase",
                        "poison dead / stored",
                        "alice episodes",
                        "alice 202->stored p50 (s)",
                        "p95 (s)",
                        "max (s)",
                        "attempts per poison (min / max)",
                        "poison attempts",
                        "poison 202->dead p50 / max (s)",
                        "worker time: normal / poison",
                        "longest poison task (s)",
                        f"bound on p95: baseline p95 + {BOUND_S:g} s",
                    ],
                    rows,
                ),
                "",
                "- 202->stored: stored_at - created_at of alice's episodes (the database's clock).",
                (
                    "- 202->dead: the time of the last failed attempt (enqueued_at) - created_at; the backoff between "
                    "attempts is 2, 4, 8, 16 s, so about 30 s at best."
                ),
                (
                    "- worker time: the seconds the 2 workers spent in ingest tasks that stored episodes / that only "
                    "failed them (poison), over the phase's wall time x 2 (from the workers' task logs)."
                ),
                f"- requests not answered 202 in the whole run: {len(refused)}.",
                (
                    f"- the bound (docs/faults.md), for poison up to {BOUND_POISON_SHARE:g} x the other tenant's rate: "
                    f"every poison episode dead after exactly {MAX_ATTEMPTS} attempts, and the other tenant's "
                    f"202->stored p95 at most {BOUND_S:g} s above its p95 without poison: "
                    + ("met." if verdicts and all(verdicts) else "NOT met (see the table).")
                ),
                "",
                "## Environment",
                "",
                environment_note(load_before, command_line()),
            ]
        )
        print(text)
        print(f"wrote {write_report('poison.md', text)}")
    finally:
        stack.close()


if __name__ == "__main__":
    main()
