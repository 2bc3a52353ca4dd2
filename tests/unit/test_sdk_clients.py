"""memworker.Client and memworker.AsyncClient are one SDK: the same public methods with the
same parameters (names, kinds, defaults, annotations) and docstrings, each an operation of
memworker.sdk._Operations sent by a blocking or an async transport. The methods are written
by tests/sdk_codegen.py; the block in sdk.py is what it writes now."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import memworker
from memworker import sdk
from tests import sdk_codegen

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
    # the public answer types are the described ones: recall answers a dict either way
    assert inspect.signature(sdk.AsyncClient.recall).return_annotation == "dict[str, Any]"
    assert inspect.signature(sdk._Operations.recall).return_annotation == "_Op[dict[str, Any]]"


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
