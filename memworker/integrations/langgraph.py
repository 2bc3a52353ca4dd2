"""LangGraph's long-term memory store (BaseStore) over memworker's HTTP API (docs/langgraph.md).

    from memworker.integrations.langgraph import MemworkerStore
    graph = builder.compile(store=MemworkerStore("http://127.0.0.1:8420", api_key))

Needs the optional extra: pip install 'memworker[langgraph]'.

The mapping (one LangGraph item = one memworker memory):
- the agent is namespace[0], or the store's `agent_id=` for every namespace when one is given;
- the memory's metadata keeps the full namespace and the key (KEY, NAMESPACE, one flat LEVEL
  entry per label so a namespace prefix is a plain containment filter, for both the list
  route's and recall's filter) and the value exactly as put (VALUE);
- the memory's text is what recall searches: the value's indexed fields (the whole value as
  JSON by default, like LangGraph's fields=["$"]), clipped to memworker's 280 characters;
- put of an existing key changes that memory in place (PATCH); a new key is written with an
  idempotency key derived from (namespace, key), so two concurrent puts make one memory;
- a store is one scope: with `subject=` that subject's memories, without it the agent's
  general ones (no subject). Every read keeps to the store's scope, so two stores of one
  agent, subject or general, never see, replace or delete each other's items.

Every operation is written once, as a generator of HTTP calls (sans-IO): `batch` drives it
with memworker.sdk.Client, `abatch` with an httpx.AsyncClient, so both sides behave alike."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import httpx

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        validate_op_namespace,
    )
except ImportError as exc:  # the extra is optional: say how to get it, not just what is missing
    raise ImportError("memworker.integrations.langgraph needs LangGraph: pip install 'memworker[langgraph]'") from exc

from memworker.domain import memories
from memworker.schemas import Kind, Tier, WritableTier
from memworker.sdk import REFUSED, ApiError, Client, Hit, MemoryList, MemoryOut, answer, retry_after

# metadata entries of a memory that holds a LangGraph item (flat: recall's filter takes scalars only)
ITEM = "lg_item"  # True: tells the store's memories from the agent's others
NAMESPACE = "lg_namespace"  # the full namespace, a list of labels
LEVEL = "lg_ns_{}"  # lg_ns_0, lg_ns_1, ...: one label each, for prefix filters
DEPTH = "lg_depth"  # len(namespace): a prefix filter plus the depth is the exact namespace
KEY = "lg_key"
VALUE = "lg_value"  # the value as put, returned by get and search
INDEXED = "lg_indexed"  # False: index=False or nothing to index; query search skips it
UPDATED = "lg_updated_at"  # this client's clock at the put (memworker answers only created_at)

RECALL_MAX_K = 100  # the recall route's bound on k
PAGE = 500  # the list route's bound on limit
FIND_PAGE = 50  # a key's memories per page: one per subject that put it, and the general one
# A filter on the store's flat metadata entries (ITEM, LEVEL, DEPTH, KEY): the memories whose
# metadata contains it (jsonb @>); recall's metadata filter takes scalars only.
Entries = dict[str, str | int | bool]

T = TypeVar("T")


@dataclass(frozen=True)
class _Call:
    """One HTTP call an operation needs; the driver answers it with the decoded JSON (or
    throws the ApiError into the generator)."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    body: Any = None


Plan = Generator[_Call, Any, T]


class MemworkerStore(BaseStore):
    """A LangGraph BaseStore whose items are memworker memories (module docstring: the mapping).

    `agent_id`: put every namespace in this one agent (then namespace[0] is an ordinary label,
    and search or list_namespaces over all namespaces work); None: namespace[0] is the agent.
    `fields`: the paths of a value that make the memory's text (LangGraph's IndexConfig
    fields syntax; default ["$"], the whole value as JSON); put(..., index=[...]) overrides
    it per item, index=False keeps an item out of query search. `kind` and `tier` of the
    memories written: an "event" is never superseded by another memory, and L2 is outside
    decay and the episodic cap (docs/langgraph.md: memworker's lifecycle still applies)."""

    supports_ttl = False

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        agent_id: str | None = None,
        fields: list[str] | None = None,
        kind: str = Kind.EVENT,
        tier: WritableTier = Tier.L2,
        timeout: float = 30.0,
        retries: int = 3,
        subject: str | None = None,
    ) -> None:
        if agent_id is not None:
            _check_agent(agent_id, "agent_id")
        if subject is not None and not memories.SUBJECT.fullmatch(subject):
            raise ValueError(f"subject {subject!r}: 1-128 letters, digits and ._:@-")
        # One subject per store, never a namespace label: labels are the application's own
        # layout, and a label that silently became a subject would move items between scopes.
        self._subject = subject
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._agent_id = agent_id
        self._fields = list(fields) if fields else ["$"]
        self._kind = kind
        self._tier = tier
        self._timeout = timeout
        self._retries = retries
        self._client = Client(base_url, api_key, timeout=timeout, retries=retries)
        # An httpx.AsyncClient's connections belong to the event loop that opened them: one per loop.
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self.close()

    def __enter__(self) -> MemworkerStore:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    async def __aenter__(self) -> MemworkerStore:
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    # --- BaseStore ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        reads, writes = self._plans(ops)
        results = [self._drive(plan) for plan in reads]
        for plan in writes:
            self._drive(plan)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        reads, writes = self._plans(ops)
        results = [await self._adrive(plan) for plan in reads]
        for plan in writes:
            await self._adrive(plan)
        return results

    def _plans(self, ops: Iterable[Op]) -> tuple[list[Plan[Result]], list[Plan[None]]]:
        """One plan per op giving its result, in the ops' order (a put's is None), and the
        writes to run after them. As in LangGraph's InMemoryStore, the reads see the store as
        it was before the batch and, of several puts to one key, the last wins. Every op is
        checked before any call is made."""
        ops = list(ops)
        for op in ops:
            self._check(op)
        results: list[Plan[Result]] = []
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                writes.pop((op.namespace, op.key), None)  # re-inserted: the last put runs last
                writes[(op.namespace, op.key)] = op
                results.append(_const(None))
            else:
                results.append(self._read(op))
        return results, [self._put(op) for op in writes.values()]

    def _read(self, op: Op) -> Plan[Result]:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"MemworkerStore: unknown operation {type(op).__name__}")

    def _check(self, op: Op) -> None:
        """Refuses what the store cannot honour, before anything is sent."""
        if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
            raise ValueError(f"MemworkerStore: unknown operation {type(op).__name__}")
        validate_op_namespace(op)  # a '.' in a label could spell another namespace
        if isinstance(op, GetOp | PutOp):
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            self._agent(op.namespace)
        if isinstance(op, PutOp):
            if op.namespace[0] == "langgraph":
                raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
            if op.ttl is not None:
                raise NotImplementedError(
                    "MemworkerStore does not support LangGraph TTLs (ttl=): memworker expires memories "
                    "by the agent's tier policy (ttl_l2_hours, ...), see docs/langgraph.md"
                )
            if op.value is not None and not isinstance(op.value, Mapping):
                raise TypeError(f"a value must be a mapping (dict), not {type(op.value).__name__}")
        if isinstance(op, SearchOp):
            if op.limit < 1 or op.offset < 0:
                raise ValueError(f"search needs limit >= 1 and offset >= 0 (got limit={op.limit}, offset={op.offset})")
            if op.query is not None and op.offset + op.limit > RECALL_MAX_K:
                raise ValueError(
                    f"a query search ranks at most {RECALL_MAX_K} hits (memworker recall's k): "
                    f"offset + limit is {op.offset + op.limit}"
                )
            if not op.namespace_prefix:
                self._require_pinned("search over every namespace")
            else:
                self._agent(op.namespace_prefix)
            for name, cond in (op.filter or {}).items():
                _check_filter(name, cond)
        if isinstance(op, ListNamespacesOp):
            if op.limit < 0 or op.offset < 0:
                raise ValueError("list_namespaces needs limit >= 0 and offset >= 0")
            self._list_agent(op)

    # --- the mapping -------------------------------------------------------------------------

    def _agent(self, namespace: tuple[str, ...]) -> str:
        if self._agent_id is not None:
            return self._agent_id
        return _check_agent(namespace[0], "namespace[0] (the memworker agent id)")

    def _require_pinned(self, what: str) -> None:
        if self._agent_id is None:
            raise NotImplementedError(
                f"MemworkerStore cannot {what}: namespace[0] names the memworker agent and memworker does "
                "not list agents. Give a namespace prefix, or make the store with agent_id=... to keep "
                "every namespace in one agent"
            )

    def _list_agent(self, op: ListNamespacesOp) -> str:
        if self._agent_id is not None:
            return self._agent_id
        prefixes = [c.path for c in op.match_conditions or () if c.match_type == "prefix"]
        if not prefixes or not prefixes[0] or prefixes[0][0] == "*":
            self._require_pinned("list namespaces without a prefix whose first label is the agent")
        return _check_agent(prefixes[0][0], "the prefix's first label (the memworker agent id)")

    def _prefix_filter(self, prefix: tuple[str, ...], *, wildcards: bool = False) -> Entries:
        """The containment filter for items under prefix. "*" is a wildcard only where LangGraph
        makes it one, a list_namespaces match condition (wildcards=True); in get, put, delete and
        search it is a label like any other, so no namespace can reach into another."""
        return {
            ITEM: True,
            **{LEVEL.format(i): label for i, label in enumerate(prefix) if not (wildcards and label == "*")},
        }

    def _mine(self, memory: Mapping[str, Any]) -> bool:
        """Whether a memory is in this store's scope: its subject's, or for the general store
        one without a subject. The list route without a subject answers every memory and
        recall for a subject adds the general ones, so each answer is checked here."""
        return memory.get("subject") == self._subject

    def _key_filter(self, namespace: tuple[str, ...], key: str) -> Entries:
        return {**self._prefix_filter(namespace), DEPTH: len(namespace), KEY: key}

    def _text(self, value: Mapping[str, Any], index: Literal[False] | list[str] | None) -> str | None:
        """The memory's text: the indexed fields' text, clipped to memworker's limit; None when
        nothing is to be indexed."""
        if index is False:
            return None
        parts = [t for path in (index or self._fields) for t in get_text_at_path(dict(value), path)]
        text = memories.clip(" ".join(p for p in parts if p.strip()))
        return text or None

    # --- operations --------------------------------------------------------------------------

    def _find(self, namespace: tuple[str, ...], key: str) -> Plan[MemoryOut | None]:
        """The live memory holding (namespace, key) in this store's scope, or None."""
        cursor: str | None = None
        while True:
            page = yield from self._page(self._agent(namespace), self._key_filter(namespace, key), FIND_PAGE, cursor)
            if page is None:  # the agent does not exist yet: nothing was put
                return None
            for m in page["memories"]:
                # exactly this namespace and key (the filter is containment: check what it let through)
                if self._mine(m) and tuple(m["metadata"].get(NAMESPACE) or ()) == namespace:
                    return m
            cursor = page["next_cursor"]
            if not cursor:
                return None

    def _get(self, op: GetOp) -> Plan[Result]:
        memory = yield from self._find(op.namespace, op.key)
        return None if memory is None else _item(memory)

    def _put(self, op: PutOp) -> Plan[None]:
        old = yield from self._find(op.namespace, op.key)
        if op.value is None:
            if old is not None:
                yield from self._delete(op.namespace, old["id"])
            return
        value = dict(op.value)
        text = self._text(value, op.index)
        metadata = {
            ITEM: True,
            NAMESPACE: list(op.namespace),
            **{LEVEL.format(i): label for i, label in enumerate(op.namespace)},
            DEPTH: len(op.namespace),
            KEY: op.key,
            VALUE: value,
            INDEXED: text is not None,
            UPDATED: datetime.now(UTC).isoformat(),
        }
        # An item kept out of query search still needs a text (memworker requires one); its
        # address reads better there than an empty marker, and INDEXED keeps recall off it.
        text = text or memories.clip("/".join((*op.namespace, op.key)))
        if old is not None:
            yield from self._replace(op.namespace, old, text, metadata)
            return
        # The idempotency key makes (namespace, key) one memory even when two puts race: the
        # second gets the first's memory back, and then replaces it like any existing item.
        scope = [list(op.namespace), op.key] + ([self._subject] if self._subject else [])  # one item per subject
        idem = "lg:" + hashlib.sha256(json.dumps(scope).encode()).hexdigest()
        body = {"text": text, "kind": self._kind, "tier": self._tier, "metadata": metadata, "idempotency_key": idem}
        path = self._path(op.namespace, "memories")
        memory = yield _Call("POST", path, body=body)
        if memory["metadata"] == metadata and memory["text"] == text:
            return
        if memory.get("superseded_by") or _expired(memory):
            # the key's memory is gone from view (expired, superseded) but still holds the
            # idempotency key: delete it and write afresh
            yield from self._delete(op.namespace, memory["id"])
            yield _Call("POST", path, body=body)
            return
        yield from self._replace(op.namespace, memory, text, metadata)

    def _replace(self, namespace: tuple[str, ...], old: MemoryOut, text: str, metadata: dict[str, Any]) -> Plan[None]:
        # the text only when it changed: a new text is embedded again on the server
        changes = {"metadata": metadata, **({"text": text} if text != old["text"] else {})}
        yield _Call("PATCH", self._path(namespace, f"memories/{old['id']}"), body=changes)

    def _delete(self, namespace: tuple[str, ...], memory_id: str) -> Plan[None]:
        try:
            yield _Call("DELETE", self._path(namespace, f"memories/{memory_id}"))
        except ApiError as exc:
            if exc.status != 404:  # 404: a concurrent delete got there first, which is the goal
                raise

    def _search(self, op: SearchOp) -> Plan[Result]:
        prefix = op.namespace_prefix
        agent = self._agent(prefix) if prefix else self._agent_id
        assert agent is not None  # _check: an empty prefix needs agent_id
        wanted = _Wanted(prefix, op.filter or {})
        if op.query is not None:
            # recall ranks the agent's memories under the namespace prefix (server side); a
            # value filter is applied to its top hits here, so it may leave fewer than limit.
            # Recall for a subject ranks the general memories too, which are not this store's.
            exact = not op.filter and self._subject is None
            try:
                answer = yield _Call(
                    "POST",
                    f"/v1/agents/{agent}/recall",
                    body={
                        "query": op.query,
                        "k": op.offset + op.limit if exact else RECALL_MAX_K,
                        "tiers": list(memories.TIERS),
                        "metadata": {**self._prefix_filter(prefix), INDEXED: True},
                    },
                )
            except ApiError as exc:
                if exc.status == 404:
                    return []
                raise
            hits = [h for h in answer["memories"] if self._mine(h) and wanted(h["metadata"])]
            return [_item(h, score=float(h["score"])) for h in hits[op.offset : op.offset + op.limit]]
        # no query: list, newest first, filtered on the server as far as containment reaches
        server = {**self._prefix_filter(prefix), **_exact_part(op.filter or {})}
        out: list[SearchItem] = []
        skip = op.offset
        cursor: str | None = None
        while True:
            page = yield from self._page(agent, server, min(PAGE, op.offset + op.limit), cursor)
            if page is None:
                return []
            for m in page["memories"]:
                if not self._mine(m) or not wanted(m["metadata"]):
                    continue
                if skip:
                    skip -= 1
                    continue
                out.append(_item(m))
                if len(out) == op.limit:
                    return out
            cursor = page["next_cursor"]
            if not cursor:
                return out

    def _page(
        self, agent: str, server: Mapping[str, object], limit: int, cursor: str | None
    ) -> Plan[MemoryList | None]:
        """One page of the agent's items whose metadata contains `server`; None when the agent
        does not exist (yet): no items."""
        params: dict[str, Any] = {"metadata": json.dumps(server), "limit": limit}
        if cursor:
            params["cursor"] = cursor
        try:
            page: MemoryList = yield _Call("GET", f"/v1/agents/{agent}/memories", params)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return page

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[Result]:
        """Every namespace of the agent, read from its items' metadata (memworker keeps no
        namespace table): a walk over the agent's items under the prefix."""
        agent = self._list_agent(op)
        prefixes = [c.path for c in op.match_conditions or () if c.match_type == "prefix"]
        server = self._prefix_filter(tuple(prefixes[0]) if prefixes else (), wildcards=True)
        found: set[tuple[str, ...]] = set()
        cursor: str | None = None
        while True:
            page = yield from self._page(agent, server, PAGE, cursor)
            if page is None:
                return []
            for m in page["memories"]:
                ns = tuple(m["metadata"].get(NAMESPACE) or ()) if self._mine(m) else ()
                if ns and all(_matches(c, ns) for c in op.match_conditions or ()):
                    found.add(ns if op.max_depth is None else ns[: op.max_depth])
            cursor = page["next_cursor"]
            if not cursor:
                break
        return sorted(found)[op.offset : op.offset + op.limit]

    def _path(self, namespace: tuple[str, ...], rest: str) -> str:
        return f"/v1/agents/{self._agent(namespace)}/{rest}"

    def _scoped(self, call: _Call) -> _Call:
        """The call for the store's subject: its writes are about it, its lists and gets read
        its memories only, its searches recall its memories and the agent's general ones (of
        which _mine keeps its own)."""
        if self._subject is None:
            return call
        if call.method == "POST" and call.path.endswith(("/memories", "/recall")) and isinstance(call.body, dict):
            return dataclasses.replace(call, body={**call.body, "subject": self._subject})
        if call.method == "GET" and call.path.endswith("/memories"):
            return dataclasses.replace(call, params={**(call.params or {}), "subject": self._subject})
        return call

    # --- drivers -----------------------------------------------------------------------------

    def _drive(self, plan: Plan[T]) -> T:
        try:
            call = next(plan)
            while True:
                try:
                    call = self._scoped(call)
                    answer = self._client.request(call.method, call.path, params=call.params, json=call.body)
                except ApiError as exc:
                    call = plan.throw(exc)
                else:
                    call = plan.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the generator's return value, typed T

    async def _adrive(self, plan: Plan[T]) -> T:
        try:
            call = next(plan)
            while True:
                try:
                    answer = await self._arequest(self._scoped(call))
                except ApiError as exc:
                    call = plan.throw(exc)
                else:
                    call = plan.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the generator's return value, typed T

    async def _arequest(self, call: _Call) -> Any:
        """memworker.sdk.Client._call, asynchronously: the same retries of 429/503 after the
        server's Retry-After, the same ApiError."""
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            self._aclient = httpx.AsyncClient(
                base_url=self._base_url, timeout=self._timeout, headers={"Authorization": f"Bearer {self._api_key}"}
            )
            self._aloop = loop
        client = self._aclient
        resp = await client.request(call.method, call.path, params=call.params, json=call.body)
        for _ in range(self._retries):
            if resp.status_code not in REFUSED:
                break
            await asyncio.sleep(retry_after(resp))
            resp = await client.request(call.method, call.path, params=call.params, json=call.body)
        return answer(resp)


# --- helpers -------------------------------------------------------------------------------------


def _check_agent(agent: str, what: str) -> str:
    if not memories.AGENT_ID.fullmatch(agent):
        raise InvalidNamespaceError(
            f"{what} {agent!r} is not a memworker agent id: 1-128 of A-Z a-z 0-9 . _ : @ -, "
            "starting with a letter or digit"
        )
    return agent


def _const(value: T) -> Plan[T]:
    return value
    yield  # a generator that makes no call


def _expired(memory: MemoryOut) -> bool:
    at = memory.get("expires_at")
    return at is not None and datetime.fromisoformat(at) <= datetime.now(UTC)


def _item(memory: MemoryOut | Hit, score: float | None = None) -> SearchItem:
    md = memory["metadata"]
    created = datetime.fromisoformat(memory["created_at"])
    # this client's clock against the server's: never before the memory was created
    updated = max(created, datetime.fromisoformat(md[UPDATED])) if md.get(UPDATED) else created
    return SearchItem(
        namespace=tuple(md[NAMESPACE]),
        key=md[KEY],
        value=md[VALUE],
        created_at=created,
        updated_at=updated,
        score=score,
    )


OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _check_filter(name: str, cond: Any) -> None:
    if isinstance(cond, dict):
        bad = [k for k in cond if k.startswith("$") and k not in OPERATORS]
        if bad:
            raise ValueError(f"filter on {name!r}: unsupported operator {bad[0]!r}; supported: {', '.join(OPERATORS)}")
        if any(k.startswith("$") for k in cond) and not all(k.startswith("$") for k in cond):
            raise ValueError(f"filter on {name!r}: do not mix operators and fields in one object")
        for k, v in cond.items():
            if not k.startswith("$"):
                _check_filter(f"{name}.{k}", v)


def _exact_part(flt: dict[str, Any]) -> dict[str, dict[str, str | int | float]]:
    """The part of a LangGraph filter that jsonb containment decides exactly (top-level
    strings and numbers), for the server; the whole filter is checked here anyway. None and
    booleans stay here: {"x": None} also matches items without x, and True == 1 in Python."""
    exact = {k: v for k, v in flt.items() if isinstance(v, str | int | float) and not isinstance(v, bool)}
    return {VALUE: exact} if exact else {}


class _Wanted:
    """Whether a memory's metadata is an item under the prefix that the filter accepts
    (LangGraph's InMemoryStore semantics: top-level fields, nested objects as subsets,
    lists equal element by element, $eq $ne $gt $gte $lt $lte)."""

    def __init__(self, prefix: tuple[str, ...], flt: dict[str, Any]) -> None:
        self.prefix = prefix
        self.filter = flt

    def __call__(self, md: dict[str, Any]) -> bool:
        if not md.get(ITEM) or KEY not in md:
            return False
        if tuple(md.get(NAMESPACE) or ())[: len(self.prefix)] != self.prefix:
            return False
        value = md.get(VALUE) or {}
        return all(_compare(value.get(k), v) for k, v in self.filter.items())


def _compare(item: Any, cond: Any) -> bool:
    if isinstance(cond, dict):
        if any(k.startswith("$") for k in cond):
            return all(_operator(item, op, v) for op, v in cond.items())
        return isinstance(item, dict) and all(_compare(item.get(k), v) for k, v in cond.items())
    if isinstance(cond, list | tuple):
        return (
            isinstance(item, list | tuple)
            and len(item) == len(cond)
            and all(_compare(i, c) for i, c in zip(item, cond, strict=True))
        )
    return bool(item == cond)


def _operator(item: Any, op: str, value: Any) -> bool:
    if op == "$eq":
        return bool(item == value)
    if op == "$ne":
        return bool(item != value)
    try:
        a, b = float(item), float(value)
    except (TypeError, ValueError):
        return False  # a missing or non-numeric field is not greater or less than anything
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


__all__ = ["MemworkerStore"]
