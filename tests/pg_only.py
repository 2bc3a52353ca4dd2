"""A Postgres-only `stack` for test modules that never touch Redis (the lifecycle store,
forget and CLI tests). conftest's `stack` also hands each module a Redis database of its
own, a limited resource; importing this fixture into a module overrides `stack` there (and
so for `tenants`, which builds on it) without taking one.

    from tests.pg_only import stack  # noqa: F401"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memworker.settings import Settings
from memworker.storage import db
from tests.conftest import TEMPLATE, _with_db, drop_database, recreate_database

NO_REDIS = "redis://127.0.0.1:1/0"  # nothing listens there: a module that uses it fails loudly


@pytest.fixture(scope="module")
def stack(services: dict[str, str], request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A fresh database copied from the migrated template, as conftest's `stack` gives, and
    no Redis: {'owner_url', 'app_url', 'redis_url' (unusable), 'settings'}."""
    name = "t_" + re.sub(r"\W", "_", request.module.__name__.split(".")[-1])[:50]
    recreate_database(services, name, TEMPLATE)  # refuses a leftover on a server it did not start
    owner_url = _with_db(services["pg"], name)
    app_url = db.app_url(owner_url)
    data_dir = Path(services["base"]) / name
    data_dir.mkdir(exist_ok=True)
    settings = Settings(
        database_url=app_url, admin_database_url=owner_url, redis_url=NO_REDIS, data_dir=data_dir, db_pool_max=8
    )
    yield {"owner_url": owner_url, "app_url": app_url, "redis_url": NO_REDIS, "settings": settings}
    drop_database(services, name)
