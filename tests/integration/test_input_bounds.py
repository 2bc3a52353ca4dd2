"""Bounded input at the edge. Every free-form JSON object the API accepts
(episode, memory and session metadata, the recall metadata filter) is limited in depth and
size; lone surrogates, deep nesting and undecodable bodies are a JSON 4xx that changes
nothing; and no stored row, however it got there, breaks a read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from memworker.settings import Settings

SURROGATE = "x\ud800y"


def _nested(depth: int) -> dict[str, Any]:
    """A metadata object `depth` levels deep ({"a": {"a": ... {} }})."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def _raw(obj: Any) -> bytes:
    """JSON text Python can write but not encode as UTF-8 (lone surrogates as \\u escapes)."""
    return json.dumps(obj).encode()  # ensure_ascii: \ud800 stays an escape


def _h(tenant: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant['key']}", "Content-Type": "application/json"}


def _count(stack: dict[str, Any], table: str) -> int:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute(f"SELECT count(*) FROM memworker.{table}").fetchone()
    assert row is not None
    return int(row[0])


def _assert_refused(r: httpx.Response) -> None:
    assert r.status_code in (400, 413, 422), (r.status_code, r.text[:300])
    assert isinstance(r.json().get("error"), str), r.text[:300]


def test_settings_have_metadata_limits() -> None:
    s = Settings.from_env({"MEMWORKER_MAX_METADATA_DEPTH": "8", "MEMWORKER_MAX_METADATA_BYTES": "1024"})
    assert (s.max_metadata_depth, s.max_metadata_bytes) == (8, 1024)
    assert (Settings().max_metadata_depth, Settings().max_metadata_bytes) == (16, 16_384)


@pytest.mark.parametrize("depth", [17, 254, 280, 400, 990, 1500])
def test_deep_metadata_is_refused_everywhere_and_writes_nothing(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], depth: int
) -> None:
    h, deep = _h(tenants["alice"]), "@deep@"  # stands for the JSON text: deeper than json.dumps goes
    deep_text = '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    before = {t: _count(stack, t) for t in ("episodes", "memories", "sessions")}
    bodies = [
        ("/v1/agents/deep/episodes", {"content": "deep metadata episode", "metadata": deep}),
        ("/v1/agents/deep/episodes/batch", {"episodes": [{"content": "deep", "metadata": deep}]}),
        ("/v1/agents/deep/memories", {"text": "deep metadata memory", "metadata": deep}),
        ("/v1/agents/deep/memories/batch", {"memories": [{"text": "deep", "metadata": deep}]}),
        ("/v1/agents/deep/sessions", {"metadata": deep}),
        ("/v1/agents/deep/recall", {"query": "deep", "metadata": {"a": deep}}),
    ]
    for path, body in bodies:
        raw = _raw(body).replace(b'"@deep@"', deep_text.encode())
        _assert_refused(httpx.post(api + path, content=raw, headers=h, timeout=30))
    after = {t: _count(stack, t) for t in ("episodes", "memories", "sessions")}
    assert after == before


def test_metadata_at_the_limits_is_accepted(api: str, tenants: dict[str, Any]) -> None:
    h = _h(tenants["alice"])
    r = httpx.post(
        f"{api}/v1/agents/edge/memories", json={"text": "sixteen levels", "metadata": _nested(16)}, headers=h
    )
    assert r.status_code == 201, r.text
    big = {"blob": "x" * 16_000}
    r = httpx.post(f"{api}/v1/agents/edge/memories", json={"text": "almost 16 KB", "metadata": big}, headers=h)
    assert r.status_code == 201, r.text


def test_oversized_metadata_is_refused(api: str, stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    h, big = _h(tenants["alice"]), {"blob": "x" * 17_000}
    wide = {f"k{i}": i for i in range(3_000)}  # many small keys add up too
    before = {t: _count(stack, t) for t in ("episodes", "memories", "sessions")}
    for meta in (big, wide):
        for path, body in [
            ("/v1/agents/big/episodes", {"content": "big metadata", "metadata": meta}),
            ("/v1/agents/big/memories", {"text": "big metadata", "metadata": meta}),
            ("/v1/agents/big/sessions", {"metadata": meta}),
        ]:
            r = httpx.post(api + path, json=body, headers=h)
            assert r.status_code == 422 and "metadata" in r.json()["error"], r.text[:300]
    r = httpx.post(f"{api}/v1/agents/big/memories", json={"text": "small"}, headers=h)
    assert r.status_code == 201
    mid = r.json()["id"]
    r = httpx.patch(f"{api}/v1/agents/big/memories/{mid}", json={"metadata": big}, headers=h)
    assert r.status_code == 422
    assert httpx.get(f"{api}/v1/agents/big/memories/{mid}", headers=h).json()["metadata"] == {}
    after = {t: _count(stack, t) for t in ("episodes", "memories", "sessions")}
    assert after["episodes"] == before["episodes"] and after["sessions"] == before["sessions"]
    assert after["memories"] == before["memories"] + 1


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/agents/sur/episodes", {"content": SURROGATE}),
        ("/v1/agents/sur/episodes", {"messages": [{"role": "user", "content": SURROGATE}]}),
        ("/v1/agents/sur/episodes", {"content": "ok", "metadata": {SURROGATE: 1}}),
        ("/v1/agents/sur/episodes", {"content": "ok", "metadata": {"k": SURROGATE}}),
        ("/v1/agents/sur/episodes", {"content": "ok", "metadata": {"k": [{"n": SURROGATE}]}}),
        ("/v1/agents/sur/episodes/batch", {"episodes": [{"content": "ok", "metadata": {"k": SURROGATE}}]}),
        ("/v1/agents/sur/memories", {"text": SURROGATE}),
        ("/v1/agents/sur/memories", {"text": "ok", "metadata": {SURROGATE: "v"}}),
        ("/v1/agents/sur/sessions", {"metadata": {"k": SURROGATE}}),
        ("/v1/agents/sur/sessions", {"goal": SURROGATE}),
        ("/v1/agents/sur/recall", {"query": "ok", "metadata": {"k": SURROGATE}}),
        ("/v1/agents/sur/recall", {"query": "ok", "metadata": {SURROGATE: "v"}}),
        ("/v1/agents/sur/recall", {"query": SURROGATE}),
        ("/v1/agents/sur/policy", {SURROGATE: 1}),
        ("/v1/policy", {"recall_tiers": [SURROGATE]}),
        ("/v1/agents/sur/policy", {"recall_tiers": _nested(300)}),
        ("/v1/agents/sur/memories", {"text": "ok", "metadata": {"k": float("nan")}}),
        ("/v1/agents/sur/episodes", {"content": "ok", "metadata": {"k": float("inf")}}),
        ("/v1/agents/sur/memories", {"text": "ok", SURROGATE: 1}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_lone_surrogates_are_a_json_4xx(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], path: str, body: dict[str, Any]
) -> None:
    h = _h(tenants["alice"])
    before = {t: _count(stack, t) for t in ("episodes", "memories", "sessions")}
    method = httpx.put if path.endswith("policy") else httpx.post
    _assert_refused(method(api + path, content=_raw(body), headers=h))
    assert {t: _count(stack, t) for t in ("episodes", "memories", "sessions")} == before


@pytest.mark.parametrize(
    "raw",
    [
        b'{"content": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"content": "\xff\xfe"}',
        b"[" * 1_000 + b"]" * 1_000,
        b'{"content": "x", "metadata": ' + b'{"a":' * 1_000 + b"{}" + b"}" * 1_000 + b"}",
        b'{"content": "x", "metadata": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
        b'{"content": ',
    ],
    ids=["latin-1", "not-utf-8", "array-1000", "object-1000", "array-5000", "truncated"],
)
def test_undecodable_bodies_answer_error_json(api: str, tenants: dict[str, Any], raw: bytes) -> None:
    r = httpx.post(f"{api}/v1/agents/raw/episodes", content=raw, headers=_h(tenants["alice"]))
    _assert_refused(r)


def test_an_episode_over_the_content_limit_names_its_largest_message(
    api: str, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    before = _count(stack, "episodes")
    messages = [{"role": "user", "content": "What does the log say?"}, {"role": "tool", "content": "x " * 20_000}]
    r = httpx.post(f"{api}/v1/agents/raw/episodes", json={"messages": messages}, headers=_h(tenants["alice"]))
    assert r.status_code == 413, r.text[:300]
    error = r.json()["error"]
    assert "over the limit of 32,768" in error and "messages[1] (tool, 40,000 bytes)" in error, error
    assert _count(stack, "episodes") == before


def test_a_body_that_is_not_json_says_where_it_breaks(api: str, tenants: dict[str, Any]) -> None:
    r = httpx.post(f"{api}/v1/agents/raw/memories", content=b'{"text": "x",}', headers=_h(tenants["alice"]))
    _assert_refused(r)
    assert r.json()["error"].startswith("body: not valid JSON at character 13: "), r.json()


def test_unknown_route_answers_error_json(api: str) -> None:
    r = httpx.get(f"{api}/v1/nothing-here")
    assert r.status_code == 404 and isinstance(r.json()["error"], str)


def _set_metadata(stack: dict[str, Any], table: str, where: str, key: Any, value: Any) -> None:
    """Write metadata straight to the database, as an older release (or a hand) did."""
    with psycopg.connect(stack["owner_url"], autocommit=True) as conn:
        conn.execute(f"UPDATE memworker.{table} SET metadata = %s WHERE {where} = %s", (Jsonb(value), key))


def _legacy_rows(api: str, stack: dict[str, Any], tenant: dict[str, Any], agent: str) -> dict[str, str]:
    """A memory, an episode and a session of `agent`, made through the API."""
    h = _h(tenant)
    r = httpx.post(f"{api}/v1/agents/{agent}/memories", json={"text": "Kafka retention is seven days."}, headers=h)
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    r = httpx.post(f"{api}/v1/agents/{agent}/episodes", json={"content": "The deploy froze."}, headers=h)
    assert r.status_code == 202, r.text
    eid = r.json()["episode_id"]
    r = httpx.post(f"{api}/v1/agents/{agent}/sessions", json={"session_id": "s1"}, headers=h)
    assert r.status_code == 201, r.text
    return {"memory": mid, "episode": eid, "session": "s1"}


def test_a_stored_deep_row_never_breaks_a_read(api: str, stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    h, ids = _h(tenants["bob"]), _legacy_rows(api, stack, tenants["bob"], "legacy")
    _set_metadata(stack, "memories", "id", ids["memory"], _nested(600))
    _set_metadata(stack, "episodes", "id", ids["episode"], _nested(300))
    _set_metadata(stack, "sessions", "id", ids["session"], _nested(900))
    marker = {"_repaired": "metadata exceeded depth 64"}
    listed = httpx.get(f"{api}/v1/agents/legacy/memories", headers=h)
    assert listed.status_code == 200, listed.text[:300]
    assert [m["metadata"] for m in listed.json()["memories"]] == [marker]
    one = httpx.get(f"{api}/v1/agents/legacy/memories/{ids['memory']}", headers=h)
    assert one.status_code == 200 and one.json()["metadata"] == marker
    hits = httpx.post(f"{api}/v1/agents/legacy/recall", json={"query": "Kafka retention"}, headers=h)
    assert hits.status_code == 200, hits.text[:300]
    assert [(m["id"], m["metadata"]) for m in hits.json()["memories"]] == [(ids["memory"], marker)]
    ep = httpx.get(f"{api}/v1/agents/legacy/episodes/{ids['episode']}", headers=h)
    assert ep.status_code == 200 and ep.json()["metadata"] == marker, ep.text[:300]
    for path in ("/sessions", "/sessions/s1"):
        r = httpx.get(f"{api}/v1/agents/legacy{path}", headers=h)
        assert r.status_code == 200, r.text[:300]
    # the other tenants see nothing of it
    for other in ("alice", "charlie"):
        assert (
            httpx.get(f"{api}/v1/agents/legacy/memories/{ids['memory']}", headers=_h(tenants[other])).status_code == 404
        )
        assert httpx.get(f"{api}/v1/agents/legacy/memories", headers=_h(tenants[other])).status_code == 404


def test_the_repair_migration_marks_rows_deeper_than_the_limit(
    api: str, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    deep = {name: _legacy_rows(api, stack, tenants[name], "repair") for name in ("alice", "charlie")}
    kept = _legacy_rows(api, stack, tenants["bob"], "repair")
    for name, ids in deep.items():
        _set_metadata(stack, "memories", "id", ids["memory"], {"x": [_nested(16)]})  # 17 levels, through a list
        _set_metadata(stack, "episodes", "id", ids["episode"], _nested(280))
        _set_metadata(stack, "sessions", "tenant_id", tenants[name]["id"], _nested(40))
    _set_metadata(stack, "memories", "id", kept["memory"], {"x": _nested(15)})  # 16 levels: left alone
    _set_metadata(stack, "episodes", "id", kept["episode"], {"k": [1, {"a": "b"}]})
    sql = (Path(__file__).resolve().parents[2] / "sql" / "0008_metadata_repair.sql").read_text()
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(sql)  # as the migration runner does: one transaction, the owner role
    marker = {"_repaired": "metadata exceeded depth 16"}
    with psycopg.connect(stack["owner_url"]) as conn:
        for name, ids in deep.items():
            for table, col in (("memories", "id"), ("episodes", "id"), ("sessions", "tenant_id")):
                key = (
                    tenants[name]["id"] if col == "tenant_id" else ids[table[:-1] if table != "memories" else "memory"]
                )
                row = conn.execute(f"SELECT metadata FROM memworker.{table} WHERE {col} = %s", (key,)).fetchone()
                assert row is not None and row[0] == marker, (name, table)
        got = conn.execute("SELECT metadata FROM memworker.memories WHERE id = %s", (kept["memory"],)).fetchone()
        assert got is not None and got[0] == {"x": _nested(15)}
        got = conn.execute("SELECT metadata FROM memworker.episodes WHERE id = %s", (kept["episode"],)).fetchone()
        assert got is not None and got[0] == {"k": [1, {"a": "b"}]}
        forced = conn.execute(
            "SELECT bool_and(relforcerowsecurity) FROM pg_class WHERE oid = ANY(%s::regclass[])",
            (["memworker.memories", "memworker.episodes", "memworker.sessions"],),
        ).fetchone()
        assert forced == (True,)
    h = _h(tenants["alice"])
    r = httpx.get(f"{api}/v1/agents/repair/memories", headers=h)
    assert r.status_code == 200 and r.json()["memories"][0]["metadata"] == marker
