"""memworker.Client and memworker.AsyncClient are one SDK: the same public methods with the
same parameters (names, kinds, defaults, annotations) and docstrings, each an operation of
memworker.sdk._Operations sent by a blocking or an async transport. The methods are written
by tests/sdk_codegen.py; the block in sdk.py is what it writes now.

Their answers are named types: a TypedDict per answer component of the API's OpenAPI document
(written by the same generator), and each operation answers the component its route declares."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from typing_extensions import is_typeddict  # typing's misses typing_extensions' TypedDicts before 3.12

import memworker
from memworker import sdk
from memworker.lifecycle import governance
from memworker.lifecycle import queries as lifecycle_db
from memworker.storage import sessions_db
from tests import sdk_codegen
from tests.unit import test_openapi as openapi

HAND_WRITTEN = {"close", "wait_for_episode", "wait_for_run"}  # written twice: blocking and async


def public(cls: type) -> dict[str, Callable[..., Any]]:
    return {n: getattr(cls, n) for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """Names, kinds, defaults and annotations, in order (the answer's type aside)."""
    return list(inspect.signature(fn).parameters.values())


def test_the_package_exports_both_clients() -> None:
    assert memworker.Client is sdk.Client and memworker.AsyncClient is sdk.AsyncClient
    assert {"Client", "AsyncClient"} <= set(memworker.__all__)


def test_both_clients_have_the_same_methods_and_parameters() -> None:
    sync, asynchronous = public(sdk.Client), public(sdk.AsyncClient)
    assert len(sync) > 60  # the whole SDK, not an empty class
    assert set(sync) == set(asynchronous)
    differ = {name: (parameters(fn), parameters(asynchronous[name])) for name, fn in sync.items()}
    assert {name: pair for name, pair in differ.items() if pair[0] != pair[1]} == {}
    assert [n for n, fn in sync.items() if fn.__doc__ != asynchronous[n].__doc__] == []
    assert inspect.signature(sdk.Client.__init__) == inspect.signature(sdk.AsyncClient.__init__)


def test_each_method_is_its_described_operation() -> None:
    """Every public method but the hand-written loops is an operation of _Operations with the
    same parameters (self aside, the same list) and docstring."""
    described = public(sdk._Operations)
    for cls in (sdk.Client, sdk.AsyncClient):
        methods = public(cls)
        assert set(methods) == set(described) | HAND_WRITTEN, cls.__name__
        for name, op in described.items():
            assert parameters(methods[name]) == parameters(op), name
            assert methods[name].__doc__ == op.__doc__, name


def test_async_methods_are_coroutines_and_streams_async_iterators() -> None:
    streams = {"export_chunks", "subject_export_chunks"}
    for name, fn in public(sdk.AsyncClient).items():
        if name in streams:
            assert inspect.signature(fn).return_annotation == "AsyncIterator[bytes]", name
        else:
            assert inspect.iscoroutinefunction(fn), name
    for name in streams:
        assert inspect.signature(getattr(sdk.Client, name)).return_annotation == "Iterator[bytes]"
    # the public answer types are the described ones: recall answers a Recalled either way
    assert inspect.signature(sdk.AsyncClient.recall).return_annotation == "Recalled"
    assert inspect.signature(sdk._Operations.recall).return_annotation == "_Op[Recalled]"


def test_the_generated_methods_are_up_to_date() -> None:
    source = sdk_codegen.SDK.read_text()
    assert sdk_codegen.render(source) == source, "run `python -m tests.sdk_codegen` and commit memworker/sdk.py"


def test_the_generator_writes_a_method_per_operation_and_client() -> None:
    """The generator itself: an operation gives a blocking and an async method that forward
    every parameter as it came (positional, keyword-only, **rest)."""
    source = '''
class _Operations:
    def thing(self, a: str, b: int = 2, *, c: str | None = None, **rest: Any) -> _Op[dict[str, Any]]:
        """Doc of thing."""
        return _obj("GET", "/v1/x")

    def chunks(self, a: str) -> _Stream:
        return _Stream("/v1/y", {})
'''
    block = sdk_codegen.block(source)
    assert "    def thing(self, a: str, b: int=2, *, c: str | None=None, **rest: Any) -> dict[str, Any]:" in block
    assert "    async def thing(self, a: str, b: int=2, *, c: str | None=None, **rest: Any) -> dict[str, Any]:" in block
    assert block.count("return self._send(_OPS.thing(a, b, c=c, **rest))") == 1
    assert block.count("return await self._send(_OPS.thing(a, b, c=c, **rest))") == 1
    assert block.count('        """Doc of thing."""') == 2
    assert "    def chunks(self, a: str) -> AsyncIterator[bytes]:" in block
    assert block.count("return self._chunks(_OPS.chunks(a))") == 2


def test_the_generator_writes_a_typed_dict_per_answer_component() -> None:
    """The types generator itself: a component an answer uses (nested ones too) is a
    TypedDict of the same name, its required keys total, the others NotRequired; a component
    no answer uses is left out."""
    doc: dict[str, Any] = {
        "paths": {
            "/v1/things/{id}": {
                "get": {
                    "responses": {
                        "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}
                    }
                }
            },
            "/healthz": {
                "get": {
                    "responses": {
                        "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
                    }
                }
            },
        },
        "components": {
            "schemas": {
                "Thing": {
                    "description": "A thing.",
                    "properties": {
                        "id": {"type": "string"},
                        "size": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                        "parts": {"type": "array", "items": {"$ref": "#/components/schemas/Part"}},
                        "metadata": {"type": "object", "additionalProperties": True},
                        "note": {"type": "string"},
                        "raw": {},
                    },
                    "required": ["id", "size", "parts", "metadata", "raw"],
                },
                "Part": {"properties": {"weight": {"type": "number"}}, "required": ["weight"]},
                "Health": {"properties": {"ok": {"type": "boolean"}}},
            }
        },
    }
    block = sdk_codegen.types_block(doc)
    assert '    """A thing."""' in block
    for line in (
        "class Thing(TypedDict):",
        "    id: str",
        "    size: int | None",
        "    parts: list[Part]",
        "    metadata: dict[str, Any]",
        "    note: NotRequired[str]",
        "    raw: Any",
        "class Part(TypedDict):",
        "    weight: float",
    ):
        assert f"\n{line}\n" in block, line
    assert "Health" not in block


def _declared(fn: ast.FunctionDef) -> str:
    """The type an operation answers (T of its _Op[T]), or "" for a stream."""
    returns = fn.returns
    return ast.unparse(returns.slice) if isinstance(returns, ast.Subscript) else ""


def _documented(method: str, path: str, key: str | None) -> str | None:
    """The type the document says the route answers: its component, or the type of its field
    `key` (a list of a component, or "list[dict[str, Any]]" for objects without named
    fields); None when it answers no JSON."""
    op = openapi.operations()[(method, path)]
    code = next(c for c in op["responses"] if c.startswith("2"))
    schema = op["responses"][code].get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return None
    if key is None:
        return sdk_codegen.annotation(schema)
    return sdk_codegen.annotation(openapi.resolve(schema)["properties"][key])


def _named_in_sdk(declared: str) -> bool:
    """Whether `declared` is list[X] with X a TypedDict written in sdk.py (not an answer
    component: those name other answers)."""
    item = declared.removeprefix("list[").removesuffix("]")
    written = item not in sdk_codegen.answer_components(openapi.document())
    return declared.startswith("list[") and written and is_typeddict(getattr(sdk, item, None))


def test_each_operation_answers_its_routes_documented_type() -> None:
    """An operation that answers an object answers its route's component (MemoryOut for a
    memory); one that unwraps a list, a list of the component the array holds. Where the
    document names no fields for the items, the operation names a TypedDict of sdk.py."""
    fns = sdk_codegen.operations(sdk_codegen.SDK.read_text())
    checked, wrong = 0, []
    for line, method, path, key, field in openapi.sdk_calls():
        fn = next(f for f in fns if f.lineno <= line <= (f.end_lineno or f.lineno))
        declared = _declared(fn).removesuffix(" | None")  # pop_session_item: None when there was none
        documented = _documented(method, path, key)
        if field is not None or documented is None or declared in ("", "int", "list[int]"):
            continue  # a field read off the answer, no JSON answer, a stream, a count read off it
        if declared == documented or (documented == "list[dict[str, Any]]" and _named_in_sdk(declared)):
            checked += 1
        else:
            wrong.append(f"{fn.name}: {declared}, the document says {documented}")
    assert wrong == []
    assert checked > 50  # every object-answering operation, not a few


def test_the_types_written_in_sdk_name_the_rows_their_routes_send() -> None:
    """A TypedDict written in sdk.py (the document names no fields for it) has the keys of the
    row its route sends, ids and dates as strings."""
    rows: dict[str, type] = {
        "Review": governance.ReviewItem,
        "ReviewedMemory": governance.ReviewSide,
        "RetentionRun": lifecycle_db.RetentionRun,
        "ContextCall": sessions_db.ContextCall,
        "Delivery": sessions_db.WebhookDelivery,
    }
    for name, row in rows.items():
        keys = {f.name for f in dataclasses.fields(row)} if dataclasses.is_dataclass(row) else set(get_type_hints(row))
        assert set(get_type_hints(getattr(sdk, name))) == keys, name


def test_every_answer_type_is_a_typed_dict_of_the_sdk() -> None:
    """What a client method answers is a name the package exports (sdk.X), a TypedDict, or a
    list of one, or a scalar: no open dict."""
    for name, fn in public(sdk.Client).items():
        answer = str(inspect.signature(fn).return_annotation)
        assert "dict[" not in answer, (name, answer)
        for word in answer.replace("list[", " ").replace("]", " ").replace("|", " ").split():
            if word[0].isupper() and word not in ("Any", "None") and not word.startswith("Iterator"):
                assert is_typeddict(getattr(sdk, word)), (name, word)
