"""memworker.integrations.langgraph.MemworkerStore against the real API (real HTTP, Postgres,
Redis): LangGraph's store semantics as far as they apply (docs/langgraph.md), sync and async,
and a compiled StateGraph that reads and writes through it."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from memworker.integrations.langgraph import MemworkerStore
from memworker.sdk import ApiError, Client


@pytest.fixture(scope="module")
def store(api: str, tenants: dict[str, Any]) -> Any:
    with MemworkerStore(api, tenants["alice"]["key"]) as s:
        yield s


def test_put_get_search_delete_round_trip(store: MemworkerStore, api: str, tenants: dict[str, Any]) -> None:
    ns = ("support-bot", "user-1", "prefs")
    store.put(ns, "contact", {"text": "Prefers email over phone calls.", "channel": "email", "rank": 1})
    store.put(ns, "tz", {"text": "Lives in Lisbon, works on UTC time.", "channel": "none", "rank": 2})
    item = store.get(ns, "contact")
    assert item is not None
    assert (item.namespace, item.key) == (ns, "contact")
    assert item.value == {"text": "Prefers email over phone calls.", "channel": "email", "rank": 1}
    assert item.created_at <= item.updated_at

    hits = store.search(("support-bot", "user-1"), query="how does the user want to be contacted?", limit=2)
    assert hits[0].key == "contact" and hits[0].score is not None
    assert [h.key for h in store.search(("support-bot",), filter={"channel": "email"})] == ["contact"]

    # it is a memworker memory: the agent is namespace[0], recallable through the plain API
    raw = Client(api, tenants["alice"]["key"]).recall("support-bot", "email phone")["memories"]
    assert raw and raw[0]["metadata"]["lg_key"] == "contact"

    store.put(ns, "contact", {"text": "Prefers Signal messages now.", "channel": "signal"})  # replaces
    again = store.get(ns, "contact")
    assert again is not None and again.value == {"text": "Prefers Signal messages now.", "channel": "signal"}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    assert len(store.search(ns, limit=50)) == 2  # replaced in place, not a second memory
    assert store.search(ns, query="signal messages")[0].key == "contact"

    store.delete(ns, "contact")
    assert store.get(ns, "contact") is None
    assert [h.key for h in store.search(ns, limit=50)] == ["tz"]
    store.put(ns, "tz", None)  # type: ignore[arg-type]  # a None value deletes (PutOp semantics)
    assert store.search(ns) == []
    store.delete(ns, "never-there")  # deleting a missing key is not an error
    assert store.get(("nobody-yet", "x"), "k") is None and store.search(("nobody-yet",)) == []


def test_async_round_trip(api: str, tenants: dict[str, Any]) -> None:
    async def main() -> None:
        async with MemworkerStore(api, tenants["alice"]["key"]) as s:
            ns = ("async-bot", "notes")
            await s.aput(ns, "a", {"text": "The staging database is Postgres 16."})
            await s.aput(ns, "b", {"text": "Deploys happen on Tuesdays."})
            got = await s.aget(ns, "a")
            assert got is not None and got.value["text"] == "The staging database is Postgres 16."
            hits = await s.asearch(ns, query="which postgres version runs staging?")
            assert hits[0].key == "a"
            await s.aput(ns, "a", {"text": "The staging database is Postgres 17."})
            replaced = await s.aget(ns, "a")
            assert replaced is not None and replaced.value["text"].endswith("17.")
            # concurrent calls share the client; gather runs them on one loop
            items = await asyncio.gather(s.aget(ns, "a"), s.aget(ns, "b"), s.aget(ns, "zzz"))
            assert [i.key if i else None for i in items] == ["a", "b", None]
            await s.adelete(ns, "a")
            assert await s.aget(ns, "a") is None
            assert [i.key for i in await s.asearch(ns)] == ["b"]
            assert await s.alist_namespaces(prefix=("async-bot",)) == [ns]

    asyncio.run(main())


def test_namespace_isolation_filters_and_paging(store: MemworkerStore) -> None:
    for i in range(7):
        store.put(
            ("iso", "docs", "a"), f"k{i}", {"text": f"Document number {i} about rivers.", "n": i, "even": i % 2 == 0}
        )
    store.put(("iso", "docs", "b"), "k0", {"text": "A different document in b.", "n": 100, "even": True})
    store.put(("iso", "docsx"), "k0", {"text": "Not under docs at all.", "n": 5})

    a = store.search(("iso", "docs", "a"), limit=100)
    assert sorted(i.key for i in a) == [f"k{i}" for i in range(7)]
    assert {i.namespace for i in store.search(("iso", "docs"), limit=100)} == {
        ("iso", "docs", "a"),
        ("iso", "docs", "b"),
    }
    assert store.get(("iso", "docs", "b"), "k0").value["n"] == 100  # type: ignore[union-attr]
    assert store.get(("iso", "docs"), "k0") is None  # a prefix is not the namespace

    # filters: exact values and LangGraph's operators, on the value's top-level fields
    assert {i.key for i in store.search(("iso",), filter={"even": True}, limit=100)} == {"k0", "k2", "k4", "k6"}
    assert {i.value["n"] for i in store.search(("iso",), filter={"n": {"$gte": 5}}, limit=100)} == {5, 6, 100}
    assert {i.value["n"] for i in store.search(("iso", "docs"), filter={"n": {"$gt": 2, "$lt": 5}})} == {3, 4}
    assert {i.value["n"] for i in store.search(("iso", "docs", "a"), filter={"n": {"$ne": 0}}, limit=100)} == set(
        range(1, 7)
    )

    # limit and offset page through one order (newest first) without overlap
    pages = [store.search(("iso", "docs", "a"), limit=3, offset=o) for o in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    keys = [i.key for p in pages for i in p]
    assert len(set(keys)) == 7 and keys == [i.key for i in a]
    ranked = store.search(("iso", "docs"), query="rivers document", limit=2, offset=1)
    assert len(ranked) == 2 and all(i.score is not None for i in ranked)
    assert [i.key for i in ranked] == [i.key for i in store.search(("iso", "docs"), query="rivers document", limit=3)][
        1:
    ]
    assert {i.value["n"] for i in store.search(("iso",), query="document", filter={"even": False})} == {1, 3, 5}

    # list_namespaces: prefix, suffix, wildcards, max_depth, paging
    assert store.list_namespaces(prefix=("iso",)) == [("iso", "docs", "a"), ("iso", "docs", "b"), ("iso", "docsx")]
    assert store.list_namespaces(prefix=("iso",), max_depth=2) == [("iso", "docs"), ("iso", "docsx")]
    assert store.list_namespaces(prefix=("iso", "*", "b")) == [("iso", "docs", "b")]
    assert store.list_namespaces(prefix=("iso",), suffix=("a",)) == [("iso", "docs", "a")]
    assert store.list_namespaces(prefix=("iso",), limit=1, offset=1) == [("iso", "docs", "b")]


def test_index_false_is_kept_out_of_query_search_only(store: MemworkerStore) -> None:
    ns = ("idx-bot", "cfg")
    store.put(ns, "secret", {"text": "Quokkas are the happiest marsupials."}, index=False)
    store.put(ns, "shown", {"title": "Quokka facts", "body": "Quokkas live on Rottnest Island."}, index=["body"])
    assert store.get(ns, "secret") is not None
    assert {i.key for i in store.search(ns)} == {"secret", "shown"}
    assert [i.key for i in store.search(ns, query="quokka happiest marsupials")] == ["shown"]


def test_batch_reads_see_the_store_before_its_writes(store: MemworkerStore) -> None:
    ns = ("batch-bot", "b")
    store.put(ns, "x", {"text": "old x"})
    out = store.batch(
        [
            PutOp(ns, "x", {"text": "new x"}),
            GetOp(ns, "x"),
            PutOp(ns, "y", {"text": "first y"}),
            PutOp(ns, "y", {"text": "last y"}),
            SearchOp(ns, limit=10),
        ]
    )
    assert out[0] is None and out[2] is None and out[3] is None
    assert out[1].value == {"text": "old x"}  # type: ignore[union-attr]
    assert [i.key for i in out[4]] == ["x"]  # type: ignore[union-attr]
    assert store.get(ns, "x").value == {"text": "new x"}  # type: ignore[union-attr]
    assert store.get(ns, "y").value == {"text": "last y"}  # type: ignore[union-attr]
    assert len(store.search(ns)) == 2


def test_tenants_and_agents_do_not_see_each_other(api: str, tenants: dict[str, Any], store: MemworkerStore) -> None:
    store.put(("private-bot", "p"), "k", {"text": "Alice's launch code is 0000."})
    with MemworkerStore(api, tenants["bob"]["key"]) as bob:
        assert bob.get(("private-bot", "p"), "k") is None
        assert bob.search(("private-bot",), query="launch code") == []
        bob.put(("private-bot", "p"), "k", {"text": "Bob keeps bees."})
    assert store.get(("private-bot", "p"), "k").value["text"].startswith("Alice")  # type: ignore[union-attr]


def test_the_general_store_and_a_subject_store_share_no_item(api: str, tenants: dict[str, Any]) -> None:
    """A store without a subject is the agent's general one: it sees only items without a
    subject, and a subject's store only that subject's, for every operation both ways."""
    ns, key = ("scoped-bot", "prefs"), tenants["charlie"]["key"]
    card = {"text": "Pays with the Visa card ending 4242."}
    with MemworkerStore(api, key, subject="cust-a") as subject, MemworkerStore(api, key) as general:
        subject.put(ns, "card", card)
        # the general store does not see the subject's item, nor change or delete it
        assert general.get(ns, "card") is None
        assert general.search(ns) == [] and general.search(ns, query="which card does the customer pay with?") == []
        assert general.list_namespaces(prefix=("scoped-bot",)) == []
        assert asyncio.run(general.aget(ns, "card")) is None
        general.delete(ns, "card")
        general.put(ns, "card", {"text": "The company card on file is an Amex."})
        general.put(("scoped-bot", "desk"), "hours", {"text": "The desk is open 9 to 17."})
        assert subject.get(ns, "card").value == card  # type: ignore[union-attr]
        assert general.get(ns, "card").value["text"].endswith("Amex.")  # type: ignore[union-attr]

        # and the subject's store does not see the general items
        assert subject.get(("scoped-bot", "desk"), "hours") is None
        assert [i.value for i in subject.search(ns)] == [card]
        assert [i.value for i in subject.search(ns, query="which card is on file, Visa or Amex?")] == [card]
        assert subject.search(("scoped-bot",), query="when is the desk open?") == []
        assert subject.list_namespaces(prefix=("scoped-bot",)) == [ns]
        assert general.list_namespaces(prefix=("scoped-bot",)) == [("scoped-bot", "desk"), ns]
        assert [i.value["text"] for i in general.search(ns, query="which card is on file, Visa or Amex?")] == [
            "The company card on file is an Amex."
        ]

        subject.delete(ns, "card")  # each store deletes its own item only
        assert subject.get(ns, "card") is None and general.get(ns, "card") is not None
        subject.put(ns, "card", card)
        general.delete(ns, "card")
        assert general.get(ns, "card") is None and subject.get(ns, "card").value == card  # type: ignore[union-attr]
    listed = Client(api, key).list_memories("scoped-bot", limit=50)["memories"]
    assert sorted((m["metadata"]["lg_key"], m["subject"]) for m in listed) == [("card", "cust-a"), ("hours", None)]


def test_pinned_agent_keeps_every_namespace_in_one_agent(api: str, tenants: dict[str, Any]) -> None:
    with MemworkerStore(api, tenants["charlie"]["key"], agent_id="one-agent") as s:
        s.put(("memories", "u1"), "a", {"text": "u1 likes tea"})
        s.put(("memories", "u2"), "a", {"text": "u2 likes coffee"})
        s.put(("profile",), "u1", {"text": "u1 is a pilot"})
        assert s.list_namespaces() == [("memories", "u1"), ("memories", "u2"), ("profile",)]
        assert len(s.search((), limit=10)) == 3
        assert s.get(("memories", "u2"), "a").value["text"] == "u2 likes coffee"  # type: ignore[union-attr]
        assert s.search(("memories",), query="who likes coffee?")[0].namespace == ("memories", "u2")
    # the agent's other memories are not items
    Client(api, tenants["charlie"]["key"]).add_memory("one-agent", "A plain memworker memory.")
    with MemworkerStore(api, tenants["charlie"]["key"], agent_id="one-agent") as s:
        assert len(s.search((), limit=10)) == 3


def test_a_star_label_is_never_a_wildcard_on_get_put_delete(api: str, tenants: dict[str, Any]) -> None:
    with MemworkerStore(api, tenants["bob"]["key"], agent_id="star-agent") as s:
        s.put(("victim", "memories"), "profile", {"text": "the victim's private profile"})
        assert s.get(("*", "memories"), "profile") is None  # no read through a literal "*"
        s.put(("*", "memories"), "profile", {"text": "written under a literal star label"})
        victim = s.get(("victim", "memories"), "profile")
        assert victim is not None and victim.value["text"] == "the victim's private profile"  # not replaced
        star = s.get(("*", "memories"), "profile")
        assert star is not None and star.namespace == ("*", "memories")
        s.delete(("*", "memories"), "profile")
        assert s.get(("*", "memories"), "profile") is None
        assert s.get(("victim", "memories"), "profile") is not None  # not deleted
        assert [i.namespace for i in s.search(("*",))] == []  # a search prefix is literal too
        assert s.list_namespaces(prefix=("*",)) == [("victim", "memories")]  # where LangGraph makes it one


def test_what_it_cannot_do_is_a_clear_error(store: MemworkerStore) -> None:
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(("ttl-bot",), "k", {"text": "x"}, ttl=5)
    with pytest.raises(NotImplementedError, match="agent_id"):
        store.search(())
    with pytest.raises(NotImplementedError, match="agent"):
        store.list_namespaces(suffix=("a",))
    with pytest.raises(ValueError, match="unsupported operator"):
        store.search(("x-bot",), filter={"n": {"$in": [1]}})
    with pytest.raises(ValueError, match="at most 100"):
        store.search(("x-bot",), query="q", limit=50, offset=60)
    with pytest.raises(InvalidNamespaceError, match="agent id"):
        store.put(("bad agent!",), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put(("ok-bot", "a.b"), "k", {"text": "x"})  # '.' would spell another namespace
    with pytest.raises(ApiError) as err:  # over the server's metadata limit: its 422, named
        store.put(("big-bot",), "k", {"text": "x" * 20_000})
    assert err.value.status == 422 and "metadata" in str(err.value)
    assert store.get(("big-bot",), "k") is None


# --- the graph of docs/langgraph.md ---------------------------------------------------------------


class State(TypedDict):
    user: str
    message: str
    replies: Annotated[list[str], operator.add]


def remember(state: State, runtime: Runtime) -> dict[str, Any]:
    """Store what the user said; a later run of any thread can find it."""
    assert runtime.store is not None
    notes = runtime.store.search(("chat-bot", state["user"]), limit=100)
    runtime.store.put(("chat-bot", state["user"]), f"note-{len(notes)}", {"text": state["message"]})
    return {}


def answer(state: State, runtime: Runtime) -> dict[str, Any]:
    assert runtime.store is not None
    hits = runtime.store.search(("chat-bot", state["user"]), query=state["message"], limit=1)
    return {"replies": [f"I remember: {hits[0].value['text']}" if hits else "Nothing yet."]}


def build_graph(store: MemworkerStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def test_a_graph_uses_it_as_its_store(api: str, tenants: dict[str, Any]) -> None:
    with MemworkerStore(api, tenants["alice"]["key"]) as store:
        graph = build_graph(store)
        graph.invoke({"user": "u7", "message": "My favourite colour is teal.", "replies": []})
        out = graph.invoke({"user": "u7", "message": "I work as a marine biologist.", "replies": []})
        assert out["replies"] == ["I remember: I work as a marine biologist."]
        assert {i.key for i in store.search(("chat-bot", "u7"))} == {"note-0", "note-1"}
        assert store.search(("chat-bot", "u7"), query="what colour do I like?")[0].value["text"].endswith("teal.")

    async def run_async() -> dict[str, Any]:
        async with MemworkerStore(api, tenants["alice"]["key"]) as astore:
            result: dict[str, Any] = await build_graph(astore).ainvoke(
                {"user": "u8", "message": "I have a cat named Miso.", "replies": []}
            )
            return result

    # ainvoke runs the sync nodes in threads with store.batch: the sync client under asyncio works
    assert asyncio.run(run_async())["replies"] == ["I remember: I have a cat named Miso."]
