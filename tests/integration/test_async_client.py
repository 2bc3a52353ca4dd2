"""memworker.AsyncClient on the real stack: the operations of memworker.Client as coroutines
over one httpx.AsyncClient, with the same answers, errors and retries. Many calls at once on
one client, an episode the worker stores, memories, sessions and archives, an export streamed
and imported again, the API's message on bad input, a port where nothing listens, 429 and 503
waited out after Retry-After, and tenants apart."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from memworker import AsyncClient, Client
from memworker.local import embedded
from memworker.sdk import ApiError, Unreachable
from tests.conftest import start_api, stop_worker

FACTS = [
    "The deploy target is Postgres 16 on Hetzner.",
    "Maria prefers tea over coffee in the morning.",
    "Invoices are due 30 days after issue.",
    "Backups are kept for 35 days in cold storage.",
    "The on-call rotation changes every Monday at 9am.",
]
QUESTIONS = {
    "where do we deploy": FACTS[0],
    "what does Maria drink in the morning": FACTS[1],
    "when are invoices due": FACTS[2],
    "how long are backups kept": FACTS[3],
    "when does the on-call rotation change": FACTS[4],
}


T = TypeVar("T")


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


async def api_error(call: Awaitable[Any]) -> ApiError:
    with pytest.raises(ApiError) as err:
        await call
    return err.value


@pytest.fixture(scope="module")
def facts(api: str, tenants: dict[str, Any]) -> str:
    """alice's agent 'facts', written through the async client."""

    async def write() -> None:
        async with AsyncClient(api, tenants["alice"]["key"]) as c:
            written = await c.add_memories("facts", [{"text": t} for t in FACTS])
            assert [m["text"] for m in written] == FACTS

    run(write)
    return "facts"


def test_twenty_recalls_at_once_on_one_client(api: str, tenants: dict[str, Any], facts: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with AsyncClient(api, tenants["alice"]["key"]) as c:
            queries = [q for _ in range(4) for q in QUESTIONS]
            return list(await asyncio.gather(*(c.recall(facts, q, k=3) for q in queries)))

    answers = run(scenario)
    assert len(answers) == 20
    for question, answer in zip([q for _ in range(4) for q in QUESTIONS], answers, strict=True):
        assert answer["memories"][0]["text"] == QUESTIONS[question], question
    with Client(api, tenants["alice"]["key"]) as sync:  # the blocking client answers alike
        assert [m["id"] for m in sync.recall(facts, "when are invoices due", k=3)["memories"]] == [
            m["id"] for m in answers[2]["memories"]
        ]


def test_an_episode_is_queued_then_stored_by_the_worker(api: str, tenants: dict[str, Any], worker: Any) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        async with AsyncClient(api, tenants["alice"]["key"]) as c:
            ep = await c.add_episode("diary", "I moved my weekly sync with Priya to Wednesdays at 3pm.")
            stored = await c.wait_for_episode("diary", ep["episode_id"], timeout=120)
            listed = await c.list_episodes(agent_id="diary")
            return ep, stored, listed

    ep, stored, listed = run(scenario)
    assert ep["episode_id"] and stored["status"] == "stored"
    assert [e["episode_id"] for e in listed] == [ep["episode_id"]]


def test_memories_are_written_read_changed_and_deleted(api: str, tenants: dict[str, Any]) -> None:
    async def scenario() -> None:
        async with AsyncClient(api, tenants["alice"]["key"]) as c:
            m = await c.add_memory("crud", "The build cache lives on disk2.", metadata={"team": "infra"})
            assert (await c.get_memory("crud", m["id"]))["text"] == "The build cache lives on disk2."
            changed = await c.update_memory("crud", m["id"], metadata={"team": "platform"})
            assert changed["metadata"] == {"team": "platform"}
            page = await c.list_memories("crud", metadata={"team": "platform"})
            assert [x["id"] for x in page["memories"]] == [m["id"]]
            assert (await c.history("crud", m["id"]))["events"]
            assert await c.delete_memory("crud", m["id"]) is None
            assert (await api_error(c.get_memory("crud", m["id"]))).status == 404

    run(scenario)


def test_a_session_its_plan_context_and_archive(api: str, tenants: dict[str, Any], facts: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(api, tenants["alice"]["key"]) as c:
            s = await c.create_session(facts, "s1", goal="ship the release")
            assert s["session_id"] == "s1" and s["created"]
            await c.update_working(facts, "s1", add=[{"kind": "decision", "text": "we ship on Thursday"}])
            working = await c.working(facts, "s1")
            assert working["items"] == 1 and [d["text"] for d in working["decisions"]] == ["we ship on Thursday"]
            await c.set_plan(facts, "s1", [{"title": "Ship", "steps": [{"title": "Tag"}, {"title": "Deploy"}]}])
            await c.update_step(facts, "s1", "m1.s1", status="done")
            assert (await c.plan(facts, "s1"))["resume"]
            ctx = await c.context(facts, "where do we deploy", session_id="s1")
            assert ctx["memory_ids"]
            assert [x["session_id"] for x in await c.sessions(facts)] == ["s1"]
            assert (await c.archive_session(facts, "s1"))["version"] == 1
            lines = await c.read_archive(facts, "s1", 1)
            assert lines[0]["type"] == "header" and lines[-1]["type"] == "footer"
            assert (await c.download_archive(facts, "s1", 1))[:2] == b"\x1f\x8b"  # gzip, as stored
            assert (await c.restore_session(facts, "s1"))["status"] == "open"

    run(scenario)


def test_an_export_streams_and_imports_into_another_tenant(
    api: str, tenants: dict[str, Any], facts: str, tmp_path: Path
) -> None:
    async def scenario() -> tuple[bytes, bytes, dict[str, Any], list[int]]:
        async with AsyncClient(api, tenants["alice"]["key"]) as alice, AsyncClient(api, tenants["bob"]["key"]) as bob:
            whole = await alice.download_export(facts)
            streamed = b"".join([chunk async for chunk in alice.export_chunks(facts)])
            path = tmp_path / "facts.ndjson"
            path.write_bytes(streamed)
            sent: list[int] = []
            report = await bob.import_file("copy", path, progress=sent.append)  # streamed from disk
            return whole, streamed, report, sent

    whole, streamed, report, sent = run(scenario)
    lines = [json.loads(line) for line in whole.splitlines()]
    n = sum(1 for line in lines if line.get("type") == "memory")
    assert streamed.splitlines()[1:] == whole.splitlines()[1:]  # the header aside: its exported_at
    assert lines[0]["agent"] == facts and n >= len(FACTS)
    assert report["memories_written"] == n and sum(sent) == len(streamed)

    async def again() -> tuple[dict[str, Any], ApiError]:
        async with AsyncClient(api, tenants["bob"]["key"]) as bob:
            second = await bob.import_file("copy", whole)  # bytes: the same file adds nothing
            bad = await api_error(bob.import_file("broken", whole.splitlines()[0] + b"\n{not json}\n"))
            return second, bad

    second, bad = run(again)
    assert (second["memories_written"], second["memories_existing"]) == (0, n)
    assert bad.status == 422 and "line 2" in str(bad)


def test_bad_input_is_an_api_error_with_the_apis_message(api: str, tenants: dict[str, Any], facts: str) -> None:
    async def scenario() -> list[ApiError]:
        async with AsyncClient(api, tenants["alice"]["key"]) as c:
            return [
                await api_error(c.recall(facts, "deploy", k=0)),
                await api_error(c.add_memory("bad agent name!", "x y z")),
                await api_error(c.update_step(facts, "nope", "m1.s1", status="done")),
            ]

    errors = run(scenario)
    with Client(api, tenants["alice"]["key"]) as sync:  # the same status and message either way
        for err, call in zip(
            errors,
            (
                lambda: sync.recall(facts, "deploy", k=0),
                lambda: sync.add_memory("bad agent name!", "x y z"),
                lambda: sync.update_step(facts, "nope", "m1.s1", status="done"),
            ),
            strict=True,
        ):
            with pytest.raises(ApiError) as same:
                call()
            assert (err.status, err.body, str(err)) == (same.value.status, same.value.body, str(same.value))
    assert [e.status for e in errors] == [422, 422, 404]
    assert all(isinstance(e.body, dict) and e.body["error"] and e.body["error"] in str(e) for e in errors)


def test_a_port_where_nothing_listens_is_unreachable() -> None:
    url = f"http://127.0.0.1:{embedded.free_port()}"

    async def scenario() -> Unreachable:
        async with AsyncClient(url, "mwk_unused") as c:
            with pytest.raises(Unreachable) as err:
                await c.recall("a", "anything")
            with pytest.raises(Unreachable):  # a stream too, once it is read
                [chunk async for chunk in c.export_chunks("a")]
            return err.value

    err = run(scenario)
    assert err.status == 0 and err.url == url and url in str(err) and "memworker up" in str(err)
    assert isinstance(err, ApiError)


def test_rate_limited_requests_are_sent_again_after_retry_after(stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    proc, url = start_api(
        stack["settings"], "api-rate", extra_env={"MEMWORKER_RATE_KEY_PER_S": "1", "MEMWORKER_RATE_KEY_BURST": "2"}
    )
    key = tenants["charlie"]["key"]

    async def scenario() -> tuple[list[Any], float, list[int]]:
        async with AsyncClient(url, key, retries=0) as once:
            refused = await asyncio.gather(*(once.list_episodes(limit=1) for _ in range(4)), return_exceptions=True)
        await asyncio.sleep(2.5)  # the bucket fills again
        async with AsyncClient(url, key, retries=4) as patient:
            start = time.monotonic()
            counts = [len(await patient.list_episodes(limit=1)) for _ in range(4)]
            return refused, time.monotonic() - start, counts

    try:
        refused, took, counts = run(scenario)
    finally:
        stop_worker(proc)
    rejected = [r for r in refused if isinstance(r, ApiError)]
    assert rejected and all(r.status == 429 and "rate limit" in str(r) for r in rejected), refused
    assert counts == [0, 0, 0, 0]  # all four answered: charlie has no episodes
    assert took >= 1.0  # past the burst of two, a 429 waited out its Retry-After


def test_overloaded_requests_are_sent_again_after_retry_after(
    stack: dict[str, Any], tenants: dict[str, Any], facts: str
) -> None:
    proc, url = start_api(stack["settings"], "api-tight", extra_env={"MEMWORKER_API_MAX_INFLIGHT": "1"})
    key = tenants["alice"]["key"]

    async def scenario() -> tuple[list[Any], list[dict[str, Any]]]:
        async with AsyncClient(url, key, retries=0) as once:
            refused = await asyncio.gather(
                *(once.recall(facts, q) for q in [*QUESTIONS, *QUESTIONS]), return_exceptions=True
            )
        async with AsyncClient(url, key, retries=8) as patient:
            answered = await asyncio.gather(*(patient.recall(facts, q, k=1) for q in QUESTIONS))
        return refused, list(answered)

    try:
        refused, answered = run(scenario)
    finally:
        stop_worker(proc)
    rejected = [r for r in refused if isinstance(r, ApiError)]
    assert rejected and all(r.status == 503 and "overloaded" in str(r) for r in rejected), refused
    assert [a["memories"][0]["text"] for a in answered] == list(QUESTIONS.values())


def test_tenants_stay_apart(api: str, tenants: dict[str, Any], facts: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(api, tenants["alice"]["key"]) as alice, AsyncClient(api, tenants["bob"]["key"]) as bob:
            mine = await alice.add_memory("private", "Alice's safe code is 4711.")
            assert (await api_error(bob.get_memory("private", mine["id"]))).status == 404
            assert (await api_error(bob.list_memories("private"))).status == 404
            assert (await api_error(bob.download_export("private"))).status == 404
            assert (await api_error(bob.recall("private", "safe code", k=5))).status == 404
            await bob.add_memory("private", "Bob's own note.")  # bob's agent of the same name
            hits = (await bob.recall("private", "safe code", k=5))["memories"]
            assert [h["text"] for h in hits] == ["Bob's own note."]
            assert [h["text"] for h in (await alice.recall("private", "safe code", k=1))["memories"]] == [
                "Alice's safe code is 4711."
            ]

    run(scenario)
