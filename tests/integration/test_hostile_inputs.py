"""Hostile input, property-based, over every route of the API and its own OpenAPI schema,
through the real API (HTTP, Postgres, Redis, then a real worker).

test_fuzz.py sends schema-valid requests (schemathesis) and hostile metadata; this suite
builds each route's requests from the schema:

- hypothesis examples per route, each body either at the edges its schema allows or with
  hostile values at every leaf: dates past the accepted range and in extreme offsets, huge,
  negative, fractional, NaN and infinite numbers, long, empty, NUL, lone-surrogate and
  path-like strings, wrong types and deep nesting; odd ids in every path segment and query
  parameter; a body the API reads raw (an NDJSON import) as lines of plain, hostile and
  broken JSON;
- a deterministic sweep: every field of every body (nested ones too) at each edge value of
  its schema, one request each, in an otherwise valid body (what random examples rarely
  build, and what gets stored); every policy knob at its extremes; every agent route with a
  bad agent id.

For every request: no 5xx, and a 4xx says why ({"error": "..."}); a 4xx changed nothing
(every table's row count and row versions are the same); after a 2xx write the agent still
reads (its lists, the written memory or episode).

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
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from memworker.api import app as api_app
from memworker.sdk import Client

AGENT = "fz-agent"
SESSION = "fz-s"
STEP = "s1"
# Examples per route: the whole module (about 50 routes, a worker) runs in about a minute.
BODY_EXAMPLES = 10
EXAMPLES = 4

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
# (deeper JSON than the API's ceiling of 64 levels; test_fuzz.py sends text nested past 1,000)
HOSTILE = st.one_of(HOSTILE_LEAF, st.builds(_nested, st.sampled_from([20, 70]), HOSTILE_LEAF))


def _resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


# Values a JSON schema allows, at its edges: what the API may accept, and so must read back.
EDGE_DATES = [
    "0001-01-01T00:00:00+14:00",  # year 0 in UTC
    "9999-12-31T23:59:59-14:00",  # year 10000 in UTC
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "1900-01-01T00:00:00Z",
    "8999-12-31T09:59:59-14:00",
    "2024-06-01T12:00:00",
]
EDGE_TEXT = ["ünïcödé 🙂 \u202e reversed", "tab\tand\nnewline"]


def _edge_string(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if schema.get("format") == "date-time":
        return st.sampled_from(EDGE_DATES)
    longest = min(schema.get("maxLength", 40_000), 40_000)
    if schema.get("pattern"):
        return st.sampled_from(["fz-1", "A" * min(longest, 128)])
    return st.sampled_from([*EDGE_TEXT, "y" * longest])


def _edge_numbers(schema: dict[str, Any], integer: bool) -> list[Any]:
    bounds = [schema.get(k) for k in ("minimum", "maximum")]
    values = [b for b in bounds if b is not None] + [1]
    if schema.get("maximum") is None:  # unbounded above: what fits a JSON number
        values += [2**31, 2**63, 10**30] if integer else [1e300]
    if schema.get("minimum") is None:
        values += [-(2**63)] if integer else [-1e300]
    return [int(v) if integer else float(v) for v in values]


def _edge_number(schema: dict[str, Any], integer: bool) -> st.SearchStrategy[Any]:
    return st.sampled_from(_edge_numbers(schema, integer))


def _leaf(hostile: bool, edge: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(edge, HOSTILE) if hostile else edge


def strategy(schema: dict[str, Any], spec: dict[str, Any], hostile: bool, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for `schema`: schema-shaped with every leaf at an edge the schema allows, or
    (hostile) with anything possible at every leaf."""
    schema = _resolve(schema, spec)
    if depth > 6:
        return HOSTILE_LEAF
    if "anyOf" in schema or "oneOf" in schema:
        return st.one_of([strategy(s, spec, hostile, depth + 1) for s in schema.get("anyOf", schema.get("oneOf"))])
    if "enum" in schema:
        return _leaf(hostile, st.sampled_from(schema["enum"]))
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        if not props:  # free-form (metadata): nesting, hostile keys and values
            keys = st.sampled_from(["k", "", "\x00", "\ud800", "a.b"] if hostile else ["k", "a.b", "ü"])
            values = HOSTILE if hostile else st.sampled_from([*EDGE_TEXT, 1e300, 2**63, None, _nested(10, "deep")])
            return st.dictionaries(keys, values, max_size=3)
        required = set(schema.get("required", []))
        fields = {k: strategy(v, spec, hostile, depth + 1) for k, v in props.items()}
        return st.fixed_dictionaries(
            {k: s for k, s in fields.items() if k in required},
            optional={k: s for k, s in fields.items() if k not in required},
        )
    if kind == "array":
        items = strategy(schema.get("items", {}), spec, hostile, depth + 1)
        return _leaf(hostile, st.lists(items, min_size=min(1, schema.get("minItems", 0)), max_size=3))
    if kind == "string":
        return _leaf(hostile, _edge_string(schema))
    if kind in ("integer", "number"):
        return _leaf(hostile, _edge_number(schema, kind == "integer"))
    if kind == "boolean":
        return _leaf(hostile, st.booleans())
    if kind == "null":
        return st.none()
    return HOSTILE if hostile else st.sampled_from(EDGE_TEXT)


def _policy_body() -> st.SearchStrategy[dict[str, Any]]:
    from memworker.domain.policy import Policy

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
    "proposal_id": [str(uuid.uuid4()), "bad"],
    "webhook_id": ["@webhook", str(uuid.uuid4()), "x"],
    "version": ["1", "0", "-1", "99999999999999999999", "abc"],
}
# DELETE /v1/agents/{agent_id} erases what it names: never the module's agent (the other
# routes' examples and the sweeps read it), but one made afresh before each example that draws
# it (so the same example erases the same thing every time it runs), one never made, odd ids.
ERASE = ("DELETE", "/v1/agents/{agent_id}")
ERASABLE = "fz-erasable"
ERASE_VALUES = [ERASABLE, "fz-never-made", *ODD_IDS]
QUERY_VALUES = ["-1", "0", "1", "1000000000000", "NaN", "1e3", "", "L1", "L9", "open", "bogus", "{", '{"a":1}']
QUERY_VALUES += ['{"a":"\\u0000"}', json.dumps(_nested(80, 1)), "a" * 5000, AGENT, "..", "\x00"]


# A body the API reads raw (not JSON): an NDJSON import, one JSON document a line.
NDJSON = "application/x-ndjson"
NDJSON_LINE = st.one_of(
    st.builds(lambda t: json.dumps({"text": t}, ensure_ascii=True), st.sampled_from([*EDGE_TEXT, *STRINGS])),
    st.builds(lambda v: json.dumps(v, ensure_ascii=True, allow_nan=True), HOSTILE),
    st.sampled_from(["", "{", "not json", "\x00", '{"text": "a"} trailing', '{"format": "memworker"}']),
)
NDJSON_BODY = st.builds("\n".join, st.lists(NDJSON_LINE, max_size=4))


def _minimal_body(op: dict[str, Any], spec: dict[str, Any]) -> tuple[str | None, dict[str, str]]:
    """The simplest body an operation takes, as text, and its content type header: JSON from
    its schema, one plain line for an NDJSON body, none when it takes none."""
    content = op.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        return json.dumps(_minimal(content["application/json"]["schema"], spec)), {}
    if NDJSON in content:
        return json.dumps({"text": "minimal line"}) + "\n", {"Content-Type": NDJSON}
    return None, {}


def _operations(with_body: bool) -> list[tuple[str, str]]:
    """Every (method, path) of the API's routers, those taking a JSON body or the others."""
    out = []
    for router in api_app.ROUTERS:
        for route in router.routes:
            if route.path.startswith("/v1/") and (getattr(route, "body_field", None) is not None) == with_body:
                out += [(m, route.path) for m in getattr(route, "methods", None) or () if m != "HEAD"]
    return sorted(set(out))


WITH_BODY, WITHOUT_BODY = _operations(True), _operations(False)


@pytest.fixture(scope="module")
def stack(stack: dict[str, Any]) -> dict[str, Any]:
    """The module's stack with rate limits far above the suite's pace (the limits have tests of
    their own; here a 429 would only slow the run down)."""
    fast = {"rate_key_per_s": 10_000.0, "rate_key_burst": 10_000, "rate_tenant_per_s": 10_000.0}
    return {**stack, "settings": stack["settings"].replace(**fast, rate_tenant_burst=10_000)}


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
    """A function giving every table's (row count, hash of its row versions), in one round
    trip: an insert, update or delete makes a new row version (ctid, xmin), so any write
    changes it, without reading the rows' (large) values."""
    with psycopg.connect(stack["owner_url"]) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'memworker' ORDER BY tablename"
            ).fetchall()
        ]
    sql = " UNION ALL ".join(
        f"SELECT '{t}', count(*), coalesce(sum(hashtext(x.ctid::text || x.xmin::text)::bigint), 0) FROM memworker.{t} x"
        for t in tables
    )
    conn = psycopg.connect(stack["owner_url"], autocommit=True)

    def take() -> dict[str, tuple[int, int]]:
        return {r[0]: (r[1], r[2]) for r in conn.execute(sql).fetchall()}  # type: ignore[arg-type]

    yield take
    conn.close()


def _request(data: Any, method: str, path: str, spec: dict[str, Any], seeded: dict[str, str]) -> dict[str, Any]:
    """One drawn request: its URL, query parameters, body text and headers."""
    op = spec["paths"][path][method.lower()]
    url = path
    for name in [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]:
        values = ERASE_VALUES if (method, path) == ERASE else PATH_VALUES.get(name, ["fz-1", *ODD_IDS])
        value = data.draw(st.sampled_from(values), label=name)
        url = url.replace("{" + name + "}", quote(seeded.get(value, value), safe=""))
    query = {}
    for p in [p for p in op.get("parameters", []) if p["in"] == "query"]:
        if data.draw(st.booleans(), label=f"send {p['name']}"):
            query[p["name"]] = data.draw(st.sampled_from(QUERY_VALUES), label=p["name"])
    body, headers = None, {}
    content = op.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None and NDJSON in content:
        body, headers = data.draw(NDJSON_BODY, label="ndjson body"), {"Content-Type": NDJSON}
    if schema is not None:
        is_policy = path.endswith("/policy")
        bodies = st.one_of(strategy(schema, spec, hostile=False), strategy(schema, spec, hostile=True))
        value = data.draw(_policy_body() if is_policy else bodies, label="body")
        body = json.dumps(value, ensure_ascii=True, allow_nan=True)  # NaN, lone surrogates kept as sent
    return {"url": url, "query": query, "body": body, "headers": headers}


def _expect(ok: bool, *why: Any) -> None:
    """Fail with the request and the answer, without a Python traceback: pytest re-parses the
    sources it shows, which can fail in this suite once deeply nested JSON has gone through
    the interpreter (and the request is the whole story)."""
    if not ok:
        pytest.fail(repr(why)[:3000], pytrace=False)


def _call(http: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """The request, again after Retry-After while the key's rate limit says 429: the suite is
    faster than the limit, and a refusal for load is not the answer under test."""
    for _ in range(100):
        r = http.request(method, url, **kwargs)
        if r.status_code != 429:
            return r
        time.sleep(min(float(r.headers.get("retry-after", "0.05") or 0.05), 1.0) + 0.02)
    return r


def _reads_back(http: httpx.Client, url: str, answer: Any) -> None:
    """After a 2xx write: the agent's lists still answer, and a written memory reads."""
    parts = url.split("/")
    if len(parts) < 4 or parts[2] != "agents":
        return
    agent = parts[3]
    for path in (f"/v1/agents/{agent}/memories", f"/v1/agents/{agent}/sessions", f"/v1/episodes?agent_id={agent}"):
        r = _call(http, "GET", path)
        _expect(r.status_code in (200, 404), path, r.status_code, r.text[:300])
    if not isinstance(answer, dict):
        return
    # lists of what was written (a receipt's "memories" may be a count)
    lists = [v for v in (answer.get("memories"), answer.get("episodes")) if isinstance(v, list)]
    written = [answer, *(w for found in lists for w in found)]
    for item in [w for w in written if isinstance(w, dict)]:
        if "episode_id" in item and "/episodes" in url:
            r = _call(http, "GET", f"/v1/agents/{agent}/episodes/{item['episode_id']}")
            _expect(r.status_code == 200, url, "episode reads back", r.status_code, r.text[:300])
        elif "id" in item and url.endswith(("/memories", "/memories/batch")):
            r = _call(http, "GET", f"/v1/agents/{agent}/memories/{item['id']}")
            _expect(r.status_code == 200, url, "memory reads back", r.status_code, r.text[:300])


def _check(
    method: str, path: str, data: Any, spec: dict[str, Any], seeded: dict[str, str], http: httpx.Client, fp: Any
) -> None:
    req = _request(data, method, path, spec, seeded)
    if (method, path) == ERASE and req["url"].endswith("/" + ERASABLE):
        made = _call(http, "POST", f"/v1/agents/{ERASABLE}/memories", json={"text": "An agent made to be erased."})
        _expect(made.status_code < 300, "making the agent to erase", made.status_code, made.text[:300])
    before = fp()
    r = _call(http, method, req["url"], params=req["query"], content=req["body"], headers=req["headers"])
    _expect(r.status_code < 500, method, req["url"], (req["body"] or "")[:300], r.status_code, r.text[:500])
    if r.status_code >= 400:
        _expect(isinstance(r.json().get("error"), str), method, req["url"], r.text[:300])
        after = fp()
        changed = sorted(t for t in after if after[t] != before.get(t))
        _expect(changed == [], method, req["url"], r.status_code, r.text[:300], "changed:", changed)
    elif method != "GET":
        _reads_back(http, req["url"], r.json() if r.content else None)


# no explain phase: it re-parses the failing example, which deep nesting breaks
PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink]
FUZZ = settings(derandomize=True, database=None, deadline=None, phases=PHASES, suppress_health_check=list(HealthCheck))
FUZZ_BODIES = settings(FUZZ, max_examples=BODY_EXAMPLES)
FUZZ_IDS = settings(FUZZ, max_examples=EXAMPLES)


@pytest.mark.parametrize(("method", "path"), WITH_BODY, ids=[f"{m} {p}" for m, p in WITH_BODY])
@given(data=st.data())
@FUZZ_BODIES
def test_bodies_no_5xx_and_a_refusal_changes_nothing(
    method: str,
    path: str,
    data: Any,
    spec: dict[str, Any],
    seeded: dict[str, str],
    http: httpx.Client,
    fingerprint: Any,
) -> None:
    _check(method, path, data, spec, seeded, http, fingerprint)


@pytest.mark.parametrize(("method", "path"), WITHOUT_BODY, ids=[f"{m} {p}" for m, p in WITHOUT_BODY])
@given(data=st.data())
@FUZZ_IDS
def test_ids_and_queries_no_5xx_and_a_refusal_changes_nothing(
    method: str,
    path: str,
    data: Any,
    spec: dict[str, Any],
    seeded: dict[str, str],
    http: httpx.Client,
    fingerprint: Any,
) -> None:
    _check(method, path, data, spec, seeded, http, fingerprint)


# --- the edge sweep: every leaf of every body, at each edge its schema allows --------------
# Random examples rarely put the one bad value in an otherwise valid body, which is what gets
# stored; the sweep does it for every field, deterministically (one request per value).

# Bodies whose schema requires nothing but whose rules need something (one of two fields).
BASE: dict[str, dict[str, Any]] = {
    "EpisodeIn": {"content": "base episode"},
    "MemoryPatch": {"salience": 0.5},
    "WorkingPatchIn": {"intent": "base intent"},
    "StepPatchIn": {"note": "base note"},
    "ForgetIn": {"provenance": "episode:00000000-0000-0000-0000-000000000000"},
}


def _minimal(schema: dict[str, Any], spec: dict[str, Any]) -> Any:
    """The simplest value the schema (and BASE) accepts."""
    name = schema.get("$ref", "").rsplit("/", 1)[-1]
    schema = _resolve(schema, spec)
    if "anyOf" in schema or "oneOf" in schema:
        options = [o for o in schema.get("anyOf", schema.get("oneOf")) if o.get("type") != "null"]
        return _minimal(options[0], spec) if options else None
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        out = {k: _minimal(props[k], spec) for k in schema.get("required", []) if k in props}
        return {**out, **BASE.get(name, {})}
    if kind == "array":
        return [_minimal(schema.get("items", {}), spec)] * max(1, schema.get("minItems", 0))
    if kind == "string":
        if schema.get("format") == "date-time":
            return "2024-06-01T12:00:00Z"
        return "fz-1" if schema.get("pattern") else "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    return False if kind == "boolean" else None


def _edges(schema: dict[str, Any], spec: dict[str, Any]) -> list[Any]:
    """The edge values of a leaf: what the schema allows at its limits, and what it does not say."""
    schema = _resolve(schema, spec)
    if "anyOf" in schema or "oneOf" in schema:
        return [e for o in schema.get("anyOf", schema.get("oneOf")) for e in _edges(o, spec)]
    if "enum" in schema:
        return list(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") == "date-time":
            return list(EDGE_DATES)
        longest = min(schema.get("maxLength", 40_000), 40_000)
        return ["A" * min(longest, 128), "fz-1"] if schema.get("pattern") else [*EDGE_TEXT, "y" * longest]
    if kind in ("integer", "number"):
        return _edge_numbers(schema, kind == "integer")
    if kind == "boolean":
        return [True, False]
    if kind == "object" and not schema.get("properties"):
        return [{"k": 1e300}, {"k": 2**63}, _nested(10, "deep")]
    return []


def _leaves(schema: dict[str, Any], spec: dict[str, Any], prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every property (into arrays through their first element), four levels deep."""
    schema = _resolve(schema, spec)
    if "anyOf" in schema:
        schema = next((_resolve(o, spec) for o in schema["anyOf"] if o.get("type") != "null"), schema)
    out: list[tuple[Any, ...]] = []
    for key, sub in schema.get("properties", {}).items():
        path = (*prefix, key)
        out.append(path)
        inner = _resolve(sub, spec)
        if inner.get("type") == "array" and len(path) < 4:
            element = _resolve(inner.get("items", {}), spec)
            if element.get("type") == "object" and not element.get("properties"):
                out.append((*path, 0))  # an array of free objects: the edges are its first element's
            out += _leaves(inner.get("items", {}), spec, (*path, 0))
        elif inner.get("properties") and len(path) < 4:
            out += _leaves(inner, spec, path)
    return out


def _schema_at(schema: dict[str, Any], spec: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    for step in path:
        schema = _resolve(schema, spec)
        if "anyOf" in schema:
            schema = next((_resolve(o, spec) for o in schema["anyOf"] if o.get("type") != "null"), schema)
        schema = schema.get("items", {}) if isinstance(step, int) else schema["properties"][step]
    return schema


def _with(body: Any, path: tuple[Any, ...], value: Any, schema: dict[str, Any], spec: dict[str, Any]) -> Any:
    """A copy of body with value at path (containers on the way made minimal)."""
    body = json.loads(json.dumps(body))
    here = body
    for i, step in enumerate(path[:-1]):
        if isinstance(here, dict) and step not in here:
            here[step] = _minimal(_schema_at(schema, spec, path[: i + 1]), spec)
        elif isinstance(here, list) and not here:
            here.append(_minimal(_schema_at(schema, spec, path[: i + 1]), spec))
        here = here[step]
    here[path[-1]] = value
    return body


def _seeded_url(path: str, seeded: dict[str, str]) -> str:
    values = {"agent_id": AGENT, "session_id": SESSION, "step_id": STEP, "pool": "fz-pool", "version": "1"}
    values["subject"] = "fz-subject"
    values |= {"memory_id": seeded["@memory"], "episode_id": seeded["@episode"], "webhook_id": seeded["@webhook"]}
    values["review_id"] = values["proposal_id"] = str(uuid.uuid4())
    for name, value in values.items():
        path = path.replace("{" + name + "}", quote(value, safe=""))
    return path


def _send(http: httpx.Client, fp: Any, method: str, url: str, body: Any) -> httpx.Response:
    before = fp()
    r = _call(http, method, url, content=json.dumps(body, ensure_ascii=True, allow_nan=True))
    _expect(r.status_code < 500, method, url, json.dumps(body)[:300], r.status_code, r.text[:300])
    if r.status_code >= 400:
        after = fp()
        changed = [t for t in after if after[t] != before.get(t)]
        _expect(changed == [], method, url, json.dumps(body)[:300], r.text[:300], "changed:", changed)
    else:
        _reads_back(http, url, r.json() if r.content else None)
    return r


SWEPT = [(m, p) for m, p in WITH_BODY if not p.endswith("/policy")]


@pytest.mark.parametrize(("method", "path"), SWEPT, ids=[f"{m} {p}" for m, p in SWEPT])
def test_every_field_at_every_edge(
    method: str, path: str, spec: dict[str, Any], seeded: dict[str, str], http: httpx.Client, fingerprint: Any
) -> None:
    schema = spec["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]
    url = _seeded_url(path, seeded)
    base = _minimal(schema, spec)
    sent = 0
    for leaf in _leaves(schema, spec):
        for value in _edges(_schema_at(schema, spec, leaf), spec):
            _send(http, fingerprint, method, url, _with(base, leaf, value, schema, spec))
            sent += 1
    assert sent > 0 or not _leaves(schema, spec), path


def test_every_policy_knob_at_its_edges(
    api: str, http: httpx.Client, fingerprint: Any, tenants: dict[str, Any]
) -> None:
    from memworker.domain.policy import Policy

    agent = "fz-policy"
    with Client(api, tenants["alice"]["key"]) as c:
        c.add_memory(agent, "The policy agent exists and remembers the deploy window.")
        for knob, default in Policy().to_json().items():
            if isinstance(default, list):
                values: list[Any] = [[], ["L9"], "x"]
            elif isinstance(default, bool):
                values = [None, 1, "x"]
            else:
                values = [0, -1, 1e-9, 2**31, 1e300, None, "x"]
            for value in values:
                r = _send(http, fingerprint, "PUT", f"/v1/agents/{agent}/policy", {knob: value})
                if r.status_code < 300 and value not in (0.5, 1, True, False, default):
                    # an extreme accepted: the agent still takes a memory, recalls, lists and
                    # builds a context
                    for call in (
                        lambda: c.add_memory(agent, f"A memory under {knob}={value!r}."),
                        lambda: c.recall(agent, "deploy window"),
                        lambda: c.list_memories(agent),
                        lambda: c.context(agent, "deploy window"),
                    ):
                        call()
        c.set_policy({}, agent_id=agent)


AGENT_ROUTES = [(m, p) for m, p in WITH_BODY + WITHOUT_BODY if "{agent_id}" in p]


@pytest.mark.parametrize("bad", ["a\x00b", "a" * 129, "-starts-with-dash", "a b"])
def test_every_agent_route_checks_the_agent_id(
    bad: str, spec: dict[str, Any], seeded: dict[str, str], http: httpx.Client, fingerprint: Any
) -> None:
    before = fingerprint()
    for method, path in AGENT_ROUTES:
        url = _seeded_url(path.replace("{agent_id}", quote(bad, safe="")), seeded)
        content, headers = _minimal_body(spec["paths"][path][method.lower()], spec)
        r = _call(http, method, url, content=content, headers=headers)
        _expect(r.status_code == 422 and "agent_id" in r.text, method, path, r.status_code, r.text[:300])
    assert fingerprint() == before


# --- integers: every integer parameter and body field of every route, at the extremes -------
# Postgres integers are 4 or 8 bytes: a value past them that reaches a query is a 500, so every
# integer the API takes (path, query, body, policy knob) is bounded at the edge, and past the
# bound is a 422 that changes nothing.

INT_EXTREMES = [0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**40]
INT_SENT = {"requests": 0, "5xx": 0}


def _integer_leaves(
    schema: dict[str, Any], spec: dict[str, Any], prefix: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    """Paths to every integer a schema holds: through anyOf, properties and arrays (their
    first element), as _with takes them."""
    schema = _resolve(schema, spec)
    out: list[tuple[Any, ...]] = [prefix] if schema.get("type") == "integer" else []
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        out += _integer_leaves(option, spec, prefix)
    if schema.get("type") == "array" and len(prefix) < 6:
        out += _integer_leaves(schema.get("items", {}), spec, (*prefix, 0))
    for key, sub in schema.get("properties", {}).items():
        out += _integer_leaves(sub, spec, (*prefix, key))
    return list(dict.fromkeys(out))


def _integer_targets(spec: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(method, path, where, name) for every integer of every /v1 route in the spec: where is
    'path' or 'query' (name: the parameter) or 'body' (name: the path to the field); a policy
    body, free-form in the schema, has its integer knobs."""
    from memworker.domain.policy import Policy

    knobs = [k for k, v in Policy().to_json().items() if isinstance(v, int) and not isinstance(v, bool)]
    out: list[tuple[str, str, str, Any]] = []
    for path, ops in spec["paths"].items():
        for method, op in ops.items() if path.startswith("/v1/") else ():
            for prm in op.get("parameters", []):
                if _integer_leaves(prm["schema"], spec):
                    out.append((method.upper(), path, prm["in"], prm["name"]))
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body is not None and path.endswith("/policy"):
                out += [(method.upper(), path, "body", (k,)) for k in knobs]
            elif body is not None:
                out += [(method.upper(), path, "body", leaf) for leaf in _integer_leaves(body, spec)]
    return out


def _send_integer(
    target: tuple[str, str, str, Any],
    value: int,
    spec: dict[str, Any],
    seeded: dict[str, str],
    http: httpx.Client,
    fp: Any,
) -> str | None:
    """One request with value at the target (the rest minimal and valid): why it failed, or None."""
    method, path, where, name = target
    url = _seeded_url(path.replace("{" + name + "}", str(value)) if where == "path" else path, seeded)
    params = {name: str(value)} if where == "query" else {}
    body = None
    if where == "body" and path.endswith("/policy"):
        body = {name[0]: value}
    elif where == "body":
        schema = spec["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]["schema"]
        body = _with(_minimal(schema, spec), name, value, schema, spec)
    before = fp()
    content = None if body is None else json.dumps(body)
    try:
        r = _call(http, method, url, params=params, content=content)
    except httpx.TransportError:  # the server closed the connection after a 500 to the one before
        r = _call(http, method, url, params=params, content=content)
    INT_SENT["requests"] += 1
    where_sent = f"{method} {url} {where} {name}={value}"
    if r.status_code >= 500:
        INT_SENT["5xx"] += 1
        return f"{where_sent}: {r.status_code} {r.text[:200]}"
    if r.status_code >= 400:
        after = fp()
        changed = [t for t in after if after[t] != before.get(t)]
        if changed or not isinstance(r.json().get("error"), str):
            return f"{where_sent}: {r.status_code} {r.text[:200]} changed {changed}"
    return None


def test_every_integer_of_every_route_is_bounded(spec: dict[str, Any]) -> None:
    """The schema says so: every integer parameter and field has a minimum and a maximum that
    a Postgres integer holds."""
    unbounded = []
    for method, path, where, name in _integer_targets(spec):
        if where == "body" and path.endswith("/policy"):
            continue  # free-form in the schema: memworker/domain/policy.py bounds each knob
        op = spec["paths"][path][method.lower()]
        if where == "body":
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            found = _schema_at(schema, spec, name)
        else:
            found = next(p["schema"] for p in op["parameters"] if p["name"] == name)
        found = _resolve(found, spec)
        found = next((o for o in found.get("anyOf", [found]) if o.get("type") == "integer"), found)
        if not (found.get("minimum", -(2**63)) >= -(2**31) and found.get("maximum", 2**63) <= 2**31 - 1):
            unbounded.append((method, path, where, name, found))
    assert unbounded == []


def test_every_integer_of_every_route_at_the_extremes(
    spec: dict[str, Any], seeded: dict[str, str], http: httpx.Client, fingerprint: Any
) -> None:
    targets = _integer_targets(spec)
    failures = [
        why
        for target in targets
        for value in INT_EXTREMES
        if (why := _send_integer(target, value, spec, seeded, http, fingerprint)) is not None
    ]
    routes = sorted({(m, p) for m, p, _, _ in targets})
    print(f"integers: {len(routes)} routes, {len(targets)} parameters and fields, {INT_SENT}")
    _expect(failures == [], len(failures), failures[:20])


@given(data=st.data())
@settings(FUZZ, max_examples=200)
def test_any_integer_anywhere_is_a_clean_answer(
    data: Any, spec: dict[str, Any], seeded: dict[str, str], http: httpx.Client, fingerprint: Any
) -> None:
    target = data.draw(st.sampled_from(_integer_targets(spec)), label="target")
    value = data.draw(
        st.one_of(st.sampled_from(INT_EXTREMES), st.integers(-(2**80), 2**80), st.integers(-(2**31), 2**31)),
        label="value",
    )
    why = _send_integer(target, value, spec, seeded, http, fingerprint)
    _expect(why is None, why)


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
