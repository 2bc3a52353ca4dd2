"""Soak: 5,000 episodes through 2 workers of concurrency 2, reflected by a slow and flaky
OpenAI-compatible LLM server on loopback (50-300 ms per answer, 10% HTTP 500, 2% hanging past
the LLM timeout), while worker pool children and whole workers are SIGKILLed again and again
(at least 50 kills), Redis is restarted with its data lost and Postgres is stopped for a while.
The history the client recorded is checked against the final state (lost, duplicated,
unexpected), and each fault's recovery time is measured from the database's timestamps.

    python bench/soak.py [--episodes 5000] [--rate 6] [--kill-every 10] [--min-kills 50]

The client posts at a rate the stack sustains while faults are injected (--rate), so the
backlog at a fault is the work the fault hit, and its drain time is that fault's recovery
time; as fast as the client can (--rate 0), the queue grows all run long and the drain
times measure the queue instead.

Prints the figures and writes bench/results/faults.md."""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memworker.testing import FakeLLM  # noqa: E402
from tests.faults.harness import FaultStack, HistoryClient, Op, check, write_report  # noqa: E402

LLM_TIMEOUT_S = 5.0  # FaultStack's MEMWORKER_LLM_TIMEOUT_S


@dataclass
class Fault:
    kind: str  # child | worker | redis | postgres
    at: float  # wall clock (time.time()) when it was injected
    back: float  # when the broken part was running again (== at for a kill)
    backlog: int = 0  # episodes accepted before `at` and not yet stored then
    drain_s: float | None = None  # until every one of them was stored
    first_success_s: float | None = None  # until the first episode stored after `back`


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2, help="prefork children per worker")
    ap.add_argument("--rate", type=float, default=6.0, help="episodes posted per second (0: as fast as possible)")
    ap.add_argument("--kill-every", type=float, default=10.0, help="mean seconds between kills")
    ap.add_argument("--min-kills", type=int, default=50, help="keep killing after the last post until this many")
    ap.add_argument("--pg-outage-s", type=float, default=8.0)
    ap.add_argument("--llm-fail", type=float, default=0.10, help="share of LLM calls answered HTTP 500")
    ap.add_argument("--llm-hang", type=float, default=0.02, help="share of LLM calls hanging past the timeout")
    args = ap.parse_args()
    llm = FakeLLM(
        echo=True,
        latency_s=(0.05, 0.3),
        fail_rate=args.llm_fail,
        hang_rate=args.llm_hang,
        hang_s=LLM_TIMEOUT_S + 2,
        seed=7,
    )
    stack = FaultStack(lease_s=10, llm_url=llm.url)
    assert stack.settings.llm_timeout_s == LLM_TIMEOUT_S
    rng = random.Random(11)
    wall_started = time.monotonic()
    try:
        stack.start_fleet(workers=args.workers, concurrency=args.concurrency)
        client = HistoryClient(stack.api_url, stack.tenants)
        flow = threading.Thread(
            target=client.run, args=(args.episodes,), kwargs={"seed": 1, "agents": 50, "rate_per_s": args.rate or None}
        )
        started = time.monotonic()
        flow.start()
        faults: list[Fault] = []
        kills = {"child": 0, "worker": 0}
        while flow.is_alive() or sum(kills.values()) < args.min_kills:
            time.sleep(rng.expovariate(1 / args.kill_every))
            now = time.time()
            kind = stack.kill_random_worker(rng)
            kills[kind] += 1
            faults.append(Fault(kind, now, now))
            done = len(client.ops)
            if not any(f.kind == "redis" for f in faults) and done > args.episodes / 2:
                at = time.time()
                stack.restart_redis(lose_data=True)
                faults.append(Fault("redis", at, time.time()))
            if not any(f.kind == "postgres" for f in faults) and done > args.episodes * 3 / 4:
                at = time.time()
                stack.stop_postgres()
                time.sleep(args.pg_outage_s)
                stack.start_postgres()
                faults.append(Fault("postgres", at, time.time()))
            print(f"\r{done}/{args.episodes} posted, kills={sum(kills.values())}", end="", flush=True)
        flow.join()
        posted = time.monotonic() - started
        keys = [op.key for op in client.ops if op.state in ("ok", "timeout")]
        drain = stack.wait_drained(keys, timeout=1800)
        wall = time.monotonic() - wall_started
        verdict = check(stack, client.ops, scope="op-1-")
        measure_recovery(stack, faults)
        (fallbacks,) = stack.query(
            "SELECT count(*) FROM memworker.episodes WHERE idempotency_key LIKE 'op-1-%%' "
            "AND reflector LIKE 'offline (llm failed%%'"
        )[0]
        figures: dict[str, object] = {
            "episodes invoked": verdict.invoked,
            "accepted (202)": verdict.ok,
            "refused (503 during the Postgres outage)": verdict.failed,
            "client timeouts": verdict.timeout,
            # one client thread: `rate` paces it (a pause of 1/rate after each post), the
            # post's own latency comes on top
            "client rate, episodes/s (paced at / achieved)": f"{args.rate or '-'} / {verdict.invoked / posted:.1f}",
            "workers x prefork children": f"{args.workers} x {args.concurrency}",
            "worker kills (pool child / whole worker)": f"{kills['child']} / {kills['worker']}",
            "Redis restarts with data lost": sum(f.kind == "redis" for f in faults),
            f"Postgres outages ({args.pg_outage_s:g} s)": sum(f.kind == "postgres" for f in faults),
            "lost": verdict.lost,
            "duplicated": verdict.duplicated,
            "unexpected": verdict.unexpected,
            "dead": verdict.dead,
            "LLM requests": len(llm.requests),
            "LLM answers HTTP 500 / hung past the timeout (injected)": f"{llm.failures} / {llm.hangs}",
            "episodes reflected offline after an LLM failure": fallbacks,
            "LLM requests beyond one per accepted episode (re-reflections after kills)": len(llm.requests) - verdict.ok,
            "posting time (s)": round(posted, 1),
            "drain after the last post (s)": round(drain, 1),
            "wall time, start to verdict (s)": round(wall, 1),
            "lease (s)": stack.settings.episode_lease_s,
        }
        print()
        command = "python bench/soak.py" + (f" --episodes {args.episodes}" if args.episodes != 5000 else "")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        out = Path(__file__).parent / "results" / "faults.md"
        write_report(out, f"Soak: faults while {args.episodes:,} episodes flow (`{command}`, {when})", figures)
        with out.open("a") as f:
            f.write(setup_text(args, stack.settings.episode_lease_s))
            f.write(recovery_section(faults, client.ops, args))
        print(recovery_section(faults, client.ops, args))
        bad = verdict.lost + verdict.duplicated + verdict.unexpected
        if bad:
            print("details:", verdict.details[:20])
        return 1 if bad else 0
    finally:
        stack.close()
        llm.close()


def setup_text(args: argparse.Namespace, lease_s: int) -> str:
    return f"""
One client posts the episodes (3 tenants, 50 agents) and records every operation; the
history is checked against the final database state (tests/faults/harness.py: check). The
LLM is memworker.testing.FakeLLM on loopback, answering the episode's first sentence after
50-300 ms, HTTP 500 to {args.llm_fail:.0%} of the calls and nothing for {LLM_TIMEOUT_S + 2:g} s (past the
{LLM_TIMEOUT_S:g} s LLM timeout) to {args.llm_hang:.0%}; an episode whose call fails is reflected offline
("episodes reflected offline"). A random worker is SIGKILLed about every {args.kill_every:g} s: one of
its pool children (the parent forks a new one) or the whole worker (restarted at once); at
half the episodes Redis is stopped, its data deleted and started again; at three quarters
Postgres is stopped for {args.pg_outage_s:g} s. An episode in flight in a killed process is taken again
once its claim lease has expired (MEMWORKER_EPISODE_LEASE_S: {lease_s} s here, 300 s by default),
which bounds a kill's drain. Other work shared the 2 cores during the run.
"""


def measure_recovery(stack: FaultStack, faults: list[Fault]) -> None:
    """Fill in each fault's drain and first-success times from the episodes' timestamps."""
    rows = stack.query(
        "SELECT extract(epoch FROM created_at)::float8, extract(epoch FROM stored_at)::float8 "
        "FROM memworker.episodes WHERE idempotency_key LIKE 'op-1-%%' AND status = 'stored'"
    )
    stored = sorted(s for _, s in rows)
    for fault in faults:
        backlog = [s for c, s in rows if c < fault.at and s > fault.at]
        fault.backlog = len(backlog)
        fault.drain_s = max(backlog) - fault.at if backlog else 0.0
        after = next((s for s in stored if s > fault.back), None)
        fault.first_success_s = after - fault.at if after is not None else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def recovery_section(faults: list[Fault], ops: list[Op], args: argparse.Namespace) -> str:
    lines = [
        "",
        "## Recovery time of each fault",
        "",
        "Measured from the database after the run (episodes' `created_at` and `stored_at`):",
        "*drain* is the time from the fault until every episode accepted before it is `stored`",
        "(the backlog at the fault, including the episodes in flight in what was killed or lost);",
        "*first success* is the time from the fault until the first episode stored after the",
        "broken part was back (for a kill: after the kill). Kills come every",
        f"~{args.kill_every:g} s, so a drain can include the next fault.",
        "",
        "| fault | count | backlog at the fault: median / max | drain (s): median / p95 / max "
        "| first success (s): median / max |",
        "|---|---|---|---|---|",
    ]
    for kind in ("child", "worker"):
        fs = [f for f in faults if f.kind == kind]
        if not fs:
            continue
        drains = sorted(f.drain_s or 0.0 for f in fs)
        firsts = sorted(f.first_success_s for f in fs if f.first_success_s is not None)
        p95 = drains[min(len(drains) - 1, int(0.95 * len(drains)))]
        name = "SIGKILL of a pool child" if kind == "child" else "SIGKILL of a whole worker (restarted)"
        backlogs = sorted(f.backlog for f in fs)
        lines.append(
            f"| {name} | {len(fs)} | {statistics.median(backlogs):g} / {backlogs[-1]} "
            f"| {statistics.median(drains):.1f} / {p95:.1f} / {drains[-1]:.1f} | "
            f"{_fmt(statistics.median(firsts) if firsts else None)} / {_fmt(firsts[-1] if firsts else None)} |"
        )
    offset = time.time() - time.monotonic()  # HistoryClient records monotonic times
    for f in faults:
        if f.kind not in ("redis", "postgres"):
            continue
        first_202 = min(
            (op.started + op.took_s + offset for op in ops if op.state == "ok" and op.started + offset >= f.back),
            default=None,
        )
        down = f.back - f.at
        name = (
            f"Redis restart, data lost (down {down:.1f} s)"
            if f.kind == "redis"
            else f"Postgres outage (down {down:.1f} s)"
        )
        extra = f"; first 202 after it was back: {first_202 - f.back:.1f} s" if first_202 else ""
        lines.append(f"| {name}{extra} | 1 | {f.backlog} | {_fmt(f.drain_s)} | {_fmt(f.first_success_s)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
