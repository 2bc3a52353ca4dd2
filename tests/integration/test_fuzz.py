"""Property tests over the real API: generated requests for every route never cause a 5xx
(schemathesis over our OpenAPI schema), interleaved operations of several tenants never
let one see another's rows, and hostile JSON (lone surrogates, deep nesting, oversized
metadata) is refused without a 5xx and leaves every agent readable (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import response_schema_conformance

from memworker.sdk import ApiError, Client


@pytest.fixture(scope="module")
def api_schema(api: str) -> Any:
    return schemathesis.openapi.from_url(f"{api}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schemathesis.serializer("application/x-ndjson")
def _ndjson(ctx: Any, value: Any) -> bytes:
    """The import route's body: one JSON value a line (a generated string is sent as it is)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(v) + "\n" for v in items).encode("utf-8", "surrogatepass")


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_route_answers_5xx(case: Any, tenants: dict[str, Any]) -> None:
    response = case.call(headers={"Authorization": f"Bearer {tenants['alice']['key']}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:300])
    if response.status_code < 300:
        case.validate_response(response, checks=[response_schema_conformance])


OPS = st.lists(
    st.tuples(
        st.sampled_from(["alice", "bob", "charlie"]),
        st.sampled_from(["write", "recall", "list", "peek"]),
        st.sampled_from(["shared-agent", "agent-1"]),
        st.text(alphabet="abcdefghij klmnop", min_size=3, max_size=40).filter(lambda s: s.strip()),
    ),
    min_size=3,
    max_size=12,
)


@given(ops=OPS)
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_interleaved_tenants_never_see_each_others_rows(
    ops: list[tuple[str, str, str, str]], api: str, tenants: dict[str, Any]
) -> None:
    clients = {name: Client(api, t["key"]) for name, t in tenants.items()}
    owned: dict[str, set[str]] = {name: set() for name in tenants}
    for tenant, op, agent, text in ops:
        c = clients[tenant]
        try:
            if op == "write":
                owned[tenant].add(c.add_memory(agent, f"{tenant} note {text}")["id"])
            elif op == "recall":
                for hit in c.recall(agent, text, k=20)["memories"]:
                    assert hit["text"].startswith(tenant), (tenant, hit["text"])
            elif op == "list":
                for m in c.list_memories(agent, limit=100)["memories"]:
                    assert m["text"].startswith(tenant)
            else:  # try to read every id another tenant owns
                for other, ids in owned.items():
                    for mid in list(ids)[:3] if other != tenant else []:
                        with pytest.raises(ApiError) as err:
                            c.get_memory(agent, mid)
                        assert err.value.status == 404
        except ApiError as exc:
            assert exc.status == 404 and op in ("recall", "list"), exc  # an agent not yet created here
    for c in clients.values():
        c.close()
    assert httpx.get(f"{api}/healthz").status_code == 200


# What a careless or hostile client sends as JSON.
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
NASTY_TEXT = st.one_of(
    st.text(max_size=8),
    st.builds(lambda a, s, b: a + s + b, st.text(max_size=4), SURROGATES, st.text(max_size=4)),
    st.just("x\x00y"),
)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), NASTY_TEXT)
VALUES = st.recursive(
    LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NASTY_TEXT, inner, max_size=3), max_leaves=8
)
# (extra nesting around the value: written as text, deeper than json.dumps goes; padding bytes)
SHAPES = st.tuples(
    VALUES, st.sampled_from([0, 1, 15, 16, 17, 64, 254, 255, 300, 600, 1_200]), st.sampled_from([0, 17_000])
)
TARGETS = ["episode", "episode_batch", "memory", "memory_patch", "session", "recall"]
FUZZ_AGENTS = ("fuzz-a", "fuzz-b")


def _metadata_text(value: Any, depth: int, pad: int) -> str:
    """A metadata object as JSON text: {"v": value, "pad": ...} inside `depth` levels of
    {"a": ...}. ensure_ascii keeps lone surrogates as \\u escapes, as a client would send them."""
    inner = json.dumps({"v": value, "pad": "p" * pad}, ensure_ascii=True)
    return '{"a":' * depth + inner + "}" * depth


def _body(target: str, meta: str, memory_id: str, tenant: str) -> tuple[str, str, str]:
    """(method, path under the agent, JSON body) sending `meta` where `target` takes metadata."""
    method, path, shape = {
        "episode": ("POST", "/episodes", {"content": "fuzzed episode", "metadata": "@m@"}),
        "episode_batch": ("POST", "/episodes/batch", {"episodes": [{"content": "fuzzed", "metadata": "@m@"}]}),
        "memory": ("POST", "/memories", {"text": f"{tenant} fuzzed memory", "metadata": "@m@"}),
        "memory_patch": ("PATCH", f"/memories/{memory_id}", {"metadata": "@m@"}),
        "session": ("POST", "/sessions", {"metadata": "@m@"}),
        "recall": ("POST", "/recall", {"query": "fuzzed", "metadata": "@m@"}),
    }[target]
    return method, path, json.dumps(shape).replace('"@m@"', meta)


@pytest.fixture(scope="module")
def fuzz_memories(api: str, tenants: dict[str, Any]) -> dict[tuple[str, str], str]:
    """One memory per tenant and fuzzed agent, so every agent exists and PATCH has a target."""
    out = {}
    for name, t in tenants.items():
        with Client(api, t["key"]) as c:
            for agent in FUZZ_AGENTS:
                out[(name, agent)] = c.add_memory(agent, f"{name} fuzz anchor memory")["id"]
    return out


@given(
    cases=st.lists(
        st.tuples(st.sampled_from(["alice", "bob"]), st.sampled_from(FUZZ_AGENTS), st.sampled_from(TARGETS), SHAPES),
        min_size=1,
        max_size=4,
    )
)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_hostile_metadata_never_answers_5xx_nor_breaks_reads(
    cases: list[tuple[str, str, str, tuple[Any, int, int]]],
    api: str,
    tenants: dict[str, Any],
    fuzz_memories: dict[tuple[str, str], str],
) -> None:
    with httpx.Client(base_url=api, timeout=30) as http:
        for tenant, agent, target, (value, depth, pad) in cases:
            method, path, body = _body(
                target, _metadata_text(value, depth, pad), fuzz_memories[(tenant, agent)], tenant
            )
            headers = {"Authorization": f"Bearer {tenants[tenant]['key']}", "Content-Type": "application/json"}
            r = http.request(method, f"/v1/agents/{agent}{path}", content=body.encode(), headers=headers)
            assert r.status_code < 500, (target, depth, pad, r.status_code, r.text[:300])
            if r.status_code >= 400:
                assert isinstance(r.json().get("error"), str), r.text[:300]
        for name, t in tenants.items():  # whatever got in, every agent still reads
            headers = {"Authorization": f"Bearer {t['key']}"}
            for agent in FUZZ_AGENTS:
                listed = http.get(f"/v1/agents/{agent}/memories", params={"limit": 500}, headers=headers)
                assert listed.status_code == 200, (name, agent, listed.text[:300])
                assert all(m["text"].startswith(name) for m in listed.json()["memories"])
                hits = http.post(
                    f"/v1/agents/{agent}/recall", json={"query": "fuzzed memory", "k": 20}, headers=headers
                )
                assert hits.status_code == 200, (name, agent, hits.text[:300])
