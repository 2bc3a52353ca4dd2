"""`memworker up`: the whole system on one machine. Embedded Postgres and Redis unless
URLs are given, migrations, then the API, N Celery workers, beat and Flower as children.
Ctrl-C or SIGTERM stops every child; no process outlives us."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from memworker import errors, keys, runtime
from memworker.local import embedded
from memworker.settings import Settings
from memworker.storage import core_db, db, migrate

logger = logging.getLogger(__name__)

DEV_TENANT = "dev"
# What the embedded servers keep in the data dir: they set (and need) its modes themselves.
SERVER_FOLDERS = frozenset({"pg", "pg-replica", "redis", "run"})
FLOWER_USER = "admin"  # Flower's basic-auth login; the password: data_dir/flower-password (0600)
LOCK_FILE = "up.lock"  # held (flock) by the process that owns the data dir: see try_lock
UP = "memworker up"  # the holder a running stack writes in LOCK_FILE


def make_private(data_dir: Path) -> None:
    """Take group and other access off everything under data_dir (not following symlinks),
    except the embedded servers' own folders; data_dir itself keeps its mode (under root the
    servers' user must traverse it)."""
    for entry in data_dir.iterdir():
        if entry.is_symlink() or entry.name in SERVER_FOLDERS:
            continue
        paths = [entry]
        if entry.is_dir():
            for root, dirs, files in os.walk(entry):
                paths += [Path(root) / n for n in dirs + files]
        for path in paths:
            st = path.lstat()
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
                path.chmod(stat.S_IMODE(st.st_mode) & 0o700)


def try_lock(data_dir: Path, holder: str) -> int | None:
    """Hold data_dir for this process (an flock on up.lock, released when the descriptor is
    closed or the process ends), noting our pid and `holder` in it; None, and nothing
    changed, when another process holds it. One `memworker up` per data dir, and no command
    starts its Postgres while one runs or starts."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n{holder}\n".encode())
    return fd


def holder_of(data_dir: Path) -> str:
    """Who holds data_dir, for a message: the running `memworker up` with its API URL (from
    its stack file), one still starting, or a command using the stopped stack's database."""
    try:
        pid, _, holder = (data_dir / LOCK_FILE).read_text().partition("\n")
    except OSError:
        pid, holder = "", ""
    pid, holder = pid.strip() or "?", holder.strip() or UP
    if holder != UP:
        return f"{holder} (pid {pid}) is using the database in {data_dir}"
    try:
        api = json.loads((data_dir / runtime.STACK_FILE).read_text())["api_url"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"memworker up is already running on {data_dir} (pid {pid}, still starting: no API yet)"
    return f"memworker up is already running on {data_dir} (pid {pid}, API {api})"


def celery_argv(*args: str) -> list[str]:
    """A Celery command over this project's app, run by this interpreter."""
    return [sys.executable, "-m", "celery", "-A", "tasks.celery_app", *args]


@dataclass
class Service:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # this child's alone, over the shared env


class Stack:
    def __init__(self, settings: Settings, out: TextIO = sys.stdout, *, replica: bool = False) -> None:
        self.settings = settings
        self.replica = replica  # a streaming replica of the embedded Postgres for the reads
        self.out = out
        self.data_dir = settings.data_dir.resolve()
        self.infra: list[embedded.Child] = []
        self.services: list[Service] = []
        self._lock_fd: int | None = None
        self._stopping = False
        self._env: dict[str, str] = {}

    # --- lifecycle ----------------------------------------------------------------------

    def run(self) -> int:
        """Start everything, supervise until a signal, stop everything. Returns an exit code."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            self.start()
            self.supervise()
            return 0
        except KeyboardInterrupt:
            return 0
        finally:
            self.stop()

    def start(self) -> None:
        # Everything this process and its children create is the user's alone (folders 0700,
        # files 0600): logs, metrics files and beat's schedule can quote tenants' data. What an
        # older version left readable is closed too.
        os.umask(0o077)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()  # before anything in the data dir is touched: it may be another stack's
        make_private(self.data_dir)
        s = self.settings
        app_url, owner_url, redis_url = self._start_servers()
        applied = migrate.migrate(owner_url)
        self._say(f"migrations: {', '.join(applied) if applied else 'up to date'}")
        read_url = self._start_replica(owner_url) if self.replica else s.read_database_url
        dev_key = self._dev_key(owner_url)
        api_url = f"http://{s.api_host}:{s.api_port}"
        flower_url = f"http://127.0.0.1:{s.flower_port}"
        flower_password = embedded.secret(self.data_dir / "flower-password")
        embedded.write_private(  # 0600: its URLs carry the Redis password and name the pgpass file
            self.data_dir / runtime.STACK_FILE,
            json.dumps(
                {
                    "pid": os.getpid(),
                    "database_url": app_url,
                    "admin_database_url": owner_url,
                    "redis_url": redis_url,
                    "read_database_url": read_url,
                    "api_url": api_url,
                    "flower_url": flower_url,
                },
                indent=2,
            ),
        )
        env = self._child_env(app_url, owner_url, redis_url, read_url)
        self.services = self._services(flower_password)
        for svc in self.services:
            self._spawn(svc, env)
        self._wait_healthy(api_url)
        self._say("")
        self._say(f"memworker is up  (data dir {self.data_dir})")
        self._say(f"  API     {api_url}   (docs at {api_url}/docs)")
        self._say(f"  Flower  {flower_url}   (login {FLOWER_USER} / {flower_password})")
        self._say(f"  workers {s.workers} (+ a webhook sender, {s.webhook_worker_concurrency} threads)")
        if read_url:
            self._say("  reads   recall, context and lists from the replica (docs/scaling.md)")
        self._say(f"  dev API key (tenant '{DEV_TENANT}'): {dev_key}")
        self._say("Ctrl-C stops everything.")

    def _start_servers(self) -> tuple[str, str, str]:
        """Postgres and Redis: the configured ones, or embedded ones started here. Returns the
        app's database URL, the owner's (migrations, keys) and Redis's."""
        s = self.settings
        if s.database_url:
            app_url, owner_url = s.database_url, s.admin_database_url or s.database_url
        else:
            self._say("starting embedded Postgres (pgvector) ...")
            pg, owner_url = embedded.start_postgres(self.data_dir)
            self.infra.append(pg)
            app_url = db.app_url(owner_url)
        if s.redis_url:
            redis_url = s.redis_url
        else:
            self._say("starting embedded Redis ...")
            rd, redis_url = embedded.start_redis(self.data_dir)
            self.infra.append(rd)
        return app_url, owner_url, redis_url

    def _services(self, flower_password: str) -> list[Service]:
        """The children: the API, the ingest workers, the webhook sender, beat and Flower."""
        s = self.settings
        api = [
            sys.executable,
            "-m",
            "memworker.api.serve",  # uvicorn, keeping TCP_NODELAY with several processes
            "--host",
            s.api_host,
            "--port",
            str(s.api_port),
            "--workers",  # processes sharing the port; each its own pool, caches and model
            str(s.api_processes()),
            "--log-level",
            "warning",
        ]
        services = [Service("api", api)]
        loglevel = s.log_level.lower()
        for i in range(1, s.workers + 1):
            services.append(
                Service(
                    f"worker{i}",
                    celery_argv("worker", "-n", f"worker{i}@%h", "-Q", "ingest,consolidate,maintenance")
                    + ["-c", str(s.worker_concurrency), "--loglevel", loglevel],
                )
            )
        # Webhook deliveries: their own process, threads (each waits on a tenant's receiver,
        # up to webhook_timeout_s), so a hanging receiver never holds an ingest worker.
        services.append(
            Service(
                "webhooks",
                celery_argv("worker", "-n", "webhooks@%h", "-Q", "webhooks")
                + ["-P", "threads", "-c", str(s.webhook_worker_concurrency), "--loglevel", loglevel],
            )
        )
        services.append(
            Service("beat", celery_argv("beat", "--loglevel", "warning", "-s", str(self.data_dir / "beat-schedule")))
        )
        services.append(
            Service(
                "flower",
                celery_argv("flower", f"--port={s.flower_port}", "--address=127.0.0.1", "--logging=warning"),
                # Its UI and API can revoke and kill tasks: a login for both (in the env, not
                # on the command line, which every local user can read).
                env={"FLOWER_BASIC_AUTH": f"{FLOWER_USER}:{flower_password}"},
            )
        )
        return services

    def supervise(self) -> None:
        """Restart a child that dies (at most 5 times a minute), until told to stop."""
        env = self._env
        while not self._stopping:
            for child in self.infra:
                if child.process.poll() is not None:
                    raise errors.StorageError(f"embedded {child.name} exited; stopping")
            for svc in self.services:
                if svc.process is not None and svc.process.poll() is not None and not self._stopping:
                    now = time.monotonic()
                    svc.restarts = [t for t in svc.restarts if now - t < 60] + [now]
                    if len(svc.restarts) > 5:
                        raise errors.MemworkerError(f"{svc.name} keeps crashing; see {self.data_dir}/logs")
                    logger.warning("%s exited with %s; restarting", svc.name, svc.process.returncode)
                    self._spawn(svc, env)
            time.sleep(0.5)

    def stop(self) -> None:
        self._stopping = True
        for svc in self.services:
            if svc.process and svc.process.poll() is None:
                os.killpg(svc.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for svc in self.services:
            if svc.process is None:
                continue
            with contextlib.suppress(subprocess.TimeoutExpired):
                svc.process.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):  # what is left of its group (prefork children too)
                os.killpg(svc.process.pid, signal.SIGKILL)
            if svc.process.poll() is None:
                svc.process.wait()
        for child in reversed(self.infra):
            child.stop()
        if self._lock_fd is not None:  # the stack file is ours only while we hold the data dir
            (self.data_dir / runtime.STACK_FILE).unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- helpers ------------------------------------------------------------------------

    def _on_signal(self, signum: int, _: Any) -> None:
        if not self._stopping:
            self._say(f"\nreceived {signal.Signals(signum).name}; stopping ...")
        self._stopping = True

    def _start_replica(self, owner_url: str) -> str:
        """A hot standby of the embedded Postgres (a fresh copy at every start); its app-role URL."""
        if self.settings.database_url:
            raise errors.ConfigError(
                "--replica copies the embedded Postgres; with MEMWORKER_DATABASE_URL set, "
                "name your own standbys in MEMWORKER_READ_DATABASE_URL instead"
            )
        self._say("starting a streaming replica of Postgres (pg_basebackup) ...")
        child, replica_owner_url = embedded.start_replica(self.data_dir, owner_url)
        self.infra.append(child)
        return db.app_url(replica_owner_url)

    def _take_lock(self) -> None:
        fd = try_lock(self.data_dir, UP)
        if fd is None:
            raise errors.AlreadyRunning(f"{holder_of(self.data_dir)}; stop it first or use another --data-dir")
        self._lock_fd = fd

    def _dev_key(self, owner_url: str) -> str:
        """A full-scope key for the 'dev' tenant, kept (0600) in the data dir across restarts."""
        path = self.data_dir / "dev-api-key"
        with db.connect(owner_url) as conn:
            tenant = core_db.tenant_by_name(conn, name=DEV_TENANT) or core_db.create_tenant(conn, name=DEV_TENANT)
            if path.exists():
                key = path.read_text().strip()
                prefix = keys.prefix_of(key)
                row = core_db.authenticate(conn, prefix=prefix) if prefix else None
                if row and row.revoked_at is None and bytes(row.key_hash) == keys.hash_key(key):
                    return key
            db.bind_tenant(conn, tenant.id)
            key, _ = keys.create(conn, tenant_id=tenant.id, name="dev (memworker up)")
        embedded.write_private(path, key + "\n")
        return key

    def _child_env(self, app_url: str, owner_url: str, redis_url: str, read_url: str | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            self.settings.replace(
                database_url=app_url,
                admin_database_url=owner_url,
                redis_url=redis_url,
                data_dir=self.data_dir,
                read_database_url=read_url,
            ).to_env()
        )
        prom = self.data_dir / "prometheus"
        prom.mkdir(exist_ok=True)
        for f in prom.glob("*.db"):
            f.unlink()  # counters start afresh with the processes that write them
        env["PROMETHEUS_MULTIPROC_DIR"] = str(prom)
        env["HF_HUB_OFFLINE"] = "1"
        env["TOKENIZERS_PARALLELISM"] = "false"
        self._env = env
        return env

    def _spawn(self, svc: Service, env: dict[str, str]) -> None:
        logs = self.data_dir / "logs"
        logs.mkdir(exist_ok=True)
        logs.chmod(0o700)  # what the services log can quote tenants' data
        with open(logs / f"{svc.name}.log", "ab") as log:
            svc.process = subprocess.Popen(
                svc.argv,
                env={**env, **svc.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, so stop() reaches its children
                preexec_fn=lambda: embedded.die_with_parent(signal.SIGTERM),
            )

    def _wait_healthy(self, api_url: str, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self._stopping:
                raise KeyboardInterrupt
            api = self.services[0].process
            if api is not None and api.poll() is not None:
                raise errors.MemworkerError(f"the API exited at start; see {self.data_dir}/logs/api.log")
            try:
                r = httpx.get(f"{api_url}/healthz", timeout=2)
                if r.status_code == 200:
                    return
                last = r.text
            except httpx.HTTPError as exc:
                last = str(exc)
            time.sleep(0.3)
        raise errors.MemworkerError(f"the API did not become healthy in {timeout:.0f}s: {last}")

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)
