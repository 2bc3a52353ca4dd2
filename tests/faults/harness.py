"""A fault-injection harness on the real stack: its own embedded Postgres and Redis (so they
can be stopped, restarted and wiped), the API in a subprocess, real worker and beat
processes, a client that records every operation, and a checker over the final state.

Used by tests/faults/ and by bench/soak.py."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

from memworker import keys
from memworker.local import embedded
from memworker.settings import Settings
from memworker.storage import core_db, db, migrate


@dataclass
class Op:
    """One client operation as the client saw it."""

    key: str  # the idempotency key: how the checker finds it in the database
    tenant: str
    agent: str
    state: str = "invoked"  # invoked -> ok | failed | timeout
    episode_id: str | None = None
    status_code: int | None = None
    started: float = 0.0
    took_s: float = 0.0


class FaultStack:
    """Embedded Postgres + Redis + API subprocess + workers + beat, all killable."""

    def __init__(
        self, *, lease_s: int = 5, max_attempts: int = 5, llm_url: str | None = None, reconcile_every_s: float = 2.0
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mwfault-"))
        self.pg, self.owner_url = embedded.start_postgres(self.dir)
        self.redis_port = embedded.free_port()
        self.redis, self.redis_url = embedded.start_redis(self.dir, self.redis_port)
        migrate.migrate(self.owner_url)
        self.api_port = embedded.free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.settings = Settings(
            database_url=db.app_url(self.owner_url),
            admin_database_url=self.owner_url,
            redis_url=self.redis_url,
            data_dir=self.dir,
            episode_lease_s=lease_s,
            episode_max_attempts=max_attempts,
            reconcile_every_s=reconcile_every_s,
            llm_base_url=llm_url,
            llm_timeout_s=5.0,
            rate_key_per_s=10_000,
            rate_key_burst=100_000,
            rate_tenant_per_s=10_000,
            rate_tenant_burst=100_000,
        )
        self.tenants: dict[str, dict[str, Any]] = {}
        self.workers: list[subprocess.Popen[bytes]] = []
        self.worker_argv: list[list[str]] = []
        self.api: subprocess.Popen[bytes] | None = None
        self.beat: subprocess.Popen[bytes] | None = None

    # --- processes ------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
        env.update(self.settings.to_env())
        env["HF_HUB_OFFLINE"] = "1"
        return env

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", *argv], env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        return proc

    def start_api(self) -> None:
        self.api = self._spawn(
            "api",
            [
                "uvicorn",
                "memworker.api.app:create_app",
                "--factory",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.api_port),
                "--log-level",
                "warning",
            ],
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.api.poll() is None, (self.dir / "api.log").read_text()[-3000:]
            time.sleep(0.3)
        raise AssertionError("fault stack API did not start")

    def start_workers(self, n: int, concurrency: int = 1, queues: str = "ingest,maintenance,webhooks") -> None:
        for _ in range(n):
            i = len(self.workers)
            self.worker_argv.append(
                [
                    "celery",
                    "-A",
                    "tasks.celery_app",
                    "worker",
                    "-n",
                    f"fw{i}@%h",
                    "-Q",
                    queues,
                    "-c",
                    str(concurrency),
                    "--loglevel",
                    "info",
                ]
            )
            self.workers.append(self._spawn(f"worker{i}", self.worker_argv[i]))

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker i whole (parent and pool children: a lost node); restart_worker brings it back."""
        try:
            os.killpg(self.workers[i].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.workers[i].wait()

    def restart_worker(self, i: int) -> None:
        self.workers[i] = self._spawn(f"worker{i}", self.worker_argv[i])

    def start_fleet(self, workers: int = 2, concurrency: int = 1) -> None:
        """The usual fault stack: tenants alice, bob and charlie, the API, workers (each with
        `concurrency` prefork children) and beat."""
        for name in ("alice", "bob", "charlie"):
            self.add_tenant(name)
        self.start_api()
        self.start_workers(workers, concurrency=concurrency)
        self.start_beat()

    def start_beat(self) -> None:
        self.beat = self._spawn(
            "beat",
            ["celery", "-A", "tasks.celery_app", "beat", "-s", str(self.dir / "beat-schedule"), "--loglevel", "info"],
        )

    def kill_random_worker(self, rng: random.Random) -> str:
        """SIGKILL a pool child (the parent forks a new one) or a whole worker (restarted)."""
        i = rng.randrange(len(self.workers))
        parent = self.workers[i]
        children = psutil.Process(parent.pid).children(recursive=True) if parent.poll() is None else []
        if children and rng.random() < 0.5:
            try:
                rng.choice(children).kill()  # any of the worker's `concurrency` children
            except psutil.NoSuchProcess:
                pass  # it died on its own meanwhile: the parent replaces it all the same
            return "child"
        self.kill_worker(i)
        self.restart_worker(i)
        return "worker"

    def restart_redis(self, *, lose_data: bool) -> None:
        self.redis.stop()
        if lose_data:
            shutil.rmtree(self.dir / "redis", ignore_errors=True)
        self.redis, _ = embedded.start_redis(self.dir, self.redis_port)

    def stop_postgres(self) -> None:
        self.pg.stop()

    def start_postgres(self) -> None:
        self.pg, _ = embedded.start_postgres(self.dir)

    def close(self) -> None:
        for proc in [*self.workers, self.beat, self.api]:
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self.redis.stop()
        self.pg.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- data -----------------------------------------------------------------------------

    def add_tenant(self, name: str) -> str:
        with db.connect(self.owner_url) as conn:
            t = core_db.create_tenant(conn, name=name)
            db.bind_tenant(conn, t.id)
            key, _ = keys.create(conn, tenant_id=t.id, name="faults")
        self.tenants[name] = {"id": t.id, "key": key}
        return key

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.owner_url) as conn:
            return conn.execute(sql, args).fetchall()

    def wait_drained(self, keys_: list[str], timeout: float) -> float:
        """Seconds until every named episode is stored or dead (raises on timeout)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                (left,) = self.query(
                    "SELECT count(*) FROM memworker.episodes WHERE idempotency_key = ANY(%s) "
                    "AND status NOT IN ('stored', 'dead')",
                    keys_,
                )[0]
            except psycopg.OperationalError:
                left = -1
            if left == 0:
                return time.monotonic() - started
            time.sleep(0.5)
        raise AssertionError(f"not drained after {timeout}s; see logs in {self.dir}")


class HistoryClient:
    """Posts episodes and records every operation: invoked, then ok, failed or timeout."""

    def __init__(self, api_url: str, tenants: dict[str, dict[str, Any]], *, timeout_s: float = 10.0) -> None:
        self.api_url = api_url
        self.tenants = tenants
        self.timeout_s = timeout_s
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def post(self, tenant: str, agent: str, content: str, key: str) -> Op:
        op = Op(key, tenant, agent, started=time.monotonic())
        with self._lock:
            self.ops.append(op)
        try:
            r = httpx.post(
                f"{self.api_url}/v1/agents/{agent}/episodes",
                timeout=self.timeout_s,
                json={"content": content, "idempotency_key": key},
                headers={"Authorization": f"Bearer {self.tenants[tenant]['key']}"},
            )
            op.status_code = r.status_code
            if r.status_code == 202:
                op.state, op.episode_id = "ok", r.json()["episode_id"]
            else:
                op.state = "failed"
        except httpx.TimeoutException:
            op.state = "timeout"
        except httpx.HTTPError:
            op.state = "failed"  # connection refused: nothing was accepted
        op.took_s = time.monotonic() - op.started
        return op

    def run(self, n: int, *, agents: int = 10, rate_per_s: float | None = None, seed: int = 1) -> None:
        rng = random.Random(seed)
        names = list(self.tenants)
        for i in range(n):
            tenant = names[i % len(names)]
            agent = f"agent-{rng.randrange(agents)}"
            self.post(tenant, agent, episode_text(rng, i), f"op-{seed}-{i}")
            if rate_per_s:
                time.sleep(1 / rate_per_s)


def episode_text(rng: random.Random, i: int) -> str:
    services = ["billing", "search", "auth", "ingest", "gateway", "scheduler", "ledger"]
    s = rng.choice(services)
    return (
        f"Incident {i}: the {s} service restarted after a memory spike on node {rng.randrange(40)}. "
        f"We decided to raise the {s} heap limit to {rng.randrange(2, 16)} GB. "
        f"The on-call engineer for {s} this week is engineer {rng.randrange(100)}."
    )


@dataclass
class Verdict:
    invoked: int = 0
    ok: int = 0
    failed: int = 0
    timeout: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    dead: int = 0
    details: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if k != "details"}


def check(stack: FaultStack, ops: list[Op], scope: str = "") -> Verdict:
    """Read the final state: every accepted op stored exactly once, nothing unexpected among
    the episodes whose idempotency key starts with scope (one scenario's keys)."""
    v = Verdict(invoked=len(ops))
    states = Counter(op.state for op in ops)
    v.ok, v.failed, v.timeout = states["ok"], states["failed"], states["timeout"]
    rows = stack.query("SELECT idempotency_key, id::text, status FROM memworker.episodes")
    by_key: dict[str, list[tuple[str, str]]] = {}
    for key, eid, status in rows:
        by_key.setdefault(key, []).append((eid, status))
    invoked = {op.key for op in ops}
    for op in ops:
        found = by_key.get(op.key, [])
        if len(found) > 1:
            v.duplicated += 1
            v.details.append(f"{op.key}: {len(found)} episodes")
        if op.state == "ok":
            if not found or found[0][0] != op.episode_id:
                v.lost += 1
                v.details.append(f"{op.key}: accepted as {op.episode_id}, found {found}")
            elif found[0][1] == "dead":
                v.dead += 1
            elif found[0][1] != "stored":
                v.lost += 1
                v.details.append(f"{op.key}: still {found[0][1]}")
    v.unexpected = sum(1 for key in by_key if key and key.startswith(scope) and key not in invoked)
    (dup_memories,) = stack.query("SELECT count(*) - count(DISTINCT source_key) FROM memworker.memories")[0]
    (empty,) = stack.query(
        "SELECT count(*) FROM memworker.episodes WHERE status = 'stored' AND cardinality(memory_ids) = 0"
    )[0]
    v.duplicated += int(dup_memories)
    if empty:
        v.details.append(f"{empty} stored episodes without memories")
    return v


def write_report(path: Path, title: str, rows: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", "", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows.items()]
    path.write_text("\n".join(lines) + "\n")
    print(json.dumps(rows, indent=2))
