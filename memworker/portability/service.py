"""Export and import's use cases (docs/export.md): what an export streams, and an import of a
memworker export (a restore, in one transaction), a plain JSONL of texts, LangGraph store items
or a Mem0 export (its get_all answers), each written through the memories capability's batch
write. The caller checks scopes and spools the body to a file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from memworker import errors
from memworker.memories import service as memories
from memworker.models import embeddings
from memworker.models.embeddings import Embedder
from memworker.portability import export, foreign, mem0, restore
from memworker.portability import format as fmt
from memworker.schemas import ImportReport, MemoryIn
from memworker.settings import Settings
from memworker.storage.db import Conn, Pool

# One transaction bound to the caller's tenant, as the entry point opens it.
Transaction = Callable[[], AbstractContextManager[Conn]]


def model(settings: Settings) -> tuple[str, int]:
    """This server's embedding model: its name and dimension."""
    return fmt.model_name(settings.embedding_model), embeddings.SCHEMA_DIM


def agent_export(pool: Pool, settings: Settings, *, tenant_id: UUID, agent_id: str, vectors: bool) -> Iterator[bytes]:
    """Everything the agent holds, as NDJSON lines, page by page."""
    name, dim = model(settings)
    return export.lines(pool, export.Spec(tenant_id, agent_id, None, vectors, name, dim))


def subject_export(
    pool: Pool, settings: Settings, *, tenant_id: UUID, subject: str, vectors: bool, agents: frozenset[str] | None
) -> Iterator[bytes]:
    """One subject's memories, episodes and sessions across the tenant's agents (those of
    `agents`, when given), as NDJSON lines."""
    name, dim = model(settings)
    return export.lines(pool, export.Spec(tenant_id, None, subject, vectors, name, dim, agents=agents))


def import_file(
    path: Path,
    forced: str,
    *,
    tenant_id: UUID,
    agent_id: str,
    settings: Settings,
    embedder: Embedder,
    transaction: Transaction,
) -> ImportReport:
    """Import a file: a memworker export restored in one transaction, any other format (told
    by its start when forced is "auto") written in batches. Every line (a Mem0 file's every
    memory) is checked first: InvalidInput names the first bad one, and nothing is written."""
    kind = restore.sniff(path) if forced == "auto" else forced
    if kind == restore.MEMWORKER:
        header = restore.check(path)
        name, dim = model(settings)
        target = restore.Target(tenant_id, agent_id, embedder, name, dim)
        with transaction() as conn:
            counts = restore.restore(conn, target, path, header)
        return _report(kind, path, counts)
    return _write_foreign(
        path,
        kind,
        tenant_id=tenant_id,
        agent_id=agent_id,
        settings=settings,
        embedder=embedder,
        transaction=transaction,
    )


def _report(kind: str, path: Path, counts: dict[str, int]) -> ImportReport:
    # a Mem0 file's "lines" are its memories (its answers may be pretty-printed)
    lines = sum(1 for _ in mem0.items(path)) if kind == restore.MEM0 else restore.count_lines(path)
    base = {"format": kind, "lines": lines, "memories_written": 0, "memories_existing": 0}
    return cast(ImportReport, base | {"reembedded": 0} | counts)  # and each record type's counts


def _bodies(settings: Settings, path: Path, kind: str) -> Iterator[MemoryIn]:
    """Each line (a Mem0 file's each memory) of a foreign file as a write; InvalidInput names
    the first one that is not."""
    if kind == restore.MEM0:
        for where, obj in mem0.items(path):
            yield _body(settings, mem0.memory, obj, where)
        return
    make = foreign.langgraph if kind == restore.LANGGRAPH else foreign.plain
    for n, obj in restore.numbered(path):
        try:
            yield _body(settings, make, obj, "")
        except errors.InvalidInput as exc:
            raise restore.LineError(n, str(exc)) from None


def _body(settings: Settings, make: Callable[[Any], MemoryIn], obj: Any, where: str) -> MemoryIn:
    try:
        body = make(obj)
        memories.check_metadata(settings, body.metadata)
    except (ValueError, errors.InvalidInput) as exc:
        raise errors.InvalidInput(f"{where}: {exc}" if where else str(exc)) from None
    return body


def _write_foreign(
    path: Path,
    kind: str,
    *,
    tenant_id: UUID,
    agent_id: str,
    settings: Settings,
    embedder: Embedder,
    transaction: Transaction,
) -> ImportReport:
    """Every line checked (nothing written when one is wrong), then written in batches through
    the memories batch write: redaction, idempotency and governance as for any write. Each
    line's idempotency key makes a second import of the file write nothing."""
    for _ in _bodies(settings, path, kind):
        pass
    started = datetime.now(UTC)
    batch: list[MemoryIn] = []
    written = existing = 0

    def flush(batch: list[MemoryIn]) -> int:
        """Writes a batch; answers how many memories it made (the others were there already)."""
        checked = memories.checked(batch, settings=settings, embedder=embedder)
        with transaction() as conn:
            out = memories.write(conn, tenant_id=tenant_id, owner=agent_id, batch=checked, embedder=embedder)
        return len({m.id for m in out if m.created_at >= started})

    for body in _bodies(settings, path, kind):
        batch.append(body)
        if len(batch) == settings.max_batch:
            new = flush(batch)
            written, existing, batch = written + new, existing + len(batch) - new, []
    if batch:
        new = flush(batch)
        written, existing = written + new, existing + len(batch) - new
    return _report(kind, path, {"memories_written": written, "memories_existing": existing})
