"""Sleep (consolidation): how long one offline pass takes per agent, and how long a fleet of
1,000 agents x 50 new memories takes to consolidate with 1 and with 2 worker processes.

Run:  python bench/consolidation.py                           # 1,000 agents x 50, workers 1 and 2
      python bench/consolidation.py --agents 100 --single 20  # quicker

For each worker count it starts `memworker up --workers N` (offline reflector, no LLM) on a
temporary data dir and free ports, creates a tenant, and loads the fleet straight into the
database as the owner (the URL in stack.json) with binary COPY, the way ingest would have
written it: deterministic agent sentences (bench/_common.TextMaker), their MiniLM embeddings
(computed once in this process from a pool of distinct sentences and shared by both runs),
entities and topics from the offline reflector's rules, BM25 postings, agents created two
hours ago (the 30-minute time gate is open). The tenant's policy has consolidation off while
loading, so the stack's beat cannot start early.

1. single passes, in this process (idle stack): --single extra agents of the same shape in
   their own tenant; one pass each through memworker.sleep.consolidation.run_pass, the code a
   worker runs, with the same embedding model; duration_ms from each report.
2. fleet: the tenant is switched on and this script sends one `memworker.consolidation_sweep`
   (what beat sends every minute). It claims every agent (all are due by the time gate) and
   enqueues one pass each on the consolidate queue. Total time = from sending the sweep until
   the last of those 1,000 runs finished; each pass consolidates a 20-memory window of the
   agent's 50. The ratio is time(1 worker) / time(2 workers).
3. with --drain, sweeps keep coming every --tick s until every memory is consolidated (an
   agent left with >= 3 waiting memories is requested again; the window key admits one pass
   per agent per minute, so 50 memories take three passes over at least three minutes).

Prints markdown tables and writes bench/results/consolidation.md."""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    TextMaker,
    command_line,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    owner_connect,
    progress,
    start_stack,
    stop_stack,
    summary,
    write_report,
)


@dataclass
class Corpus:
    texts: list[str]
    vectors: np.ndarray
    entities: list[list[str]]
    topics: list[list[str]]


def make_corpus(pool_size: int, seed: int) -> Corpus:
    from memworker import reflection
    from memworker.models import embeddings
    from memworker.settings import Settings

    maker = TextMaker(seed)
    texts: list[str] = []
    seen: set[str] = set()
    while len(texts) < pool_size:
        s = maker.sentence()
        if s not in seen:
            seen.add(s)
            texts.append(s)
    model = embeddings.load(Settings().embedding_model)
    started = time.perf_counter()
    vectors = model.embed(texts)
    print(f"embedded {len(texts)} distinct sentences in {time.perf_counter() - started:.0f}s", flush=True)
    return Corpus(
        texts, vectors, [list(reflection.entities_of(t)) for t in texts], [list(reflection.topics_of(t)) for t in texts]
    )


def load_fleet(conn: Any, tenant_id: str, agents: list[str], per_agent: int, corpus: Corpus, seed: int) -> int:
    """COPY agents (created two hours ago), their memories and postings; returns memories written."""
    from memworker import reflection
    from memworker.domain.memories import content_hash
    from memworker.domain.tokens import term_frequencies

    tid = uuid.UUID(tenant_id)
    rng = random.Random(seed)
    created_agents = datetime.now(UTC) - timedelta(hours=2)
    with conn.cursor() as cur, cur.copy("COPY agents (tenant_id, id, created_at) FROM STDIN") as copy:
        for a in agents:
            copy.write_row((tid, a, created_agents))
    n = 0
    for agent in progress(agents, desc="COPY fleet", unit="agent"):
        picks = rng.sample(range(len(corpus.texts)), per_agent)
        start = datetime.now(UTC) - timedelta(minutes=90)
        mem_rows, term_rows = [], []
        for j, k in enumerate(picks):
            text = corpus.texts[k]
            tf, doc_len = term_frequencies(text)
            mid = uuid.UUID(int=rng.getrandbits(128), version=4)
            created = start + timedelta(seconds=j)
            mem_rows.append(
                (
                    mid,
                    tid,
                    agent,
                    text,
                    reflection._kind(text),
                    "L1",
                    0.5,
                    0.7,
                    created,
                    created,
                    [f"bench:{agent}:{j}"],
                    f"bench:{agent}:{j}",
                    content_hash(text),
                    doc_len,
                    corpus.entities[k],
                    corpus.topics[k],
                    corpus.vectors[k],
                )
            )
            term_rows += [(tid, agent, term, mid, c) for term, c in tf.items()]
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy(
                "COPY memories (id, tenant_id, agent_id, text, kind, tier, salience, confidence, "
                "created_at, valid_from, provenance, source_key, content_hash, doc_len, entities, "
                "topics, embedding) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(
                    [
                        "uuid",
                        "uuid",
                        "text",
                        "text",
                        "text",
                        "text",
                        "float4",
                        "float4",
                        "timestamptz",
                        "timestamptz",
                        "text[]",
                        "text",
                        "text",
                        "int4",
                        "text[]",
                        "text[]",
                        "vector",
                    ]
                )
                for row in mem_rows:
                    copy.write_row(row)
            with cur.copy(
                "COPY memory_terms (tenant_id, agent_id, term, memory_id, tf) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "text", "text", "uuid", "int4"])
                for row in term_rows:
                    copy.write_row(row)
        n += len(mem_rows)
    for table in ("agents", "memories", "memory_terms"):
        conn.execute(f"ANALYZE memworker.{table}")
    return n


def set_enabled(conn: Any, tenant_id: str, on: bool) -> None:
    conn.execute(
        "UPDATE memworker.tenants SET policy = jsonb_set(policy, '{consolidation_enabled}', %s::jsonb) WHERE id = %s",
        ("true" if on else "false", tenant_id),
    )


def single_passes(owner_url: str, tenant_id: str, agents: list[str]) -> list[float]:
    """One pass per agent in this process, as a worker runs it; duration_ms of each."""
    from memworker.models import embeddings
    from memworker.settings import Settings
    from memworker.sleep import consolidation
    from memworker.storage import db

    settings = Settings()
    model = embeddings.load(settings.embedding_model)
    model.embed(["warm up"])
    pool = db.open_pool(owner_url, max_size=2)
    out = []
    try:
        for agent in progress(agents, desc="single passes", unit="agent"):
            with db.tenant_tx(pool, tenant_id) as conn:
                run_id = consolidation.request_run(
                    conn, tenant_id=uuid.UUID(tenant_id), agent_id=agent, trigger="bench"
                )
            # force: the tenant stays switched off so that the stack's beat leaves these agents alone
            r = consolidation.run_pass(
                pool, model, None, settings, tenant_id=uuid.UUID(tenant_id), agent_id=agent, run_id=run_id, force=True
            )
            if r.status != "done":
                raise RuntimeError(f"pass for {agent}: {r.status} {r.skipped_reason or r.error}")
            out.append(float(r.duration_ms))
    finally:
        pool.close()
    return out


def _fleet_state(conn: Any, tenant_id: str) -> dict[str, Any]:
    left = conn.execute(
        "SELECT count(*) AS n FROM memworker.memories WHERE tenant_id = %s AND consolidated_at IS NULL",
        (tenant_id,),
    ).fetchone()["n"]
    runs = conn.execute(
        "SELECT count(*) FILTER (WHERE status IN ('queued', 'running')) AS open, "
        "count(*) AS n FROM memworker.consolidation_runs WHERE tenant_id = %s",
        (tenant_id,),
    ).fetchone()
    return {"left": left, "open": runs["open"], "runs": runs["n"]}


def fleet_sweep(stack: Any, tenant_id: str, total: int, args: argparse.Namespace) -> dict[str, Any]:
    """One sweep over the fleet (one pass per agent), timed until its last run finished; with
    --drain, sweeps keep coming every --tick s until nothing is left unconsolidated."""
    from celery import Celery

    app = Celery(broker=stack.info["redis_url"])
    out: dict[str, Any] = {}
    with owner_connect(stack) as conn:
        set_enabled(conn, tenant_id, True)
        started = time.perf_counter()
        sent = datetime.now(UTC)
        key = "beat:" + sent.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        app.send_task("memworker.consolidation_sweep", args=[sent.isoformat()], queue="maintenance")
        # Only this sweep's runs count: the stack's own beat claims agents again (a pass that leaves
        # >= 3 memories waiting requests another), and those passes queue behind these.
        bar = progress(total=args.agents, desc="first sweep", unit="pass")
        done_before = 0
        while time.perf_counter() - started < args.timeout:
            time.sleep(1.0)
            row = conn.execute(
                "SELECT count(*) AS n, count(*) FILTER (WHERE status IN ('queued', 'running')) AS open, "
                "max(finished_at) AS last FROM memworker.consolidation_runs "
                "WHERE tenant_id = %s AND run_key = %s",
                (tenant_id, key),
            ).fetchone()
            bar.update(row["n"] - row["open"] - done_before)
            done_before = row["n"] - row["open"]
            if row["n"] >= args.agents and row["open"] == 0:
                break
        bar.close()
        out["sweep_s"] = (row["last"] - sent).total_seconds() if row["last"] else float("nan")
        stats = conn.execute(
            "SELECT sum(items_reviewed) AS items, array_agg(duration_ms) AS durations FROM memworker.consolidation_runs "
            "WHERE tenant_id = %s AND run_key = %s AND status = 'done'",
            (tenant_id, key),
        ).fetchone()
        out["sweep_items"] = int(stats["items"] or 0)
        out["sweep_durations"] = [float(d) for d in stats["durations"] or [] if d is not None]
        if args.drain:
            while time.perf_counter() - started < args.timeout:
                state = _fleet_state(conn, tenant_id)
                if state["left"] == 0 and state["open"] == 0:
                    break
                app.send_task(
                    "memworker.consolidation_sweep", args=[datetime.now(UTC).isoformat()], queue="maintenance"
                )
                time.sleep(args.tick)
            out["drain_s"] = time.perf_counter() - started
        out["left"] = _fleet_state(conn, tenant_id)["left"]
        runs = conn.execute(
            "SELECT status, count(*) AS n, sum(items_reviewed) AS items, sum(connections_made) AS conns, "
            "sum(insights_written) AS insights, sum(conclusions_written) AS conclusions, "
            "array_agg(duration_ms) AS durations FROM memworker.consolidation_runs WHERE tenant_id = %s "
            "GROUP BY status",
            (tenant_id,),
        ).fetchall()
    app.close()
    by_status = {r["status"]: r for r in runs}
    done = by_status.get("done") or {"n": 0, "items": 0, "conns": 0, "insights": 0, "conclusions": 0, "durations": []}
    return {
        **out,
        "statuses": {s: r["n"] for s, r in by_status.items()},
        "passes": done["n"],
        "items": int(done["items"] or 0),
        "connections": int(done["conns"] or 0),
        "insights": int(done["insights"] or 0),
        "conclusions": int(done["conclusions"] or 0),
        "durations": [float(d) for d in done["durations"] or [] if d is not None],
    }


def run_one(workers: int, args: argparse.Namespace, corpus: Corpus, do_single: bool) -> dict[str, Any]:
    stack = start_stack(workers)
    try:
        assert stack.owner_url
        tenant_id, _ = create_tenant(stack, f"sleep-fleet-{workers}")
        agents = [f"fleet-{i:04d}" for i in range(args.agents)]
        with owner_connect(stack) as conn:
            set_enabled(conn, tenant_id, False)
            t0 = time.perf_counter()
            n = load_fleet(conn, tenant_id, agents, args.memories, corpus, args.seed)
            load_s = time.perf_counter() - t0
        single: list[float] = []
        if do_single and args.single:
            single_tid, _ = create_tenant(stack, "sleep-single")
            single_agents = [f"single-{i:03d}" for i in range(args.single)]
            with owner_connect(stack) as conn:
                set_enabled(conn, single_tid, False)
                load_fleet(conn, single_tid, single_agents, args.memories, corpus, args.seed + 1)
            single = single_passes(stack.owner_url, single_tid, single_agents)
        fleet = fleet_sweep(stack, tenant_id, n, args)
        return {"workers": workers, "memories": n, "load_s": load_s, "single": single, **fleet}
    finally:
        stop_stack(stack, keep=args.keep)


def report(args: argparse.Namespace, results: list[dict[str, Any]], load_before: str) -> str:
    lines = [
        "# Consolidation (sleep) benchmark",
        "",
        f"{args.agents:,} agents x {args.memories} new memories each (offline: rules, no LLM), "
        "default policy (window 20, min 3, max 5 connections); `memworker up --workers N`, one "
        "process per worker (`-c 1`), all on this machine with Postgres and Redis.",
        "",
    ]
    single = next((r["single"] for r in results if r["single"]), [])
    if single:
        s = summary(single)
        lines += [
            "## One pass per agent (in-process, idle stack, 20-memory window)",
            "",
            md_table(
                ["passes", "p50 ms", "p95 ms", "p99 ms", "mean ms", "max ms"],
                [[int(s["n"]), fmt(s["p50"]), fmt(s["p95"]), fmt(s["p99"]), fmt(s["mean"]), fmt(s["max"])]],
            ),
            "",
        ]
    rows = []
    for r in results:
        d = summary(r["sweep_durations"]) if r["sweep_durations"] else {"p50": float("nan"), "p95": float("nan")}
        first = r["sweep_items"]
        rows.append(
            [
                r["workers"],
                f"{args.agents:,}",
                f"{r['sweep_s']:.1f}",
                fmt(args.agents / r["sweep_s"]),
                f"{first:,}",
                fmt(first / r["sweep_s"]),
                fmt(d["p50"]),
                fmt(d["p95"]),
            ]
        )
    lines += [
        "## Fleet: one sweep, one pass per agent",
        "",
        "Time from sending the sweep until the last of its passes finished (finished_at of its "
        "runs, keyed by its window); each pass takes a 20-memory window of the agent's 50.",
        "",
        md_table(
            [
                "workers",
                "passes",
                "total s",
                "passes/s",
                "memories consolidated",
                "memories/s",
                "pass p50 ms",
                "pass p95 ms",
            ],
            rows,
        ),
        "",
    ]
    if len(results) == 2 and results[1]["sweep_s"]:
        ratio = results[0]["sweep_s"] / results[1]["sweep_s"]
        lines += [f"**Ratio time(1 worker) / time(2 workers): {ratio:.2f}x.**", ""]
    if all("drain_s" in r for r in results):
        drain = [
            [
                r["workers"],
                f"{r['memories']:,}",
                f"{r['drain_s']:.1f}",
                fmt(r["memories"] / r["drain_s"]),
                f"{r['passes']:,}",
                f"{r['insights']:,}",
                f"{r['conclusions']:,}",
                f"{r['connections']:,}",
                r["left"],
                ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items())),
            ]
            for r in results
        ]
        lines += [
            "## Fleet: until every memory is consolidated (--drain)",
            "",
            md_table(
                [
                    "workers",
                    "memories",
                    "total s",
                    "memories/s",
                    "passes",
                    "insights",
                    "conclusions",
                    "connections",
                    "left",
                    "runs",
                ],
                drain,
            ),
            "",
        ]
        if len(results) == 2 and results[1]["drain_s"]:
            lines += [f"Drain ratio time(1) / time(2): {results[0]['drain_s'] / results[1]['drain_s']:.2f}x.", ""]
    lines += [
        "Notes:",
        "- pass p50/p95 are the passes' own duration_ms inside the workers (one transaction each, "
        "including embedding the insight and conclusions with MiniLM on CPU).",
        "- an agent left with >= 3 waiting memories after a pass is requested again and taken by the next "
        "sweep window (one a minute; --drain sends one every --tick s, but a window key admits one pass per "
        "agent per minute), so 50 memories take three passes.",
        "- loading (COPY of memories, entities/topics, postings) is not in the total: "
        + ", ".join(f"{r['workers']} worker(s): {r['load_s']:.0f}s" for r in results)
        + ".",
        "",
        "## Environment",
        "",
        environment_note(load_before, command_line()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--memories", type=int, default=50, help="new memories per agent")
    p.add_argument("--single", type=int, default=100, help="agents for the in-process single-pass timing")
    p.add_argument("--workers", default="1,2", help="comma list of worker counts")
    p.add_argument("--pool", type=int, default=6000, help="distinct sentences to draw memories from")
    p.add_argument("--drain", action="store_true", help="also time consolidating every memory (3 passes per agent)")
    p.add_argument("--tick", type=float, default=5.0, help="seconds between sweeps while draining")
    p.add_argument("--timeout", type=float, default=1800.0, help="give up a fleet run after this long")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--keep", action="store_true", help="keep the temporary data dirs (logs)")
    p.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    args = p.parse_args(argv)
    load_before = loadavg()
    corpus = make_corpus(min(args.pool, args.agents * args.memories), args.seed)
    results = []
    for i, w in enumerate(int(x) for x in args.workers.split(",")):
        r = run_one(w, args, corpus, do_single=i == 0)
        print(f"{w} worker(s): one sweep of {args.agents} passes in {r['sweep_s']:.1f}s", flush=True)
        results.append(r)
    text = report(args, results, load_before)
    print(text)
    if not args.no_write:
        print(f"wrote {write_report('consolidation.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
