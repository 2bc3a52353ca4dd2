"""Read replicas against a real streaming replica: Postgres's own replication (pg_basebackup
-R from the embedded binaries) of the session's Postgres, started once for this module.

Recall, context, lists and single memories read from the replica; a client sees its own
writes at once (X-Memworker-LSN, and the LSN Redis remembers per tenant and agent); access
bumps reach the primary through Redis in batches, once; a replica whose replay is paused
past the lag bound is skipped, and one stopped mid-run leaves reads answering from the
primary while /healthz and the metrics say so."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import redis
import uvicorn

from memworker import Client, errors, runtime
from memworker.api import app as api_mod
from memworker.local import embedded
from memworker.settings import Settings
from memworker.storage import _sql, bumps, db, redis_keys, replicas

AGENT = "rep-agent"


def _with_db(url: str, dbname: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{dbname}"))


@pytest.fixture(scope="module")
def replica(services: dict[str, str], stack: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A hot standby of the session's Postgres, streaming from it; {'child', 'owner_url', 'app_url'}."""
    if services["pg_external"]:
        pytest.skip("the replica is a pg_basebackup of the embedded Postgres; MEMWORKER_TEST_DATABASE_URL is set")
    data_dir = Path(services["base"]) / "replica"
    child, owner = embedded.start_replica(data_dir, services["pg"])
    dbname = urlsplit(stack["owner_url"]).path.lstrip("/")
    info = {"child": child, "dir": data_dir, "owner_url": _with_db(owner, dbname)}
    info["app_url"] = db.app_url(info["owner_url"])
    yield info
    info["child"].stop()


@pytest.fixture(scope="module")
def rapi(stack: dict[str, Any], replica: dict[str, Any], embedder: Any) -> Iterator[str]:
    """The real API over HTTP, reading from the replica (a generous wait and lag bound: a
    busy 2-core machine must not make the replica look late)."""
    settings = stack["settings"].replace(read_database_url=replica["app_url"], read_wait_s=2.0, read_max_lag_s=3.0)
    res = runtime.build(settings, embedder=embedder)
    app = api_mod.create_app(settings, resources=res)
    port = embedded.free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    until(lambda: _healthy(url), "the API did not start")
    until(lambda: httpx.get(url + "/healthz").json()["replicas"]["replica1"] == "ok", "the replica is not served")
    yield url
    server.should_exit = True
    thread.join(10)
    res.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def until(ok: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _replayed(replica: dict[str, Any], lsn: str) -> bool:
    with psycopg.connect(replica["owner_url"]) as conn:
        row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
    return bool(row and row[0])


def auth(tenants: dict[str, Any], who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenants[who]['key']}"}


def reads(url: str, target: str, reason: str | None = None) -> float:
    """memworker_reads_total for target (and reason) from /metrics."""
    total = 0.0
    for line in httpx.get(url + "/metrics").text.splitlines():
        wanted = reason is None or f'reason="{reason}"' in line
        if line.startswith("memworker_reads_total{") and f'target="{target}"' in line and wanted:
            total += float(line.rsplit(" ", 1)[1])
    return total


def write(url: str, headers: dict[str, str], text: str, agent: str = AGENT) -> httpx.Response:
    r = httpx.post(f"{url}/v1/agents/{agent}/memories", json={"text": text}, headers=headers, timeout=30)
    assert r.status_code in (200, 201), r.text
    return r


def recall(url: str, headers: dict[str, str], query: str, agent: str = AGENT) -> httpx.Response:
    return httpx.post(f"{url}/v1/agents/{agent}/recall", json={"query": query, "k": 5}, headers=headers, timeout=30)


def access_count(stack: dict[str, Any], memory_id: str) -> int:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute("SELECT access_count FROM memworker.memories WHERE id = %s", (memory_id,)).fetchone()
    assert row is not None
    return int(row[0])


# --- pure parts ----------------------------------------------------------------------------------


def test_lsn_round_trip_and_bad_headers() -> None:
    assert replicas.parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert replicas.format_lsn(replicas.parse_lsn("0/3018AD0")) == "0/3018AD0"
    for bad in ("", "16", "x/1", "1/2/3", "123456789/0"):
        with pytest.raises(Exception, match="WAL position"):
            replicas.parse_lsn(bad)


def test_read_urls_are_checked_and_split() -> None:
    env = {"MEMWORKER_READ_DATABASE_URL": "postgresql://r1/db, postgresql://r2/db,", "MEMWORKER_READ_WAIT_S": "0"}
    assert Settings.from_env(env).read_urls() == ["postgresql://r1/db", "postgresql://r2/db"]
    assert Settings().read_urls() == []
    for bad in ({"MEMWORKER_READ_DATABASE_URL": "mysql://r1"}, {"MEMWORKER_READ_WAIT_S": "-1"}):
        with pytest.raises(errors.ConfigError, match="MEMWORKER_READ_"):
            Settings.from_env(bad)


def test_recall_statements_only_read() -> None:
    """A hot standby refuses a statement with a data-modifying CTE, even one that changes no
    row: recall's statements must not write (its accesses are queued in Redis)."""
    for name in ("recall", "recall_bounded", "recall_agents"):
        text = _sql.Q[name].upper()
        assert "UPDATE" not in text and "INSERT" not in text and "DELETE" not in text, name


# --- against the replica -------------------------------------------------------------------------


def test_writes_answer_their_lsn_and_reads_see_them_from_the_replica(
    rapi: str, tenants: dict[str, Any], replica: dict[str, Any]
) -> None:
    alice = auth(tenants, "alice")
    before = reads(rapi, "replica")
    for i in range(5):
        r = write(rapi, alice, f"the deploy window number {i} is on thursday evenings")
        lsn = r.headers.get("x-memworker-lsn")
        assert lsn and replicas.parse_lsn(lsn) > 0
        # read-your-writes: the very next recall finds what was just written
        hits = recall(rapi, alice, f"deploy window number {i}").json()["memories"]
        assert any(f"number {i} " in h["text"] for h in hits)
    assert reads(rapi, "replica") - before >= 5
    # what the replica holds, asked directly: the writes were replayed there
    with psycopg.connect(replica["owner_url"]) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        n = conn.execute(
            "SELECT count(*) FROM memworker.memories WHERE agent_id = %s AND text LIKE 'the deploy window%%'",
            (AGENT,),
        ).fetchone()
        assert n == (5,)
    # a read performs no write: no LSN header on it
    assert "x-memworker-lsn" not in recall(rapi, alice, "deploy").headers


def test_lists_single_memories_and_context_read_from_the_replica(
    rapi: str, tenants: dict[str, Any], replica: dict[str, Any]
) -> None:
    alice = auth(tenants, "alice")
    r = write(rapi, alice, "the staging database lives in frankfurt")
    mid = r.json()["id"]
    # where the reads go, not how fast a busy machine replays: the replica has the write first
    # (else a replay slower than read_wait_s sends a read to the primary, as it should)
    lsn = replicas.format_lsn(replicas.parse_lsn(r.headers["x-memworker-lsn"]))
    until(lambda: _replayed(replica, lsn), "the replica did not replay the write")
    before = reads(rapi, "replica")
    listed = httpx.get(f"{rapi}/v1/agents/{AGENT}/memories", headers=alice).json()["memories"]
    assert any(m["id"] == mid for m in listed)
    assert httpx.get(f"{rapi}/v1/agents/{AGENT}/memories/{mid}", headers=alice).json()["id"] == mid
    ctx = httpx.post(f"{rapi}/v1/agents/{AGENT}/context", json={"query": "where is staging"}, headers=alice)
    assert ctx.status_code == 200, ctx.text
    assert mid in ctx.json()["memory_ids"]
    assert reads(rapi, "replica") - before >= 3


def test_a_client_lsn_the_replica_cannot_reach_reads_the_primary(rapi: str, tenants: dict[str, Any]) -> None:
    alice = auth(tenants, "alice")
    write(rapi, alice, "the backup bucket is called cold-storage")
    before = reads(rapi, "primary", "behind")
    far = {**alice, "X-Memworker-LSN": "FFFF/0"}  # a position no replica replays within the wait
    r = recall(rapi, far, "backup bucket")
    assert r.status_code == 200 and "cold-storage" in r.json()["memories"][0]["text"]
    assert reads(rapi, "primary", "behind") - before == 1
    bad = recall(rapi, {**alice, "X-Memworker-LSN": "not-an-lsn"}, "backup bucket")
    assert bad.status_code == 422 and "X-Memworker-LSN" in bad.json()["error"]


def test_the_sdk_sends_back_its_last_write_position(rapi: str, tenants: dict[str, Any]) -> None:
    with Client(rapi, tenants["charlie"]["key"]) as client:
        client.add_memory("sdk-agent", "the sdk remembers where its write landed")
        sent = client._http.headers.get("x-memworker-lsn")
        assert sent and replicas.parse_lsn(sent) > 0
        # the read that follows carries the position: a replica serves it only once it holds the write
        hits = client.recall("sdk-agent", "where did the write land")["memories"]
        assert hits and "sdk remembers" in hits[0]["text"]
        assert client._http.headers.get("x-memworker-lsn") == sent  # a read moves nothing


def test_other_tenants_see_nothing_on_the_replica(rapi: str, tenants: dict[str, Any]) -> None:
    alice, bob = auth(tenants, "alice"), auth(tenants, "bob")
    mid = write(rapi, alice, "alice's secret launch code is tangerine").json()["id"]
    assert recall(rapi, bob, "launch code tangerine").status_code == 404  # bob has no such agent
    write(rapi, bob, "bob keeps notes about gardening", agent=AGENT)
    hits = recall(rapi, bob, "launch code tangerine").json()["memories"]
    assert all("tangerine" not in h["text"] for h in hits)
    assert httpx.get(f"{rapi}/v1/agents/{AGENT}/memories/{mid}", headers=bob).status_code == 404
    listed = httpx.get(f"{rapi}/v1/agents/{AGENT}/memories", headers=bob).json()["memories"]
    assert listed and all("tangerine" not in m["text"] for m in listed)


def test_access_bumps_reach_the_primary_once(rapi: str, tenants: dict[str, Any], stack: dict[str, Any]) -> None:
    alice, bob = auth(tenants, "alice"), auth(tenants, "bob")
    mid = write(rapi, alice, "the on-call phone number rotates every monday").json()["id"]
    bob_mid = write(rapi, bob, "the on-call phone number rotates every friday").json()["id"]
    client = redis.Redis.from_url(stack["redis_url"])
    pool = db.open_pool(stack["owner_url"], max_size=2)
    try:
        bumps.drain(pool, client)  # whatever earlier tests queued
        start = access_count(stack, mid)
        for _ in range(3):
            hits = recall(rapi, alice, "on-call phone rotation").json()["memories"]
            assert hits[0]["id"] == mid
        assert access_count(stack, mid) == start  # a replica wrote nothing: the bumps wait
        deadline = time.monotonic() + 10  # the API sends its bumps to Redis every bumps.FLUSH_S
        while access_count(stack, mid) < start + 3 and time.monotonic() < deadline:
            bumps.drain(pool, client)
            time.sleep(0.2)
        assert access_count(stack, mid) == start + 3
        assert access_count(stack, bob_mid) == 0  # bob's memory was never recalled
        # a drain that died after applying leaves its batch behind: applied again, it counts nothing
        with psycopg.connect(stack["owner_url"]) as conn:
            row = conn.execute("SELECT last_access_at FROM memworker.memories WHERE id = %s", (mid,)).fetchone()
        assert row is not None
        client.hset(redis_keys.BUMPS_BATCH, f"{tenants['alice']['id']}:{mid}", 3)
        client.set(redis_keys.BUMPS_BATCH_AT, repr(row[0].timestamp()))
        bumps.drain(pool, client)
        assert access_count(stack, mid) == start + 3
        assert not client.exists(redis_keys.BUMPS_BATCH)
    finally:
        pool.close()
        client.close()


def test_the_bump_queue_is_bounded(stack: dict[str, Any], tenants: dict[str, Any], monkeypatch: Any) -> None:
    client = redis.Redis.from_url(stack["redis_url"])
    try:
        client.delete(redis_keys.BUMPS_PENDING)
        monkeypatch.setattr(bumps, "MAX_PENDING", 2)
        tenant = tenants["charlie"]["id"]
        buffer = bumps.Buffer(client, every_s=3600)  # sent when flushed
        for memory in ("00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"):
            buffer.add(tenant, [memory, memory])  # two recalls of it: one field, counted twice
            assert buffer.flush() == 2
        buffer.add(tenant, ["00000000-0000-0000-0000-000000000003"])
        buffer.close()  # the hash is full: dropped
        assert client.hlen(redis_keys.BUMPS_PENDING) == 2
        assert client.hget(redis_keys.BUMPS_PENDING, f"{tenant}:00000000-0000-0000-0000-000000000001") == b"2"
    finally:
        client.delete(redis_keys.BUMPS_PENDING)
        client.close()


def test_a_replica_lagging_past_the_bound_is_skipped(
    rapi: str, tenants: dict[str, Any], replica: dict[str, Any]
) -> None:
    alice = auth(tenants, "alice")
    with psycopg.connect(replica["owner_url"], autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            write(rapi, alice, "the lag probe writes this line")  # WAL the paused replica does not replay
            until(lambda: httpx.get(rapi + "/healthz").json()["replicas"]["replica1"].startswith("lagging"), "lag")
            before = reads(rapi, "primary", "no_replica")
            r = httpx.get(f"{rapi}/v1/agents/{AGENT}/memories", headers=alice)
            assert r.status_code == 200 and any("lag probe" in m["text"] for m in r.json()["memories"])
            assert reads(rapi, "primary", "no_replica") - before == 1
            assert 'memworker_replica_up{replica="replica1"} 0.0' in httpx.get(rapi + "/metrics").text
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    until(lambda: httpx.get(rapi + "/healthz").json()["replicas"]["replica1"] == "ok", "the replica came back")


def test_a_replica_stopped_mid_run_leaves_reads_on_the_primary(
    rapi: str, tenants: dict[str, Any], replica: dict[str, Any], services: dict[str, str]
) -> None:
    alice = auth(tenants, "alice")
    write(rapi, alice, "the release train leaves at noon")
    assert recall(rapi, alice, "release train").status_code == 200
    replica["child"].stop()  # fast shutdown, mid-run
    for i in range(10):  # every read answers, the first ones found the replica gone under them
        r = recall(rapi, alice, "release train")
        assert r.status_code == 200 and "noon" in r.json()["memories"][0]["text"], (i, r.text)
    health = httpx.get(rapi + "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert health.json()["replicas"]["replica1"].startswith("down")
    assert 'memworker_replica_up{replica="replica1"} 0.0' in httpx.get(rapi + "/metrics").text
    write(rapi, alice, "written while the replica is down")
    listed = httpx.get(f"{rapi}/v1/agents/{AGENT}/memories", headers=alice)
    assert listed.status_code == 200 and any("replica is down" in m["text"] for m in listed.json()["memories"])
    # a replica that comes back (a fresh copy) is served again
    replica["child"], _ = embedded.start_replica(replica["dir"], services["pg"], fresh=False)  # resumes streaming
    until(lambda: httpx.get(rapi + "/healthz").json()["replicas"]["replica1"] == "ok", "the replica came back")
    before = reads(rapi, "replica")
    assert "noon" in recall(rapi, alice, "release train").json()["memories"][0]["text"]
    assert reads(rapi, "replica") - before == 1
