"""Recall latency: server-side (took_ms) and client-side p50/p95/p99 and QPS with 1, 16 and 64
concurrent clients, next to the bare costs measured in the same run.

Run:  python bench/recall_latency.py                               # 1,000 agents x 1,000 memories
      python bench/recall_latency.py --agents 20 --memories 500 --clients 1,16   # quicker
      python bench/recall_latency.py --api-url URL --data-dir DIR  # against a running stack

Without --api-url it starts `memworker up` on a temporary data dir and free ports and stops
it at the end. Loading 1,000,000 memories through the API would mostly measure the embedder,
so the corpus goes straight into the stack's database as the owner (the URL in
stack.json), under a fresh tenant made with `memworker tenant create`: agents rows first,
then memories (deterministic short sentences from a fixed vocabulary, random unit float32
vectors of 384 dims, created_at spread over 90 days, content_hash and doc_len as
memworker.storage.store.write_memory computes them, unique source_key) and their BM25 postings
(memworker.memory_terms, one row per (memory, term) with tf from
memworker.domain.tokens.term_frequencies), all with binary COPY, one agent per transaction over
--load-connections owner connections in parallel (at most one agent's rows per connection in
memory); then ANALYZE. The load time, the database size and the bench process's peak memory
are reported. memory_events rows (the audit trail) are not written: recall never reads them.

Bare costs, measured in this process while the stack is idle:
  (a) one query embedding: the query embedder the API builds (memworker.models.embeddings.
      for_queries of Settings.from_env: the product's backend, thread count and query
      precision, MEMWORKER_EMBEDDING_BACKEND / _THREADS / MEMWORKER_QUERY_EMBEDDING_PRECISION)
      on one short, never-seen query (no cache);
  (b) one plain SQL vector top-10 for one agent (SELECT id FROM memworker.memories WHERE
      tenant_id = .. AND agent_id = .. ORDER BY embedding <=> q LIMIT 10) over psycopg on
      the owner URL with pgvector's register_vector, one connection, one round trip;
  (c) for reference: recall as the API serves it once the query is embedded
      (memworker.recall.hybrid.serve: the app role's pooled connection, the tenant transaction,
      queries.sql: recall with the access-count bump, the commit), query vector given;
  (a') for reference, when it differs from the product's count: (a) with one thread per CPU
      (not the product's setting; shows what the thread count costs on this machine).
  (a, in turn) and (b, in turn), for reference: (a) and (b) alternating, each embedding
      followed by the top-10 of its own vector, as one recall needs them. Back to back, each
      embedding reads the ~40 MB of weights its previous call left in the CPU cache; in a
      request other work runs in between, and on a shared machine an embedding after a few ms
      of pause costs up to twice as much (bench/embedding_pause.py). These show the bare
      costs in a request's rhythm; the target is still judged on (a) and (b).

Then recall (k=10) through the API with queries from the same vocabulary, for each count in
--clients (threads, each with its own Client): every request a different query (the
query-embedding LRU cache never hits), and the same with a small set of repeated, pre-warmed
queries (cached). Target shown: server-side p50 (1 client, uncached) <= 2 x (a + b). With
--repeats N, (a), (b) and the 1-client uncached run are measured N - 1 more times at the end,
and the report says in how many of the N the target held: on a shared machine one run's
verdict is not the whole story.

Prints markdown tables and writes bench/results/recall_latency.md (--no-write: print only).

With --natural it measures natural text instead: LoCoMo turns as the memories of 20 agents,
LoCoMo questions as queries, through the API of a stack it starts, and reports the stack's CPU
per recall by process role (bench/_recall_natural.py says how); it writes that section of
bench/results/recall_latency.md and keeps the rest. --requests (the 1-client run, default
400) and --concurrent-requests (default 800) are distinct questions: LoCoMo has 1,974.

      python bench/recall_latency.py --natural --requests 200 --concurrent-requests 800"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stack,
    TextMaker,
    add_stack_args,
    command_line,
    cpu_between,
    cpu_sample,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    owner_connect,
    percentile,
    progress,
    stack_from_args,
    summary,
    write_report,
)

from memworker import Client  # noqa: E402
from memworker.sdk import ApiError  # noqa: E402

DIM = 384
K = 10
KINDS = ("fact", "fact", "fact", "preference", "decision", "method", "conclusion", "event")
PLAIN_TOPK = (
    "SELECT id FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s ORDER BY embedding <=> %s LIMIT 10"
)


# --- corpus -----------------------------------------------------------------------------------


def agent_ids(n: int) -> list[str]:
    return [f"recall-agent-{i:04d}" for i in range(n)]


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _term_vector(term: str) -> np.ndarray:
    import zlib

    return np.random.default_rng(zlib.crc32(term.encode())).standard_normal(DIM).astype(np.float32)


def text_vector(text: str, rng: np.random.Generator, noise: float = 0.5) -> np.ndarray:
    """A unit vector with the structure of a real embedding, without the model: the sum of a
    fixed random vector per BM25 term of text, plus noise (the share `noise` of the norm), so
    texts that share terms lie close and a query finds its texts by vector too (random
    vectors give every memory the same distance to every query)."""
    from memworker.domain.tokens import tokenize

    terms = tokenize(text) or [text]
    v = np.sum([_term_vector(t) for t in terms], axis=0)
    v /= np.linalg.norm(v)
    n = rng.standard_normal(DIM).astype(np.float32)
    v = v + noise * n / np.linalg.norm(n)
    return (v / np.linalg.norm(v)).astype(np.float32)


@dataclass
class Loaded:
    """What load_corpus wrote and what it cost."""

    memories: int = 0
    postings: int = 0
    seconds: float = 0.0
    db_size: str = "n/a"
    rss_mb: float = 0.0  # this process's peak resident memory after the load


# memworker.domain.tokens stems with one module-level snowballstemmer instance, which keeps its state
# in the instance and is not thread-safe: two loader threads stemming at once raised IndexError
# inside it (and could return a wrong stem). The loader threads take turns here (they share the
# GIL anyway, so this costs nothing); their backends still insert in parallel.
_TOKENIZE_LOCK = threading.Lock()


def agent_rows(
    tid: uuid.UUID, agent: str, index: int, per_agent: int, seed: int, now: datetime, term_vectors: bool = False
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """One agent's memories rows and BM25 postings, from generators seeded by (seed, index), so
    the corpus is the same whatever the number of loader connections or their order. Vectors
    are random unit vectors, or with term_vectors text_vector()'s."""
    from memworker.domain.memories import content_hash
    from memworker.domain.tokens import term_frequencies

    maker = TextMaker(seed * 1_000_003 + index)
    id_rng = random.Random(seed * 2_000_003 + index)
    vecs = unit_vectors(np.random.default_rng([seed, index]), per_agent)
    mem_rows: list[tuple[Any, ...]] = []
    term_rows: list[tuple[Any, ...]] = []
    vec_rng = np.random.default_rng([seed, index, 1])
    for i in range(per_agent):
        text = maker.sentence()
        with _TOKENIZE_LOCK:
            tf, doc_len = term_frequencies(text)
            if term_vectors:
                vecs[i] = text_vector(text, vec_rng)
        mid = uuid.UUID(int=id_rng.getrandbits(128), version=4)
        created = now - timedelta(seconds=id_rng.uniform(0, 90 * 86400))
        mem_rows.append(
            (
                mid,
                tid,
                agent,
                text,
                id_rng.choice(KINDS),
                "L1" if i % 10 else "L2",
                0.5,
                0.7,
                created,
                created,
                [f"bench:{agent}:{i}"],
                f"bench:{agent}:{i}",
                content_hash(text),
                doc_len,
                vecs[i],
            )
        )
        term_rows += [(tid, agent, term, mid, n) for term, n in tf.items()]
    return mem_rows, term_rows


def copy_agent(conn: Any, mem_rows: list[tuple[Any, ...]], term_rows: list[tuple[Any, ...]]) -> None:
    """One agent's rows in one transaction, binary COPY (memories first: postings reference them)."""
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(
            "COPY memories (id, tenant_id, agent_id, text, kind, tier, salience, confidence, "
            "created_at, valid_from, provenance, source_key, content_hash, doc_len, embedding) "
            "FROM STDIN (FORMAT BINARY)"
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
                    "vector",
                ]
            )
            for row in mem_rows:
                copy.write_row(row)
        with cur.copy(
            "COPY memory_terms (tenant_id, agent_id, term, memory_id, tf) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "text", "text", "uuid", "int4"])
            for posting in term_rows:
                copy.write_row(posting)


def load_corpus(
    stack: Stack, tenant_id: str, agents: list[str], per_agent: int, seed: int, connections: int = 2
) -> Loaded:
    """COPY agents, then memories and postings one agent per transaction over `connections`
    owner connections in parallel (threads: while one builds its next agent's rows in Python,
    the other's backend inserts; at most one agent's rows per connection in memory), then
    ANALYZE."""
    tid = uuid.UUID(tenant_id)
    now = datetime.now(UTC)
    loaded = Loaded()
    started = time.perf_counter()
    with (
        owner_connect(stack, tenant_id) as conn,
        conn.cursor() as cur,
        cur.copy("COPY agents (tenant_id, id) FROM STDIN") as copy,
    ):
        for a in agents:
            copy.write_row((tid, a))
    lock = threading.Lock()
    bar = progress(total=len(agents), desc="COPY corpus", unit="agent")

    def load_slice(part: list[tuple[int, str]]) -> None:
        with owner_connect(stack, tenant_id) as conn:
            for index, agent in part:
                mem_rows, term_rows = agent_rows(tid, agent, index, per_agent, seed, now)
                copy_agent(conn, mem_rows, term_rows)
                with lock:
                    loaded.memories += len(mem_rows)
                    loaded.postings += len(term_rows)
                    bar.update(1)

    numbered = list(enumerate(agents))
    n = max(1, min(connections, len(agents)))
    with ThreadPoolExecutor(n) as pool:
        for future in [pool.submit(load_slice, numbered[i::n]) for i in range(n)]:
            future.result()
    bar.close()
    with owner_connect(stack) as conn:
        for table in ("agents", "memories", "memory_terms"):
            conn.execute(f"ANALYZE memworker.{table}")
        loaded.db_size = str(
            conn.execute("SELECT pg_size_pretty(pg_database_size(current_database())) AS s").fetchone()["s"]
        )
    loaded.seconds = time.perf_counter() - started
    loaded.rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return loaded


# --- queries ------------------------------------------------------------------------------------


class Queries:
    """Never-repeating recall queries from the corpus vocabulary (thread-safe)."""

    def __init__(self, seed: int) -> None:
        self.maker = TextMaker(seed)
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def fresh(self) -> str:
        with self.lock:
            while True:
                q = self.maker.query()
                if q in self.seen:  # vary it until it is new: the cache must never hit
                    q = (
                        f"{q} {self.maker.rng.choice(['today', 'again', 'please', 'now', 'lately'])} "
                        f"{self.maker.rng.randint(1, 10**6)}"
                    )
                if q not in self.seen:
                    self.seen.add(q)
                    return q


# --- bare costs --------------------------------------------------------------------------------


def product_settings() -> Any:
    """Settings as the stack we start reads them (Settings.from_env: MEMWORKER_EMBEDDING_BACKEND,
    MEMWORKER_EMBEDDING_THREADS and the rest count here as they do for the API)."""
    from memworker.settings import Settings

    return Settings.from_env(os.environ)


def bare_embedding_ms(queries: Queries, n: int, threads: int | None = None) -> list[float]:
    """One never-seen short query at a time with the query embedder the API builds
    (embeddings.for_queries of product_settings(), its query precision included); with
    threads, the same backend at that thread count instead (a reference only; for torch,
    whose threads are the process's, the product's count is set back afterwards)."""
    from memworker.models import embeddings

    product = product_settings()
    settings = product if threads is None else product.replace(embedding_threads=threads)
    embedder = embeddings.for_queries(settings, embeddings.for_settings(settings))
    try:
        embedder.embed([queries.fresh()])  # warm-up
        out = []
        for _ in progress(range(n), desc=f"(a) query embedding, {settings.embedding_threads} thread(s)", unit="q"):
            q = queries.fresh()
            t = time.perf_counter()
            embedder.embed([q])
            out.append((time.perf_counter() - t) * 1000)
        return out
    finally:
        embeddings.for_settings(product)


def bare_topk_ms(stack: Stack, tenant_id: str, agents: list[str], n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed + 1)
    r = random.Random(seed + 1)
    tid = uuid.UUID(tenant_id)
    out = []
    with owner_connect(stack) as conn:
        conn.execute(PLAIN_TOPK, (tid, agents[0], unit_vectors(rng, 1)[0])).fetchall()  # warm-up
        for _ in progress(range(n), desc="(b) plain SQL top-10", unit="q"):
            vec = unit_vectors(rng, 1)[0]
            agent = r.choice(agents)
            t = time.perf_counter()
            rows = conn.execute(PLAIN_TOPK, (tid, agent, vec)).fetchall()
            out.append((time.perf_counter() - t) * 1000)
            assert len(rows) == K
    return out


def bare_pair_ms(
    stack: Stack, tenant_id: str, agents: list[str], queries: Queries, n: int, seed: int
) -> tuple[list[float], list[float]]:
    """(a) then (b) in turn, as one recall needs them: a never-seen query embedded by the
    product's embedder, then the plain top-10 for a random agent with that vector; each step
    timed. Back to back, (a) reads a model its previous call just read; in turn, as in a
    request, the other step (and whatever else shares the machine's cache) runs in between."""
    from memworker.models import embeddings

    embedder = embeddings.for_queries(product_settings(), embeddings.for_settings(product_settings()))
    r = random.Random(seed + 3)
    tid = uuid.UUID(tenant_id)
    a_ms, b_ms = [], []
    with owner_connect(stack) as conn:
        for i in progress(range(n + 1), desc="(a) then (b), in turn", unit="pair"):
            t = time.perf_counter()
            vec = embedder.embed([queries.fresh()])[0]
            t_a = time.perf_counter()
            rows = conn.execute(PLAIN_TOPK, (tid, r.choice(agents), vec)).fetchall()
            t_b = time.perf_counter()
            assert len(rows) == K
            if i:  # the first is a warm-up
                a_ms.append((t_a - t) * 1000)
                b_ms.append((t_b - t_a) * 1000)
    return a_ms, b_ms


def recall_statement_ms(
    stack: Stack, tenant_id: str, agents: list[str], queries: Queries, n: int, seed: int
) -> list[float]:
    """(c) memworker.recall.hybrid.serve as the API calls it (the app role, a pooled connection, the
    tenant transaction, queries/core.sql: recall, its hits' access bumps buffered for Redis), default policy,
    with a random query vector given instead of an embedding."""
    import redis

    from memworker.domain.policy import Policy
    from memworker.recall import hybrid as recall
    from memworker.recall.stats import Stats
    from memworker.storage import bumps, db

    app_url = stack.info.get("database_url")
    if not app_url:
        return []
    rng = np.random.default_rng(seed + 2)
    r = random.Random(seed + 2)
    out = []
    pool = db.open_pool(app_url, min_size=1, max_size=1, name="bench-recall")
    access = bumps.Buffer(redis.Redis.from_url(stack.info["redis_url"]))  # the hits' access bumps, as the API
    stats = Stats()  # large agents' statistics cached as an API process caches them
    try:
        for i in progress(range(n + 1), desc="(c) recall statement", unit="q"):
            query = recall.Query(queries.fresh(), K)
            qvec = unit_vectors(rng, 1)[0]
            t = time.perf_counter()
            recall.serve(
                pool,
                qvec,
                tenant_id=uuid.UUID(tenant_id),
                agent_id=r.choice(agents),  # type: ignore[arg-type]
                query=query,
                policy=Policy(),
                access=access,
                stats=stats,
            )
            if i:  # the first is a warm-up
                out.append((time.perf_counter() - t) * 1000)
    finally:
        pool.close()
        access.close()
        access.client.close()
    return out


# --- recall through the API ------------------------------------------------------------------


@dataclass
class Run:
    name: str
    clients: int
    server_ms: list[float] = field(default_factory=list)
    client_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)  # "HTTP 429", "ReadTimeout", ...
    busy: float = float("nan")  # the machine's CPU busy fraction over the run (all cores)
    cpu_s: float = float("nan")  # the machine's CPU seconds over the run ...
    client_cpu_s: float = float("nan")  # ... of which this process (the clients) used these

    def cpu_ms_per_request(self, seconds: float) -> float:
        return seconds * 1000 / len(self.client_ms) if self.client_ms else float("nan")

    @property
    def error_text(self) -> str:
        return ", ".join(f"{n} x {kind}" for kind, n in sorted(self.errors.items())) or "0"

    @property
    def qps(self) -> float:
        return len(self.client_ms) / self.wall_s if self.wall_s else float("nan")


def run_recalls(
    stack: Stack,
    key: str,
    agents: list[str],
    name: str,
    clients: int,
    per_client: int,
    next_query: Callable[[], str],
    seed: int,
) -> Run:
    """`clients` threads, each with its own Client, each sending per_client recalls back to back."""
    run = Run(name, clients)
    lock = threading.Lock()
    bar = progress(total=clients * per_client, desc=name, unit="req")
    start = threading.Barrier(clients + 1)

    def worker(i: int) -> None:
        r = random.Random(seed * 1000 + i)
        with Client(stack.api_url, key, timeout=60) as client:
            client.recall(agents[0], "warm up the connection", k=K)
            start.wait()
            for _ in range(per_client):
                q = next_query()
                t = time.perf_counter()
                try:
                    resp = client.recall(r.choice(agents), q, k=K)
                except Exception as exc:  # counted by kind and reported; the run goes on
                    kind = f"HTTP {exc.status}" if isinstance(exc, ApiError) else type(exc).__name__
                    with lock:
                        run.errors[kind] = run.errors.get(kind, 0) + 1
                    continue
                elapsed = (time.perf_counter() - t) * 1000
                with lock:
                    run.client_ms.append(elapsed)
                    run.server_ms.append(float(resp["took_ms"]))
                    bar.update(1)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    started, cpu_before = time.perf_counter(), cpu_sample()
    for t in threads:
        t.join()
    run.wall_s = time.perf_counter() - started
    run.busy, run.cpu_s, run.client_cpu_s = cpu_between(cpu_before, cpu_sample())
    bar.close()
    return run


def cached_queries(queries: Queries, n: int) -> Callable[[], str]:
    pool = [queries.fresh() for _ in range(n)]
    r = random.Random(len(pool))
    lock = threading.Lock()

    def pick() -> str:
        with lock:
            return r.choice(pool)

    pick.pool = pool  # type: ignore[attr-defined]
    return pick


# --- report -----------------------------------------------------------------------------------------


@dataclass
class Repetition:
    """One more check of the target in the same run: (a) and (b) measured again, then a
    1-client uncached run."""

    a_ms: float
    b_ms: float
    p50_ms: float

    @property
    def budget_ms(self) -> float:
        return 2 * (self.a_ms + self.b_ms)

    @property
    def ratio(self) -> float:
        return self.p50_ms / self.budget_ms


def repeat_target(
    stack: Stack, key: str, tenant_id: str, agents: list[str], queries: Queries, args: argparse.Namespace, index: int
) -> Repetition:
    seed = args.seed + 100 * index  # other agents and vectors than the first measurement
    a = percentile(bare_embedding_ms(queries, args.bare), 50)
    b = percentile(bare_topk_ms(stack, tenant_id, agents, args.bare, seed), 50)
    run = run_recalls(
        stack, key, agents, f"1 client, uncached (repetition {index + 1})", 1, args.requests, queries.fresh, seed
    )
    return Repetition(a, b, percentile(run.server_ms, 50))


def repetitions_section(reps: list[Repetition]) -> list[str]:
    """The target checked once per repetition, and how often it held."""
    if len(reps) < 2:
        return []
    rows = [
        [
            i + 1,
            fmt(r.a_ms, 2),
            fmt(r.b_ms, 2),
            fmt(r.budget_ms, 2),
            fmt(r.p50_ms, 2),
            fmt(r.ratio, 2),
            "yes" if r.ratio <= 1 else "no",
        ]
        for i, r in enumerate(reps)
    ]
    met = sum(r.ratio <= 1 for r in reps)
    median = percentile([r.ratio for r in reps], 50)
    return [
        "## The target, repeated in this run",
        "",
        (
            f"(a) and (b) measured again, then {len(reps) - 1} more 1-client uncached run(s), one after "
            "the other on the same stack and corpus (repetition 1 is the measurement above). ms:"
        ),
        "",
        md_table(["repetition", "(a)", "(b)", "target 2 x (a + b)", "server p50", "p50 / target", "met"], rows),
        "",
        f"Met in {met} of {len(reps)}; median p50 / target {median:.2f}.",
        "",
    ]


def report(
    args: argparse.Namespace,
    loaded: Loaded,
    bare: dict[str, list[float]],
    backend: str,
    threads: dict[str, int],
    runs: list[Run],
    load_before: str,
    stack: Stack,
    reps: list[Repetition],
) -> str:
    a, b = percentile(bare["a"], 50), percentile(bare["b"], 50)
    budget = 2 * (a + b)
    single = next((r for r in runs if r.clients == 1 and "uncached" in r.name), None)
    measures = [
        (
            f"(a) one query embedding, uncached: the product's embedder ({backend} backend, "
            f"{threads['product']} thread(s), MEMWORKER_EMBEDDING_THREADS)",
            bare["a"],
        ),
        ("(b) plain SQL vector top-10, one agent", bare["b"]),
        (
            "(c) the recall statement alone, as the API runs it (recall.serve: app role, RLS, hits buffered as accesses)",
            bare["c"],
        ),
    ]
    if bare.get("a_in_turn"):
        measures += [
            ("(a, in turn) reference only: (a) when each embedding is followed by one (b)", bare["a_in_turn"]),
            ("(b, in turn) reference only: (b) right after each (a)", bare["b_in_turn"]),
        ]
    if bare.get("a_default"):
        measures.append(
            (
                f"(a') reference only: (a) with {threads['default']} threads, one per CPU (not the product's setting)",
                bare["a_default"],
            )
        )
    bare_rows = [
        [label, len(v), fmt(percentile(v, 50), 2), fmt(percentile(v, 95), 2), fmt(percentile(v, 99), 2)]
        for label, v in measures
    ]
    run_rows = []
    ones = {r.name.split(", ")[1]: r for r in runs if r.clients == 1}  # the baseline of each kind
    for r in runs:
        s, c = summary(r.server_ms), summary(r.client_ms)
        one = ones.get(r.name.split(", ")[1])
        qps_x = fmt(r.qps / one.qps, 2) if one and one.qps else "n/a"
        p50_x = fmt(c["p50"] / percentile(one.client_ms, 50), 2) if one and one.client_ms else "n/a"
        run_rows.append(
            [
                r.name,
                r.clients,
                len(r.client_ms),
                r.error_text,
                fmt(r.qps),
                qps_x,
                p50_x,
                fmt(s["p50"], 2),
                fmt(s["p95"], 2),
                fmt(s["p99"], 2),
                fmt(c["p50"], 2),
                fmt(c["p95"], 2),
                fmt(c["p99"], 2),
                f"{r.busy:.0%}",
                fmt(r.cpu_ms_per_request(r.cpu_s), 2),
                fmt(r.cpu_ms_per_request(r.client_cpu_s), 2),
            ]
        )
    if single is None:
        target = (
            f"Target: server-side p50 (1 client, uncached) <= 2 x (a + b) = **{budget:.2f} ms**; "
            "not checked: no 1-client run (--clients)."
        )
    else:
        p50 = percentile(single.server_ms, 50)
        verdict = "meets" if p50 <= budget else "misses"
        target = (
            f"Target: server-side p50 (1 client, uncached) <= 2 x (a + b) = 2 x ({a:.2f} + {b:.2f}) = "
            f"**{budget:.2f} ms**; measured **{p50:.2f} ms**: {verdict} the target."
        )
        if bare.get("a_in_turn"):
            a_in, b_in = percentile(bare["a_in_turn"], 50), percentile(bare["b_in_turn"], 50)
            target += (
                f" For reference, with the bare costs taken in turn: 2 x ({a_in:.2f} + {b_in:.2f}) = "
                f"{2 * (a_in + b_in):.2f} ms; the measured p50 is {p50 / (a_in + b_in):.2f} x their sum."
            )
    rate = loaded.memories / loaded.seconds if loaded.seconds else float("nan")
    return "\n".join(
        [
            "# Recall latency",
            "",
            f"{args.agents:,} agents x {args.memories:,} memories = {loaded.memories:,} memories "
            f"({loaded.postings:,} postings); recall k={K}, default policy; seed {args.seed}.",
            "",
            f"Load: binary COPY over {args.load_connections} owner connection(s), one agent per transaction, "
            f"then ANALYZE: **{loaded.seconds:.0f} s** ({fmt(rate, 0)} memories/s); database {loaded.db_size} "
            f"afterwards; peak memory of the bench process {loaded.rss_mb:.0f} MB.",
            "",
            "## Bare costs (same run, stack idle), ms",
            "",
            md_table(["measure", "n", "p50", "p95", "p99"], bare_rows),
            "",
            target,
            "",
            "## Recall through the API, ms",
            "",
            md_table(
                [
                    "run",
                    "clients",
                    "answered",
                    "errors",
                    "QPS",
                    "QPS / 1 client",
                    "client p50 / 1 client",
                    "server p50",
                    "server p95",
                    "server p99",
                    "client p50",
                    "client p95",
                    "client p99",
                    "CPU busy",
                    "CPU ms / req",
                    "of which clients",
                ],
                run_rows,
            ),
            "",
            "- server = the response's took_ms (after authentication: agent check, policy, query embedding,",
            "  the recall statement); client = the whole HTTP call from a Python Client (httpx, keep-alive).",
            "- uncached: every request a query never seen before, so the API embeds it; cached: "
            f"{args.cached_pool} queries, embedded once before the run, repeated.",
            *embedding_in_request(runs, percentile(bare["a"], 50)),
            f"- 1 client: {args.requests} recalls; N clients: {args.concurrent_requests} recalls in all "
            "(each client sends its share back to back, as a thread of this process; the API processes "
            "of `memworker up` answer them, MEMWORKER_API_WORKERS). The ratios compare each run with "
            "the 1-client run of the same kind in this run. Errors other than HTTP 429/503 (with "
            "Retry-After) would be failures: an overloaded API answers 503 at once by design.",
            "- CPU: the whole machine's busy share over the run (all cores, /proc/stat) and its CPU time per "
            "answered recall, of which the clients (this process) used the last column. cores x 1000 / "
            "(CPU ms / req) bounds the QPS this machine can give, whatever the concurrency; the clients' "
            "share would sit on other hosts in a deployment.",
            "- the corpus vectors are random unit vectors, so the vector side finds nothing above the",
            "  policy's vector floor; the statement still scans and sorts every live memory of the agent.",
            "",
            *repetitions_section(reps),
            "## Environment",
            "",
            environment_note(load_before, command_line(), stack),
        ]
    )


def embedding_in_request(runs: list[Run], a_ms: float) -> list[str]:
    """A note line: the 1-client uncached minus cached server p50, which is what the query
    embedding costs inside a request, next to (a)."""
    p50 = {r.name: percentile(r.server_ms, 50) for r in runs if r.clients == 1}
    if "1 client, uncached" not in p50 or "1 client, cached" not in p50:
        return []
    inside = p50["1 client, uncached"] - p50["1 client, cached"]
    return [
        f"- 1 client, uncached minus cached p50: {inside:.2f} ms, what the query embedding costs inside "
        f"a request; {inside / a_ms:.2f} x (a) measured back to back."
    ]


def client_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of client counts: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("client counts must be >= 1")
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--memories", type=int, default=1000, help="memories per agent")
    p.add_argument(
        "--clients",
        type=client_counts,
        default=[1, 4, 16, 64],
        help="comma list of concurrent client counts (default 1,4,16,64)",
    )
    p.add_argument("--requests", type=int, default=400, help="recalls of each 1-client run")
    p.add_argument(
        "--concurrent-requests", type=int, default=800, help="recalls of each run with more than one client, in all"
    )
    p.add_argument("--bare", type=int, default=200, help="samples of each bare cost")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="check the 1-client target this many times in the run: (a), (b) and a "
        "1-client uncached run again after the others (default 1: once)",
    )
    p.add_argument("--cached-pool", type=int, default=20, help="distinct queries of the cached runs")
    p.add_argument("--load-connections", type=int, default=2, help="owner connections loading the corpus")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    g = p.add_argument_group("natural text (--natural: LoCoMo through the API, the stack's CPU per recall)")
    g.add_argument("--natural", action="store_true", help="measure natural text instead (bench/_recall_natural.py)")
    g.add_argument("--natural-clients", type=int, default=16, help="clients of the concurrent runs (default 16)")
    g.add_argument("--hits-out", help="save the 1-client run's hits (JSON) for --hits-compare")
    g.add_argument("--hits-compare", help="compare the 1-client run's hits with a saved --hits-out file")
    add_stack_args(p)
    args = p.parse_args(argv)
    if args.natural:
        return natural(args)
    load_before = loadavg()
    agents = agent_ids(args.agents)
    queries = Queries(args.seed)
    settings = product_settings()
    backend = str(settings.embedding_backend)
    # the reference count: one thread per CPU (torch's own default on this kind of machine)
    threads = {"product": settings.embedding_threads, "default": os.cpu_count() or 1}

    with stack_from_args(args, raise_limits=True) as stack:
        tenant_id, key = create_tenant(stack, f"bench-recall-{int(time.time())}")
        loaded = load_corpus(stack, tenant_id, agents, args.memories, args.seed, args.load_connections)
        print(
            f"loaded {loaded.memories:,} memories and {loaded.postings:,} postings in {loaded.seconds:.0f}s "
            f"({loaded.db_size}, peak RSS {loaded.rss_mb:.0f} MB)",
            flush=True,
        )

        bare = {"a": bare_embedding_ms(queries, args.bare)}
        if threads["default"] != threads["product"]:
            bare["a_default"] = bare_embedding_ms(queries, args.bare, threads=threads["default"])
        bare["b"] = bare_topk_ms(stack, tenant_id, agents, args.bare, args.seed)
        bare["c"] = recall_statement_ms(stack, tenant_id, agents, queries, args.bare, args.seed)
        bare["a_in_turn"], bare["b_in_turn"] = bare_pair_ms(stack, tenant_id, agents, queries, args.bare, args.seed)
        print(
            f"bare: (a) {percentile(bare['a'], 50):.2f} ms ({backend}, {threads['product']} thread(s)), "
            f"(b) {percentile(bare['b'], 50):.2f} ms, (c) {percentile(bare['c'], 50):.2f} ms (p50)",
            flush=True,
        )

        cached = cached_queries(queries, args.cached_pool)
        with Client(stack.api_url, key, timeout=60) as client:
            for q in cached.pool:  # type: ignore[attr-defined]
                client.recall(agents[0], q, k=K)  # into the API's query-embedding cache
        runs = []
        for n in args.clients:
            per_client = args.requests if n == 1 else max(1, args.concurrent_requests // n)
            label = "1 client" if n == 1 else f"{n} clients"
            for kind, pick in (("uncached", queries.fresh), ("cached", cached)):
                runs.append(run_recalls(stack, key, agents, f"{label}, {kind}", n, per_client, pick, args.seed))
                r = runs[-1]
                print(
                    f"{r.name}: server p50 {percentile(r.server_ms, 50):.1f} ms, {fmt(r.qps)} QPS, "
                    f"errors {r.error_text}",
                    flush=True,
                )
        reps = []
        single = next((r for r in runs if r.name == "1 client, uncached"), None)
        if single is not None:
            reps.append(
                Repetition(percentile(bare["a"], 50), percentile(bare["b"], 50), percentile(single.server_ms, 50))
            )
            for i in range(1, args.repeats):
                reps.append(repeat_target(stack, key, tenant_id, agents, queries, args, i))
                print(
                    f"repetition {i + 1}: server p50 {reps[-1].p50_ms:.2f} ms, {reps[-1].ratio:.2f} x the target",
                    flush=True,
                )
        text = report(args, loaded, bare, backend, threads, runs, load_before, stack, reps)
    print()
    print(text)
    if not args.no_write:
        import _recall_natural  # its sections of the report stay

        print(f"\nwritten to {write_report('recall_latency.md', text + _recall_natural.kept())}")
    return 0


def natural(args: argparse.Namespace) -> int:
    """The --natural mode: LoCoMo turns and questions, the stack's CPU per recall by process role."""
    import _recall_natural

    text = _recall_natural.measure(args)
    print()
    print(text)
    if not args.no_write:
        print(f"\nwritten to {_recall_natural.write_section(text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
