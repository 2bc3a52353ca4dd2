"""Sessions: what a runtime context costs next to a plain recall, how much packing
drops at small budgets, what the tokenizer costs to load, and archive size and timings.

Run:  python bench/sessions.py                          # 500 memories, 100 queries, 200 episodes
      python bench/sessions.py --memories 200 --queries 30
      python bench/sessions.py --api-url URL --data-dir DIR

Without --api-url it starts `memworker up` on a temporary data dir and free ports (offline
reflector) and stops it at the end. Everything goes through the public API as the dev
tenant: memories written in batches of 100 (embedded by the API), a session with 40
working-memory items and a 5 x 4 step plan, then for each query (every one different, so
the first recall pays for the query embedding) a recall (k=20, the context's candidate
count) twice, then contexts at budgets 4000 and 500 (their query embedding is cached, as it
would be after the recall: compare them with the second recall). Then 200 episodes and every context call's log go into an
archive; archive and restore are timed, and the compressed and raw sizes reported.

Tokenizer load: a fresh Python process each, (1) memworker.models.budget (tokenizers, from the
model folder's tokenizer.json) and (2) transformers.AutoTokenizer on the same folder.

Prints markdown tables and writes bench/results/sessions.md."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ROOT,
    TextMaker,
    add_stack_args,
    command_line,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    stack_from_args,
    write_report,
)

from memworker import Client  # noqa: E402


def _load_seconds(code: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "false"},
    )
    return float(out.stdout.strip().splitlines()[-1])


def tokenizer_rows() -> list[list[str]]:
    own = (
        "import time; t = time.perf_counter(); from memworker import budget; from memworker.settings import "
        "Settings; c = budget.counter(Settings().embedding_model); c('warm up'); print(time.perf_counter() - t)"
    )
    auto = (
        "import time; t = time.perf_counter(); from transformers import AutoTokenizer; from memworker.settings "
        "import Settings; tk = AutoTokenizer.from_pretrained(Settings().embedding_model, local_files_only=True); "
        "tk.encode('warm up'); print(time.perf_counter() - t)"
    )
    from memworker.models import budget
    from memworker.settings import Settings

    rows = [
        ["memworker.models.budget (tokenizers, tokenizer.json)", fmt(_load_seconds(own), 2)],
        ["transformers.AutoTokenizer (same folder)", fmt(_load_seconds(auto), 2)],
    ]
    maker = TextMaker(3)
    samples = {
        "README.md (markdown, code)": (ROOT / "README.md").read_text(),
        "1,000 generated agent sentences": " ".join(maker.sentence() for _ in range(1000)),
    }
    for name, text in samples.items():
        n = budget.count(text, Settings().embedding_model)
        rows.append(
            [
                f"{name}: {len(text):,} characters, {len(text.split()):,} words",
                f"{n:,} tokens ({len(text) / n:.2f} chars/token, {n / len(text.split()):.2f} tokens/word)",
            ]
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--memories", type=int, default=500)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--episodes", type=int, default=200)
    add_stack_args(p)
    args = p.parse_args()
    load_before = loadavg()
    tok = tokenizer_rows()
    text = TextMaker(7)
    agent = f"bench-{uuid.uuid4().hex[:6]}"
    with stack_from_args(args) as stack:
        c = Client(stack.api_url, stack.api_key, timeout=120)
        for i in range(0, args.memories, 100):
            c.add_memories(agent, [{"text": text.sentence()} for _ in range(min(100, args.memories - i))])
        sid = c.create_session(agent, goal="Keep the billing migration on track")["session_id"]
        for kind in ("constraint", "decision", "question", "candidate"):
            c.update_working(agent, sid, add=[{"kind": kind, "text": text.sentence()} for _ in range(10)])
        c.set_plan(
            agent,
            sid,
            title="Migration",
            milestones=[
                {"title": f"Milestone {m}", "steps": [{"title": text.sentence()[:80]} for _ in range(4)]}
                for m in range(5)
            ],
        )
        c.update_step(agent, sid, "m1.s1", status="done")
        c.update_step(agent, sid, "m1.s2", progress=50)
        times: dict[str, list[float]] = {
            "recall k=20 (new query)": [],
            "recall k=20 (cached query)": [],
            "context 4000": [],
            "context 500": [],
        }
        dropped: dict[str, list[int]] = {"context 4000": [], "context 500": []}
        used: dict[str, list[int]] = {"context 4000": [], "context 500": []}
        for _ in range(args.queries):
            q = text.query() + f" {uuid.uuid4().hex[:4]}"
            for name in ("recall k=20 (new query)", "recall k=20 (cached query)"):
                t = time.perf_counter()
                c.recall(agent, q, k=20)
                times[name].append((time.perf_counter() - t) * 1000)
            for budget_tokens in (4000, 500):  # the same query: its embedding is cached, like the recall's
                name = f"context {budget_tokens}"
                t = time.perf_counter()
                out = c.context(agent, q, session_id=sid, max_tokens=budget_tokens)
                times[name].append((time.perf_counter() - t) * 1000)
                dropped[name].append(sum(out["dropped"].values()))
                used[name].append(out["tokens"])
        lat = [
            [
                name,
                fmt(percentile(v, 50)),
                fmt(percentile(v, 95)),
                fmt(sum(used[name]) / len(used[name]), 0) if name in used else "-",
                fmt(sum(dropped[name]) / len(dropped[name]), 1) if name in dropped else "-",
            ]
            for name, v in times.items()
        ]
        c.add_episodes(
            agent,
            [{"content": text.sentence() + " " + text.sentence(), "session_id": sid} for _ in range(args.episodes)],
        )
        t = time.perf_counter()
        arc = c.archive_session(agent, sid)
        archive_ms = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        c.restore_session(agent, sid)
        restore_ms = (time.perf_counter() - t) * 1000
        arc_rows = [
            [
                f"{arc['counts']['episodes']} episodes, {arc['counts']['context_calls']} context calls, "
                f"{arc['counts']['working_items']} working items, {arc['counts']['plan_steps']} steps",
                f"{arc['raw_bytes']:,}",
                f"{arc['bytes']:,}",
                f"{arc['raw_bytes'] / arc['bytes']:.1f}x",
                fmt(archive_ms),
                fmt(restore_ms),
            ]
        ]
    report = "\n\n".join(
        [
            "# Sessions: runtime context, tokenizer, archives",
            environment_note(load_before, command_line()),
            f"## Context vs recall ({args.memories} memories, 40 working items, 20-step plan, {args.queries} queries)\n\n"
            + md_table(["call", "p50 ms", "p95 ms", "tokens used (mean)", "items dropped (mean)"], lat),
            "Client-side times over HTTP on loopback. The contexts reuse the query's cached embedding: compare "
            "them with the cached recall. A context call is one recall (k=20, bump off) plus the "
            "profile, the session row under its lock, packing, the access bump of what was packed, the "
            "context-call log row and the usage update, in one transaction.",
            "## Tokenizer (cold start in a fresh process, seconds)\n\n" + md_table(["loader", "value"], tok),
            "## Archive\n\n"
            + md_table(["session", "JSONL bytes", "gzip bytes", "ratio", "archive ms", "restore ms"], arc_rows),
        ]
    )
    print(report)
    print(f"wrote {write_report('sessions.md', report)}")


if __name__ == "__main__":
    main()
