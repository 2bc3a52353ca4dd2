"""A/B: one bench at two commits, in turn, in one sitting, and the figures it prints side by side.

Run:  python bench/ab.py --base d4ce564 -- recall_latency.py --agents 50 --clients 1,16 --no-write
      python bench/ab.py --base d4ce564 --head cb14378 --rounds 3 -- ingest.py --episodes 400 --paced 0

Each commit is checked out into a temporary git worktree (the working tree itself when --head
is not given) and the bench runs there as `python bench/<script> <args>` with PYTHONPATH set
to that tree, so the stack it starts (`python -m memworker up`) runs that commit's code.
Rounds alternate A, B, A, B... so a noisy minute on a shared machine hits both sides alike.
Every line the bench prints as "<name>: <figures>" is collected; the report puts each name's
figures from A and B next to each other, with the median of B / A for every number they share
position-wise. Writes bench/results/ab_<script>.md (or --report) unless --no-write."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_line, environment_note, loadavg, md_table, write_report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# "<name>: <figures>" lines, e.g. "1 client, uncached: server p50 14.5 ms, 49.1 QPS, errors 0"
_FIGURE = re.compile(r"^([\w(][^:]{2,70}): (.{1,200}\d.{0,200})$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def worktree(rev: str, into: Path) -> Path:
    path = into / rev
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev], check=True)
    return path


def run(tree: Path, script: str, args: list[str]) -> dict[str, str]:
    """The bench's "name: figures" lines (stdout), by name."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(tree / "bench" / script), *args], cwd=tree, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"{script} at {tree} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    lines = (m for line in out.stdout.splitlines() if (m := _FIGURE.match(line.strip())))
    return {m[1]: m[2] for m in lines if "://" not in m[2]}  # not the stack's addresses


def ratios(a: list[str], b: list[str]) -> str:
    """Median B / A of each number position both sides print (rounds paired in order)."""
    per_position: dict[int, list[float]] = defaultdict(list)
    for fa, fb in zip(a, b, strict=False):
        for i, (x, y) in enumerate(zip(_NUMBER.findall(fa), _NUMBER.findall(fb), strict=False)):
            if float(x) != 0:
                per_position[i].append(float(y) / float(x))
    return ", ".join(f"{statistics.median(v):.2f}" for _, v in sorted(per_position.items())) or "n/a"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="commit A (the baseline)")
    p.add_argument("--head", help="commit B (default: the working tree as it is)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each side, alternating (default 2)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--report", help="file name under bench/results (default: ab_<script>.md)")
    p.add_argument(
        "--bench-from-head",
        action="store_true",
        help="copy B's bench/ into A's checkout first, for a bench A does not have: "
        "both sides run the same bench, each on its own commit's code",
    )
    p.add_argument("bench", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...], a script of bench/")
    args = p.parse_args(argv)
    bench = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    if not bench:
        p.error("name the bench after --, e.g. -- recall_latency.py --agents 50")
    script, bench_args = bench[0], bench[1:]
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="memworker-ab-") as tmp:
        trees = {"A": worktree(args.base, Path(tmp)), "B": worktree(args.head, Path(tmp)) if args.head else ROOT}
        if args.bench_from_head:
            shutil.copytree(trees["B"] / "bench", trees["A"] / "bench", dirs_exist_ok=True)
        figures: dict[str, dict[str, list[str]]] = {"A": defaultdict(list), "B": defaultdict(list)}
        try:
            for r in range(args.rounds):
                for side in ("A", "B"):
                    print(f"round {r + 1}, {side}: {script} at {trees[side]}", flush=True)
                    for name, value in run(trees[side], script, bench_args).items():
                        figures[side][name].append(value)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)
    names = [n for n in figures["A"] if n in figures["B"]]
    rows = [
        [n, " / ".join(figures["A"][n]), " / ".join(figures["B"][n]), ratios(figures["A"][n], figures["B"][n])]
        for n in names
    ]
    text = "\n".join(
        [
            f"# A/B: {script}",
            "",
            f"A = {args.base}, B = {args.head or 'the working tree'}; {args.rounds} round(s) each, alternating.",
            "",
            md_table(["figure", "A (each round)", "B (each round)", "median B / A, per number"], rows),
            "",
            environment_note(load_before, command_line(), None),
        ]
    )
    print(text)
    if not args.no_write:
        print(f"\nwritten to {write_report(args.report or f'ab_{Path(script).stem}.md', text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
