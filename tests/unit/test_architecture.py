"""The layout stays a layout: checked from the source (ast), not from a running import.

- Entry points (memworker.api, memworker.cli, memworker.__main__, tasks) sit on top: nothing
  else imports them. Exceptions: the API publishes through tasks.publish, `python -m
  memworker` runs the CLI, and memworker.sdk's enqueue_in_cluster imports tasks.publish inside
  the function (the SDK works without Celery installed until it is called).
- No import cycles among memworker/ and tasks/ modules, counting imports inside functions too.
- Package level: each package (a subpackage of memworker/) and each top-level module is one node
  (tasks/ one more); among the nodes there is no cycle, and every node sits in one of LAYERS,
  whose imports go only to its own layer or lower ones (the allowed ways into an entry point
  aside).
- Celery( is built only under tasks/.
- memworker/ keeps at most 12 modules at its top level (__init__ and __main__ aside); the rest
  live in packages (subpackages).

An edge goes to the module an import names (`from memworker.storage import store` is an edge
to memworker.storage.store), not to the packages above it: every package __init__ here is
empty but memworker/__init__.py, which only re-exports the SDK's Client."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memworker", "tasks")
ENTRY_POINTS = ("memworker.api", "memworker.cli", "memworker.__main__", "tasks")
# (importer prefix, imported module, function-level only): the allowed ways into an entry point
ALLOWED = [
    ("memworker.api", "tasks.publish", False),
    ("memworker.__main__", "memworker.cli.main", False),
    ("memworker.sdk", "tasks.publish", True),
]
MAX_TOP_LEVEL_MODULES = 12
# Lowest first. A node imports only nodes of its own layer or of a lower one; a new top-level
# module or package is placed here on purpose (docs/ARCHITECTURE.md says why each sits where).
LAYERS: list[tuple[str, set[str]]] = [
    (
        "domain",
        {
            "memworker.errors",
            "memworker.domain",
            "memworker.schemas",
            "memworker.settings",
            "memworker.metrics",
            "memworker.tracing",
            "memworker.testing",
        },
    ),
    ("storage and models", {"memworker.storage", "memworker.models", "memworker.reflection"}),
    (
        "lower packages",
        {
            "memworker.keys",
            "memworker.tenancy",  # tenants, agents, policies: who an agent is and its rules
            "memworker.maintenance",
            "memworker.runtime",
            "memworker.lifecycle",
            "memworker.memories",  # the one writer of memories and the memories capability's use cases
            "memworker.fleet",
            "memworker.recall",
            "memworker.ingest",
            "memworker.portability",  # export and import: storage, models and the domain's schemas
        },
    ),
    ("orchestration packages", {"memworker.sleep", "memworker.sessions"}),
    ("erase", {"memworker.erase"}),  # forget reaches every copy: lifecycle, sessions, fleet
    ("clients", {"memworker.sdk", "memworker.local", "memworker.integrations"}),
    ("entry points", {"memworker", "memworker.api", "memworker.cli", "memworker.__main__", "tasks"}),
]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` (a module or module.attribute) names."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in known:
            return ".".join(parts[:i])
    return None


def _walk(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        yield child, in_function
        yield from _walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))


def imports() -> list[Import]:
    known = modules()
    found = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, in_function in _walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                resolved = _resolve(target, known)
                if resolved and resolved != name:
                    found.append(Import(name, resolved, node.lineno, in_function))  # type: ignore[attr-defined]
    return found


def _allowed(imp: Import) -> bool:
    if any(_within(imp.importer, entry) for entry in ("memworker.api", "memworker.cli", "tasks")) and any(
        _within(imp.imported, entry) for entry in ENTRY_POINTS if _within(imp.importer, entry)
    ):
        return True  # within its own entry point
    return any(
        _within(imp.importer, importer) and imp.imported == imported and (imp.in_function or not function_only)
        for importer, imported, function_only in ALLOWED
    )


def test_nothing_imports_an_entry_point_but_the_allowed_few() -> None:
    bad = [
        f"{i.importer} (line {i.line}) imports {i.imported}"
        for i in imports()
        if any(_within(i.imported, entry) for entry in ENTRY_POINTS) and not _allowed(i)
    ]
    assert not bad, "imports of an entry point (move the shared code below it):\n" + "\n".join(bad)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_the_rules_themselves() -> None:
    assert not _allowed(Import("memworker.cli.consolidation", "memworker.api.routes.consolidation", 1, True))
    assert not _allowed(Import("memworker.sdk", "tasks.publish", 1, False))
    assert _allowed(Import("memworker.sdk", "tasks.publish", 1, True))
    assert not _allowed(Import("memworker.recall", "tasks.publish", 1, True))
    assert _allowed(Import("memworker.api.deps", "tasks.publish", 1, False))
    assert not _allowed(Import("memworker.api.deps", "tasks.celery_app", 1, False))
    assert _allowed(Import("tasks.ingest_tasks", "tasks.celery_app", 1, False))
    assert _allowed(Import("memworker.cli.main", "memworker.cli.common", 1, False))


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_counting_function_level_imports() -> None:
    edges: dict[str, set[str]] = {name: set() for name in modules()}
    for i in imports():
        edges[i.importer].add(i.imported)
    cycles = _cycles(edges)
    assert not cycles, "import cycles (function-level imports count too):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def node(module: str) -> str:
    """The package-level node of a module: its package (memworker.<package>), its own name at the
    top of memworker/, or tasks."""
    parts = module.split(".")
    if parts[0] == "tasks" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


def package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {node(name): set() for name in modules()}
    for i in imports():
        if node(i.importer) != node(i.imported):
            edges[node(i.importer)].add(node(i.imported))
    return edges


def test_no_package_cycles() -> None:
    cycles = _cycles(package_edges())
    assert not cycles, "package-level import cycles (packages and top-level modules):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_every_node_has_a_layer() -> None:
    placed = [name for _, names in LAYERS for name in names]
    assert len(placed) == len(set(placed)), "a node in two layers"
    missing = sorted(set(package_edges()) - set(placed))
    assert not missing, f"place these in LAYERS (tests/unit/test_architecture.py): {missing}"
    gone = sorted(set(placed) - set(package_edges()))
    assert not gone, f"LAYERS names nodes that do not exist: {gone}"


def _level(module: str) -> int:
    return next(n for n, (_, names) in enumerate(LAYERS) if node(module) in names)


def _reaches_up(imp: Import) -> bool:
    return _level(imp.imported) > _level(imp.importer) and not _allowed(imp)


def test_no_import_reaches_a_higher_layer() -> None:
    bad = [
        f"{i.importer} (line {i.line}, {LAYERS[_level(i.importer)][0]}) imports {i.imported} "
        f"({LAYERS[_level(i.imported)][0]})"
        for i in imports()
        if _reaches_up(i)
    ]
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(bad)


def test_the_package_rules_themselves() -> None:
    assert node("memworker.storage.store") == "memworker.storage"
    assert node("memworker.ingest") == "memworker.ingest"
    assert node("tasks.publish") == "tasks" and node("memworker") == "memworker"
    assert _level("memworker.domain.rules") < _level("memworker.storage.store") < _level("memworker.ingest")
    assert _level("memworker.ingest") < _level("memworker.sessions.hooks") < _level("memworker.erase.forget")
    assert _reaches_up(Import("memworker.storage.store", "memworker.lifecycle.governance", 1, True))
    assert _reaches_up(Import("memworker.ingest", "memworker.sessions.hooks", 1, False))
    assert not _reaches_up(Import("memworker.sessions.archive", "memworker.ingest", 1, False))
    assert not _reaches_up(Import("memworker.sdk", "tasks.publish", 1, True))  # the allowed way in
    assert _reaches_up(Import("memworker.sdk", "tasks.publish", 1, False))


def test_celery_apps_are_built_only_under_tasks() -> None:
    bad = [
        str(path.relative_to(ROOT))
        for name, path in modules().items()
        if not _within(name, "tasks") and "Celery(" in path.read_text()
    ]
    assert not bad, f"Celery( outside tasks/: {bad}"


def test_the_top_level_of_memworker_stays_small() -> None:
    top = sorted(p.name for p in (ROOT / "memworker").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, (
        f"{len(top)} modules at memworker/'s top level (at most {MAX_TOP_LEVEL_MODULES}): put the new one in a package "
        f"(domain, api, cli, sleep, lifecycle, sessions, erase, models, storage, local); see docs/ARCHITECTURE.md. {top}"
    )


# storage's infrastructure: connections and transactions, migrations, replicas, the access
# buffer, the row -> JSON helper. Every other storage module runs statements: a query module.
STORAGE_INFRASTRUCTURE = {
    "memworker.storage",
    "memworker.storage.db",
    "memworker.storage.migrate",
    "memworker.storage.replicas",
    "memworker.storage.bumps",
    "memworker.storage.rows",
    "memworker.storage.redis_keys",
}
ENTRY_POINT_PACKAGES = ("memworker.api", "memworker.cli", "tasks")


def _query_module(module: str) -> bool:
    """Storage's shared query modules, and a capability's own statements (<capability>.queries)."""
    return (_within(module, "memworker.storage") and module not in STORAGE_INFRASTRUCTURE) or module.endswith(
        ".queries"
    )


def test_entry_points_import_no_query_module() -> None:
    """The API, the CLI, the console and the Celery tasks reach the data through a capability's
    service; they may open a transaction or migrate, never run a statement themselves."""
    bad = [
        f"{i.importer} (line {i.line}) imports {i.imported}"
        for i in imports()
        if any(_within(i.importer, entry) for entry in ENTRY_POINT_PACKAGES) and _query_module(i.imported)
    ]
    assert not bad, "entry points importing a query module (call a service instead):\n" + "\n".join(bad)


def test_services_import_no_entry_point() -> None:
    bad = [
        f"{i.importer} (line {i.line}) imports {i.imported}"
        for i in imports()
        if i.importer.endswith(".service") and any(_within(i.imported, entry) for entry in ENTRY_POINTS)
    ]
    assert not bad, "services importing an entry point:\n" + "\n".join(bad)


def test_redis_keys_are_named_in_one_place() -> None:
    """Every Redis key's shape lives in memworker/storage/redis_keys.py (storage/db.py's
    advisory-lock names are Postgres's, not Redis's)."""
    here = {"memworker.storage.redis_keys", "memworker.storage.db"}
    bad = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for name, path in modules().items()
        if name not in here
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("memworker:")
        and node.value[len("memworker:") : len("memworker:") + 1].isalpha()
    ]
    assert not bad, f"a Redis key spelled outside memworker/storage/redis_keys.py: {bad}"


# Process-wide registries: one connection pool and one loaded model per process, built after a
# fork (a Celery child must not share its parent's sockets). Every other cache or state belongs
# to an object its owner holds (runtime.Resources, a service's caller).
PROCESS_REGISTRIES = {
    "memworker.runtime._by_pid",
    "memworker.runtime._pools",
    "memworker.models.embeddings._shared",
}
_MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter"}


def module_state() -> list[str]:
    """Module-level names bound to a mutable container in library code (entry points aside);
    UPPER_CASE names are constant tables by this code base's convention."""
    found = []
    for name, path in modules().items():
        if any(_within(name, entry) for entry in ENTRY_POINTS):
            continue
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            if not isinstance(target, ast.Name) or target.id.isupper() or target.id.startswith("__") or value is None:
                continue
            call = value.func if isinstance(value, ast.Call) else None
            if isinstance(value, ast.Dict | ast.List | ast.Set) or (
                call is not None and getattr(call, "id", getattr(call, "attr", None)) in _MUTABLE_CALLS
            ):
                found.append(f"{name}.{target.id}")
    return found


def test_library_code_keeps_no_module_level_state_but_the_process_registries() -> None:
    extra = sorted(set(module_state()) - PROCESS_REGISTRIES)
    assert not extra, f"module-level mutable state (hold it in an object its owner keeps): {extra}"
