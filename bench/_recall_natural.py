"""Recall's CPU on natural text (`python bench/recall_latency.py --natural`; not a bench itself).

LoCoMo (/work/shared/benchdata/locomo/locomo10.json): each conversation's dialog turns, split
into its first and second half, are the memories of two agents (10 conversations: 20 agents
of about 300 memories), written through the API (POST .../memories/batch, which embeds them
with the product's embedder); LoCoMo's questions (every category, distinct texts) are the
queries, each asked of the agent holding the half of its conversation with its first evidence
turn. Recall k=10 through the HTTP API of the `memworker up` the bench started. The bench's
tenant has sleep turned off (policy consolidation_enabled false), so the corpus stays as
written.

Uncached: the API keeps an LRU of query embeddings per process (models/embeddings.
CachedQueryEmbedder) and an agent's policy for a while; it caches no recall results. An
uncached recall here is one whose query text no earlier request of the run sent, so every
one is embedded. The cached run repeats a few pre-warmed questions: the difference of the two
runs' CPU per recall is what the query embedding costs inside the server.

CPU: utime + stime from /proc/<pid>/stat of every process of the stack (the descendants of
`memworker up`), sampled before and after each run and summed by role: API processes,
Postgres backends, Postgres's own processes (WAL writer, checkpointer, autovacuum), Celery
worker and beat (the access-bump drain and whatever else they run), Redis. Server CPU per
recall = their sum / recalls answered; flower (a monitoring UI) is shown but not counted. The
clients' CPU is this process's own over the run. The machine may be shared: CPU time, unlike
wall time, does not grow with other work's load (caches and frequency aside).

Before measuring, the bench waits until the stack is quiet (the writes' follow-up work done).

The 1-client run asks its questions in a fixed order on a freshly loaded stack, so the hits
(each as its turn's dia_id) are comparable between two runs of different code: --hits-out
saves them, --hits-compare reports how many rankings agree with a saved file. On a stack given
by --api-url and --data-dir (the data dir an earlier run loaded: the load is written once),
restart `memworker up` before each run: its API processes remember the questions' embeddings
(the report's "embedded by the API" shows whether they did)."""

from __future__ import annotations

import argparse
import json
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    Stack,
    command_line,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    progress,
    stack_from_args,
    write_report,
)

from memworker import Client
from memworker.sdk import ApiError

DATA = Path("/work/shared/benchdata/locomo/locomo10.json")
K = 10
SECTION = "## Natural text: LoCoMo through the API"
SERVER_ROLES = ("api", "postgres backends", "postgres other", "worker", "redis")


# --- corpus and questions -----------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    agent: str
    text: str


def locomo(path: Path = DATA) -> tuple[dict[str, list[dict[str, Any]]], list[Ask]]:
    """(agent -> memories to write, distinct questions with their agents). Turns as
    bench/locomo_recall.py writes them (speaker: text [image: caption], clipped)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from locomo_recall import memory_text

    raw = json.loads(path.read_text())
    agents: dict[str, list[dict[str, Any]]] = {}
    asks: list[Ask] = []
    seen: set[str] = set()
    for conv in raw:
        c = conv["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in c if k.startswith("session_") and isinstance(c[k], list))
        turns = [t for n in sessions for t in c[f"session_{n}"]]
        half = (len(turns) + 1) // 2
        where: dict[str, str] = {}
        for part, chunk in enumerate((turns[:half], turns[half:])):
            agent = f"locomo-{conv['sample_id']}-{part}"
            agents[agent] = [
                {"text": memory_text(t), "kind": "event", "metadata": {"dia_id": t["dia_id"]}} for t in chunk
            ]
            where.update({t["dia_id"]: agent for t in chunk})
        first = f"locomo-{conv['sample_id']}-0"
        for qa in conv["qa"]:
            q = str(qa["question"]).strip()
            if q and q not in seen:
                seen.add(q)
                evidence = [e for e in qa.get("evidence") or [] if e in where]
                asks.append(Ask(where[evidence[0]] if evidence else first, q))
    return agents, asks


def load(client: Client, agents: dict[str, list[dict[str, Any]]], batch: int = 100) -> tuple[int, float]:
    started = time.perf_counter()
    n = 0
    bar = progress(total=sum(len(m) for m in agents.values()), desc="write LoCoMo turns", unit="memory")
    for agent, memories in agents.items():
        for i in range(0, len(memories), batch):
            client.add_memories(agent, memories[i : i + batch])
            n += len(memories[i : i + batch])
            bar.update(len(memories[i : i + batch]))
    bar.close()
    return n, time.perf_counter() - started


# --- the stack's CPU, by role ---------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds user + system) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _role(cmd: str, parent_role: str | None) -> str:
    if cmd.startswith("postgres:"):
        # a backend's title is "postgres: USER DATABASE HOST ACTIVITY"; the rest name their task
        own = ("checkpointer", "background writer", "walwriter", "autovacuum", "logical replication", "stats")
        return "postgres other" if any(cmd.startswith(f"postgres: {w}") for w in own) else "postgres backends"
    if "bin/postgres" in cmd:
        return "postgres other"
    if "memworker.api.serve" in cmd:
        return "api"
    if "celery" in cmd and "flower" in cmd:
        return "flower"
    if "celery" in cmd:
        return "worker"
    if "redis-server" in cmd:
        return "redis"
    return parent_role or "other"


class StackCpu:
    """CPU seconds of the stack's processes by role: every descendant of `memworker up`."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.roles: dict[int, str] = {}

    def sample(self) -> dict[int, float]:
        parents: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (s := _stat(int(name))) is not None:
                parents[int(name)], cpu[int(name)] = s
        out: dict[int, float] = {}

        def walk(pid: int, role: str | None) -> None:
            for child in (p for p, pp in parents.items() if pp == pid):
                if child not in self.roles:
                    self.roles[child] = _role(_cmdline(child), role)
                out[child] = cpu[child]
                walk(child, self.roles[child])

        walk(self.root, None)
        return out

    def between(self, before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
        """CPU seconds by role from before to after (a process born in between counts from 0;
        one that ended in between is lost, which the pooled processes of a run never do)."""
        by_role: dict[str, float] = {}
        for pid, t in after.items():
            role = self.roles.get(pid, "other")
            by_role[role] = by_role.get(role, 0.0) + t - before.get(pid, 0.0)
        return by_role


def wait_quiet(cpu: StackCpu, *, window_s: float = 3.0, share: float = 0.05, timeout_s: float = 300.0) -> float:
    """Wait until the stack uses under `share` of one core over a window (the writes' follow-up
    work done); returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        before = cpu.sample()
        time.sleep(window_s)
        used = sum(v for r, v in cpu.between(before, cpu.sample()).items() if r != "flower")
        if used / window_s < share:
            break
    return time.monotonic() - started


# --- runs -------------------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    clients: int
    server_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # seconds by role
    client_cpu_s: float = 0.0
    hits: list[list[str]] = field(default_factory=list)  # the 1-client run's, in question order
    embedded: float = float("nan")  # queries the API processes embedded during the run (/metrics)

    @property
    def answered(self) -> int:
        return len(self.server_ms)

    def ms(self, seconds: float) -> float:
        return seconds * 1000 / self.answered if self.answered else float("nan")

    @property
    def server_s(self) -> float:
        return sum(self.cpu.get(r, 0.0) for r in SERVER_ROLES)


def run(
    stack: Stack, key: str, cpu: StackCpu, name: str, clients: int, asks: Callable[[int], list[Ask]], *, keep: bool
) -> Run:
    """`clients` threads, each with its own Client, each asking asks(i) back to back."""
    out = Run(name, clients)
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    results: list[list[list[str]]] = [[] for _ in range(clients)]

    def worker(i: int) -> None:
        mine = asks(i)
        with Client(stack.api_url, key, timeout=60) as client:
            start.wait()
            for a in mine:
                try:
                    resp = client.recall(a.agent, a.text, k=K)
                except Exception as exc:  # counted by kind and reported; the run goes on
                    kind = f"HTTP {exc.status}" if isinstance(exc, ApiError) else type(exc).__name__
                    with lock:
                        out.errors[kind] = out.errors.get(kind, 0) + 1
                    continue
                if keep:
                    results[i].append([m["metadata"].get("dia_id", m["id"]) for m in resp["memories"]])
                with lock:
                    out.server_ms.append(float(resp["took_ms"]))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    embedded = embedded_queries(stack.api_url)
    before, own, started = cpu.sample(), os.times(), time.perf_counter()
    for t in threads:
        t.join()
    out.wall_s = time.perf_counter() - started
    after, own_after = cpu.sample(), os.times()
    out.embedded = embedded_queries(stack.api_url) - embedded
    out.cpu = cpu.between(before, after)
    out.client_cpu_s = own_after.user + own_after.system - own.user - own.system
    out.hits = [h for r in results for h in r]
    print(
        f"{name}: {out.answered} answered, {fmt(out.answered / out.wall_s)} QPS, server CPU "
        f"{fmt(out.ms(out.server_s), 2)} ms/recall ({', '.join(f'{r} {fmt(out.ms(s), 2)}' for r, s in out.cpu.items())})",
        flush=True,
    )
    return out


def embedded_queries(api_url: str) -> float:
    """How many recall queries the API processes have embedded (cache misses): the sum of
    memworker_query_embedding_batch_size on /metrics, NaN when it cannot be read."""
    import httpx

    try:
        text = httpx.get(f"{api_url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return float("nan")
    for line in text.splitlines():
        if line.startswith("memworker_query_embedding_batch_size_sum "):
            return float(line.split()[1])
    return float("nan")


# --- the query embedding, bare ---------------------------------------------------------------------


def bare_embedding(texts: list[str], threads: int | None = None) -> tuple[float, float]:
    """(CPU ms, wall ms) p50 of one question embedded alone by the query embedder the API
    builds (embeddings.for_queries of Settings.from_env), or at `threads` intra-op threads."""
    from memworker.models import embeddings
    from memworker.settings import Settings

    product = Settings.from_env(os.environ)
    settings = product if threads is None else product.replace(embedding_threads=threads)
    embedder = embeddings.for_queries(settings, embeddings.for_settings(settings))
    embedder.embed(texts[:1])
    cpu, wall = [], []
    for t in texts[1:]:
        c, w = time.process_time(), time.perf_counter()
        embedder.embed([t])
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    return percentile(cpu, 50), percentile(wall, 50)


# --- the bench --------------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> str:
    load_before = loadavg()
    corpus, asks = locomo()
    rng = random.Random(args.seed)
    single = asks[: args.requests]  # the fixed-order run: the same questions in every run of the bench
    rest = asks[args.requests :]
    rng.shuffle(rest)
    need = args.concurrent_requests + args.cached_pool
    if len(rest) < need:
        raise SystemExit(f"LoCoMo has {len(asks)} distinct questions; --requests + --concurrent-requests too many")
    concurrent, pool = rest[: args.concurrent_requests], rest[args.concurrent_requests : need]
    n = args.natural_clients
    with stack_from_args(args, raise_limits=True) as stack:
        root = stack.process.pid if stack.process is not None else stack.info.get("pid")
        if root is None:
            raise SystemExit("--natural measures the stack's processes: start one, or give --data-dir with --api-url")
        key, memories, load_s = corpus_key(stack, corpus)
        with Client(stack.api_url, key, timeout=300) as client:
            for a in pool:  # into the API processes' query-embedding caches (each process: a few rounds)
                for _ in range(6):
                    client.recall(a.agent, a.text, k=K)
        reset_access(stack)
        cpu = StackCpu(int(root))
        quiet_s = wait_quiet(cpu)
        print(f"{memories} memories (written in {load_s:.0f}s); stack quiet after {quiet_s:.0f}s", flush=True)
        runs = [run(stack, key, cpu, "1 client, uncached", 1, lambda i: single, keep=True)]
        runs.append(run(stack, key, cpu, f"{n} clients, uncached", n, lambda i: concurrent[i::n], keep=False))
        per = max(1, args.concurrent_requests // n)
        runs.append(
            run(stack, key, cpu, f"{n} clients, cached", n, lambda i: random.Random(i).choices(pool, k=per), keep=False)
        )
    texts = [a.text for a in asks[: args.bare + 1]]
    bare = {"product": bare_embedding(texts), "2": bare_embedding(texts, 2)}
    if args.hits_out:
        Path(args.hits_out).write_text(json.dumps({"asks": [a.__dict__ for a in single], "hits": runs[0].hits}))
    agree = compare_hits(runs[0].hits, args.hits_compare) if args.hits_compare else None
    return report(args, memories, len(corpus), runs, bare, agree, load_before, stack)


def corpus_key(stack: Stack, corpus: dict[str, list[dict[str, Any]]]) -> tuple[str, int, float]:
    """(API key, memories, seconds to write them) of a tenant holding the corpus: made and
    loaded now, or, on a stack of --data-dir that an earlier run loaded, that run's (the
    writes embed every turn, minutes on a busy machine; two runs of different code can
    share one data dir by restarting `memworker up` on it)."""
    saved = stack.data_dir / "bench-recall-natural.json" if stack.data_dir is not None else None
    if saved is not None and stack.process is None and saved.exists():
        state = json.loads(saved.read_text())
        return str(state["key"]), int(state["memories"]), 0.0
    tenant_id, key = create_tenant(stack, f"bench-recall-natural-{int(time.time())}")
    with Client(stack.api_url, key, timeout=300) as client:
        # no sleep passes: their conclusions and re-rated salience would change what the
        # questions find from one run to the next, and their CPU is not recall's
        client.set_policy({"consolidation_enabled": False})
        memories, load_s = load(client, corpus)
    if saved is not None:
        saved.write_text(json.dumps({"tenant_id": tenant_id, "key": key, "memories": memories}))
    return key, memories, load_s


def reset_access(stack: Stack) -> None:
    """Every memory's access count back to 0: a run's recalls bump them, and the prior reads
    them, so each run (and each run of other code on the same data) starts from one state."""
    from _common import owner_connect

    with owner_connect(stack) as conn:
        conn.execute("UPDATE memworker.memories SET access_count = 0, last_access_at = NULL")


def compare_hits(hits: list[list[str]], path: str) -> tuple[int, int, int]:
    """(identical rankings, same top-10 set, compared) against a saved --hits-out file."""
    saved = json.loads(Path(path).read_text())["hits"]
    pairs = list(zip(hits, saved, strict=False))
    return sum(a == b for a, b in pairs), sum(set(a) == set(b) for a, b in pairs), len(pairs)


def report(
    args: argparse.Namespace,
    memories: int,
    agents: int,
    runs: list[Run],
    bare: dict[str, tuple[float, float]],
    agree: tuple[int, int, int] | None,
    load_before: str,
    stack: Stack,
) -> str:
    roles = [*SERVER_ROLES, "flower", "other"]
    rows = []
    for r in runs:
        rows.append(
            [
                r.name,
                r.answered,
                fmt(r.embedded, 0),
                ", ".join(f"{n} x {k}" for k, n in r.errors.items()) or "0",
                fmt(r.answered / r.wall_s if r.wall_s else float("nan")),
                fmt(percentile(r.server_ms, 50), 2),
                f"**{fmt(r.ms(r.server_s), 2)}**",
                *(fmt(r.ms(r.cpu.get(role, 0.0)), 2) for role in roles),
                fmt(r.ms(r.client_cpu_s), 2),
            ]
        )
    by_name = {r.name: r for r in runs}
    unc, cac = by_name[f"{args.natural_clients} clients, uncached"], by_name[f"{args.natural_clients} clients, cached"]
    embed_ms = unc.ms(unc.server_s) - cac.ms(cac.server_s)
    lines = [
        SECTION,
        "",
        f"{memories:,} LoCoMo turns as memories of {agents} agents (each conversation's two halves), written "
        f"through the API; LoCoMo questions as queries, recall k={K}, default policy.",
        "",
        md_table(
            [
                "run",
                "answered",
                "embedded by the API",
                "errors",
                "QPS",
                "took_ms p50",
                "server CPU ms / recall",
                *roles,
                "clients",
            ],
            rows,
        ),
        "",
        f"- of the server CPU, the query embedding: **{embed_ms:.2f} ms** per recall ({args.natural_clients} clients, "
        "uncached minus cached); one question embedded alone in this process, p50: "
        f"{bare['product'][0]:.2f} ms CPU ({bare['product'][1]:.2f} ms wall) with the product's thread count, "
        f"{bare['2'][0]:.2f} ms CPU ({bare['2'][1]:.2f} ms wall) with 2 threads.",
        "- server CPU = api + postgres backends + postgres other + worker + redis (utime + stime of the "
        "stack's processes, /proc/<pid>/stat, over the run) / recalls answered; flower is not counted; "
        "clients = the bench process (httpx clients in threads).",
        "- uncached: no question was sent before in the run (the API embeds each; 'embedded by the API' "
        "counts the queries its processes embedded during the run, from /metrics); cached: "
        f"{args.cached_pool} questions embedded before the run, repeated.",
    ]
    if agree is not None:
        same, same_set, n = agree
        lines.append(
            f"- hits against {args.hits_compare} (1-client run, same questions in the same order): "
            f"{same} of {n} rankings identical, {same_set} of {n} the same top-{K} set."
        )
    lines += ["", environment_note(load_before, command_line(), stack)]
    return "\n".join(lines)


def _report_path(name: str) -> Path:
    from _common import RESULTS

    return Path(os.environ.get("MEMWORKER_BENCH_RESULTS") or RESULTS) / name


def kept(name: str = "recall_latency.md") -> str:
    """The natural-text sections of the report (from SECTION to the end), for the other mode's
    rewrite of the rest; "" when there are none."""
    path = _report_path(name)
    old = path.read_text() if path.exists() else ""
    return "\n\n" + SECTION + old.split(SECTION, 1)[1].rstrip() if SECTION in old else ""


def write_section(text: str, name: str = "recall_latency.md") -> Path:
    """The natural-text section into the report, replacing an earlier one and keeping the rest."""
    path = _report_path(name)
    old = path.read_text() if path.exists() else "# Recall latency\n"
    head, _, tail = old.partition(SECTION)
    rest = tail.split("\n## ", 1)
    # the section ends where the next top-level section starts (its own lines hold none)
    after = ("\n## " + rest[1]) if len(rest) > 1 and tail else ""
    return write_report(name, head.rstrip() + "\n\n" + text.rstrip() + "\n" + after)
