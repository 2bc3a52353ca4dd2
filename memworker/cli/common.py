"""What every CLI command shares: the owner URL, a connection bound to one tenant, and an API
client for the running stack."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memworker import errors, keys, runtime
from memworker.local import embedded, stack
from memworker.settings import Settings
from memworker.storage import db, migrate
from memworker.tenancy import service as tenancy


def no_stack(settings: Settings) -> errors.ConfigError:
    """The error of a command that found no stack: where it looked, and how to point at one."""
    return errors.ConfigError(
        f"no `memworker up` is running on {settings.data_dir.resolve()} and it holds no memworker database. "
        "Run the command in the folder where you ran `memworker up`, or point at its data dir with "
        "--data-dir DIR or MEMWORKER_DATA_DIR=DIR; for a Postgres of your own set MEMWORKER_DATABASE_URL "
        "(and MEMWORKER_ADMIN_DATABASE_URL)"
    )


@contextmanager
def owner_url(settings: Settings) -> Iterator[str]:
    """The owner URL: from the environment, a running `memworker up` on the data dir, or the
    database a stopped `memworker up` left there, its Postgres started for this command alone.
    Never a new database: only `memworker up` creates one (a command run in the wrong folder
    says so instead of answering from an empty database)."""
    if settings.database_url:
        yield runtime.admin_url(settings)
        return
    data_dir = settings.data_dir.resolve()
    has_cluster = (data_dir / "pg" / "PG_VERSION").exists()
    if not has_cluster and not runtime.stack_file(settings).exists():
        raise no_stack(settings)
    fd = stack.try_lock(data_dir, "a memworker command")
    if fd is None:  # a `memworker up` holds the data dir: its stack file names its servers
        if not runtime.stack_file(settings).exists():
            raise errors.ConfigError(f"{stack.holder_of(data_dir)}; try again once it is up")
        yield runtime.admin_url(runtime.resolve(settings.replace(redis_url=settings.redis_url or "redis://unused")))
        return
    try:  # no `memworker up` runs here (a stack file left behind is stale)
        if not has_cluster:
            raise no_stack(settings)
        pg, url = embedded.start_postgres(data_dir)
        try:
            migrate.migrate(url)
            yield url
        finally:
            pg.stop()
    finally:
        os.close(fd)


@contextmanager
def tenant_conn(settings: Settings, name: str) -> Iterator[tuple[Any, tenancy.Tenant]]:
    with owner_url(settings) as url, db.connect(url) as conn:
        tenant = tenancy.named_tenant(conn, name)
        db.bind_tenant(conn, tenant.id)
        yield conn, tenant


def client(settings: Settings) -> Any:
    """An SDK client for the running stack, acting with MEMWORKER_API_KEY or else the dev key
    `memworker up` keeps in the data dir (tenant 'dev'). Which one it is goes to stderr, so a
    command never acts as a tenant the operator did not see (README, "Using it")."""
    from memworker.sdk import Client

    base = f"http://{settings.api_host}:{settings.api_port}"
    stack_path = runtime.stack_file(settings)
    if stack_path.exists():
        base = json.loads(stack_path.read_text())["api_url"]
    key = settings.api_key
    dev = settings.data_dir / "dev-api-key"
    if key:
        who = f"the key in MEMWORKER_API_KEY (prefix {keys.prefix_of(key) or '?'})"
    elif dev.exists():
        key = dev.read_text().strip()
        who = (
            f"tenant '{stack.DEV_TENANT}' with the dev key of `memworker up` in {settings.data_dir.resolve()} "
            f"(prefix {keys.prefix_of(key) or '?'}; set MEMWORKER_API_KEY to act as another tenant)"
        )
    else:
        raise errors.ConfigError(
            f"no API key: set MEMWORKER_API_KEY, or run this where `memworker up` runs (it keeps a dev key in "
            f"{dev.resolve()}; --data-dir DIR or MEMWORKER_DATA_DIR=DIR point at another data dir)"
        )
    print(f"memworker: acting as {who} at {base}", file=sys.stderr)
    return Client(base, key)


def invalidate_caches(settings: Settings) -> None:
    """After a key revocation or a policy change: the running API processes drop their caches
    at once (without a reachable stack they expire within 10 s anyway)."""
    try:
        redis_url = runtime.resolve(settings).redis_url
    except errors.ConfigError:
        return  # no running stack: no API process has anything cached
    runtime.invalidate_caches(redis_url)


def parse_json(argument: str, text: str) -> Any:
    """The JSON of a command's argument (a file's text, stdin). Raises InvalidInput naming the
    argument, the line and column of the first error and what usually causes it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise errors.InvalidInput(
            f"{argument}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}{_json_hint(exc)}"
        ) from None


def _json_hint(exc: json.JSONDecodeError) -> str:
    """What a JSON error at this place is most often caused by, as '; hint: ...' ('' if nothing fits)."""
    here = exc.doc[exc.pos : exc.pos + 1]
    before = exc.doc[: exc.pos].rstrip()[-1:]
    if not exc.doc.strip():
        hint = "the input is empty"
    elif here and here in "}]" and before == ",":
        hint = "remove the trailing comma before the closing bracket"
    elif here == "'":
        hint = "JSON takes double quotes around keys and strings"
    elif exc.msg.startswith("Expecting property name"):
        hint = "keys are strings in double quotes"
    elif exc.msg.startswith("Expecting ',' delimiter"):
        hint = "a comma is missing between two items, or a quote is not closed"
    elif exc.msg.startswith("Expecting value"):
        hint = "a value goes here: an object, a list, a string in double quotes, a number, true, false or null"
    elif exc.msg.startswith("Extra data"):
        hint = "one JSON value only: wrap several in a list"
    else:
        hint = ""
    return f"; hint: {hint}" if hint else ""
