"""Direct memory writes, reads, updates and deletes over real HTTP, with three tenants."""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg
import pytest

from memworker.sdk import ApiError, Client


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


def test_missing_or_bad_key_is_401_with_json(api: str) -> None:
    r = httpx.get(f"{api}/v1/agents/a/memories")
    assert r.status_code == 401 and r.json() == {"error": "missing api key"}
    r = httpx.get(f"{api}/v1/agents/a/memories", headers={"Authorization": "Bearer mwk_nope_nope"})
    assert r.status_code == 401 and "error" in r.json()


def test_healthz_and_metrics(api: str) -> None:
    assert httpx.get(f"{api}/healthz").json() == {"status": "ok", "postgres": "ok", "redis": "ok"}
    assert "memworker_http_request_seconds" in httpx.get(f"{api}/metrics").text


def test_write_read_patch_delete(clients: dict[str, Client]) -> None:
    c = clients["alice"]
    m = c.add_memory(
        "bot", "The deploy target is Postgres 16 on Hetzner.", kind="decision", metadata={"project": "apollo"}
    )
    for field in ("id", "text", "kind", "tier", "salience", "confidence", "metadata", "created_at", "provenance"):
        assert field in m
    assert (m["kind"], m["tier"], m["provenance"]) == ("decision", "L1", ["api"])
    assert c.get_memory("bot", m["id"])["text"] == m["text"]
    patched = c.update_memory("bot", m["id"], text="The deploy target is Postgres 17 on Hetzner.", salience=0.9)
    assert patched["salience"] == 0.9
    hits = c.recall("bot", "postgres 17")["memories"]
    assert hits and hits[0]["id"] == m["id"]
    assert not c.recall("bot", "postgres 16 exact old text zzz")["memories"] or c.recall("bot", "postgres 16")[
        "memories"
    ][0]["text"].endswith("17 on Hetzner.")
    c.delete_memory("bot", m["id"])
    with pytest.raises(ApiError) as err:
        c.get_memory("bot", m["id"])
    assert err.value.status == 404


def test_batch_write_is_recallable_at_once_and_paginates(clients: dict[str, Client]) -> None:
    c = clients["bob"]
    texts = [f"Release {i} shipped feature number {i}." for i in range(25)]
    out = c.add_memories("pager", [{"text": t} for t in texts])
    assert len(out) == 25
    assert c.recall("pager", "feature number 17")["memories"][0]["text"] == "Release 17 shipped feature number 17."
    seen, cursor = [], None
    while True:
        page = c.list_memories("pager", limit=10, cursor=cursor)
        seen += [m["id"] for m in page["memories"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 25


def test_idempotency_key_makes_a_repeated_write_harmless(clients: dict[str, Client]) -> None:
    c = clients["alice"]
    a = c.add_memory("idem", "The office wifi password rotates monthly.", idempotency_key="w1")
    b = c.add_memory("idem", "The office wifi password rotates monthly.", idempotency_key="w1")
    assert a["id"] == b["id"]
    assert len(c.list_memories("idem")["memories"]) == 1


@pytest.mark.parametrize(
    "body,status",
    [
        ({"text": ""}, 422),
        ({"text": "x" * 281}, 422),
        ({"text": "ok text", "kind": "gossip"}, 422),
        ({"text": "ok text", "tier": "L3"}, 422),
        ({"text": "ok text", "salience": 2}, 422),
        ({"text": "ok text", "unknown": 1}, 422),
        ({"text": 5}, 422),
    ],
)
def test_bad_memory_input_is_rejected_and_writes_nothing(
    api: str, tenants: dict[str, Any], stack: dict[str, Any], body: dict[str, Any], status: int
) -> None:
    before = _count(stack)
    r = httpx.post(
        f"{api}/v1/agents/badin/memories", json=body, headers={"Authorization": f"Bearer {tenants['charlie']['key']}"}
    )
    assert r.status_code == status and "error" in r.json()
    assert _count(stack) == before


def test_oversized_batch_is_413(api: str, tenants: dict[str, Any]) -> None:
    r = httpx.post(
        f"{api}/v1/agents/big/memories/batch",
        json={"memories": [{"text": "a b c"}] * 1001},
        headers={"Authorization": f"Bearer {tenants['charlie']['key']}"},
    )
    assert r.status_code == 413


def test_another_tenants_ids_are_404_never_data(clients: dict[str, Client]) -> None:
    secret = clients["alice"].add_memory("shared-name", "Alice's launch code is 0000.")
    clients["bob"].add_memory("shared-name", "Bob keeps bees.")
    for verb in ("get", "patch", "delete"):
        with pytest.raises(ApiError) as err:
            if verb == "get":
                clients["bob"].get_memory("shared-name", secret["id"])
            elif verb == "patch":
                clients["bob"].update_memory("shared-name", secret["id"], salience=0.1)
            else:
                clients["bob"].delete_memory("shared-name", secret["id"])
        assert err.value.status == 404
    hits = clients["bob"].recall("shared-name", "launch code", k=10)["memories"]
    assert all("launch code" not in h["text"] for h in hits)
    with pytest.raises(ApiError) as err:
        clients["charlie"].recall("shared-name", "launch code")
    assert err.value.status == 404
    assert clients["alice"].get_memory("shared-name", secret["id"])["salience"] == secret["salience"]


def test_list_filters_by_metadata_containment(api: str, tenants: dict[str, Any], clients: dict[str, Client]) -> None:
    c = clients["charlie"]
    a = c.add_memory("lister", "Ticket 1 is about SSO.", metadata={"project": "apollo", "ns": {"team": "web"}})
    b = c.add_memory("lister", "Ticket 2 is about billing.", metadata={"project": "apollo", "ns": {"team": "ops"}})
    c.add_memory("lister", "Ticket 3 is about search.", metadata={"project": "zeus"})

    def ids(metadata: dict[str, Any]) -> list[str]:
        return [m["id"] for m in c.list_memories("lister", metadata=metadata)["memories"]]

    assert ids({"project": "apollo"}) == [b["id"], a["id"]]  # newest first, as without a filter
    assert ids({"project": "apollo", "ns": {"team": "web"}}) == [a["id"]]  # nested objects: containment
    assert ids({"project": "hermes"}) == [] and len(ids({})) == 3
    page = c.list_memories("lister", metadata={"project": "apollo"}, limit=1)
    assert [m["id"] for m in page["memories"]] == [b["id"]] and page["next_cursor"]
    rest = c.list_memories("lister", metadata={"project": "apollo"}, cursor=page["next_cursor"])
    assert [m["id"] for m in rest["memories"]] == [a["id"]]
    headers = {"Authorization": f"Bearer {tenants['charlie']['key']}"}
    for bad, says in (
        ("{nope", "not JSON"),
        ("[1]", "JSON object"),
        ('{"a": "\\u0000"}', "NUL"),
        ("[" * 3000, "nested too deeply"),  # deeper than json's recursion: 422, not 500
    ):
        r = httpx.get(f"{api}/v1/agents/lister/memories", params={"metadata": bad}, headers=headers)
        assert r.status_code == 422 and says in r.json()["error"], (bad, r.text)
    deep: dict[str, Any] = {}
    for _ in range(40):
        deep = {"x": deep}
    r = httpx.get(f"{api}/v1/agents/lister/memories", params={"metadata": json.dumps(deep)}, headers=headers)
    assert r.status_code == 422 and "metadata filter" in r.json()["error"]


def _count(stack: dict[str, Any]) -> int:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute("SELECT count(*) FROM memworker.memories").fetchone()
    assert row is not None
    return int(row[0])
