"""Connection pools, the per-transaction tenant binding, and psycopg error translation."""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import LiteralString
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import JsonbDumper, set_json_loads

from memworker import errors
from memworker.storage import rows

# The one connection type: every connection memworker opens (open_pool, connect) answers rows
# as dicts; storage/ reads them into typed rows (_sql's runners), nothing outside it sees one.
Conn = psycopg.Connection[DictRow]
Pool = psycopg_pool.ConnectionPool[Conn]

APP_ROLE = "memworker_app"
_OPTIONS = "-c search_path=memworker,public"
# The one statement that binds a connection to a tenant (row-level security reads the setting
# through memworker.current_tenant()); bind_tenant is its only user.
_BIND: LiteralString = "SELECT set_config('memworker.tenant_id', %s, %s)"
# A connection back in the pool less than this long ago is lent without a liveness ping.
TRUST_RECENT_S = 1.0
_returned_at: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()


def _configure(conn: Conn) -> None:
    register_vector(conn)
    conn.adapters.register_dumper(dict, JsonbDumper)  # a dict parameter is a jsonb value
    set_json_loads(rows.load_json, conn)  # a stored value too deep to answer reads as a marker


def _check(conn: Conn) -> None:
    """The pool's check on lending a connection: a round trip to the server, except for a
    connection that finished a transaction within TRUST_RECENT_S. Under steady traffic that
    spares one round trip per borrow (about 0.2 ms of a 6 ms recall); a server that died in
    that second costs the one request that finds out a 503, and the pool replaces the
    connection when it comes back broken."""
    if time.monotonic() - _returned_at.get(conn, float("-inf")) >= TRUST_RECENT_S:
        psycopg_pool.ConnectionPool.check_connection(conn)


def _returned(conn: Conn) -> None:
    _returned_at[conn] = time.monotonic()


def open_pool(
    url: str, *, min_size: int = 1, max_size: int = 8, timeout_s: float = 5.0, name: str = "memworker"
) -> Pool:
    """A pool whose connections know the vector type and use the memworker schema."""
    pool: Pool = psycopg_pool.ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        open=False,
        timeout=timeout_s,
        connection_class=Conn,
        kwargs={"options": _OPTIONS, "row_factory": dict_row, "connect_timeout": 5},
        configure=_configure,
        check=_check,
        reset=_returned,
        # The pool retries a lost server with doubling delays; giving up on an attempt after
        # 10 s makes the next request start a fresh one, so recovery after an outage is
        # seconds, not the minutes the doubling would reach.
        reconnect_timeout=10.0,
    )
    try:
        pool.open(wait=True, timeout=30.0)
    except psycopg_pool.PoolTimeout as exc:
        pool.close()
        raise errors.Unavailable(f"cannot connect to Postgres at {redact(url)}") from exc
    return pool


def connect(url: str, *, autocommit: bool = False) -> Conn:
    """One connection outside any pool (CLI, migrations, tests)."""
    try:
        conn = psycopg.connect(url, options=_OPTIONS, row_factory=dict_row, autocommit=autocommit, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise errors.Unavailable(f"cannot connect to Postgres at {redact(url)}: {exc}") from exc
    _configure(conn)
    return conn


@contextmanager
def tenant_tx(pool: Pool, tenant_id: UUID | str) -> Iterator[Conn]:
    """One transaction bound to one tenant: row-level security sees only its rows.

    The setting is transaction-local, so a pooled connection never carries it to the
    next borrower. Raises Unavailable when Postgres cannot be reached."""
    with translate(), pool.connection() as conn, conn.transaction():
        bind_tenant(conn, tenant_id)
        yield conn


def bind_tenant(conn: Conn, tenant_id: UUID | str, *, transaction_local: bool = True) -> None:
    """Bind conn to one tenant: row-level security then sees only that tenant's rows.

    transaction_local (the default, and what app code wants) ends the binding with the
    current transaction, so a pooled connection never carries it to the next borrower;
    False binds the session (benches, one-off scripts)."""
    conn.execute(_BIND, (str(tenant_id), transaction_local))


@contextmanager
def system_tx(pool: Pool) -> Iterator[Conn]:
    """A transaction with no tenant bound: it sees no tenant rows, only SECURITY DEFINER lookups."""
    with translate(), pool.connection() as conn, conn.transaction():
        yield conn


@contextmanager
def translate() -> Iterator[None]:
    """Map lost connections and pool exhaustion to Unavailable (HTTP 503)."""
    try:
        yield
    except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
        raise errors.Unavailable(f"database unavailable: {exc}") from exc


def app_url(owner_url: str) -> str:
    """The embedded stack's app-role URL: same server and database, the role that owns nothing."""
    parts = urlsplit(owner_url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{APP_ROLE}@{host}"))


def redact(url: str) -> str:
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<unparsable url>"
    if "password" in info:
        info["password"] = "***"
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


def statement_timeout(conn: Conn, seconds: int) -> None:
    """Cancel any statement of the current transaction that runs longer than seconds (0: no
    limit), so a background sweep cannot hold a pooled connection for minutes; the setting
    ends with the transaction (SET LOCAL)."""
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(max(0, seconds) * 1000),))


def try_agent_lock(conn: Conn, tenant_id: UUID | str, agent_id: str) -> bool:
    """Take the agent's transaction-scoped advisory lock if free. Consolidation, retention and
    anything else that rewrites one agent's memories hold it, so they never overlap."""
    row = conn.execute(
        "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0)) AS ok", (f"memworker:agent:{tenant_id}:{agent_id}",)
    ).fetchone()
    return bool(row and row["ok"])


def dedup_lock(conn: Conn, tenant_id: UUID | str, agent_id: str) -> None:
    """Wait for the transaction-scoped lock under which one agent's duplicate check and
    insert run. Without it two writers storing the same sentence at once each find no
    committed copy (neither sees the other's uncommitted row) and both insert. It is held to
    the end of the writer's transaction, so the next writer's check sees the first's row.

    One lock per agent, not per subject: one episode's items may belong to several subjects,
    and two transactions taking per-subject locks in their items' order could deadlock. It
    is a key of its own, apart from try_agent_lock's: consolidation, retention, forget and
    access bumps never wait for it, and a writer takes it before touching any existing
    memory row, so no wait-for cycle can form through it."""
    key = f"memworker:dedup:{tenant_id}:{agent_id}"
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
