"""The API describes its answers, and the SDK calls what the API describes.

- Every /v1 operation in /openapi.json has a 2xx response, and each 2xx response but a 204
  has a content schema that names its fields (a named answer in memworker/schemas.py), or
  is a file download (a binary string).
- Every request the SDK describes (in memworker/sdk.py's _Operations: `_obj`, `_list`,
  `_none`, `_bytes` with a literal method and path, and each `_Stream` GET) names an operation
  the document has, with that method; a `_list(..., key=K)` unwraps an array field K the answer
  declares, and a `.then(lambda answer: answer["k"])` reads a field it declares. And every
  operation has a method that calls it.
- Both clients send only those descriptions: each public method of Client and of AsyncClient
  that is an operation sends `_OPS.<its own name>(...)`, so what holds for _Operations holds
  for both (tests/unit/test_sdk_clients.py checks the methods are the ones generated).

The document comes from the app factory (no lifespan: nothing is connected), the SDK's calls
from its source (ast)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import Any

from memworker.api.app import create_app
from memworker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "memworker" / "sdk.py"
PLACEHOLDER = re.compile(r"\{[^}]+\}")


@cache
def document() -> dict[str, Any]:
    # URLs that are never dialled: the factory builds routes only; the lifespan would connect
    settings = Settings.from_env(
        {"MEMWORKER_DATABASE_URL": "postgresql://unused/unused", "MEMWORKER_REDIS_URL": "redis://unused:1"}
    )
    return create_app(settings).openapi()


def operations() -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path with each {parameter} as {}) -> the operation, for /v1 paths."""
    return {
        (method.upper(), PLACEHOLDER.sub("{}", path)): op
        for path, ops in document()["paths"].items()
        if path.startswith("/v1/")
        for method, op in ops.items()
    }


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = ref.removeprefix("#/components/schemas/")
    return resolve(document()["components"]["schemas"][name])


def answer_schema(op: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of the operation's 2xx answer ({} when it has no JSON body)."""
    for code, response in op["responses"].items():
        if code.startswith("2"):
            content = response.get("content", {}).get("application/json")
            return resolve(content["schema"]) if content else {}
    return {}


def test_every_v1_operation_declares_its_answer() -> None:
    ops = operations()
    assert len(ops) > 40  # the whole API, not an empty document
    missing = []
    for (method, path), op in sorted(ops.items()):
        codes = [c for c in op["responses"] if c.startswith("2")]
        if not codes:
            missing.append(f"{method} {path}: no 2xx response")
            continue
        if codes == ["204"]:
            continue  # no content, by definition
        content = op["responses"][codes[0]].get("content", {})
        schemas = [resolve(c.get("schema", {})) for c in content.values()]
        named = [s for s in schemas if s.get("properties") and s.get("title")]
        binary = [s for s in schemas if s.get("type") == "string" and s.get("format") == "binary"]
        if not named and not binary:
            missing.append(f"{method} {path}: {schemas}")
    assert missing == [], "operations whose answer has no named schema:\n" + "\n".join(missing)


def answer_names() -> set[str]:
    """The components the 2xx answers use, those they nest included."""
    refs = re.compile(r"#/components/schemas/(\w+)")
    todo = [
        response for op in operations().values() for code, response in op["responses"].items() if code.startswith("2")
    ]
    names: set[str] = set()
    while todo:
        for name in refs.findall(str(todo.pop())):
            if name not in names:
                names.add(name)
                todo.append(document()["components"]["schemas"][name])
    return names


def test_answers_are_open_so_no_field_is_dropped() -> None:
    """A response model filters what a route returns; every answer keeps fields it does not
    name (additionalProperties), so one a route adds before its answer names it is never cut."""
    schemas = document()["components"]["schemas"]
    names = answer_names()
    assert {"MemoryOut", "Recalled", "Hit"} <= names
    closed = sorted(n for n in names if schemas[n].get("additionalProperties") is not True)
    assert closed == []


def _path_templates(node: ast.expr, local: dict[str, ast.expr]) -> list[str]:
    """The paths an argument can be: a literal, an f-string's with each {expression} as {},
    both sides of `a if c else b`, what a local name was set to; [] for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)]
    if isinstance(node, ast.IfExp):
        return _path_templates(node.body, local) + _path_templates(node.orelse, local)
    if isinstance(node, ast.Name) and node.id in local:
        return _path_templates(local[node.id], local)
    return []


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


BUILDERS = ("_obj", "_list", "_none", "_bytes")  # _Operations' ways to describe a request


def _route_call(node: ast.Call) -> tuple[str, ast.expr] | None:
    """(METHOD, the path argument) of a call that describes a request to a route, else None."""
    f = node.func
    if isinstance(f, ast.Name) and f.id in BUILDERS and len(node.args) >= 2:
        method = node.args[0]
        if isinstance(method, ast.Constant) and isinstance(method.value, str):
            return method.value, node.args[1]
    if isinstance(f, ast.Name) and f.id == "_Stream" and node.args:
        return "GET", node.args[0]
    return None


def _field_reads(tree: ast.AST) -> dict[int, str]:
    """id of a builder call -> the field `.then(lambda answer: answer["k"])` reads off its answer."""
    reads: dict[int, str] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "then"
            and isinstance(node.func.value, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Lambda)
        ):
            continue
        body = node.args[0].body
        if (
            isinstance(body, ast.Subscript)
            and isinstance(body.slice, ast.Constant)
            and isinstance(body.slice.value, str)
        ):
            reads[id(node.func.value)] = body.slice.value
    return reads


def _operations_class(tree: ast.Module) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Operations")


def sdk_calls() -> list[tuple[int, str, str, str | None, str | None]]:
    """(line, METHOD, path template, _list key, a field read off the answer) per request the
    SDK's _Operations describes."""
    tree = ast.parse(SDK.read_text())
    reads = _field_reads(tree)
    found = []
    for fn in ast.walk(_operations_class(tree)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        local = {
            t.id: a.value
            for a in ast.walk(fn)
            if isinstance(a, ast.Assign)
            for t in a.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(fn):
            call = _route_call(node) if isinstance(node, ast.Call) else None
            if call is None:
                continue
            assert isinstance(node, ast.Call)
            key = next(
                (k.value.value for k in node.keywords if k.arg == "key" and isinstance(k.value, ast.Constant)), None
            )
            # a path passed through (request()) is no route: no template
            for path in _path_templates(call[1], local):
                found.append((node.lineno, call[0], path, key, reads.get(id(node))))
    return found


def _sent(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The operations a client method sends: each `_OPS.<name>(...)` it calls."""
    return [
        node.func.attr
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "_OPS"
    ]


def test_both_clients_send_each_operation_as_described() -> None:
    """Client and AsyncClient: every operation of _Operations is a method of each, and that
    method sends exactly that operation's description (so the checks above cover both)."""
    tree = ast.parse(SDK.read_text())
    described = {f.name for f in _operations_class(tree).body if isinstance(f, ast.FunctionDef)}
    assert {"recall", "download_archive", "export_chunks", "import_file"} <= described
    for name in ("Client", "AsyncClient"):
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert set(methods) == {d for d in described if not d.startswith("_")}, name
        wrong = {m: _sent(f) for m, f in methods.items() if _sent(f) != [m]}
        assert wrong == {}, f"{name} methods that do not send their own operation: {wrong}"


def test_the_sdk_calls_only_documented_operations() -> None:
    ops = operations()
    calls = sdk_calls()
    assert len(calls) > 40  # the walk found the client's methods
    problems = []
    for line, method, path, key, field in calls:
        op = ops.get((method, path))
        if op is None:
            problems.append(f"sdk.py:{line}: {method} {path} is not in /openapi.json")
            continue
        props = answer_schema(op).get("properties", {})
        if key is not None and props.get(key, {}).get("type") != "array":
            problems.append(f"sdk.py:{line}: {method} {path} answers no array field {key!r}")
        if field is not None and field not in props:
            problems.append(f"sdk.py:{line}: {method} {path} answers no field {field!r}")
    assert problems == [], "\n".join(problems)


def test_the_sdk_reaches_every_operation() -> None:
    reached = {(method, path) for _, method, path, _, _ in sdk_calls()}
    assert sorted(set(operations()) - reached) == []


def test_the_sdk_walk_reads_paths_methods_and_keys() -> None:
    """The walk itself: a literal method and an f-string path, an unwrapped key, a read field."""
    calls = {(m, p): (k, f) for _, m, p, k, f in sdk_calls()}
    assert calls[("GET", "/v1/agents/{}/consolidation/runs")] == ("runs", None)
    assert calls[("POST", "/v1/agents/{}/consolidate")] == (None, "run_id")
    assert ("GET", "/v1/agents/{}/sessions/{}/archives/{}") in calls  # the download, through httpx
    # a path set in a local name, one of two: an agent's policy or the tenant's
    assert {("PUT", "/v1/agents/{}/policy"), ("PUT", "/v1/policy")} <= set(calls)


def test_every_v1_operation_requires_the_bearer_key() -> None:
    """/docs can send the API key: the document declares an HTTP bearer scheme and every /v1
    operation requires it; the unauthenticated ops routes declare none."""
    schemes = document()["components"]["securitySchemes"]
    bearer = [name for name, s in schemes.items() if s.get("type") == "http" and s.get("scheme") == "bearer"]
    assert len(bearer) == 1, schemes
    unguarded = sorted(
        f"{m} {p}" for (m, p), op in operations().items() if {bearer[0]: []} not in op.get("security", [])
    )
    assert unguarded == []
    assert "security" not in document()["paths"]["/healthz"]["get"]
