"""What a pause between two query embeddings costs the second one.

Run:  python bench/embedding_pause.py                    # 6 rounds of 25 calls per case
      python bench/embedding_pause.py --rounds 2         # quicker

One short recall query (bench/_common.TextMaker.query) is embedded per call (embed(), no
query cache) with the embedder the API builds (memworker.models.embeddings.for_settings of
Settings.from_env: the product's backend and thread count), in this process, no stack.
Before each call the bench either does nothing (back to back), sleeps, or spins (a busy loop
that touches almost no memory) for --pauses milliseconds. Each case runs as a block of
--block calls in a row; the blocks of all cases alternate, in a shuffled order each round,
for --rounds rounds, so a shared machine's drifts fall on all of them. The table gives
p50/p95 per case and p50 over the back-to-back p50.

Why it matters: recall_latency.py's target weighs a request against the bare embedding cost
(a) measured in a tight loop, while at one client a request embeds one query every ~15 ms
with other work in between (the SQL, HTTP, the client). One call streams the model's ~40 MB
of weights; called over and over, they stay in the CPU's shared last-level cache. A spin
costing about as much as a sleep says it is the time between calls, not our own work in
between, that loses them (the cache is shared with the machine's other tenants).

Prints markdown and writes bench/results/embedding_pause.md (--no-write: print only)."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    TextMaker,
    command_line,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    progress,
    write_report,
)


def sleep_for(ms: float) -> Callable[[], None]:
    return lambda: time.sleep(ms / 1000)


def spin_for(ms: float) -> Callable[[], None]:
    def spin() -> None:
        end = time.perf_counter() + ms / 1000
        while time.perf_counter() < end:
            pass

    return spin


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6, help="rounds; each runs one block per case")
    p.add_argument("--block", type=int, default=25, help="calls in a row per block")
    p.add_argument("--pauses", default="1,3,6,12", help="comma list of pauses in ms")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    args = p.parse_args(argv)
    from memworker.models import embeddings
    from memworker.settings import Settings

    load_before = loadavg()
    settings = Settings.from_env(os.environ)
    embedder = embeddings.for_settings(settings)
    cases: dict[str, Callable[[], None]] = {"back to back": lambda: None}
    for ms in (float(x) for x in args.pauses.split(",") if x.strip()):
        cases[f"after a {ms:g} ms sleep"] = sleep_for(ms)
        cases[f"after a {ms:g} ms spin"] = spin_for(ms)
    maker, rng = TextMaker(args.seed), random.Random(args.seed)
    embedder.embed([maker.query()])  # load and warm up
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in progress(range(args.rounds), desc="embeddings", unit="round"):
        for name in rng.sample(list(cases), len(cases)):
            for _ in range(args.block):
                query = maker.query()
                cases[name]()
                t = time.perf_counter()
                embedder.embed([query])
                times[name].append((time.perf_counter() - t) * 1000)
    base = percentile(times["back to back"], 50)
    rows = [
        [name, len(v), fmt(percentile(v, 50), 2), fmt(percentile(v, 95), 2), fmt(percentile(v, 50) / base, 2)]
        for name, v in times.items()
    ]
    text = "\n".join(
        [
            "# A pause before a query embedding",
            "",
            (
                f"The product's embedder ({settings.embedding_backend} backend, {settings.embedding_threads} "
                f"thread(s)), one short recall query per call; {args.rounds} rounds, each one block of "
                f"{args.block} calls in a row per case, the blocks in a shuffled order. ms:"
            ),
            "",
            md_table(["case", "n", "p50", "p95", "p50 / back to back"], rows),
            "",
            "## Environment",
            "",
            environment_note(load_before, command_line()),
        ]
    )
    print(text)
    if not args.no_write:
        print(f"\nwritten to {write_report('embedding_pause.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
