"""Soak: 5,000 episodes through 2 workers while a random worker is SIGKILLed again and
again, then Redis restarted with its data lost, then Postgres stopped; the recorded history
is checked against the final state (lost, duplicated, unexpected).

    python bench/soak.py [--episodes 5000] [--kill-every 3]

Prints the figures and writes bench/results/faults.md."""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memworker.testing import FakeLLM  # noqa: E402
from tests.faults.harness import FaultStack, HistoryClient, check, write_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between kills")
    args = ap.parse_args()
    llm = FakeLLM(echo=True)
    stack = FaultStack(lease_s=10, llm_url=llm.url)
    rng = random.Random(11)
    figures: dict[str, object] = {}
    try:
        stack.start_fleet()

        client = HistoryClient(stack.api_url, stack.tenants)
        flow = threading.Thread(target=client.run, args=(args.episodes,), kwargs={"seed": 1, "agents": 50})
        started = time.monotonic()
        flow.start()
        kills = {"child": 0, "worker": 0}
        redis_restarts = pg_outages = 0
        while flow.is_alive():
            time.sleep(rng.expovariate(1 / args.kill_every))
            kills[stack.kill_random_worker(rng)] += 1
            done = len(client.ops)
            if redis_restarts == 0 and done > args.episodes / 2:
                stack.restart_redis(lose_data=True)
                redis_restarts += 1
            if pg_outages == 0 and done > args.episodes * 3 / 4:
                stack.stop_postgres()
                time.sleep(5)
                stack.start_postgres()
                pg_outages += 1
            print(f"\r{done}/{args.episodes} posted, kills={sum(kills.values())}", end="", flush=True)
        flow.join()
        posted = time.monotonic() - started
        keys = [op.key for op in client.ops if op.state in ("ok", "timeout")]
        drain = stack.wait_drained(keys, timeout=1800)
        verdict = check(stack, client.ops, scope="op-1-")
        figures = {
            "episodes invoked": verdict.invoked,
            "accepted (202)": verdict.ok,
            "refused (503 during the Postgres outage)": verdict.failed,
            "client timeouts": verdict.timeout,
            "worker kills (pool child / whole worker)": f"{kills['child']} / {kills['worker']}",
            "Redis restarts with data lost": redis_restarts,
            "Postgres outages (5 s)": pg_outages,
            "lost": verdict.lost,
            "duplicated": verdict.duplicated,
            "unexpected": verdict.unexpected,
            "dead": verdict.dead,
            "LLM calls": len(llm.requests),
            "LLM call bound (episodes + kills x concurrency 1)": verdict.invoked + sum(kills.values()),
            "posting time (s)": round(posted, 1),
            "drain after the last post (s)": round(drain, 1),
            "lease (s)": stack.settings.episode_lease_s,
        }
        print()
        command = "python bench/soak.py" + (f" --episodes {args.episodes}" if args.episodes != 5000 else "")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_report(
            Path(__file__).parent / "results" / "faults.md",
            f"Soak: faults while {args.episodes:,} episodes flow (`{command}`, {when})",
            figures,
        )
    finally:
        stack.close()
        llm.close()


if __name__ == "__main__":
    main()
