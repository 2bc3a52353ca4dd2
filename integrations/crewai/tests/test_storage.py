"""MemworkerStorage against a real memworker API (real HTTP, Postgres, Redis, embeddings):
crewai's StorageBackend semantics, memworker's view of the same memories, and errors."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from crewai.memory.storage.backend import StorageBackend
from crewai.memory.types import MemoryRecord

from memworker_crewai import MemworkerError, MemworkerStorage, memworker_memory

FACTS = [
    ("inv", "The client wants every invoice as a PDF attachment.", "/billing", ["prefs"]),
    ("dep", "Production deploys happen on Tuesdays after the standup.", "/eng/ops", ["process"]),
    ("db", "The staging database runs Postgres 16 on a single node.", "/eng/infra", ["infra"]),
    ("oncall", "Maria is on call for the payment service this week.", "/eng/ops", ["people", "process"]),
]


def _save_facts(storage: MemworkerStorage) -> dict[str, MemoryRecord]:
    records = {
        name: MemoryRecord(content=text, scope=scope, categories=cats, importance=0.6, metadata={"fact": name})
        for name, text, scope, cats in FACTS
    }
    storage.save(list(records.values()))
    return records


def _search(storage: MemworkerStorage, query: str, **kw: Any) -> list[tuple[MemoryRecord, float]]:
    (vector,) = storage.embedder([query])
    return storage.search(vector, **kw)


def _raw(api: str, key: str, agent_id: str) -> list[dict[str, Any]]:
    """The agent's memories through memworker's plain API, not through the storage."""
    resp = httpx.get(
        f"{api}/v1/agents/{agent_id}/memories", headers={"Authorization": f"Bearer {key}"}, params={"limit": 500}
    )
    if resp.status_code == 404:
        return []
    resp.raise_for_status()
    memories: list[dict[str, Any]] = resp.json()["memories"]
    return memories


def test_it_is_a_crewai_storage_backend(storage: MemworkerStorage) -> None:
    assert isinstance(storage, StorageBackend)


def test_save_then_search_finds_it_by_meaning(
    storage: MemworkerStorage, api: str, keys: list[str], agent_id: str
) -> None:
    records = _save_facts(storage)
    hits = _search(storage, "in which file format should bills be sent?")
    assert hits and hits[0][0].id == records["inv"].id
    assert hits[0][0].content == records["inv"].content
    assert all(0 <= score <= 1 for _, score in hits) and hits[0][1] > 0
    assert _search(storage, "who handles incidents for payments?")[0][0].id == records["oncall"].id

    # each record is one memworker memory of the agent, visible through the plain API
    raw = {m["text"]: m for m in _raw(api, keys[0], agent_id)}
    assert set(raw) == {text for _, text, _, _ in FACTS}
    assert raw[records["inv"].content]["metadata"]["crewai_id"] == records["inv"].id

    # a retried save writes nothing twice
    storage.save([records["inv"]])
    assert len(_raw(api, keys[0], agent_id)) == len(FACTS)
    # an agent that holds nothing yet answers empty, not an error
    with MemworkerStorage(api, keys[0], agent_id=agent_id + "-empty") as empty:
        assert _search(empty, "anything") == [] and empty.count() == 0 and empty.list_records() == []


def test_every_field_round_trips(storage: MemworkerStorage) -> None:
    meta = {
        "customer": "acme",
        "n": 3,
        "ratio": 0.25,
        "vip": True,
        "none": None,
        "tags": ["a", "b"],
        "deep": {"k": [1]},
    }
    record = MemoryRecord(
        content="Acme's renewal is due on the first of June.",
        scope="/accounts/acme/",
        categories=["renewals", "dates"],
        metadata=meta,
        importance=0.85,
        source="user-17",
        private=True,
    )
    storage.save([record])

    def same(got: MemoryRecord | None) -> None:
        assert got is not None
        assert (got.id, got.content, got.scope, got.categories) == (
            record.id,
            record.content,
            "/accounts/acme",
            ["renewals", "dates"],
        )
        assert got.metadata == meta and got.importance == 0.85
        assert (got.source, got.private) == ("user-17", True)
        assert abs(got.created_at - datetime.utcnow()) < timedelta(minutes=5)

    same(storage.get_record(record.id))
    same(_search(storage, "when does acme renew?")[0][0])
    same(storage.list_records()[0])
    assert storage.get_record("no-such-record") is None

    record.content, record.metadata, record.importance = "Acme's renewal moved to July.", {"customer": "acme"}, 0.4
    storage.update(record)
    got = storage.get_record(record.id)
    assert got is not None and (got.content, got.metadata, got.importance) == (
        record.content,
        {"customer": "acme"},
        0.4,
    )
    assert storage.count() == 1


def test_limit_and_score_threshold(storage: MemworkerStorage) -> None:
    _save_facts(storage)
    query = "how do we run production: deploys, on-call, databases?"
    everything = _search(storage, query, limit=10)
    assert len(everything) >= 3
    assert len(_search(storage, query, limit=2)) == 2
    assert len(_search(storage, query, limit=1)) == 1 and _search(storage, query, limit=0) == []

    # min_score keeps exactly the hits at or above it (recall's order is its fused rank)
    cut = sorted(s for _, s in everything)[-2]
    kept = _search(storage, query, limit=10, min_score=cut)
    assert len(kept) == 2 and all(s >= cut for _, s in kept)
    assert {r.id for r, _ in kept} == {r.id for r, s in everything if s >= cut}
    assert len(_search(storage, query, limit=1, min_score=cut)) == 1
    assert _search(storage, query, min_score=1.0) == []


def test_scope_categories_and_metadata_filters(storage: MemworkerStorage) -> None:
    records = _save_facts(storage)
    query = "who is on call, when are production deploys, which Postgres runs staging, how are invoices sent?"
    assert {r.id for r, _ in _search(storage, query)} == {r.id for r in records.values()}
    assert {r.id for r, _ in _search(storage, query, scope_prefix="/eng")} == {
        records[n].id for n in ("dep", "db", "oncall")
    }
    assert {r.id for r, _ in _search(storage, query, scope_prefix="/eng/ops/")} == {
        records[n].id for n in ("dep", "oncall")
    }
    assert _search(storage, query, scope_prefix="/en") == []  # a level is matched whole, not as a prefix
    assert {r.id for r, _ in _search(storage, query, categories=["process"])} == {
        records[n].id for n in ("dep", "oncall")
    }
    assert [r.id for r, _ in _search(storage, query, metadata_filter={"fact": "db"})] == [records["db"].id]
    assert _search(storage, "how are invoices sent?", metadata_filter={"fact": "db"}) == []

    assert storage.count() == 4 and storage.count("/eng") == 3
    assert storage.list_scopes("/") == ["/billing", "/eng"]
    assert storage.list_scopes("/eng") == ["/eng/infra", "/eng/ops"]
    assert storage.list_categories("/eng") == {"process": 2, "infra": 1, "people": 1}
    info = storage.get_scope_info("/eng/ops")
    assert (info.path, info.record_count, info.categories) == ("/eng/ops", 2, ["people", "process"])
    page = storage.list_records("/eng", limit=2, offset=1)
    assert len(page) == 2 and [r.id for r in page] == [r.id for r in storage.list_records("/eng")][1:3]


def test_delete_and_reset(storage: MemworkerStorage, api: str, keys: list[str], agent_id: str) -> None:
    records = _save_facts(storage)
    assert storage.delete(record_ids=[records["db"].id, "not-a-record"]) == 1
    assert storage.get_record(records["db"].id) is None
    assert storage.delete(scope_prefix="/eng", categories=["people"]) == 1
    assert storage.delete(older_than=datetime.utcnow() - timedelta(hours=1)) == 0
    assert {r.id for r in storage.list_records()} == {records["inv"].id, records["dep"].id}

    storage.reset("/eng")  # a scope's reset leaves the others
    assert [r.id for r in storage.list_records()] == [records["inv"].id]
    storage.reset()
    assert storage.count() == 0 and storage.list_records() == []
    assert _search(storage, "invoice format") == []
    assert _raw(api, keys[0], agent_id) == []  # forgotten in memworker, not just hidden


def test_tenants_do_not_see_each_other(storage: MemworkerStorage, api: str, keys: list[str], agent_id: str) -> None:
    records = _save_facts(storage)
    with MemworkerStorage(api, keys[1], agent_id=agent_id) as other:
        assert _search(other, "invoice file format") == []
        assert other.get_record(records["inv"].id) is None
        assert other.count() == 0 and other.list_scopes() == []
        other.save([MemoryRecord(content="The other tenant sends invoices by fax.", scope="/billing")])
        other.reset()
        assert other.delete(record_ids=[records["inv"].id]) == 0
    assert storage.count() == 4
    assert [r.content for r, _ in _search(storage, "how are invoices sent?")][0] == records["inv"].content


def test_bad_input_gives_the_apis_message(storage: MemworkerStorage, api: str, keys: list[str]) -> None:
    with pytest.raises(MemworkerError) as nul:
        storage.save([MemoryRecord(content="Bad\x00text.")])
    assert nul.value.status == 422
    assert "text must not contain NUL" in str(nul.value)
    unreachable = r"cannot reach http://127\.0\.0\.1:9 .*is memworker running there\?"
    with (
        MemworkerStorage(api, "mwk_not_a_key", agent_id="x") as bad,
        pytest.raises(MemworkerError, match="HTTP 401: invalid api key"),
    ):
        bad.count()
    with (
        MemworkerStorage("http://127.0.0.1:9", "k", agent_id="x", retries=0) as nowhere,
        pytest.raises(MemworkerError, match=unreachable),
    ):
        nowhere.count()
    with pytest.raises(MemworkerError, match=r"HTTP 422: memories: .*text must not contain NUL"):
        storage.save([MemoryRecord(content="Bad\x00text.")])
    with pytest.raises(ValueError, match="not JSON compliant"):  # refused before it is sent
        storage.save([MemoryRecord(content="Bad metadata.", metadata={"n": float("nan")})])
    with pytest.raises(ValueError, match="reserved for memworker_crewai"):
        storage.save([MemoryRecord(content="Sneaky.", metadata={"crewai_scope": "/x"})])
    with pytest.raises(ValueError, match="only str, int, float, bool or None"):
        _search(storage, "q", metadata_filter={"tags": ["a"]})
    with pytest.raises(ValueError, match=r"Memory\(storage=storage, embedder=storage.embedder\)"):
        storage.search([0.1] * 1536)
    with pytest.raises(ValueError, match="no memory with record id"):
        storage.update(MemoryRecord(content="Never saved."))
    # through crewai's Memory, the same message reaches the caller
    memory = memworker_memory(api, keys[0], agent_id=storage.agent_id)
    with pytest.raises(MemworkerError, match=r"HTTP 422: .*text must not contain NUL"):
        memory.remember("Bad\x00text again.", scope="/", categories=[], importance=0.5)
    assert storage.count() == 0  # nothing of the refused writes was stored


def test_a_long_content_is_kept_whole(storage: MemworkerStorage, api: str, keys: list[str]) -> None:
    result = " ".join(f"step {i}: the invoice export for client {i} moved to the new billing API." for i in range(20))
    record = MemoryRecord(content=f"Task: migrate invoice exports. Result: {result}", scope="/billing")
    storage.save([record])
    got = storage.get_record(record.id)
    assert got is not None and got.content == record.content
    hits = _search(storage, "which API do invoice exports use now?")
    assert hits and hits[0][0].content == record.content
    (memory,) = [m for m in _raw(api, keys[0], storage.agent_id) if m["metadata"].get("crewai_id") == record.id]
    assert len(memory["text"]) <= 280 and memory["text"].endswith("\u2026")
    assert record.content.startswith(memory["text"][:-1])
    storage.reset()


def test_async_methods(storage: MemworkerStorage) -> None:
    import asyncio

    async def main() -> None:
        record = MemoryRecord(content="The office wifi password rotates every Monday.", scope="/office")
        await storage.asave([record])
        (vector,) = storage.embedder(["when does the wifi password change?"])
        hits = await storage.asearch(vector, scope_prefix="/office")
        assert [r.id for r, _ in hits] == [record.id]
        assert await storage.adelete(record_ids=[record.id]) == 1

    asyncio.run(main())
    assert storage.count() == 0
