"""Read replicas: recall QPS from two API processes while a bulk ingest saturates the primary,
reading from a streaming replica against reading from the primary, in one run.

Run:  python bench/replicas.py                                  # 20 agents x 1,000 memories
      python bench/replicas.py --agents 5 --memories 500 --seconds 10 --rounds 1   # quicker

The benchmark starts its own embedded Postgres (the primary) and Redis in a temporary folder,
migrates, makes a tenant and key, and loads the corpus straight into the primary as the owner
(bench/recall_latency.py load_corpus: deterministic sentences, random unit vectors, BM25
postings, binary COPY). Then a streaming replica of it (memworker.local.embedded.start_replica:
pg_basebackup -R, Postgres's own replication) and --writers bulk-ingest processes, which run
for the whole measurement: each COPYs batches of --batch memories with their postings into a
new agent per batch, one transaction per batch, back to back, on the primary.

Round 0 runs before the ingest starts (what the replica path costs by itself); the rounds
after it with the ingest running. A round is two phases, in turn: `python -m
memworker.api.serve --workers 2` (two API processes) without MEMWORKER_READ_DATABASE_URL
(every recall on the primary) and with it (the replica). In each phase --clients threads send recalls (k=10) for --seconds: fresh queries
(every one embedded: the embedding's CPU is in each request) and, when --queries includes
it, cached queries (a small set repeated: the API's embedding cache hits, so the cost is
the recall statement). Reported per phase: QPS, client p50/p95, server p50, where the reads
ran (memworker_reads_total from /metrics), the ingest's memories/s and the machine's CPU
busy share. The ratio is replica QPS / primary QPS of the same round.

Prints markdown tables and writes bench/results/replicas.md (--no-write: print only)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    RAISED_LIMITS,
    ROOT,
    Stack,
    command_line,
    environment_note,
    fmt,
    free_port,
    loadavg,
    md_table,
    owner_connect,
    percentile,
    write_report,
)
from recall_latency import Queries, Run, agent_ids, agent_rows, cached_queries, copy_agent, load_corpus, run_recalls  # noqa: E402

from memworker import keys  # noqa: E402
from memworker.domain.tokens import term_frequencies  # noqa: E402
from memworker.local import embedded  # noqa: E402
from memworker.settings import Settings  # noqa: E402
from memworker.storage import core_db, db, migrate  # noqa: E402


@dataclass
class Phase:
    round: int
    target: str  # "primary" or "replica"
    queries: str  # "fresh" or "cached"
    run: Run
    ingest_per_s: float
    reads: dict[str, float]


# --- the bulk ingest (a child process) -----------------------------------------------------------


def writer_main(owner_url: str, tenant_id: str, batch: int, counter: Path, seed: int) -> None:
    """COPY batches of memories into a new agent each, until SIGTERM; the running total of
    memories written goes to `counter` after every batch."""
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    stack = Stack(api_url="", api_key="", owner_url=owner_url)
    tid = uuid.UUID(tenant_id)
    template, _ = agent_rows(tid, "bulk", seed, batch, seed, datetime.now(UTC))
    tfs = [term_frequencies(row[3])[0] for row in template]  # once: the ingest's cost is the database's
    written, n = 0, 0
    with owner_connect(stack, tenant_id, autocommit=False) as conn:
        while not stop:
            n += 1
            agent = f"bulk-{os.getpid()}-{n}"
            mem_rows, term_rows = _rekeyed(template, tfs, agent)
            with conn.transaction():
                conn.execute("INSERT INTO agents (tenant_id, id) VALUES (%s, %s)", (tid, agent))
            copy_agent(conn, mem_rows, term_rows)
            conn.commit()
            written += len(mem_rows)
            counter.write_text(str(written))


def _rekeyed(
    template: list[tuple[Any, ...]], tfs: list[dict[str, int]], agent: str
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The template's memories under a new agent and new ids (unique source keys), with postings."""
    mem_rows, term_rows = [], []
    for i, (row, tf) in enumerate(zip(template, tfs, strict=True)):
        mid = uuid.uuid4()
        key = f"bench:{agent}:{i}"
        mem_rows.append((mid, row[1], agent, *row[3:10], [key], key, *row[12:]))
        term_rows += [(row[1], agent, term, mid, c) for term, c in tf.items()]
    return mem_rows, term_rows


@contextmanager
def writers(count: int, owner_url: str, tenant_id: str, batch: int, folder: Path) -> Iterator[Callable[[], int]]:
    """`count` writer processes; yields a function giving the memories they wrote so far."""
    procs, counters = [], []
    for i in range(count):
        counter = folder / f"writer{i}.count"
        counter.write_text("0")
        counters.append(counter)
        argv = [sys.executable, __file__, "--writer", owner_url, tenant_id, str(batch), str(counter), str(i + 1)]
        procs.append(subprocess.Popen(argv, cwd=ROOT, start_new_session=True))

    def total() -> int:
        return sum(int(c.read_text() or 0) for c in counters)

    try:
        yield total
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# --- the API (two processes) ---------------------------------------------------------------------


@contextmanager
def api(settings: Settings, folder: Path, *, replica_url: str | None) -> Iterator[str]:
    """`python -m memworker.api.serve --workers 2` on a free port; yields its URL once healthy
    (and, with a replica, once the replica is served)."""
    port = free_port()
    prom = folder / f"prom-{port}"
    prom.mkdir()
    env = {**os.environ, **settings.replace(read_database_url=replica_url).to_env(), **RAISED_LIMITS}
    env.update(PROMETHEUS_MULTIPROC_DIR=str(prom), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    argv = [sys.executable, "-m", "memworker.api.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    log = open(folder / f"api-{port}.log", "ab")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _ready(url, replica_url is not None):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the API did not start; see {folder}/api-{port}.log")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _ready(url: str, replica: bool) -> bool:
    try:
        r = httpx.get(url + "/healthz", timeout=2)
    except httpx.HTTPError:
        return False
    return r.status_code == 200 and (not replica or r.json().get("replicas", {}).get("replica1") == "ok")


def reads_by_target(url: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("memworker_reads_total{"):
            target = line.split('target="', 1)[1].split('"', 1)[0]
            out[target] = out.get(target, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


# --- the run -------------------------------------------------------------------------------------


def measure(
    url: str, key: str, agents: list[str], clients: int, seconds: float, pick: Callable[[], str], seed: int
) -> Run:
    """run_recalls sized to last about `seconds`: a short probe gives the rate first."""
    one = httpx.post(
        f"{url}/v1/agents/{agents[0]}/recall", json={"query": pick()}, headers={"Authorization": f"Bearer {key}"}
    )
    if one.status_code != 200:  # run_recalls' clients would wait for each other forever
        raise SystemExit(f"recall answers {one.status_code}: {one.text[:500]}")
    stack = Stack(api_url=url, api_key=key)
    probe = run_recalls(stack, key, agents, "probe", clients, 3, pick, seed)
    per_client = max(5, int(probe.qps * seconds / clients))
    return run_recalls(stack, key, agents, "recall", clients, per_client, pick, seed + 1)


def phases(args: argparse.Namespace, settings: Settings, folder: Path, key: str, replica_url: str) -> list[Phase]:
    """Round 0 without the ingest (what the replica path itself costs), then the rounds with it."""
    agents = agent_ids(args.agents)
    queries = Queries(args.seed)
    cached = cached_queries(queries, 32)
    out: list[Phase] = []

    def one_round(rnd: int, written: Callable[[], int]) -> None:
        for target in ("primary", "replica"):
            with api(settings, folder, replica_url=replica_url if target == "replica" else None) as url:
                for kind in args.queries.split(","):
                    pick = queries.fresh if kind == "fresh" else cached
                    if kind == "cached":
                        run_recalls(Stack(api_url=url, api_key=key), key, agents, "warm", 2, 20, pick, 1)
                    before_reads, before_rows, t0 = reads_by_target(url), written(), time.perf_counter()
                    run = measure(url, key, agents, args.clients, args.seconds, pick, args.seed + rnd)
                    rate = (written() - before_rows) / (time.perf_counter() - t0)
                    after = reads_by_target(url)
                    reads = {t: after.get(t, 0.0) - before_reads.get(t, 0.0) for t in ("primary", "replica")}
                    out.append(Phase(rnd, target, kind, run, rate, reads))
                    print(f"round {rnd} {target:7} {kind:6} {run.qps:7.1f} QPS, ingest {rate:7.0f}/s", flush=True)

    if args.idle_round:
        one_round(0, lambda: 0)
    with writers(args.writers, settings.admin_database_url or "", args.tenant_id, args.batch, folder) as written:
        for rnd in range(1, args.rounds + 1):
            one_round(rnd, written)
    return out


def report(args: argparse.Namespace, got: list[Phase], load_before: str, loaded: Any) -> str:
    rows = []
    for p in got:
        r = p.run
        rows.append(
            [
                p.round,
                p.target,
                p.queries,
                fmt(r.qps),
                fmt(percentile(r.client_ms, 50)),
                fmt(percentile(r.client_ms, 95)),
                fmt(percentile(r.server_ms, 50)),
                f"{int(p.reads['replica'])} / {int(p.reads['primary'])}",
                fmt(p.ingest_per_s, 0),
                f"{r.busy:.2f}",
                r.error_text,
            ]
        )
    ratios = []
    for kind in args.queries.split(","):
        for rnd in range(0 if args.idle_round else 1, args.rounds + 1):
            a = next(p for p in got if p.round == rnd and p.queries == kind and p.target == "primary")
            b = next(p for p in got if p.round == rnd and p.queries == kind and p.target == "replica")
            load = "none" if rnd == 0 else "bulk ingest"
            ratios.append([kind, rnd, load, fmt(a.run.qps), fmt(b.run.qps), f"{b.run.qps / a.run.qps:.2f}"])
    return "\n".join(
        [
            "# Read replicas: recall QPS while a bulk ingest saturates the primary",
            "",
            environment_note(load_before, command_line()),
            f"- corpus: {args.agents} agents x {args.memories} memories ({loaded.memories} rows, "
            f"{loaded.postings} postings, database {loaded.db_size}); recall k=10 over those agents",
            f"- load: {args.writers} bulk-ingest processes, each COPYing {args.batch} memories + postings "
            "per transaction into a new agent, back to back, on the primary, through rounds 1 and on"
            + ("; round 0 runs without it (what the replica path itself costs)" if args.idle_round else ""),
            f"- API: two processes (`python -m memworker.api.serve --workers 2`), {args.clients} client threads, "
            f"about {args.seconds:g} s per phase; the primary and its streaming replica on this same machine",
            "",
            md_table(
                [
                    "round",
                    "reads on",
                    "queries",
                    "QPS",
                    "client p50 ms",
                    "client p95 ms",
                    "server p50 ms",
                    "reads replica / primary",
                    "ingest memories/s",
                    "CPU busy",
                    "errors",
                ],
                rows,
            ),
            "",
            "Replica QPS against primary QPS, same round:",
            "",
            md_table(["queries", "round", "load", "primary QPS", "replica QPS", "ratio"], ratios),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=20)
    p.add_argument("--memories", type=int, default=1000, help="per agent")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20.0, help="per phase")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--batch", type=int, default=200, help="memories per ingest transaction")
    p.add_argument("--queries", default="fresh,cached")
    p.add_argument("--no-idle-round", dest="idle_round", action="store_false", help="skip round 0 (no ingest)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    load_before = loadavg()
    folder = Path(tempfile.mkdtemp(prefix="mw-replicas-"))
    children = []
    try:
        pg, owner = embedded.start_postgres(folder)
        children.append(pg)
        rd, redis_url = embedded.start_redis(folder)
        children.append(rd)
        migrate.migrate(owner)
        with db.connect(owner) as conn:
            tenant = core_db.create_tenant(conn, name="bench")
            db.bind_tenant(conn, tenant.id)
            key, _ = keys.create(conn, tenant_id=tenant.id, name="bench")
            conn.commit()
        args.tenant_id = str(tenant.id)
        loaded = load_corpus(Stack("", key, owner_url=owner), args.tenant_id, agent_ids(args.agents), args.memories, 1)
        rep, replica_owner = embedded.start_replica(folder, owner)
        children.append(rep)
        settings = Settings(database_url=db.app_url(owner), admin_database_url=owner, redis_url=redis_url)
        settings = settings.replace(data_dir=folder, db_pool_max=8)
        got = phases(args, settings, folder, key, db.app_url(replica_owner))
        text = report(args, got, load_before, loaded)
        print(text)
        if not args.no_write:
            print(f"wrote {write_report('replicas.md', text)}")
        return 0
    finally:
        for child in reversed(children):
            child.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        owner_url, tenant_id, batch, counter, seed = sys.argv[2:7]
        writer_main(owner_url, tenant_id, int(batch), Path(counter), int(seed))
    else:
        sys.exit(main())
