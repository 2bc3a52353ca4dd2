"""The query embedder: concurrent misses share one model call, a lone one never waits,
hits never reach the model, a model error reaches every caller of its batch, and a batch of
the real model gives each text the vector it gets alone."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from memworker.models.embeddings import CachedQueryEmbedder
from memworker.models.onnx_embedder import padding_chunks


class SlowModel:
    """Answers each text with [len(text), 0, 0, 1] after a pause, and records its batches."""

    dim = 4

    def __init__(self, pause_s: float = 0.05, fail: bool = False) -> None:
        self.pause_s = pause_s
        self.fail = fail
        self.batches: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        time.sleep(self.pause_s)
        if self.fail:
            raise RuntimeError("model down")
        return np.array([[len(t), 0, 0, 1] for t in texts], dtype=np.float32)


def _concurrently(q: CachedQueryEmbedder, texts: list[str]) -> dict[str, np.ndarray | Exception]:
    out: dict[str, np.ndarray | Exception] = {}

    def go(text: str) -> None:
        try:
            out[text] = q.embed_one(text)
        except Exception as exc:
            out[text] = exc

    threads = [threading.Thread(target=go, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_misses_share_model_calls_and_get_their_own_vectors() -> None:
    model = SlowModel()
    q = CachedQueryEmbedder(model, max_batch=8)
    texts = ["x" * n for n in range(1, 21)]
    out = _concurrently(q, texts)
    assert all(float(out[t][0]) == len(t) for t in texts)  # type: ignore[index]
    assert sorted(t for b in model.batches for t in b) == sorted(texts)  # each embedded once
    assert len(model.batches) < len(texts) and max(len(b) for b in model.batches) <= 8


def test_a_lone_query_is_embedded_at_once_and_a_hit_never_reaches_the_model() -> None:
    model = SlowModel(pause_s=0.0)
    q = CachedQueryEmbedder(model)
    q.embed_one("alone")
    assert model.batches == [["alone"]]
    q.embed_one("alone")
    assert model.batches == [["alone"]] and q.hits == 1 and q.misses == 1


def test_a_model_error_reaches_every_caller_of_its_batch_and_nothing_is_cached() -> None:
    model = SlowModel(fail=True)
    q = CachedQueryEmbedder(model)
    out = _concurrently(q, [f"q{i}" for i in range(6)])
    assert all(isinstance(v, RuntimeError) for v in out.values())
    model.fail = False
    assert float(q.embed_one("q1")[0]) == 2.0
    with pytest.raises(RuntimeError):
        model.fail = True
        q.embed_one("q2")


QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "What is Melanie's hobby?",
    "Why?",
    "What did Jon and Gina both lose their jobs to, and what did each of them decide to start "
    "afterwards in order to keep paying the rent on their apartments?",
    "Where did Maria travel in 2023 with her sister, and what did they eat on the first night there?",
    "Who?",
    "How many children does Melanie have?",
    "Would Caroline still want to pursue counseling as a career if she hadn't received support growing up?",
]


class Recording:
    """The real model behind a recorder of its batches; the first batch waits until `hold` more
    callers are queued behind it, so the next batch is sure to take them together."""

    def __init__(self, inner: Any, hold: int) -> None:
        self.inner, self.dim, self.hold = inner, inner.dim, hold
        self.batches: list[list[str]] = []
        self.queue: CachedQueryEmbedder | None = None

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.batches and self.queue is not None:
            deadline = time.monotonic() + 30
            while len(self.queue._queue) < self.hold and time.monotonic() < deadline:
                time.sleep(0.005)
        self.batches.append(list(texts))
        out: np.ndarray = self.inner.embed(texts)
        return out


def test_the_real_model_gives_a_batch_the_vectors_it_gives_each_text_alone(embedder: Any) -> None:
    alone = np.vstack([embedder.embed([t]) for t in QUESTIONS])
    together = embedder.embed(QUESTIONS)  # padded to the longest: the mask must keep the pads out
    assert together.shape == alone.shape
    assert float(np.abs(together - alone).max()) < 1e-5


def test_concurrent_callers_of_the_real_model_each_get_their_own_vector(embedder: Any) -> None:
    model = Recording(embedder, hold=len(QUESTIONS) - 1)
    q = CachedQueryEmbedder(model, max_batch=32)
    model.queue = q
    out = _concurrently(q, QUESTIONS)
    for text in QUESTIONS:
        got = out[text]
        assert isinstance(got, np.ndarray)
        assert float(np.abs(got - embedder.embed([text])[0]).max()) < 1e-5
    assert sorted(t for b in model.batches for t in b) == sorted(QUESTIONS)
    assert len(model.batches) == 2 and len(model.batches[1]) == len(QUESTIONS) - 1


def test_a_batch_cap_of_one_embeds_each_query_alone() -> None:
    model = SlowModel(pause_s=0.01)
    q = CachedQueryEmbedder(model, max_batch=1)
    texts = [f"q{i}" for i in range(6)]
    out = _concurrently(q, texts)
    assert all(float(out[t][0]) == len(t) for t in texts)  # type: ignore[index]
    assert sorted(model.batches) == [[t] for t in sorted(texts)]


def test_padding_chunks_cover_every_row_once_within_the_cap_and_split_long_from_short() -> None:
    lengths = [120, 118, 40, 14, 13, 12, 12, 11, 10, 9, 8, 8, 7, 6, 5, 4]
    for cap in (1, 3, 64):
        chunks = padding_chunks(lengths, cap)
        assert [s for s, _ in chunks] == [0] + [e for _, e in chunks[:-1]] and chunks[-1][1] == len(lengths)
        assert all(0 < e - s <= cap for s, e in chunks)
    chunks = padding_chunks(lengths, 64)
    assert (0, 2) in chunks and len(chunks) < len(lengths)  # the two long rows apart, the short ones together
    assert padding_chunks([], 8) == [] and padding_chunks([9] * 5, 64) == [(0, 5)]
