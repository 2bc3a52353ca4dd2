"""Session fixtures: the embedded Postgres and Redis start once per test session (or
MEMWORKER_TEST_DATABASE_URL / MEMWORKER_TEST_REDIS_URL are used instead); the schema is
migrated once into a template database and copied per test module.

On servers given by those variables the fixtures drop only databases they created in this
run and flush only Redis databases they found empty: a leftover database of the same name,
or a Redis database holding keys, stops the run with a message, unless
MEMWORKER_TEST_ALLOW_DESTRUCTIVE=1 says the server is for tests only."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis

from memworker.local import embedded
from memworker.settings import Settings
from memworker.storage import db, migrate

TEMPLATE = "memworker_template"
ALLOW_DESTRUCTIVE = "MEMWORKER_TEST_ALLOW_DESTRUCTIVE"


def refusal(what: str, variable: str, *, external: bool, env: dict[str, str] | os._Environ[str]) -> str | None:
    """Why the fixtures must not destroy `what` (an existing database, a non-empty Redis
    database) on the server from `variable`, or None when they may: the server is one this
    session started, or the test owner opted in with MEMWORKER_TEST_ALLOW_DESTRUCTIVE=1."""
    if not external or env.get(ALLOW_DESTRUCTIVE) == "1":
        return None
    return (
        f"refusing to destroy {what} on the server given by {variable}: the test fixtures did not "
        f"create it. Remove it yourself, or set {ALLOW_DESTRUCTIVE}=1 if that server holds test data only."
    )


def recreate_database(services: dict[str, str], name: str, template: str | None = None) -> None:
    """CREATE DATABASE name (from template), dropping a leftover of that name first only
    where refusal() allows it."""
    with psycopg.connect(services["pg"], autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            why = refusal(
                f"the existing database {name}",
                "MEMWORKER_TEST_DATABASE_URL",
                external=services["pg_external"] == "1",
                env=os.environ,
            )
            if why:
                pytest.fail(why, pytrace=False)
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))


def drop_database(services: dict[str, str], name: str) -> None:
    """Drop a database this session created."""
    with psycopg.connect(services["pg"], autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Owner URL of a Postgres server and a Redis URL, for the whole session."""
    pg_url = os.environ.get("MEMWORKER_TEST_DATABASE_URL")
    redis_url = os.environ.get("MEMWORKER_TEST_REDIS_URL")
    children = []
    base = Path(tempfile.mkdtemp(prefix="mwtest-"))
    try:
        if not pg_url:
            child, pg_url = embedded.start_postgres(base)
            children.append(child)
        if not redis_url:
            child, redis_url = embedded.start_redis(base)
            children.append(child)
        got = {
            "pg": pg_url,
            "redis": redis_url,
            "base": str(base),
            # "1" where the server came from MEMWORKER_TEST_*: see refusal()
            "pg_external": "1" if os.environ.get("MEMWORKER_TEST_DATABASE_URL") else "",
            "redis_external": "1" if os.environ.get("MEMWORKER_TEST_REDIS_URL") else "",
        }
        recreate_database(got, TEMPLATE)
        migrate.migrate(_with_db(pg_url, TEMPLATE))
        yield got
        drop_database(got, TEMPLATE)
    finally:
        for child in reversed(children):
            child.stop()
        shutil.rmtree(base, ignore_errors=True)


def _with_db(url: str, dbname: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{dbname}"))


_modules_seen = itertools.count()


def _redis_db(url: str) -> int:
    """A database number per module (the server's count permitting; modules run one after
    another, so a reused number is flushed before use)."""
    client = redis.Redis.from_url(url)
    try:
        available = int(client.config_get("databases").get("databases", 16))
    except redis.RedisError:
        available = 16
    finally:
        client.close()
    return 1 + next(_modules_seen) % (available - 1)


@pytest.fixture(scope="module")
def stack(services: dict[str, str], request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A fresh database (copied from the migrated template) and an empty Redis database
    for one test module: {'owner_url', 'app_url', 'redis_url', 'settings'}."""
    name = "t_" + re.sub(r"\W", "_", request.module.__name__.split(".")[-1])[:50]
    recreate_database(services, name, TEMPLATE)
    owner_url = _with_db(services["pg"], name)
    app_url = db.app_url(owner_url)
    redis_db = _redis_db(services["redis"])
    redis_url = services["redis"].rsplit("/", 1)[0] + f"/{redis_db}"
    client = redis.Redis.from_url(redis_url)
    if client.dbsize():
        why = refusal(
            f"Redis database {redis_db} (it holds keys)",
            "MEMWORKER_TEST_REDIS_URL",
            external=services["redis_external"] == "1",
            env=os.environ,
        )
        if why:
            client.close()
            pytest.fail(why, pytrace=False)
        client.flushdb()  # our own embedded server, or the test owner opted in
    client.close()
    data_dir = Path(services["base"]) / name
    data_dir.mkdir(exist_ok=True)
    settings = Settings(
        database_url=app_url,
        admin_database_url=owner_url,
        redis_url=redis_url,
        data_dir=data_dir,
        episode_lease_s=5,
        episode_max_attempts=3,
        db_pool_max=8,
    )
    yield {"owner_url": owner_url, "app_url": app_url, "redis_url": redis_url, "settings": settings}
    drop_database(services, name)
    client = redis.Redis.from_url(redis_url)
    client.flushdb()  # empty when this module took it: what is there now is the module's own
    client.close()


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The real all-MiniLM-L6-v2 model, loaded once per session."""
    from memworker.models import embeddings

    return embeddings.load(Settings().embedding_model)


@pytest.fixture(scope="module")
def tenants(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Three tenants per module (alice, bob, charlie), each with a full-scope key."""
    from memworker import keys
    from memworker.storage import core_db

    out = {}
    with db.connect(stack["owner_url"]) as conn:
        for name in ("alice", "bob", "charlie"):
            t = core_db.create_tenant(conn, name=name)
            db.bind_tenant(conn, t.id)
            key, _ = keys.create(conn, tenant_id=t.id, name="test")
            out[name] = {"id": t.id, "key": key}
        conn.commit()
    return out


@pytest.fixture(scope="module")
def api(stack: dict[str, Any], embedder: Any) -> Iterator[str]:
    """The real API over real HTTP (uvicorn on a loopback port, in a thread); publishes to
    the module's Redis. Yields the base URL."""
    import threading
    import time

    import httpx
    import uvicorn

    from memworker import runtime
    from memworker.api import app as api_mod

    settings = stack["settings"]
    res = runtime.build(settings, embedder=embedder)
    app = api_mod.create_app(settings, resources=res)
    port = embedded.free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "test API did not start"
        time.sleep(0.1)
    yield url
    server.should_exit = True
    thread.join(10)
    res.close()


def start_worker(
    settings: Settings,
    name: str,
    *,
    extra_env: dict[str, str] | None = None,
    concurrency: int = 1,
    queues: str = "ingest,consolidate,maintenance,webhooks",
    pool: str = "prefork",
) -> Any:
    """A real `celery worker` process on the module's Redis and database; returns the Popen
    once the worker answers a ping. By default it consumes every queue (production runs the
    webhooks queue in its own senders: `queues="webhooks", pool="threads"`)."""
    import subprocess
    import sys
    import time

    from celery import Celery

    env = dict(os.environ)
    env.update(settings.to_env())
    env.update(extra_env or {})
    log = open(settings.data_dir / f"{name}.log", "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tasks.celery_app",
            "worker",
            "-n",
            f"{name}@%h",
            "-Q",
            queues,
            "-P",
            pool,
            "-c",
            str(concurrency),
            "--loglevel",
            "info",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    app = Celery(broker=settings.redis_url)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"worker exited; see {settings.data_dir}/{name}.log"
            replies = app.control.ping(timeout=1.0) or []
            if any(name in list(r)[0] for r in replies):
                return proc
            time.sleep(0.5)
    finally:
        app.close()
    raise AssertionError(f"worker {name} did not answer a ping in 90 s")


def start_api(settings: Settings, name: str, *, extra_env: dict[str, str] | None = None) -> tuple[Any, str]:
    """A real API process (uvicorn, its own pool and caches) on the module's database and
    Redis, as another host would run it; returns (Popen, base URL) once /healthz answers.
    Stop it with stop_worker."""
    import subprocess
    import sys
    import time

    import httpx

    port = embedded.free_port()
    env = {**os.environ, **settings.to_env(), "MEMWORKER_API_PORT": str(port), **(extra_env or {})}
    log = open(settings.data_dir / f"{name}.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "memworker.api.app:create_app"]
        + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"API {name} exited; see {settings.data_dir}/{name}.log"
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    stop_worker(proc)
    raise AssertionError(f"API {name} not healthy in 120 s; see {settings.data_dir}/{name}.log")


def stop_worker(proc: Any) -> None:
    import signal
    import subprocess

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.fixture(scope="module")
def worker(stack: dict[str, Any]) -> Iterator[Any]:
    proc = start_worker(stack["settings"], "w1")
    yield proc
    stop_worker(proc)
