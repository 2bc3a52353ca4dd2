"""The query embedder: concurrent misses share one model call, a lone one never waits,
hits never reach the model, and a model error reaches every caller of its batch."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from memworker.models.embeddings import CachedQueryEmbedder


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
