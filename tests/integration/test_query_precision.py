"""Query embeddings with the int8 copy of the ONNX export (MEMWORKER_QUERY_EMBEDDING_PRECISION).

The copy is made once from the fp32 export into the cache folder and is close to it, not equal;
an API process configured for it embeds recall queries with it while the memories it stores
keep the fp32 model's vectors: a query whose text is a stored memory's finds it with a cosine
just under 1 (the default API: 1). Each tenant recalls only its own memories either way."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from memworker import errors
from memworker.models import embeddings, onnx_embedder
from memworker.models.onnx_embedder import OnnxEmbedder
from memworker.settings import Settings
from tests.conftest import start_api, stop_worker

MODEL = Settings().embedding_model
TEXTS = [
    "hi",
    "",
    "What did Caroline research after the support group?",
    "When did Melanie paint a sunrise?",
    "我喜欢吃拉面，但是不喜欢寿司。",
    "Émile a visité Zürich — naïve café ☕",
    " ".join(f"word{i}" for i in range(600)),  # past max_seq_length
]
STORED = "The billing service moved its nightly backup to the eu-west bucket on Tuesday."


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the fp32 export (copied from this machine's cache when it has one, so
    the test quantises without exporting again) and the int8 copy made from it."""
    cache = tmp_path_factory.mktemp("query-precision-cache")
    fp32 = OnnxEmbedder(MODEL, threads=1)  # the user's cache: exported there once if missing
    shutil.copy2(fp32.model_file, cache / fp32.model_file.name)
    OnnxEmbedder(MODEL, threads=1, cache_dir=cache, precision="int8")
    return cache


def test_the_int8_copy_is_made_once_and_close_to_the_fp32_vectors(cache: Path) -> None:
    names = sorted(p.name for p in cache.iterdir())
    models = [n for n in names if n.endswith(".onnx")]
    assert len(models) == 2 and not [n for n in names if n.endswith(".tmp")], names
    (int8_name,) = [n for n in models if f"-int8v{onnx_embedder.QUANTIZE_VERSION}" in n]
    before = (cache / int8_name).stat()
    int8 = OnnxEmbedder(MODEL, threads=1, cache_dir=cache, precision="int8")
    fp32 = OnnxEmbedder(MODEL, threads=1, cache_dir=cache)
    assert int8.model_file.name == int8_name and fp32.model_file != int8.model_file
    after = int8.model_file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # reused, not remade
    assert int8.model_file.stat().st_size < 0.7 * fp32.model_file.stat().st_size
    ours, theirs = int8.embed(TEXTS), fp32.embed(TEXTS)
    assert ours.shape == (len(TEXTS), embeddings.SCHEMA_DIM) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * theirs, axis=1)
    assert cosines.min() >= onnx_embedder.MIN_QUANTIZED_COSINE and cosines.max() < 0.99999, cosines
    single = int8.embed([TEXTS[2]])[0]
    assert float(single @ ours[2]) >= 0.9999  # alone as in a batch


def test_queries_take_the_copy_only_when_asked_and_build_it_on_first_use(cache: Path) -> None:
    base = Settings(embedding_cache_dir=cache)
    stored = embeddings.for_settings(base)
    assert base.query_precision == "int8"  # the default (auto) with the onnx backend
    assert embeddings.for_queries(base.replace(query_embedding_precision="fp32"), stored) is stored
    deferred = embeddings.for_queries(base, stored)
    assert isinstance(deferred, embeddings.DeferredEmbedder) and deferred.dim == stored.dim
    built = deferred.load()  # what an API process does at start; a worker never calls it
    assert isinstance(built, OnnxEmbedder) and built.precision == "int8" and built.model_file.parent == cache
    assert deferred.load() is built and embeddings.for_queries(base, stored).load() is built  # one per process
    np.testing.assert_array_equal(deferred.embed([TEXTS[3]]), built.embed([TEXTS[3]]))


def test_bad_precision_settings_name_the_setting() -> None:
    with pytest.raises(errors.ConfigError, match="MEMWORKER_QUERY_EMBEDDING_PRECISION"):
        Settings.from_env({"MEMWORKER_QUERY_EMBEDDING_PRECISION": "int4"})
    with pytest.raises(errors.ConfigError, match="MEMWORKER_QUERY_EMBEDDING_PRECISION=int8 needs"):
        Settings.from_env({"MEMWORKER_EMBEDDING_BACKEND": "torch", "MEMWORKER_QUERY_EMBEDDING_PRECISION": "int8"})
    assert Settings.from_env({"MEMWORKER_EMBEDDING_BACKEND": "torch"}).query_precision == "fp32"  # auto
    with pytest.raises(errors.ConfigError, match="MEMWORKER_QUERY_EMBEDDING_PRECISION"):
        OnnxEmbedder(MODEL, threads=1, precision="int4")


def _vector_signal(client: httpx.Client, agent: str, text: str) -> tuple[str, float]:
    r = client.post(f"/v1/agents/{agent}/recall", json={"query": text, "k": 3, "explain": True})
    assert r.status_code == 200, r.text
    top = r.json()["memories"][0]
    return top["text"], float(top["signals"]["vector"])


def test_an_int8_api_embeds_queries_with_the_copy_and_stores_fp32(
    stack: dict[str, Any], tenants: dict[str, dict[str, Any]], api: str, cache: Path
) -> None:
    settings = stack["settings"]
    proc, url = start_api(
        settings,
        "api-int8-queries",
        extra_env={"MEMWORKER_QUERY_EMBEDDING_PRECISION": "int8", "MEMWORKER_EMBEDDING_CACHE_DIR": str(cache)},
    )
    try:
        alice = {"Authorization": f"Bearer {tenants['alice']['key']}"}
        bob = {"Authorization": f"Bearer {tenants['bob']['key']}"}
        with httpx.Client(base_url=url, headers=alice, timeout=60) as int8_api:
            memories = [{"text": STORED}, {"text": "Lunch on Friday is at the ramen place near the office."}]
            r = int8_api.post("/v1/agents/ops/memories/batch", json={"memories": memories})
            assert r.status_code in (200, 201), r.text
            text, int8_cosine = _vector_signal(int8_api, "ops", STORED)
        with httpx.Client(base_url=api, headers=alice, timeout=60) as fp32_api:
            same, fp32_cosine = _vector_signal(fp32_api, "ops", STORED)
        # the int8 API stored the fp32 model's vector (the default API's query meets it at
        # cosine 1) and embedded its own query with the copy (close to it, not equal)
        assert text == same == STORED
        assert fp32_cosine > 0.9999 and 0.95 <= int8_cosine < 0.99999, (fp32_cosine, int8_cosine)
        with httpx.Client(base_url=url, headers=bob, timeout=60) as other_tenant:
            r = other_tenant.post("/v1/agents/ops/recall", json={"query": STORED, "k": 3})
            assert r.status_code in (200, 404), r.text
            assert STORED not in r.text
    finally:
        stop_worker(proc)
