"""Reads from hot standbys (MEMWORKER_READ_DATABASE_URL): which replica may serve a read, and
when the primary must instead.

A replica serves a read while this process's probe (every PROBE_EVERY_S) finds it up, in
recovery, and less than max_lag_s behind the primary. Lag is measured in time, not bytes: the
probe keeps the primary's WAL position at each tick, and a replica's lag is the age of the
oldest position it has not replayed (zero when it has replayed them all), so an idle primary
never makes a caught-up replica look late.

Read-your-writes: a write through the API notes its commit's WAL position (an LSN) in Redis
for its tenant and agent, for as long as a served replica may still miss it (max_lag_s plus
two probe ticks), and answers it in X-Memworker-LSN. A read wants the newest of what the
client sends back in that header and what Redis remembers; a replica that has not replayed it
gets read_wait_s to do so, then the primary answers. A replica that fails mid-read is marked
down until the probe finds it again, and the read is repeated on the primary."""

from __future__ import annotations

import itertools
import logging
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from uuid import UUID

import psycopg
import psycopg_pool
import redis

from memworker import errors, metrics
from memworker.storage import db, redis_keys
from memworker.storage.db import Conn, Pool

logger = logging.getLogger(__name__)

T = TypeVar("T")
PROBE_EVERY_S = 0.5
_POLL_S = 0.005  # how often a read waiting for its LSN asks the replica again
_LSN = re.compile(r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")
# Keep the higher of the stored and the new position (zero-padded hex compares as text).
_NOTE = """
local cur = redis.call('GET', KEYS[1])
if (not cur) or cur < ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
return 1
"""


class ReplicaFailed(errors.Unavailable):
    """A replica failed under a read: the read may be repeated on the primary."""


def parse_lsn(text: str) -> int:
    """'16/B374D848' -> its position; InvalidInput for anything else (a client's header)."""
    if not _LSN.match(text):
        raise errors.InvalidInput("X-Memworker-LSN must be a WAL position such as 16/B374D848")
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


@dataclass
class Replica:
    """One standby as this process sees it: a probe connection, a read pool once it was up."""

    label: str  # replica1, replica2, ...: for metrics and /healthz (never the URL: it names secrets)
    url: str
    pool: Pool | None = None
    probe: Conn | None = None
    state: str = "down"  # ok | lagging | down
    detail: str = "not probed yet"
    lag_s: float = 0.0
    replay: int = 0  # the WAL position it had replayed at the last probe

    def report(self) -> str:
        if self.state == "ok":
            return "ok"
        return f"{self.state}: {self.detail}"


@dataclass
class Reads:
    """Routes replica-eligible reads of one process (API or CLI) to a replica or the primary."""

    primary: Pool
    replicas: list[Replica]
    client: redis.Redis
    max_lag_s: float = 5.0
    wait_s: float = 0.2
    pool_max: int = 8
    pool_timeout_s: float = 5.0
    _history: deque[tuple[float, int]] = field(default_factory=deque)  # (monotonic time, primary LSN)
    _turn: Iterator[int] = field(default_factory=itertools.count)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @classmethod
    def open(cls, primary: Pool, urls: list[str], client: redis.Redis, **options: Any) -> Reads:
        """Probe every replica once, then keep probing in a daemon thread."""
        reads = cls(primary, [Replica(f"replica{i}", u) for i, u in enumerate(urls, 1)], client, **options)
        reads.probe_once()
        reads._thread = threading.Thread(target=reads._probe_loop, name="memworker-replica-probe", daemon=True)
        reads._thread.start()
        return reads

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for r in self.replicas:
            if r.pool is not None:
                r.pool.close()
            if r.probe is not None:
                r.probe.close()

    # --- the read path ----------------------------------------------------------------------

    def read(self, tenant_id: UUID, fn: Callable[[Conn], T], *, agent_id: str | None, client_lsn: int = 0) -> T:
        """fn(conn) in read_tx; when the replica fails under it, once more on the primary.
        fn must only read."""
        try:
            with self.read_tx(tenant_id, agent_id=agent_id, client_lsn=client_lsn) as conn:
                return fn(conn)
        except ReplicaFailed:
            metrics.READS.labels("primary", "error").inc()
            with db.tenant_tx(self.primary, tenant_id) as conn:
                return fn(conn)

    @contextmanager
    def read_tx(self, tenant_id: UUID, *, agent_id: str | None, client_lsn: int = 0) -> Iterator[Conn]:
        """A read-only transaction bound to the tenant, on a replica that has replayed the
        caller's last write (client_lsn, or the one Redis remembers for the tenant and agent),
        else on the primary. A replica that fails under the caller's block is marked down and
        the block's error is ReplicaFailed (Unavailable: 503), which read() retries."""
        need, reason = self._wanted(tenant_id, agent_id, client_lsn)
        for replica in self._serving() if reason is None else []:
            try:
                stack, conn, caught_up = self._enter(replica, tenant_id, need)
            except errors.Unavailable as exc:
                self._failed(replica, exc)
                reason = "error"
                continue
            if not caught_up:
                stack.close()
                reason = "behind"
                break
            metrics.READS.labels("replica", "none").inc()
            try:
                with stack:
                    yield conn
            except errors.Unavailable as exc:
                self._failed(replica, exc)
                raise ReplicaFailed(str(exc)) from exc
            return
        metrics.READS.labels("primary", reason or "no_replica").inc()
        with db.tenant_tx(self.primary, tenant_id) as conn:
            yield conn

    def _enter(self, replica: Replica, tenant_id: UUID, need: int) -> tuple[ExitStack, Conn, bool]:
        """A transaction on the replica, open in the returned stack, and whether the replica
        holds position need (waiting for it up to wait_s). Unavailable when the replica fails."""
        stack = ExitStack()
        conn = stack.enter_context(db.tenant_tx(cast(Pool, replica.pool), tenant_id))
        try:
            caught_up = not need or replica.replay >= need or self._caught_up(conn, need)
        except BaseException:
            stack.__exit__(*sys.exc_info())  # raises Unavailable for a lost connection (db.translate)
            raise
        return stack, conn, caught_up

    def _wanted(self, tenant_id: UUID, agent_id: str | None, client_lsn: int) -> tuple[int, str | None]:
        """The WAL position the read must see, or a reason to go to the primary at once."""
        keys = [redis_keys.write_lsn(tenant_id, None)]
        if agent_id is not None:
            keys.append(redis_keys.write_lsn(tenant_id, agent_id))
        try:
            noted = [int(v, 16) for v in cast("list[bytes | None]", self.client.mget(keys)) if v]
        except redis.RedisError:
            return 0, "error"  # the last write is unknown: only the primary is sure to have it
        return max([client_lsn, *noted]), None

    def _serving(self) -> list[Replica]:
        ok = [r for r in self.replicas if r.state == "ok" and r.pool is not None]
        if len(ok) > 1:
            shift = next(self._turn) % len(ok)
            ok = ok[shift:] + ok[:shift]
        return ok

    def _caught_up(self, conn: Conn, need: int) -> bool:
        """Whether the replica replays past need within wait_s (asked every few ms)."""
        deadline = time.monotonic() + self.wait_s
        while True:
            row = cast(
                "dict[str, Any]",
                conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn AS ok", (format_lsn(need),)).fetchone(),
            )
            if row["ok"] or time.monotonic() >= deadline:
                return bool(row["ok"])
            time.sleep(_POLL_S)

    def _failed(self, replica: Replica, exc: errors.Unavailable) -> None:
        """A read on the replica failed: unless the cause says nothing about the server (a
        query cancelled by a conflict with recovery, a full pool), it is out of service until
        the probe finds it again. Either way the read goes to the primary."""
        cause = exc.__cause__
        if not isinstance(cause, psycopg_pool.PoolTimeout | psycopg.errors.SerializationFailure):
            replica.state, replica.detail = "down", f"read failed: {type(cause).__name__}"
            metrics.REPLICA_UP.labels(replica.label).set(0)
            logger.warning("replica %s failed a read; the primary serves until it answers again", replica.label)

    # --- writes: what a read must see ---------------------------------------------------------

    def note_write(self, tenant_id: UUID, agent_id: str | None, lsn: int) -> None:
        """Remember the tenant's (and agent's) newest write for as long as a served replica may
        lack it. Best effort: without Redis the client still has X-Memworker-LSN."""
        ttl = str(int(self.max_lag_s + 2 * PROBE_EVERY_S) + 1)
        try:
            self.client.eval(_NOTE, 1, redis_keys.write_lsn(tenant_id, agent_id), f"{lsn:016X}", ttl)
        except redis.RedisError as exc:
            logger.warning("could not note a write's LSN in Redis: %s", exc)

    # --- the probe --------------------------------------------------------------------------

    def probe_once(self) -> None:
        """One tick: the primary's WAL position, then each replica's state and lag."""
        now = time.monotonic()
        try:
            with db.system_tx(self.primary) as conn:
                row = cast("dict[str, Any]", conn.execute("SELECT pg_current_wal_lsn()::text AS lsn").fetchone())
            self._history.append((now, parse_lsn(row["lsn"])))
        except errors.Unavailable:
            pass  # lag is then measured against the last position known
        while len(self._history) > 2 and self._history[1][0] < now - 2 * self.max_lag_s - 5:
            self._history.popleft()
        for replica in self.replicas:
            self._probe(replica, now)
            metrics.REPLICA_UP.labels(replica.label).set(1 if replica.state == "ok" else 0)
            metrics.REPLICA_LAG_SECONDS.labels(replica.label).set(replica.lag_s)

    def _probe(self, replica: Replica, now: float) -> None:
        try:
            if replica.probe is None or replica.probe.closed or replica.probe.broken:
                replica.probe = db.connect(replica.url, autocommit=True)
            row = cast(
                "dict[str, Any]",
                replica.probe.execute(
                    "SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replay"
                ).fetchone(),
            )
        except (errors.Unavailable, psycopg.Error) as exc:
            replica.state, replica.detail = "down", f"unreachable ({type(exc).__name__})"
            return
        if not row["standby"] or row["replay"] is None:
            replica.state, replica.detail = "down", "not a standby (promoted?): its data may differ from the primary's"
            return
        replica.replay = parse_lsn(row["replay"])
        unreplayed = [t for t, lsn in self._history if lsn > replica.replay]
        replica.lag_s = round(now - unreplayed[0], 3) if unreplayed else 0.0
        if replica.lag_s > self.max_lag_s:
            replica.state, replica.detail = "lagging", f"{replica.lag_s:.1f} s behind (bound {self.max_lag_s:g} s)"
            return
        if replica.pool is None:
            try:
                replica.pool = db.open_pool(
                    replica.url, min_size=1, max_size=self.pool_max, timeout_s=self.pool_timeout_s, name=replica.label
                )
            except errors.Unavailable as exc:
                replica.state, replica.detail = "down", str(exc)
                return
        replica.state, replica.detail = "ok", ""

    def _probe_loop(self) -> None:
        while not self._stop.wait(PROBE_EVERY_S):
            try:
                self.probe_once()
            except Exception:  # a process edge: the thread must outlive any one failed tick
                logger.exception("replica probe failed")

    def status(self) -> dict[str, str]:
        """Each replica's state for /healthz: 'ok', 'lagging: ...' or 'down: ...'."""
        return {r.label: r.report() for r in self.replicas}


@contextmanager
def write_tx(pool: Pool, tenant_id: UUID, lsn: list[int]) -> Iterator[Conn]:
    """db.tenant_tx that, when the transaction wrote anything, appends to lsn a WAL position
    at or past its commit record (read-your-writes). A read-only transaction costs one more
    round trip and appends nothing."""
    with db.translate(), pool.connection() as conn:
        with conn.transaction():
            db.bind_tenant(conn, tenant_id)
            yield conn
            row = cast(
                "dict[str, Any]",
                conn.execute("SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS wrote").fetchone(),
            )
        if row["wrote"]:
            with conn.transaction():
                after = cast(
                    "dict[str, Any]", conn.execute("SELECT pg_current_wal_insert_lsn()::text AS lsn").fetchone()
                )
            lsn.append(parse_lsn(after["lsn"]))
