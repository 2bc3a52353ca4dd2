"""Session items over the real API (HTTP, Postgres, Redis): a session's raw conversation log,
kept whole and in order, never a memory (docs/sessions.md, "Session items")."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import psycopg
import pytest

from memworker.sdk import ApiError, Client
from memworker.sessions import items as session_items

AGENT = "items-bot"


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}


def _rows(stack: dict[str, Any], agent: str) -> int:
    """The agent's session_items rows, every tenant (the owner sees past row-level security)."""
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute("SELECT count(*) FROM memworker.session_items WHERE agent_id = %s", (agent,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture(scope="module")
def client(api: str, tenants: dict[str, Any]) -> Any:
    with Client(api, tenants["alice"]["key"]) as c:
        yield c


def test_items_keep_their_order_the_last_n_pop_and_clear(client: Client) -> None:
    c = client
    c.create_session(AGENT, "chat-order")
    first = [_msg("user", "hi"), _msg("assistant", "hello")]
    second = [{"type": "function_call", "name": "lookup", "arguments": '{"q": 1}', "call_id": "c1"}, _msg("user", "z")]
    assert c.add_session_items(AGENT, "chat-order", first) == [0, 1]
    assert c.add_session_items(AGENT, "chat-order", second) == [2, 3]
    got = c.session_items(AGENT, "chat-order")
    assert [x["item"] for x in got] == first + second  # whole, as given
    assert [x["position"] for x in got] == [0, 1, 2, 3]
    assert [x["item"] for x in c.session_items(AGENT, "chat-order", limit=2)] == second
    assert [x["position"] for x in c.session_items(AGENT, "chat-order", limit=99)] == [0, 1, 2, 3]

    popped = c.pop_session_item(AGENT, "chat-order")
    assert popped is not None and popped["position"] == 3 and popped["item"] == second[1]
    assert [x["position"] for x in c.session_items(AGENT, "chat-order")] == [0, 1, 2]
    assert c.add_session_items(AGENT, "chat-order", [_msg("user", "again")]) == [3]  # after the last one left

    assert c.clear_session_items(AGENT, "chat-order") == 4
    assert c.session_items(AGENT, "chat-order") == []
    assert c.pop_session_item(AGENT, "chat-order") is None  # an empty session pops nothing, 200
    assert c.clear_session_items(AGENT, "chat-order") == 0
    assert c.add_session_items(AGENT, "chat-order", [_msg("user", "fresh")]) == [0]


def test_concurrent_appenders_keep_every_item_at_distinct_places(api: str, tenants: dict[str, Any]) -> None:
    with Client(api, tenants["alice"]["key"]) as c:
        c.create_session(AGENT, "chat-race")
    writers, batches, size = 6, 5, 3
    taken: list[list[int]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def write(w: int) -> None:
        try:
            with Client(api, tenants["alice"]["key"]) as mine:
                for b in range(batches):
                    batch = [{"writer": w, "batch": b, "i": i} for i in range(size)]
                    places = mine.add_session_items(AGENT, "chat-race", batch)
                    with lock:
                        taken.append(places)
        except BaseException as exc:  # noqa: BLE001 - a thread's failure is the test's, reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    with Client(api, tenants["alice"]["key"]) as c:
        got = c.session_items(AGENT, "chat-race")
    total = writers * batches * size
    assert [x["position"] for x in got] == list(range(total))  # every item, each at its own place
    assert sorted(p for places in taken for p in places) == list(range(total))
    for places in taken:  # a batch takes consecutive places, in its order
        assert places == list(range(places[0], places[0] + size))
    by_place = {x["position"]: x["item"] for x in got}
    for places in taken:
        batch = [by_place[p] for p in places]
        assert {(x["writer"], x["batch"]) for x in batch} == {(batch[0]["writer"], batch[0]["batch"])}
        assert [x["i"] for x in batch] == list(range(size))


def test_bad_input_is_refused_and_writes_nothing(client: Client, api: str, tenants: dict[str, Any]) -> None:
    c = client
    c.create_session(AGENT, "chat-bounds")
    c.add_session_items(AGENT, "chat-bounds", [_msg("user", "kept")])
    big = {"role": "user", "content": "x" * session_items.MAX_ITEM_BYTES}
    with pytest.raises(ApiError) as exc:
        c.add_session_items(AGENT, "chat-bounds", [_msg("user", "small"), big])
    assert (
        exc.value.status == 413 and "items[1]" in str(exc.value) and str(session_items.MAX_ITEM_BYTES) in str(exc.value)
    )
    path = f"/v1/agents/{AGENT}/sessions/chat-bounds/items"
    headers = {"Authorization": f"Bearer {tenants['alice']['key']}"}
    with httpx.Client(base_url=api, headers=headers, timeout=30) as http:
        for body in (
            {"items": []},
            {"items": ["a string"]},
            {"items": [{"a": 1}] * (session_items.MAX_BATCH + 1)},
            {"item": [{"a": 1}]},
            {"items": [{"bad": "nul\u0000"}]},
        ):
            r = http.post(path, json=body)
            assert r.status_code == 422, (body, r.status_code, r.text)
            assert r.json()["error"]
        assert http.get(path, params={"limit": 0}).status_code == 422
        assert http.post(f"/v1/agents/{AGENT}/sessions/no-such/items", json={"items": [{"a": 1}]}).status_code == 404
    assert [x["item"] for x in c.session_items(AGENT, "chat-bounds")] == [_msg("user", "kept")]


def test_an_archived_session_reads_its_items_and_refuses_changes(client: Client) -> None:
    c = client
    c.create_session(AGENT, "chat-archived")
    items = [_msg("user", "before the archive"), _msg("assistant", "noted")]
    c.add_session_items(AGENT, "chat-archived", items)
    c.archive_session(AGENT, "chat-archived")
    assert [x["item"] for x in c.session_items(AGENT, "chat-archived")] == items  # read allowed
    for change in (
        lambda: c.add_session_items(AGENT, "chat-archived", [_msg("user", "after")]),
        lambda: c.pop_session_item(AGENT, "chat-archived"),
        lambda: c.clear_session_items(AGENT, "chat-archived"),
    ):
        with pytest.raises(ApiError) as exc:
            change()
        assert exc.value.status == 409 and "archived" in str(exc.value) and "restore" in str(exc.value)
    assert [x["item"] for x in c.session_items(AGENT, "chat-archived")] == items
    lines = c.read_archive(AGENT, "chat-archived", 1)  # the archive holds them too
    assert [x["item"] for x in lines if x["type"] == "item"] == items
    assert lines[-1]["counts"]["items"] == 2
    restored = c.restore_session(AGENT, "chat-archived")
    assert restored["restored"]["items_in_archive"] == 2
    assert c.add_session_items(AGENT, "chat-archived", [_msg("user", "reopened")]) == [2]


def test_the_acting_subject_guards_items_and_another_tenant_sees_none(
    client: Client, api: str, tenants: dict[str, Any]
) -> None:
    c = client
    c.create_session(AGENT, "chat-cust", subject="cust-a")
    c.add_session_items(AGENT, "chat-cust", [_msg("user", "cust-a's words")], subject="cust-a")
    for call in (
        lambda: c.session_items(AGENT, "chat-cust", subject="cust-b"),
        lambda: c.add_session_items(AGENT, "chat-cust", [{"a": 1}], subject="cust-b"),
        lambda: c.pop_session_item(AGENT, "chat-cust", subject="cust-b"),
        lambda: c.clear_session_items(AGENT, "chat-cust", subject="cust-b"),
    ):
        with pytest.raises(ApiError) as exc:
            call()
        assert exc.value.status == 403 and "cust-a's words" not in str(exc.value.body)
    assert len(c.session_items(AGENT, "chat-cust", subject="cust-a")) == 1
    with Client(api, tenants["bob"]["key"]) as other:
        for call in (
            lambda: other.session_items(AGENT, "chat-cust"),
            lambda: other.add_session_items(AGENT, "chat-cust", [{"a": 1}]),
            lambda: other.pop_session_item(AGENT, "chat-cust"),
            lambda: other.clear_session_items(AGENT, "chat-cust"),
        ):
            with pytest.raises(ApiError) as exc:
                call()
            assert exc.value.status == 404
    assert [x["item"] for x in c.session_items(AGENT, "chat-cust")] == [_msg("user", "cust-a's words")]


def test_items_are_never_recalled_packed_or_counted_as_memories(client: Client) -> None:
    c = client
    agent = "items-recall"
    c.add_memory(agent, "The staging database lives in Frankfurt.")
    c.create_session(agent, "chat-r")
    c.add_session_items(agent, "chat-r", [_msg("user", "Where does the staging database live? Pelicanberry.")])
    hits = c.recall(agent, "staging database pelicanberry", 20)["memories"]
    assert hits and all("Pelicanberry" not in h["text"] for h in hits)
    ctx = c.context(agent, "where is the staging database? pelicanberry", session_id="chat-r")
    assert "Frankfurt" in ctx["context"] and "Pelicanberry" not in ctx["context"]
    assert all("Pelicanberry" not in m["text"] for m in c.list_memories(agent, limit=100)["memories"])


def test_forget_and_erase_remove_the_items(client: Client, stack: dict[str, Any]) -> None:
    c = client
    agent = "items-forget"
    c.create_session(agent, "chat-s")
    c.create_session(agent, "chat-cust", subject="cust-f")
    c.create_session(agent, "chat-kept")
    for sid in ("chat-s", "chat-cust", "chat-kept"):
        c.add_session_items(agent, sid, [_msg("user", f"said in {sid}"), _msg("assistant", "ok")])
    assert _rows(stack, agent) == 6

    receipt = c.forget(agent, session_id="chat-s")
    assert receipt["sessions"]["items"] == 2
    assert _rows(stack, agent) == 4
    c.forget_subject("cust-f")
    assert _rows(stack, agent) == 2
    assert [x["item"] for x in c.session_items(agent, "chat-kept")][0] == _msg("user", "said in chat-kept")

    # a forgotten memory's text goes from the items that quote it too
    m = c.add_memory(agent, "The vault code is 4471-9932-1187.")
    c.add_session_items(agent, "chat-kept", [_msg("user", "the vault code is 4471-9932-1187, keep it")])
    receipt = c.forget(agent, memory_ids=[m["id"]])
    assert receipt["scrubbed"]["session_items"] == 1
    assert len(c.session_items(agent, "chat-kept")) == 2

    receipt = c.erase_agent(agent)
    assert receipt["session_items"] == 2
    assert _rows(stack, agent) == 0
