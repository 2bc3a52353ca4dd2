"""Webhooks that cannot reach inside the deployment, cannot starve other tenants, and stay
within an agent-limited key's agents. The real API over HTTP, real workers (an
ingest worker and a webhook sender, as `memworker up` runs them), real Postgres and Redis,
real HTTP receivers. All traffic stays on loopback and nothing needs DNS: internal
addresses are literals, and a name is resolved by a resolver the test passes in.

The module's operator allows 127.0.0.2 (MEMWORKER_WEBHOOK_ALLOW_HOSTS), where its receivers
listen; 127.0.0.1, where Redis, Postgres and the API listen, stays refused."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import psycopg
import pytest

from memworker import keys
from memworker.local import embedded
from memworker.sdk import ApiError, Client
from memworker.sessions import egress, hooks
from memworker.settings import Settings
from memworker.storage import db
from tests.conftest import start_worker, stop_worker

ALLOWED = "127.0.0.2"  # a loopback address the operator allows; 127.0.0.1 is not
LIMITED_AGENT = "bot-a"


@pytest.fixture(scope="module")
def stack(stack: dict[str, Any]) -> dict[str, Any]:
    """The conftest's stack, with the operator's allow-list for this module's receivers."""
    return {**stack, "settings": stack["settings"].replace(webhook_allow_hosts=ALLOWED)}


@pytest.fixture(scope="module")
def workers(stack: dict[str, Any]) -> Iterator[None]:
    """As production runs them: an ingest worker that never sees a delivery, and a webhook
    sender of two threads, each tenant allowed one delivery in flight."""
    env = {"MEMWORKER_WEBHOOK_TENANT_INFLIGHT": "1"}
    ingest = start_worker(stack["settings"], "ingest", queues="ingest,consolidate,maintenance", extra_env=env)
    try:
        sender = start_worker(
            stack["settings"], "sender", queues="webhooks", pool="threads", concurrency=2, extra_env=env
        )
    except BaseException:
        stop_worker(ingest)
        raise
    yield
    stop_worker(sender)
    stop_worker(ingest)


def client(api: str, tenants: dict[str, Any], name: str) -> Client:
    return Client(api, tenants[name]["key"])


def _error(fn: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(ApiError) as err:
        fn()
    return err.value.status, str(err.value.body.get("error", ""))


def _until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Receiver:
    """A real HTTP server answering every POST with `status`; records (time, headers)."""

    def __init__(self, host: str = ALLOWED, status: int = 200) -> None:
        self.requests: list[tuple[float, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner.requests.append((time.monotonic(), {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Hanging:
    """Accepts connections (in the kernel's backlog) and never answers."""

    def __init__(self, host: str = ALLOWED) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(1024)
        self.url = f"http://{host}:{self.sock.getsockname()[1]}/hook"

    def close(self) -> None:
        self.sock.close()


class HangUp:
    """Accepts each connection and closes it at once (a reset, not an answer)."""

    def __init__(self, host: str = ALLOWED) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.url = f"http://{host}:{self.sock.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()

    def close(self) -> None:
        self.sock.close()


# --- 1. no webhook reaches inside the deployment ----------------------------------------------


def test_internal_and_credentialed_urls_are_refused_at_registration(
    stack: dict[str, Any], api: str, tenants: dict[str, Any]
) -> None:
    alice = client(api, tenants, "alice")
    redis_port = urlsplit(stack["redis_url"]).port
    port = embedded.free_port()
    internal = [
        f"http://127.0.0.1:{redis_port}/",  # Redis
        f"http://localhost:{port}/api/task/async-apply/memworker.reconcile",  # Flower's API
        f"http://LOCALHOST.:{port}/",
        f"http://api.localhost:{port}/",
        f"http://0.0.0.0:{port}/",
        f"http://2130706433:{port}/",
        f"http://127.1:{port}/",
        f"http://0x7f000001:{port}/",
        f"http://0177.0.0.1:{port}/",
        f"http://0x7f.1:{port}/",
        f"http://[::1]:{port}/",
        f"http://[::]:{port}/",
        f"http://[::ffff:127.0.0.1]:{port}/",  # IPv4-mapped
        f"http://[2002:7f00:1::]:{port}/",  # 6to4 around 127.0.0.1
        f"http://[64:ff9b::7f00:1]:{port}/",  # NAT64 around 127.0.0.1
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",  # shared (CGNAT)
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://224.0.0.1/",
        "http://[ff02::1]/",
        "http://240.0.0.1/",  # reserved
        "http://255.255.255.255/",
        "http://192.0.2.1/",  # documentation
        "https://127.0.0.1/",
    ]
    for url in internal:
        status, error = _error(lambda url=url: alice.add_webhook(url, ["post_turn"]))
        assert status == 422 and "must point at a public address" in error, (url, status, error)
    for url in (
        f"http://user:pw@{ALLOWED}:{port}/hook",
        f"http://user@{ALLOWED}:{port}/hook",
        "http://a:b@93.184.215.14/",
    ):
        status, error = _error(lambda url=url: alice.add_webhook(url, ["post_turn"]))
        assert status == 422 and "credentials" in error, (url, status, error)
    assert alice.webhooks() == []
    # a public address and an allowed internal one register (nothing is sent at registration;
    # the public one is scoped to an agent that never acts, and deleted at once)
    public = alice.add_webhook("http://93.184.215.14/hook", ["post_turn"], agent_ids=["never-acts"])
    alice.delete_webhook(public["webhook_id"])
    allowed = alice.add_webhook(f"http://{ALLOWED}:{port}/hook", ["post_turn"], agent_ids=["never-acts"])
    alice.delete_webhook(allowed["webhook_id"])


def test_a_delivery_checks_the_address_again_and_refuses_an_internal_one(
    stack: dict[str, Any], api: str, tenants: dict[str, Any], workers: None
) -> None:
    """A webhook registered while the operator allowed 127.0.0.1 (or a name that DNS now
    points inside): the sender refuses it, sends nothing, and retries nothing."""
    settings: Settings = stack["settings"]
    inside = Receiver("127.0.0.1")
    pool = db.open_pool(stack["app_url"], max_size=2)
    try:
        tid = tenants["alice"]["id"]
        with db.tenant_tx(pool, tid) as conn:
            row, _ = hooks.create(
                conn,
                tenant_id=tid,
                url=inside.url,
                events=["pre_turn"],
                agent_ids=["late-bot"],
                settings=settings.replace(webhook_allow_hosts="127.0.0.1"),
            )
        alice = client(api, tenants, "alice")
        alice.add_memory("late-bot", "Deliveries are checked again when sent.")
        alice.context("late-bot", "anything at all")
        (d,) = _until(
            lambda: [x for x in alice.webhook_deliveries(str(row.id)) if x["status"] == "failed"], "the refusal"
        )
        assert d["attempts"] == 1 and d["last_error"] == "delivery refused (address not allowed)"
        assert d["last_status"] is None and inside.requests == []
        alice.delete_webhook(str(row.id))
    finally:
        pool.close()
        inside.close()


def test_a_delivery_resolves_once_and_connects_to_the_checked_address(
    stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    """No rebinding between check and connect: the name is resolved once per delivery, the
    connection goes to that address, and the name travels in the Host header."""
    settings: Settings = stack["settings"]
    receiver = Receiver()
    calls: list[str] = []
    answers = [egress.literal(ALLOWED), egress.literal("127.0.0.1")]  # the second lookup would rebind

    def rebinding(host: str, port: int) -> list[egress.IPAddress]:
        calls.append(host)
        ip = answers[min(len(calls), len(answers)) - 1]
        assert ip is not None
        return [ip]

    name = "hooks.example.test"
    pool = db.open_pool(stack["app_url"], max_size=2)
    try:
        tid = tenants["charlie"]["id"]
        with db.tenant_tx(pool, tid) as conn:
            conn.execute(
                "INSERT INTO memworker.agents (tenant_id, id) VALUES (%s, 'pin-bot') ON CONFLICT DO NOTHING", (tid,)
            )
            with pytest.raises(egress.Refused):  # a name that resolves inside is refused too
                hooks.create(
                    conn,
                    tenant_id=tid,
                    url=f"http://{name}:{receiver.port}/hook",
                    events=["post_turn"],
                    agent_ids=["pin-bot"],
                    settings=settings,
                    resolve=lambda host, port: [egress.literal("10.0.0.7")],  # type: ignore[list-item]
                )
            row, _ = hooks.create(
                conn,
                tenant_id=tid,
                url=f"http://{name}:{receiver.port}/hook",
                events=["post_turn"],
                agent_ids=["pin-bot"],
                settings=settings,
                resolve=rebinding,
            )
            (d1,) = hooks.emit(conn, tenant_id=tid, agent_id="pin-bot", event="post_turn", data={"n": 1})
        calls.clear()
        assert hooks.deliver(pool, settings, tenant_id=tid, delivery_id=d1, resolve=rebinding).status == "delivered"
        assert calls == [name]  # one lookup for the attempt
        assert len(receiver.requests) == 1 and receiver.requests[0][1]["host"] == f"{name}:{receiver.port}"
        with db.tenant_tx(pool, tid) as conn:  # the next lookup names 127.0.0.1: refused, nothing sent
            (d2,) = hooks.emit(conn, tenant_id=tid, agent_id="pin-bot", event="post_turn", data={"n": 2})
        attempt = hooks.deliver(pool, settings, tenant_id=tid, delivery_id=d2, resolve=rebinding)
        assert attempt.status == "failed" and attempt.error == "delivery refused (address not allowed)"
        assert len(receiver.requests) == 1
        with db.tenant_tx(pool, tid) as conn:
            conn.execute("DELETE FROM memworker.webhooks WHERE id = %s", (row.id,))
    finally:
        pool.close()
        receiver.close()


def test_delivery_errors_do_not_tell_refused_from_reset_from_timeout(
    stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    """What the deliveries route shows must not map ports: a closed port, a connection cut
    without an answer and a receiver that never answers read the same; an answer is its
    status."""
    settings: Settings = stack["settings"].replace(webhook_timeout_s=1.0)
    closed_port = embedded.free_port()
    hangup, hanging, answers_405 = HangUp(), Hanging(), Receiver(status=405)
    pool = db.open_pool(stack["app_url"], max_size=2)
    tid = tenants["bob"]["id"]
    try:
        errors: dict[str, str | None] = {}
        for what, url in [
            ("closed", f"http://{ALLOWED}:{closed_port}/hook"),
            ("reset", hangup.url),
            ("timeout", hanging.url),
            ("405", answers_405.url),
        ]:
            with db.tenant_tx(pool, tid) as conn:
                conn.execute(
                    "INSERT INTO memworker.agents (tenant_id, id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (tid, f"err-{what}"),
                )
                row, _ = hooks.create(
                    conn, tenant_id=tid, url=url, events=["post_turn"], agent_ids=[f"err-{what}"], settings=settings
                )
                (d,) = hooks.emit(conn, tenant_id=tid, agent_id=f"err-{what}", event="post_turn", data={})
            attempt = hooks.deliver(pool, settings, tenant_id=tid, delivery_id=d)
            assert attempt.status == "retry"
            with db.tenant_tx(pool, tid) as conn:
                found = conn.execute(
                    "SELECT last_error FROM memworker.webhook_deliveries WHERE id = %s", (d,)
                ).fetchone()
                conn.execute("DELETE FROM memworker.webhooks WHERE id = %s", (row.id,))
            errors[what] = found["last_error"] if found else None
        assert errors == {
            "closed": "delivery failed (connection error)",
            "reset": "delivery failed (connection error)",
            "timeout": "delivery failed (connection error)",
            "405": "HTTP 405",
        }
    finally:
        pool.close()
        for server in (hangup, hanging, answers_405):
            server.close()


# --- 2. one tenant's webhooks cannot starve another -------------------------------------------


def test_a_tenant_has_at_most_the_configured_number_of_webhooks(api: str, tenants: dict[str, Any]) -> None:
    alice, bob = client(api, tenants, "alice"), client(api, tenants, "bob")
    url = f"http://{ALLOWED}:{embedded.free_port()}/hook"
    made = [alice.add_webhook(url, ["archive"], agent_ids=["cap-bot"])["webhook_id"] for _ in range(20)]
    status, error = _error(lambda: alice.add_webhook(url, ["archive"], agent_ids=["cap-bot"]))
    assert status == 422 and "at most 20 webhooks" in error
    other = bob.add_webhook(url, ["archive"], agent_ids=["cap-bot"])  # another tenant's count is its own
    bob.delete_webhook(other["webhook_id"])
    alice.delete_webhook(made.pop())
    made.append(alice.add_webhook(url, ["archive"], agent_ids=["cap-bot"])["webhook_id"])  # room again
    for w in made:
        alice.delete_webhook(w)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def test_hanging_receivers_neither_slow_another_tenants_ingest_nor_hold_every_sender(
    stack: dict[str, Any], api: str, tenants: dict[str, Any], workers: None
) -> None:
    """Alice has 4 webhooks on a receiver that never answers and keeps firing them; bob posts
    episodes, charlie has a webhook that answers. Bob's episode-to-stored p95 is measured
    with and without alice's webhooks under the same load; charlie's deliveries go out
    while alice's hang."""
    alice, bob, charlie = (client(api, tenants, n) for n in ("alice", "bob", "charlie"))
    hanging, fine = Hanging(), Receiver()
    charlie_hook = charlie.add_webhook(fine.url, ["pre_turn"], agent_ids=["quick-bot"])
    n, gap = 20, 0.3
    alice.add_memory("hang-bot", "We decided to ship on Thursday.")
    charlie.add_memory("quick-bot", "Status: green.")

    def phase(tag: str) -> tuple[list[float], list[float]]:
        stop = threading.Event()
        charlie_sent: list[float] = []

        def fire() -> None:  # alice's pre_turn events (4 deliveries each when hooked), charlie's
            i = 0
            while not stop.is_set():
                alice.context("hang-bot", f"what did we decide {i}?")
                if i % 3 == 0:
                    charlie_sent.append(time.monotonic())
                    charlie.context("quick-bot", f"status {i}?")
                i += 1
                stop.wait(0.25)

        seen = len(fine.requests)
        firing = threading.Thread(target=fire, daemon=True)
        firing.start()
        time.sleep(1.0)  # the load is on before bob starts
        ids = []
        for i in range(n):
            ids.append(
                bob.add_episode("ingest-bot", f"{tag} note {i}: the release train leaves on Thursday.")["episode_id"]
            )
            time.sleep(gap)
        stop.set()
        firing.join()
        with psycopg.connect(stack["owner_url"]) as conn:

            def stored() -> list[tuple[Any, ...]]:
                rows = conn.execute(
                    "SELECT extract(epoch FROM stored_at - created_at)::float FROM memworker.episodes"
                    " WHERE id = ANY(%s) AND status = 'stored'",
                    ([UUID(i) for i in ids],),
                ).fetchall()
                return rows if len(rows) == n else []

            latencies = [r[0] for r in _until(stored, f"bob's {tag} episodes stored", 60)]
        _until(lambda: len(fine.requests) - seen >= len(charlie_sent), "charlie's deliveries", 30)
        received = sorted(t for t, _ in fine.requests[seen:])
        charlie_waits = [got - sent for sent, got in zip(charlie_sent, received, strict=False)]
        return latencies, charlie_waits

    try:
        before, _ = phase("baseline")
        made = [alice.add_webhook(hanging.url, ["pre_turn"], agent_ids=["hang-bot"]) for _ in range(4)]
        during, charlie_waits = phase("hanging")
        hung = alice.webhook_deliveries(made[0]["webhook_id"], limit=1000)
        p95_before, p95_during = _p95(before), _p95(during)
        print(
            f"\nbob episode->stored p95: {p95_before:.3f}s without alice's hanging webhooks, "
            f"{p95_during:.3f}s with them; charlie's deliveries waited at most {max(charlie_waits):.3f}s; "
            f"alice's first webhook had {len(hung)} deliveries"
        )
        assert len(hung) >= 10  # the load was real
        assert p95_during - p95_before < 0.5
        assert max(charlie_waits) < 5.0  # less than one of alice's attempts (webhook_timeout_s)
        for w in made:
            alice.delete_webhook(w["webhook_id"])
    finally:
        charlie.delete_webhook(charlie_hook["webhook_id"])
        hanging.close()
        fine.close()


# --- 3. an agent-limited key stays within its agents ------------------------------------------


@pytest.fixture(scope="module")
def limited(stack: dict[str, Any], api: str, tenants: dict[str, Any]) -> Client:
    """An admin key of alice's limited to bot-a."""
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenants["alice"]["id"])
        key, _ = keys.create(conn, tenant_id=tenants["alice"]["id"], name="limited", agent_ids=[LIMITED_AGENT])
        conn.commit()
    return Client(api, key)


def test_an_agent_limited_key_manages_only_webhooks_of_its_agents(
    api: str, tenants: dict[str, Any], limited: Client
) -> None:
    alice, bob = client(api, tenants, "alice"), client(api, tenants, "bob")
    url = f"http://{ALLOWED}:{embedded.free_port()}/hook"
    assert _error(lambda: limited.add_webhook(url, ["post_turn"], agent_ids=["bot-b"]))[0] == 404
    assert _error(lambda: limited.add_webhook(url, ["post_turn"], agent_ids=[LIMITED_AGENT, "bot-b"]))[0] == 404
    status, error = _error(lambda: limited.add_webhook(url, ["post_turn"]))  # every agent
    assert status == 403 and "agent_ids" in error
    own = limited.add_webhook(url, ["post_turn"], agent_ids=[LIMITED_AGENT])
    tenant_wide = alice.add_webhook(url, ["post_turn"])
    other_agent = alice.add_webhook(url, ["post_turn"], agent_ids=["bot-b"])
    mixed = alice.add_webhook(url, ["post_turn"], agent_ids=[LIMITED_AGENT, "bot-b"])
    bobs = bob.add_webhook(url, ["post_turn"], agent_ids=[LIMITED_AGENT])
    try:
        assert [w["webhook_id"] for w in limited.webhooks()] == [own["webhook_id"]]
        assert len(alice.webhooks()) == 4 and [w["webhook_id"] for w in bob.webhooks()] == [bobs["webhook_id"]]
        for w in (tenant_wide, other_agent, mixed, bobs):
            assert _error(lambda w=w: limited.delete_webhook(w["webhook_id"]))[0] == 404
            assert _error(lambda w=w: limited.webhook_deliveries(w["webhook_id"]))[0] == 404
        assert len(alice.webhooks()) == 4  # nothing was deleted
        assert limited.webhook_deliveries(own["webhook_id"]) == []
        limited.delete_webhook(own["webhook_id"])
        assert len(alice.webhooks()) == 3
    finally:
        for w in (tenant_wide, other_agent, mixed):
            alice.delete_webhook(w["webhook_id"])
        bob.delete_webhook(bobs["webhook_id"])
