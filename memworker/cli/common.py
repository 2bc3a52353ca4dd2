"""What every CLI command shares: the owner URL, a connection bound to one tenant, and an API
client for the running stack."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memworker import errors, runtime
from memworker.local import embedded
from memworker.settings import Settings
from memworker.storage import core_db, db, migrate


@contextmanager
def owner_url(settings: Settings) -> Iterator[str]:
    """The owner URL: from the environment, a running `memworker up`, or an embedded
    Postgres started for this command alone."""
    try:
        yield runtime.admin_url(runtime.resolve(settings.replace(redis_url=settings.redis_url or "redis://unused")))
        return
    except errors.ConfigError:
        if settings.database_url:
            raise
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    pg, url = embedded.start_postgres(settings.data_dir.resolve())
    try:
        migrate.migrate(url)
        yield url
    finally:
        pg.stop()


@contextmanager
def tenant_conn(settings: Settings, name: str) -> Iterator[tuple[Any, core_db.Tenant]]:
    with owner_url(settings) as url, db.connect(url) as conn:
        tenant = core_db.tenant_by_name(conn, name=name)
        if tenant is None:
            raise errors.NotFound(f"no tenant named {name!r} (memworker tenant list)")
        db.bind_tenant(conn, tenant.id)
        yield conn, tenant


def client(settings: Settings) -> Any:
    from memworker.sdk import Client

    base = f"http://{settings.api_host}:{settings.api_port}"
    stack_path = runtime.stack_file(settings)
    if stack_path.exists():
        base = json.loads(stack_path.read_text())["api_url"]
    key = settings.api_key
    dev = settings.data_dir / "dev-api-key"
    if not key and dev.exists():
        key = dev.read_text().strip()
    if not key:
        raise errors.ConfigError("set MEMWORKER_API_KEY (or run `memworker up`, which keeps a dev key)")
    return Client(base, key)


def invalidate_caches(settings: Settings) -> None:
    """After a key revocation or a policy change: the running API processes drop their caches
    at once (without a reachable stack they expire within 10 s anyway)."""
    try:
        redis_url = runtime.resolve(settings).redis_url
    except errors.ConfigError:
        return  # no running stack: no API process has anything cached
    runtime.invalidate_caches(redis_url)
