"""Hostile input, property-based, over every route of the API and its own OpenAPI schema,
through the real API (HTTP, Postgres, Redis, then a real worker).

test_fuzz.py sends schema-valid requests (schemathesis) and hostile metadata; this suite
builds each route's requests from the schema with hostile values mixed in at every leaf:
dates at and past the accepted range and in extreme offsets, huge, negative, fractional,
NaN and infinite numbers, long, empty, NUL, lone-surrogate and path-like strings, odd ids in
every path segment and query parameter, wrong types and deep nesting; and policy bodies
with every knob at extremes. For every request:

- no 5xx, and a 4xx says why ({"error": "..."});
- a 4xx changed nothing: every table's rows (count and a hash of their text) are the same;
- after a 2xx write the agent still reads (lists, the written memory).

Afterwards every episode the API accepted is stored by a real worker (none stuck or dead:
an accepted value must read back), and agents of this tenant and another still ingest and
recall. Reproducible: derandomized, no example database; bounded examples per route."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memworker.api import app as api_app
from memworker.sdk import Client

AGENT = "fz-agent"
SESSION = "fz-s"
STEP = "s1"
EXAMPLES = 8  # per route (about 50 routes): the whole module runs in about a minute

DATES = [
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "1899-12-31T23:59:59Z",
    "9000-01-01T00:00:00Z",
    "1900-01-01T00:00:00Z",  # the first accepted instant
    "8999-12-31T09:59:59-14:00",  # the last one, in an extreme offset
    "2024-02-30T00:00:00Z",
    "2024-06-01T12:00:00",
    "-infinity",
    "infinity",
    "",
    253402300800,
    -62135596801,
    1e300,
]
NUMBERS = [0, -1, 1, 2**31, -(2**31) - 1, 2**63, 10**40, 1e308, -1e308, 1e-320, -0.0, 0.5, float("nan"), float("inf")]
STRINGS = [
    "",
    " ",
    "x" * 40_000,
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "../../etc/passwd",
    "*",
    "%00",
    "🙂" * 300,
    "\u202eevil",
    "line\u2028break",
    "SELECT 1; --",
    "<script>alert(1)</script>",
]
ODD_IDS = ["..", ".", "a" * 129, "a b", "*", "%00", "-x", "ünï", "a/b", "00000000-0000-0000-0000-000000000000"]
WRONG_TYPES: list[Any] = [None, True, [], {}, 7, "text"]


def _nested(depth: int, leaf: Any) -> Any:
    value: Any = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


HOSTILE_LEAF = st.sampled_from(DATES + NUMBERS + STRINGS + ODD_IDS + WRONG_TYPES)
HOSTILE = st.one_of(HOSTILE_LEAF, st.builds(_nested, st.sampled_from([20, 70, 300]), HOSTILE_LEAF))


def _resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _valid_string(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if schema.get("format") == "date-time":
        return st.sampled_from(["2024-06-01T12:00:00Z", "1900-01-01T00:00:00Z", "8999-12-31T00:00:00+02:00"])
    if schema.get("pattern"):
        return st.sampled_from(["fz-1", "a", "A" * min(schema.get("maxLength", 64), 64)])
    longest = schema.get("maxLength", 4000)
    return st.sampled_from(["fuzzed text", "x" * max(1, schema.get("minLength", 1)), "y" * min(longest, 4000)])


def _valid_number(schema: dict[str, Any], integer: bool) -> st.SearchStrategy[Any]:
    bounds = [schema.get(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")]
    values = [b for b in bounds if b is not None] + [1]
    return st.sampled_from([int(v) if integer else float(v) for v in values])


def strategy(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for `schema`: schema-shaped, with a hostile value possible at every leaf."""
    schema = _resolve(schema, spec)
    if depth > 6:
        return HOSTILE_LEAF
    if "anyOf" in schema or "oneOf" in schema:
        return st.one_of([strategy(s, spec, depth + 1) for s in schema.get("anyOf", schema.get("oneOf"))])
    if "enum" in schema:
        return st.one_of(st.sampled_from(schema["enum"]), HOSTILE_LEAF)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        if not props:  # free-form (metadata): hostile values, keys and nesting
            return st.one_of(st.dictionaries(st.sampled_from(["k", "", "\x00", "\ud800", "a.b"]), HOSTILE, max_size=3))
        required = set(schema.get("required", []))
        fields = {k: strategy(v, spec, depth + 1) for k, v in props.items()}
        return st.fixed_dictionaries(
            {k: s for k, s in fields.items() if k in required},
            optional={k: s for k, s in fields.items() if k not in required},
        )
    if kind == "array":
        items = strategy(schema.get("items", {}), spec, depth + 1)
        return st.one_of(st.lists(items, max_size=3), HOSTILE)
    if kind == "string":
        return st.one_of(_valid_string(schema), HOSTILE)
    if kind in ("integer", "number"):
        return st.one_of(_valid_number(schema, kind == "integer"), HOSTILE_LEAF)
    if kind == "boolean":
        return st.one_of(st.booleans(), HOSTILE_LEAF)
    return HOSTILE


def _policy_body() -> st.SearchStrategy[dict[str, Any]]:
    from memworker.policy import Policy

    knobs = list(Policy.__dataclass_fields__)
    extremes = st.sampled_from([0, -1, 1, 0.5, 1.0, 2**31, 10**9, 10**40, 1e300, None, True, "x", ["L9"], []])
    return st.dictionaries(st.sampled_from([*knobs, "not_a_knob"]), extremes, min_size=1, max_size=4)


PATH_VALUES: dict[str, list[str]] = {
    "agent_id": [AGENT, AGENT, "fz-new", *ODD_IDS],
    "session_id": [SESSION, SESSION, "nope", "..", "a" * 200],
    "step_id": [STEP, "zz", "..", "a" * 70],
    "memory_id": ["@memory", str(uuid.uuid4()), "not-a-uuid", "0", ".."],
    "episode_id": ["@episode", str(uuid.uuid4()), "bad"],
    "review_id": [str(uuid.uuid4()), "bad"],
    "webhook_id": ["@webhook", str(uuid.uuid4()), "x"],
    "version": ["1", "0", "-1", "99999999999999999999", "abc"],
}
QUERY_VALUES = ["-1", "0", "1", "1000000000000", "NaN", "1e3", "", "L1", "L9", "open", "bogus", "{", '{"a":1}']
QUERY_VALUES += ['{"a":"\\u0000"}', json.dumps(_nested(80, 1)), "a" * 5000, AGENT, "..", "\x00"]


def _operations() -> list[tuple[str, str]]:
    out = []
    for router in api_app.ROUTERS:
        for route in router.routes:
            for method in sorted(getattr(route, "methods", None) or ()):
                if method in ("GET", "POST", "PUT", "PATCH", "DELETE") and route.path.startswith("/v1/"):
                    out.append((method, route.path))
    return sorted(set(out))


OPERATIONS = _operations()


@pytest.fixture(scope="module")
def spec(api: str) -> dict[str, Any]:
    return dict(httpx.get(f"{api}/openapi.json", timeout=30).json())


@pytest.fixture(scope="module")
def seeded(api: str, tenants: dict[str, Any]) -> dict[str, str]:
    """Real ids for the path segments: a memory, an episode, a session with a plan, a webhook."""
    with Client(api, tenants["alice"]["key"]) as c:
        memory = c.add_memory(AGENT, "The fuzz target agent keeps its notes in Lisbon.")["id"]
        episode = c.add_episode(AGENT, "The fuzz target agent met the auditors on Monday.")["episode_id"]
        c.create_session(AGENT, SESSION, goal="survive the fuzzing")
        c.set_plan(AGENT, SESSION, [{"id": "m1", "title": "one", "steps": [{"id": STEP, "title": "first"}]}])
        hook = c.webhooks() or [c.add_webhook("http://93.184.216.34/hook", ["post_turn"])]
    return {"@memory": memory, "@episode": episode, "@webhook": hook[0]["webhook_id"]}


@pytest.fixture(scope="module")
def http(api: str, tenants: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {tenants['alice']['key']}", "Content-Type": "application/json"}
    with httpx.Client(base_url=api, headers=headers, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def fingerprint(stack: dict[str, Any]) -> Any:
    """A function giving every table's (count, hash of its rows' text), in one round trip."""
    with psycopg.connect(stack["owner_url"]) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'memworker' ORDER BY tablename"
            ).fetchall()
        ]
    sql = " UNION ALL ".join(
        f"SELECT '{t}', count(*), coalesce(sum(hashtext(x::text)::bigint), 0) FROM memworker.{t} x" for t in tables
    )
    conn = psycopg.connect(stack["owner_url"], autocommit=True)

    def take() -> dict[str, tuple[int, int]]:
        return {r[0]: (r[1], r[2]) for r in conn.execute(sql).fetchall()}  # type: ignore[arg-type]

    yield take
    conn.close()


def _request(data: Any, method: str, path: str, spec: dict[str, Any], seeded: dict[str, str]) -> dict[str, Any]:
    """One drawn request: its URL, query parameters and JSON body text."""
    op = spec["paths"][path][method.lower()]
    url = path
    for name in [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]:
        value = data.draw(st.sampled_from(PATH_VALUES[name]), label=name)
        url = url.replace("{" + name + "}", quote(seeded.get(value, value), safe=""))
    query = {}
    for p in [p for p in op.get("parameters", []) if p["in"] == "query"]:
        if data.draw(st.booleans(), label=f"send {p['name']}"):
            query[p["name"]] = data.draw(st.sampled_from(QUERY_VALUES), label=p["name"])
    body = None
    schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema is not None:
        is_policy = path.endswith("/policy")
        value = data.draw(_policy_body() if is_policy else strategy(schema, spec), label="body")
        body = json.dumps(value, ensure_ascii=True, allow_nan=True)  # NaN, lone surrogates kept as sent
    return {"url": url, "query": query, "body": body}


def _reads_back(http: httpx.Client, url: str, answer: Any) -> None:
    """After a 2xx write: the agent's lists still answer, and a written memory reads."""
    parts = url.split("/")
    if len(parts) < 4 or parts[2] != "agents":
        return
    agent = parts[3]
    for path in (f"/v1/agents/{agent}/memories", f"/v1/agents/{agent}/sessions", f"/v1/episodes?agent_id={agent}"):
        r = http.get(path)
        assert r.status_code in (200, 404), (path, r.status_code, r.text[:300])
    if isinstance(answer, dict) and url.endswith("/memories") and "id" in answer:
        r = http.get(f"/v1/agents/{agent}/memories/{answer['id']}")
        assert r.status_code == 200, (r.status_code, r.text[:300])


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
@given(data=st.data())
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_5xx_and_a_refusal_changes_nothing(
    method: str,
    path: str,
    data: Any,
    spec: dict[str, Any],
    seeded: dict[str, str],
    http: httpx.Client,
    fingerprint: Any,
) -> None:
    req = _request(data, method, path, spec, seeded)
    before = fingerprint()
    r = http.request(method, req["url"], params=req["query"], content=req["body"])
    assert r.status_code < 500, (method, req["url"], r.status_code, r.text[:500])
    if r.status_code >= 400:
        assert isinstance(r.json().get("error"), str), r.text[:300]
        after = fingerprint()
        changed = sorted(t for t in after if after[t] != before.get(t))
        assert changed == [], (method, req["url"], r.status_code, r.text[:300], changed)
    elif method != "GET":
        _reads_back(http, req["url"], r.json() if r.content else None)


def _waiting(stack: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        rows = conn.execute(
            "SELECT id::text, status, last_error FROM memworker.episodes WHERE status <> 'stored'"
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def test_afterwards_every_accepted_episode_is_stored_and_others_still_flow(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], worker: Any
) -> None:
    with Client(api, tenants["alice"]["key"]) as a, Client(api, tenants["bob"]["key"]) as b:
        mine = a.add_episode("bystander-a", "Bystander note: the printer on floor two needs toner.")
        other = b.add_episode("bystander-b", "Other tenant: the quarterly review moved to Thursday.")
        assert a.wait_for_episode("bystander-a", mine["episode_id"], timeout=120)["status"] == "stored"
        assert b.wait_for_episode("bystander-b", other["episode_id"], timeout=120)["status"] == "stored"
        assert a.recall("bystander-a", "printer toner")["memories"] is not None
        hits = b.recall("bystander-b", "when is the quarterly review")["memories"]
        assert any("quarterly review" in h["text"] for h in hits), hits
        # what the fuzzing wrote still reads
        for agent in (AGENT, "fz-new", "fz-1"):
            for call in (lambda: a.list_memories(agent, limit=200), lambda: a.recall(agent, "fuzzed text")):
                try:
                    call()
                except Exception as exc:  # only "no such agent" is an acceptable refusal
                    assert getattr(exc, "status", None) == 404, exc
    # every episode the API accepted reads back in the worker: none stuck, none dead
    deadline = time.monotonic() + 120
    waiting = _waiting(stack)
    while any(s in ("queued", "processing", "failed") for _, s, _ in waiting) and time.monotonic() < deadline:
        time.sleep(1)
        waiting = _waiting(stack)
    assert waiting == [], waiting
