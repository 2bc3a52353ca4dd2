"""The production deployment files, checked by parsing them: there is no Docker engine on
the development machines, so docker-compose.yml, ops/Dockerfile and the Postgres init script
are never run here and these tests are what stands between a typo and a failed deploy."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "ops" / "Dockerfile"
INIT_DIR = ROOT / "ops" / "postgres-init"

SERVICES = {"postgres", "redis", "migrate", "api", "worker", "webhooks", "beat", "flower"}
APP_SERVICES = ("migrate", "api", "worker", "webhooks", "beat", "flower")
LONG_RUNNING = ("api", "worker", "webhooks", "beat", "flower")

# Compose interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}.
_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """What compose makes of a string, given the variables in env (a missing `:?` raises)."""

    def sub(m: re.Match[str]) -> str:
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        if env.get(name):
            return env[name]
        if op in (":?", "?"):
            raise KeyError(f"{name} is required: {arg}")
        return arg or ""

    return _VAR.sub(sub, value)


FAKE_ENV = {"POSTGRES_PASSWORD": "ownerpw", "MEMWORKER_APP_PASSWORD": "apppw", "FLOWER_BASIC_AUTH": "admin:pw"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def svcs(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]  # type: ignore[no-any-return]


def argv(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def healthcheck_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(test)


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        word, _, rest = pending.partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "Dockerfile ends inside a continued line"
    return out


# --- docker-compose.yml ----------------------------------------------------------------------


def test_compose_defines_every_service_of_the_system(svcs: dict[str, Any]) -> None:
    assert set(svcs) >= SERVICES


def test_every_variable_reference_is_well_formed_and_required_ones_are_documented() -> None:
    text = COMPOSE.read_text()
    starts = [m.start() for m in re.finditer(r"\$\{", text)]
    matched = {m.start() for m in _VAR.finditer(text)}
    assert starts and set(starts) == matched, "a ${...} reference compose cannot parse"
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    required = {m.group("name") for m in _VAR.finditer(text) if m.group("op") in (":?", "?")}
    assert required == set(FAKE_ENV)
    for name in required:
        assert name in header, f"{name} is required but not explained at the top of the file"
    with pytest.raises(KeyError, match="MEMWORKER_APP_PASSWORD"):
        interpolate(text, {k: v for k, v in FAKE_ENV.items() if k != "MEMWORKER_APP_PASSWORD"})


def test_postgres_runs_pgvector_with_a_volume_and_a_readiness_check(svcs: dict[str, Any]) -> None:
    pg = svcs["postgres"]
    assert pg["image"].startswith("pgvector/pgvector:")
    assert any(str(v).endswith(":/var/lib/postgresql/data") for v in pg["volumes"])
    assert "pg_isready" in healthcheck_text(pg)
    env = env_of(pg)
    assert env["POSTGRES_USER"] == "memworker" and env["POSTGRES_DB"] == "memworker"
    assert "POSTGRES_PASSWORD" in env and "MEMWORKER_APP_PASSWORD" in env


def test_postgres_init_script_creates_the_app_login_role_from_the_env(svcs: dict[str, Any]) -> None:
    mounts = [str(v) for v in svcs["postgres"]["volumes"]]
    init = [m for m in mounts if ":/docker-entrypoint-initdb.d" in m]
    assert len(init) == 1
    assert (ROOT / init[0].split(":", 1)[0]).resolve() == INIT_DIR
    scripts = sorted(INIT_DIR.glob("*.sh"))
    assert scripts, "no init script in ops/postgres-init"
    text = "\n".join(s.read_text() for s in scripts)
    assert re.search(r"CREATE ROLE memworker_app LOGIN PASSWORD :'app_password'", text)
    assert 'app_password="$MEMWORKER_APP_PASSWORD"' in text
    assert "NOBYPASSRLS" in text  # the same attributes the migration would give it
    bash = shutil.which("bash")
    if bash:
        for script in scripts:
            subprocess.run([bash, "-n", str(script)], check=True)


def test_redis_appends_to_disk_and_never_evicts_queued_tasks(svcs: dict[str, Any]) -> None:
    redis = svcs["redis"]
    cmd = argv(redis)
    assert cmd[cmd.index("--appendonly") + 1] == "yes"
    assert cmd[cmd.index("--maxmemory-policy") + 1] == "noeviction"
    assert any(str(v).endswith(":/data") for v in redis["volumes"])
    assert "redis-cli ping" in healthcheck_text(redis)


def test_worker_can_be_scaled_with_compose(svcs: dict[str, Any]) -> None:
    worker = svcs["worker"]
    assert "container_name" not in worker
    assert "ports" not in worker
    assert "replicas" not in worker.get("deploy", {})  # would fight with --scale


def test_worker_consumes_every_queue_the_app_routes_to(svcs: dict[str, Any]) -> None:
    from tasks.celery_app import CONSOLIDATE, INGEST, MAINTENANCE

    cmd = argv(svcs["worker"])
    assert cmd[:4] == ["celery", "-A", "tasks.celery_app", "worker"]
    assert set(cmd[cmd.index("-Q") + 1].split(",")) == {INGEST, CONSOLIDATE, MAINTENANCE}
    assert cmd[cmd.index("-c") + 1] == "2"


def test_webhook_deliveries_have_their_own_senders(svcs: dict[str, Any]) -> None:
    """A tenant's hanging receivers must not hold the ingest workers, so the
    webhooks queue is consumed by its own service and by nothing that consumes ingest."""
    from memworker.settings import Settings
    from tasks.celery_app import INGEST, WEBHOOKS, make_celery

    app = make_celery(Settings())  # the routes are the same whatever the settings

    consumers = {name: argv(svc) for name, svc in svcs.items() if "worker" in argv(svc)[:4]}
    queues = {name: set(cmd[cmd.index("-Q") + 1].split(",")) for name, cmd in consumers.items()}
    assert queues["webhooks"] == {WEBHOOKS}
    assert not any(INGEST in q and WEBHOOKS in q for q in queues.values())
    routed = {r["queue"] for r in app.conf.task_routes.values()}
    assert routed <= set().union(*queues.values())  # every queue the app routes to has a consumer
    cmd = consumers["webhooks"]
    assert cmd[cmd.index("-P") + 1] == "threads"


def test_beat_is_a_single_service_with_its_schedule_on_a_volume(svcs: dict[str, Any]) -> None:
    beats = [name for name, svc in svcs.items() if "beat" in argv(svc)]
    assert beats == ["beat"]
    beat = svcs["beat"]
    assert int(beat.get("deploy", {}).get("replicas", 1)) <= 1
    cmd = argv(beat)
    assert cmd[:4] == ["celery", "-A", "tasks.celery_app", "beat"]
    schedule_dir = str(Path(cmd[cmd.index("-s") + 1]).parent)
    assert any(str(v).split(":")[1] == schedule_dir for v in beat["volumes"])


def test_app_services_build_from_ops_dockerfile(svcs: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        build = svcs[name]["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context == ROOT, name
        assert build["dockerfile"] == "ops/Dockerfile", name
        assert (context / build["dockerfile"]).is_file()


def test_app_services_reach_the_postgres_and_redis_services(svcs: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        env = {k: interpolate(v, FAKE_ENV) for k, v in env_of(svcs[name]).items()}
        db = urlsplit(env["MEMWORKER_DATABASE_URL"])
        assert db.scheme == "postgresql" and db.hostname == "postgres" and db.port == 5432, name
        assert (db.username, db.password, db.path) == ("memworker_app", "apppw", "/memworker"), name
        redis = urlsplit(env["MEMWORKER_REDIS_URL"])
        assert redis.scheme == "redis" and redis.hostname == "redis" and redis.port == 6379, name


def test_app_services_share_one_environment_anchor(compose: dict[str, Any], svcs: dict[str, Any]) -> None:
    shared = {k: str(v) for k, v in compose["x-memworker-env"].items()}
    assert shared["HF_HUB_OFFLINE"] == "1"
    assert shared["PROMETHEUS_MULTIPROC_DIR"]
    for name in APP_SERVICES:
        env = env_of(svcs[name])
        assert shared.items() <= env.items(), name
        # the multiprocess metrics directory exists (a tmpfs) in every container
        assert any(str(t).split(":")[0] == shared["PROMETHEUS_MULTIPROC_DIR"] for t in svcs[name].get("tmpfs", [])), (
            name
        )


def test_only_migrate_holds_the_owner_role(svcs: dict[str, Any]) -> None:
    owner = urlsplit(interpolate(env_of(svcs["migrate"])["MEMWORKER_ADMIN_DATABASE_URL"], FAKE_ENV))
    assert (owner.username, owner.password, owner.hostname) == ("memworker", "ownerpw", "postgres")
    for name in LONG_RUNNING:
        assert "MEMWORKER_ADMIN_DATABASE_URL" not in env_of(svcs[name]), name


def test_migrate_runs_once_after_postgres_is_healthy(svcs: dict[str, Any]) -> None:
    migrate = svcs["migrate"]
    assert argv(migrate) == ["memworker", "migrate"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert str(migrate["restart"]) == "no"  # one-shot: a restart policy would loop it


def test_api_and_worker_start_only_after_a_successful_migration(svcs: dict[str, Any]) -> None:
    for name in ("api", "worker"):
        deps = svcs[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully", name
        assert deps["redis"]["condition"] == "service_healthy", name


def test_api_serves_the_app_factory_on_8420_and_checks_healthz(svcs: dict[str, Any]) -> None:
    api = svcs["api"]
    cmd = argv(api)
    assert cmd[:3] == ["python", "-m", "memworker.api.serve"]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    assert cmd[cmd.index("--port") + 1] == "8420"
    assert any(str(p).endswith("8420:8420") for p in api["ports"])
    check = healthcheck_text(api)
    assert "/healthz" in check and ":8420" in check


def test_flower_listens_on_5555_behind_basic_auth(svcs: dict[str, Any]) -> None:
    flower = svcs["flower"]
    cmd = argv(flower)
    assert cmd[:4] == ["celery", "-A", "tasks.celery_app", "flower"]
    assert "--port=5555" in cmd
    assert any(str(p).endswith("5555:5555") for p in flower["ports"])
    env = env_of(flower)
    assert env["FLOWER_BASIC_AUTH"]
    assert "FLOWER_UNAUTHENTICATED_API" not in env


def test_flower_login_comes_from_the_env_and_its_port_stays_on_loopback(svcs: dict[str, Any]) -> None:
    """Flower can revoke and kill tasks. Its login is required from .env (compose
    refuses to start without it), never on a command line, and its port is published on the
    host's loopback only; no service opens its API without a login."""
    flower = svcs["flower"]
    auth = env_of(flower)["FLOWER_BASIC_AUTH"]
    assert _VAR.fullmatch(auth) and _VAR.fullmatch(auth).group("op") == ":?"  # type: ignore[union-attr]
    assert interpolate(auth, FAKE_ENV) == FAKE_ENV["FLOWER_BASIC_AUTH"]
    with pytest.raises(KeyError, match="FLOWER_BASIC_AUTH"):
        interpolate(auth, {})
    assert not any(arg.startswith("--basic-auth") or arg.startswith("--auth") for arg in argv(flower))
    assert [str(p) for p in flower["ports"]] == ["127.0.0.1:5555:5555"]
    for name, svc in svcs.items():
        assert "FLOWER_UNAUTHENTICATED_API" not in env_of(svc), name


def test_published_ports_stay_on_loopback_unless_widened(compose: dict[str, Any], svcs: dict[str, Any]) -> None:
    """No port is published on every interface by default: the API (with its /metrics) is on
    the host's loopback until MEMWORKER_PUBLISH_ADDRESS, explained at the top of the file,
    names another address; Flower stays on loopback whatever it says. The API's containers
    get MEMWORKER_METRICS_TOKEN, which guards /metrics once the port is widened."""
    for name, svc in svcs.items():
        for spec in svc.get("ports", []):
            assert isinstance(spec, str), (name, spec)  # the short syntax, so the address is checked
            assert interpolate(spec, {}).split(":")[0] == "127.0.0.1", (name, spec)
    widened = {"MEMWORKER_PUBLISH_ADDRESS": "0.0.0.0"}
    assert [interpolate(p, widened) for p in svcs["api"]["ports"]] == ["0.0.0.0:8420:8420"]
    assert [interpolate(p, widened) for p in svcs["flower"]["ports"]] == ["127.0.0.1:5555:5555"]
    header = "\n".join(line for line in COMPOSE.read_text().splitlines() if line.startswith("#"))
    assert "MEMWORKER_PUBLISH_ADDRESS" in header and "MEMWORKER_METRICS_TOKEN" in header
    assert (
        interpolate(str(compose["x-memworker-env"]["MEMWORKER_METRICS_TOKEN"]), {"MEMWORKER_METRICS_TOKEN": "t"}) == "t"
    )
    assert interpolate(str(env_of(svcs["api"])["MEMWORKER_METRICS_TOKEN"]), {}) == ""  # unset: /metrics open


def test_named_volumes_are_declared(compose: dict[str, Any], svcs: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    assert {"pgdata", "redis-data"} <= declared
    for name, svc in svcs.items():
        for mount in svc.get("volumes", []):
            source = str(mount).split(":", 1)[0]
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"{name} mounts undeclared volume {source}"


# --- ops/Dockerfile --------------------------------------------------------------------------


def test_dockerfile_builds_on_python_311_slim() -> None:
    froms = [args for instr, args in dockerfile_instructions() if instr == "FROM"]
    assert froms == ["python:3.11-slim"]


def test_dockerfile_gets_torch_only_through_the_project_pin() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "torch==2.13.0" in pyproject["project"]["dependencies"]
    for instr, args in dockerfile_instructions():
        if instr == "RUN" and "pip" in args:
            assert not re.search(r"\btorch\b(?!==2\.13\.0)", args), args
    # No index or host of our own in the build: PyPI defaults, or a build arg's value.
    code = [line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert not any("://" in line or "--index-url" in line for line in code)


def test_dockerfile_copies_the_sources_and_installs_editable_so_sql_is_found() -> None:
    instrs = dockerfile_instructions()
    copied = {
        src.rstrip("/")
        for instr, args in instrs
        if instr == "COPY"
        for src in args.split()[:-1]
        if not src.startswith("--")
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    needed = {"pyproject.toml", "constraints.txt", pyproject["project"]["readme"], "sql", *packages}
    assert needed <= copied
    for src in ("sql", *packages):
        assert (ROOT / src).is_dir(), src
    # The image runs the copied tree (editable), where storage/migrations links to sql/.
    assert any(instr == "RUN" and re.search(r"pip install .*-e \.", args) for instr, args in instrs)
    from memworker.storage import migrate

    assert migrate.SQL_DIR.resolve() == ROOT / "sql"


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for instr, args in dockerfile_instructions() if instr == "USER"]
    assert users and users[-1] not in ("root", "0")
