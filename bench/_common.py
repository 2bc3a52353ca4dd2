"""Helpers shared by the benchmarks in bench/ (not a benchmark itself).

- a `memworker up` subprocess on a temporary data dir and free ports (or an existing stack
  given by --api-url/--api-key, with --data-dir or --admin-database-url for the owner URL);
- tenants through the CLI, owner connections to the stack's database;
- a deterministic generator of realistic short agent sentences and episodes;
- percentiles, markdown tables, and the report writer (bench/results/)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"

# The API's per-key and per-tenant rate limits (MEMWORKER_RATE_*: 50/s per key by default)
# would turn a throughput benchmark into a measure of the limiter; with raise_limits=True a
# stack we start runs with them far out of the way. An existing stack keeps its settings.
RAISED_LIMITS = {
    "MEMWORKER_RATE_KEY_PER_S": "1000000",
    "MEMWORKER_RATE_KEY_BURST": "1000000",
    "MEMWORKER_RATE_TENANT_PER_S": "1000000",
    "MEMWORKER_RATE_TENANT_BURST": "1000000",
}


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


# bench/run_all.py stops a bench past its timeout with SIGTERM to its process group: as
# SystemExit, the bench's finally blocks still stop the stack it started and remove its files.
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)

# --- the stack --------------------------------------------------------------------------


@dataclass
class Stack:
    """A running memworker: its API, the dev key, and (when known) the owner database URL."""

    api_url: str
    api_key: str
    data_dir: Path | None = None
    owner_url: str | None = None
    process: subprocess.Popen[bytes] | None = None  # set when we started it
    temp_dir: Path | None = None
    started_s: float = 0.0  # seconds `memworker up` took to become healthy
    workers: int = 1
    info: dict[str, Any] = field(default_factory=dict)
    raised_limits: bool = False

    def require_owner_url(self) -> str:
        if not self.owner_url:
            raise SystemExit(
                "this benchmark needs the database owner URL: give --data-dir of the "
                "running stack or --admin-database-url"
            )
        return self.owner_url


def add_stack_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("stack (default: start `memworker up` on a temp dir and free ports)")
    g.add_argument("--api-url", help="use this running API instead of starting a stack")
    g.add_argument("--api-key", help="API key for --api-url (default: DATA_DIR/dev-api-key)")
    g.add_argument(
        "--data-dir", type=Path, help="data dir of the running stack behind --api-url (for stack.json and the CLI)"
    )
    g.add_argument("--admin-database-url", help="owner database URL of the stack behind --api-url")
    g.add_argument("--keep", action="store_true", help="keep the temporary data dir (logs) afterwards")


def free_port() -> int:
    from memworker.local.embedded import free_port as _free_port

    return int(_free_port())


def start_stack(
    workers: int = 1,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
    log: bool = True,
    raise_limits: bool = False,
) -> Stack:
    """`memworker --data-dir TMP up --port P --flower-port F --workers N`, waited until healthy;
    raise_limits: API rate limits out of the way (RAISED_LIMITS)."""
    temp = Path(tempfile.mkdtemp(prefix="memworker-bench-"))
    data_dir = temp / "data"
    argv = [
        sys.executable,
        "-m",
        "memworker",
        "--data-dir",
        str(data_dir),
        "up",
        "--port",
        str(free_port()),
        "--flower-port",
        str(free_port()),
        "--workers",
        str(workers),
    ]
    out = open(temp / "up.log", "wb")  # noqa: SIM115 - lives as long as the child
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(RAISED_LIMITS if raise_limits else {}), **(env or {})},
        cwd=ROOT,
    )
    stack = Stack("", "", data_dir, process=proc, temp_dir=temp, workers=workers, raised_limits=raise_limits)
    try:
        _wait_up(stack, timeout)
    except BaseException:
        stop_stack(stack, keep=True)
        raise
    stack.started_s = time.perf_counter() - started
    if log:
        print(
            f"memworker up: {stack.api_url} ({workers} worker(s)) in {stack.started_s:.0f}s; data {data_dir}",
            flush=True,
        )
    return stack


def _wait_up(stack: Stack, timeout: float) -> None:
    assert stack.process is not None and stack.data_dir is not None and stack.temp_dir is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.process.poll() is not None:
            raise RuntimeError(f"memworker up exited with {stack.process.returncode}; see {stack.temp_dir / 'up.log'}")
        info = _read_stack_file(stack.data_dir)
        key_file = stack.data_dir / "dev-api-key"
        if info and key_file.exists():
            stack.info, stack.api_url = info, info["api_url"]
            stack.owner_url = info.get("admin_database_url")
            stack.api_key = key_file.read_text().strip()
            if stack.api_key and _healthy(stack.api_url):
                return
        time.sleep(0.5)
    raise TimeoutError(f"memworker up did not become healthy in {timeout:.0f}s")


def _read_stack_file(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((data_dir / "stack.json").read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _healthy(api_url: str) -> bool:
    try:
        return httpx.get(f"{api_url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stop_stack(stack: Stack, *, keep: bool = False) -> None:
    """SIGTERM the `memworker up` we started (it stops its children), then remove its dir."""
    proc = stack.process
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if stack.temp_dir is not None:
        if keep:
            print(f"kept {stack.temp_dir} (logs in data/logs and up.log)", flush=True)
        else:
            shutil.rmtree(stack.temp_dir, ignore_errors=True)


@contextlib.contextmanager
def stack_from_args(args: argparse.Namespace, workers: int = 1, *, raise_limits: bool = False) -> Iterator[Stack]:
    """The stack named on the command line, or a fresh one stopped at the end."""
    if args.api_url:
        data_dir: Path | None = args.data_dir
        info = _read_stack_file(data_dir) if data_dir else None
        key = args.api_key
        if not key and data_dir is not None and (data_dir / "dev-api-key").exists():
            key = (data_dir / "dev-api-key").read_text().strip()
        if not key:
            raise SystemExit("--api-url needs --api-key (or --data-dir holding dev-api-key)")
        owner = args.admin_database_url or (info or {}).get("admin_database_url")
        yield Stack(args.api_url.rstrip("/"), key, data_dir, owner, workers=workers, info=info or {})
        return
    stack = start_stack(workers, raise_limits=raise_limits)
    try:
        yield stack
    finally:
        stop_stack(stack, keep=args.keep)


def create_tenant(stack: Stack, name: str) -> tuple[str, str]:
    """`memworker tenant create NAME --json` against the stack; returns (tenant_id, api_key)."""
    argv = [sys.executable, "-m", "memworker"]
    env = dict(os.environ)
    if stack.data_dir is not None:
        argv += ["--data-dir", str(stack.data_dir)]
    elif stack.owner_url:
        env["MEMWORKER_DATABASE_URL"] = stack.owner_url
    else:
        raise SystemExit("creating a tenant needs --data-dir or --admin-database-url")
    out = subprocess.run(
        argv + ["tenant", "create", name, "--json"], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"memworker tenant create failed: {out.stderr or out.stdout}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return str(data["tenant_id"]), str(data["api_key"])


def run_key(stack: Stack, name: str) -> tuple[str, int]:
    """The API key a run writes with, and the run's tag (epoch seconds). Where the bench can make
    a tenant (its own stack, or an owner URL) the run gets a fresh one, `bench-NAME-TAG`, so its
    agents start empty; otherwise it writes with the stack's key."""
    tag = int(time.time())
    if stack.data_dir is not None or stack.owner_url:
        return create_tenant(stack, f"bench-{name}-{tag}")[1], tag
    return stack.api_key, tag


def owner_connect(stack: Stack, tenant_id: str | None = None, *, autocommit: bool = True) -> Any:
    """A psycopg connection as the database owner with pgvector registered; with tenant_id
    the session is bound to that tenant (so row-level security passes for a non-superuser)."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.rows import dict_row

    from memworker.storage import db

    conn = psycopg.connect(
        stack.require_owner_url(),
        autocommit=autocommit,
        row_factory=dict_row,
        options="-c search_path=memworker,public",
    )
    register_vector(conn)
    if tenant_id:
        db.bind_tenant(conn, tenant_id, transaction_local=False)
    return conn


# --- statistics and reports ------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100), NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": float(len(values)),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values) if values else math.nan,
        "max": max(values) if values else math.nan,
    }


def fmt(x: float, digits: int = 1) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class CpuSample:
    """The machine's busy and total CPU seconds (all cores, /proc/stat) and this process's own
    CPU seconds, at one moment: two of them bracket a run (cpu_between)."""

    busy_s: float
    total_s: float
    own_s: float


def cpu_sample() -> CpuSample:
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    t = os.times()
    return CpuSample((sum(fields) - idle) / ticks, sum(fields) / ticks, t.user + t.system)


def cpu_between(before: CpuSample, after: CpuSample) -> tuple[float, float, float]:
    """(machine busy fraction, machine CPU seconds, this process's CPU seconds) between two samples."""
    busy, total = after.busy_s - before.busy_s, after.total_s - before.total_s
    return (busy / total if total else float("nan"), busy, after.own_s - before.own_s)


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def git_commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return (out.stdout.strip() or "unknown") + (" (+ uncommitted edits)" if dirty.stdout.strip() else "")


def environment_note(load_before: str, command: str, stack: Stack | None = None) -> str:
    lines = []
    if stack is not None:
        lines.append(
            f"- stack: `memworker up` started by the benchmark, {stack.workers} worker(s)"
            + (", API rate limits raised out of the way (MEMWORKER_RATE_*=1000000)" if stack.raised_limits else "")
            if stack.process is not None
            else "- stack: an existing one (--api-url), with its own settings"
        )
    return "\n".join(
        [
            f"- command: `{command}`",
            *lines,
            f"- when: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; commit {git_commit()}",
            f"- machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
            f"load average (1/5/15 min) before {load_before}, after {loadavg()}",
            "- the machine was shared with other work during the run; treat the figures as noisy",
        ]
    )


def command_line() -> str:
    return "python " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])


def write_report(name: str, text: str) -> Path:
    """bench/results/NAME, or NAME in $MEMWORKER_BENCH_RESULTS when set (bench/run_all.py sets
    it so that a combined run leaves the curated per-bench result files alone)."""
    out = Path(os.environ.get("MEMWORKER_BENCH_RESULTS") or RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(text.rstrip() + "\n")
    return path


# --- deterministic agent text ------------------------------------------------------------------

_NAMES = [
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Elif",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tara",
    "Uma",
    "Viktor",
]
_SERVICES = [
    "billing",
    "search",
    "auth",
    "checkout",
    "notifications",
    "ingest",
    "reporting",
    "gateway",
    "scheduler",
    "inventory",
    "payments",
    "analytics",
]
_COMPONENTS = [
    "connection pool",
    "Redis cache",
    "Kafka consumer",
    "nginx proxy",
    "cron job",
    "DNS resolver",
    "load balancer",
    "Postgres replica",
    "S3 bucket policy",
    "feature flag",
    "rate limiter",
    "TLS certificate",
    "webhook handler",
    "CI runner",
]
_CAUSES = [
    "an expired certificate",
    "a missing environment variable",
    "a stale cache entry",
    "a race in the retry loop",
    "an unbounded query",
    "a full disk",
    "a wrong timezone setting",
    "a dropped index",
    "a memory leak",
    "a misconfigured timeout",
    "a schema drift",
]
_PROJECTS = ["Apollo", "Borealis", "Cobalt", "Delta", "Ember", "Falcon", "Granite", "Helix", "Iris", "Juniper"]
_CHANNELS = ["email", "phone", "Slack", "SMS", "video calls", "the support portal"]
_TOPICS = [
    "SSO login",
    "invoice totals",
    "data export",
    "password reset",
    "API rate limits",
    "dashboard latency",
    "refund request",
    "mobile sync",
    "webhook retries",
    "plan upgrade",
]
_CITIES = ["Berlin", "Lisbon", "Toronto", "Osaka", "Nairobi", "Austin", "Warsaw", "Dublin", "Seoul", "Lyon"]
_FOODS = ["ramen", "tapas", "sushi", "vegan curry", "espresso", "green tea", "pizza", "falafel"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
_TOOLS = [
    "kubectl rollout restart",
    "terraform apply",
    "pg_repack",
    "git bisect",
    "redis-cli flushdb",
    "helm upgrade",
    "pytest -x",
    "docker compose up",
]
_ACTIONS = [
    "migrate the queue to Redis streams",
    "pin the client library",
    "add a read replica",
    "roll back the release",
    "split the monolith job",
    "enable request tracing",
    "move the cron to the scheduler",
    "raise the pool size to 20",
]

_TEMPLATES = [
    "The customer {name} prefers {channel} over {channel2} for follow-ups.",
    "Ticket {ticket} is about {topic} on the {project} account.",
    "We decided to {action} before the {day} release.",
    "To fix the {component} problem, run {tool} and restart the {service} service.",
    "Turns out the root cause of the {service} outage was {cause}.",
    "{name} visited the {city} office last week to review the {project} roadmap.",
    "The {project} build {version} failed because of {cause}.",
    "{name} likes {food} and dislikes {food2}.",
    "The deploy of {service} {version} finished at {hour}:{minute:02d} without errors.",
    "The budget for {project} is {amount} dollars for Q{quarter}.",
    "I'll send the {topic} summary to {name} by {day}.",
    "Maybe the {component} in {service} is misconfigured, but I'm not sure.",
    "{name} is the on-call owner for {service} this week.",
    "The {service} p95 latency went from {ms} ms to {ms2} ms after the {component} change.",
    "{name} asked whether the {topic} fix ships in {version}.",
    "We agreed that {name} will own the {project} migration.",
    "The {component} for {service} is shared with the {service2} team.",
    "{name} works from {city} and is usually online until {hour}:00.",
]
_CHITCHAT = [
    "Thanks, that sounds good!",
    "Hi there!",
    "Great, thank you.",
    "Okay, got it.",
    "No problem.",
    "Can you check that for me?",
    "Sounds good to me.",
]


class TextMaker:
    """Seeded generator of short agent-memory sentences and multi-sentence episodes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def _slots(self) -> dict[str, Any]:
        r = self.rng
        name, service, channel, food = (r.choice(_NAMES), r.choice(_SERVICES), r.choice(_CHANNELS), r.choice(_FOODS))
        return {
            "name": name,
            "service": service,
            "service2": r.choice([s for s in _SERVICES if s != service]),
            "channel": channel,
            "channel2": r.choice([c for c in _CHANNELS if c != channel]),
            "food": food,
            "food2": r.choice([f for f in _FOODS if f != food]),
            "ticket": r.randint(1000, 99999),
            "topic": r.choice(_TOPICS),
            "project": r.choice(_PROJECTS),
            "action": r.choice(_ACTIONS),
            "day": r.choice(_DAYS),
            "component": r.choice(_COMPONENTS),
            "tool": r.choice(_TOOLS),
            "cause": r.choice(_CAUSES),
            "city": r.choice(_CITIES),
            "version": f"v{r.randint(1, 9)}.{r.randint(0, 30)}.{r.randint(0, 9)}",
            "hour": r.randint(7, 22),
            "minute": r.randint(0, 59),
            "amount": r.randint(2, 90) * 1000,
            "quarter": r.randint(1, 4),
            "ms": r.randint(20, 400),
            "ms2": r.randint(20, 900),
        }

    def sentence(self) -> str:
        return self.rng.choice(_TEMPLATES).format(**self._slots())

    def query(self) -> str:
        """A short recall query made of the same vocabulary, e.g. 'Priya billing outage root cause'."""
        s = self._slots()
        shapes = [
            "what does {name} prefer for follow-ups",
            "why did the {service} outage happen",
            "who owns the {project} migration",
            "how to fix the {component} in {service}",
            "{topic} ticket for {project}",
            "when does {name} send the {topic} summary",
            "{service} latency after the {component} change",
            "where does {name} work from",
            "budget for {project}",
            "what did we decide before the {day} release",
        ]
        return self.rng.choice(shapes).format(**s)

    def episode(self, min_sentences: int = 3, max_sentences: int = 8) -> list[str]:
        """The sentences of one episode; about one in five is chit-chat the reflector should drop."""
        n = self.rng.randint(min_sentences, max_sentences)
        return [self.rng.choice(_CHITCHAT) if self.rng.random() < 0.2 else self.sentence() for _ in range(n)]

    def episode_body(self, as_messages: bool) -> dict[str, Any]:
        """An EpisodeIn body: plain content, or user/assistant messages of 1-3 sentences each."""
        sentences = self.episode()
        if not as_messages:
            return {"content": " ".join(sentences)}
        messages, role, i = [], "user", 0
        while i < len(sentences):
            take = self.rng.randint(1, 3)
            messages.append({"role": role, "content": " ".join(sentences[i : i + take])})
            role = "assistant" if role == "user" else "user"
            i += take
        return {"messages": messages}


def bare_embedder_rate(texts: Sequence[str], *, desc: str = "bare embedder") -> tuple[float, int]:
    """(texts/s, batch size) of the embedder a process of this environment builds
    (memworker.models.embeddings.for_settings(Settings.from_env(os.environ)): the model, backend,
    batch size and thread count a worker of the same environment uses), run in this process on
    `texts` in batches of the settings' embedding batch size, after one warm-up batch. The
    ceiling a worker's embedding step can reach (bench/ingest.py measures its ceiling the same way)."""
    from memworker.models.embeddings import for_settings
    from memworker.settings import Settings

    settings = Settings.from_env(os.environ)
    batch = settings.embedding_batch_size
    embedder = for_settings(settings)
    embedder.embed(list(texts[:batch]))  # warm-up: model load and first-call costs
    started = time.perf_counter()
    for i in progress(range(0, len(texts), batch), desc=desc, unit="batch"):
        embedder.embed(list(texts[i : i + batch]))
    return len(texts) / (time.perf_counter() - started), batch


def progress(iterable: Any = None, **kwargs: Any) -> Any:
    """tqdm progress on stderr (BENCH_PROGRESS=0 silences it)."""
    from tqdm import tqdm

    disable = os.environ.get("BENCH_PROGRESS") == "0"
    return tqdm(iterable, disable=disable, mininterval=2.0, dynamic_ncols=False, ncols=100, **kwargs)
