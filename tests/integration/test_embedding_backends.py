"""The ONNX embedding backend against the torch one, on the real bundled model.

Exports once into a temporary cache (two processes racing for it), then checks that the
export is reused, that the vectors are the torch path's (cosine >= 0.9999 per row) and that
misconfiguration fails with the setting named. Nothing here is stored per tenant, so there
is no tenant isolation to check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memworker import errors
from memworker.models import embeddings
from memworker.models.onnx_embedder import OnnxEmbedder
from memworker.settings import Settings

MODEL = Settings().embedding_model

TEXTS = [
    "hi",
    "",
    "   ",
    "?",
    "ok",
    "The customer Alice prefers email over Slack for follow-ups.",
    "To fix the connection pool problem, run kubectl rollout restart and restart the billing service.",
    "我喜欢吃拉面，但是不喜欢寿司。",
    "东京的会议改到星期三下午三点。",
    "Émile a visité Zürich — naïve café ☕ 🚀",
    "Привет, как дела? Всё хорошо.",
    " ".join(f"word{i}" for i in range(600)),  # far past max_seq_length (256 tokens)
    "x" * 3000,
    "The deploy finished. " * 80,
    "tab\tseparated\nand\nnew lines",
]

# One process's first load, as a worker would do it; prints the file it uses and whether torch
# was imported (it must not be once the export is cached).
LOAD = """
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from pathlib import Path
from memworker.models.onnx_embedder import OnnxEmbedder
emb = OnnxEmbedder(sys.argv[1], threads=1, cache_dir=Path(sys.argv[2]))
assert emb.embed(["hello"]).shape == (1, 384)
print(emb.model_file, "torch" in sys.modules)
"""


def _start_load(cache: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", LOAD, MODEL, str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache exported by two processes starting together (as `memworker up` workers do)."""
    cache = tmp_path_factory.mktemp("onnx-cache")
    procs = [_start_load(cache), _start_load(cache)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    exports = sum(err.count("exporting the embedding model") for _, err in outs)
    assert exports == 1, [err for _, err in outs]
    assert len({out.split()[0] for out, _ in outs}) == 1  # both use the one file
    return cache


@pytest.fixture(scope="module")
def onnx(cache: Path) -> OnnxEmbedder:
    return OnnxEmbedder(MODEL, batch_size=4, threads=1, cache_dir=cache)  # small batches: reordering


@pytest.fixture(scope="module")
def torch_embedder() -> Any:
    return embeddings.load(MODEL, backend="torch")


def test_concurrent_first_loads_leave_one_complete_file(cache: Path) -> None:
    files = sorted(p.name for p in cache.iterdir())
    onnx_files = [f for f in files if f.endswith(".onnx")]
    assert len(onnx_files) == 1 and not [f for f in files if f.endswith(".tmp")], files
    assert (cache / onnx_files[0]).stat().st_size > 50_000_000  # the whole model, not a stub


def test_a_later_process_reuses_the_export_without_torch(cache: Path) -> None:
    (model_file,) = cache.glob("*.onnx")
    before = model_file.stat()
    proc = _start_load(cache)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "exporting" not in err
    assert out.split() == [str(model_file), "False"]  # same file, torch never imported
    after = model_file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_onnx_vectors_are_the_torch_vectors(onnx: OnnxEmbedder, torch_embedder: Any) -> None:
    assert onnx.dim == torch_embedder.dim == embeddings.SCHEMA_DIM
    ours, theirs = onnx.embed(TEXTS), torch_embedder.embed(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * theirs, axis=1)
    assert cosines.min() >= 0.9999, dict(zip(TEXTS, cosines.round(6)))
    # one at a time (the query path) gives the same rows as in a mixed-length batch
    singles = np.vstack([onnx.embed([t]) for t in TEXTS[:6] + TEXTS[11:13]])
    assert np.sum(singles * ours[[*range(6), 11, 12]], axis=1).min() >= 0.9999
    assert onnx.embed([]).shape == (0, 384)


def test_load_picks_the_backend_and_shares_the_instance(cache: Path) -> None:
    settings = Settings(embedding_backend="onnx", embedding_cache_dir=cache)
    emb = embeddings.for_settings(settings)
    assert isinstance(emb, OnnxEmbedder) and emb is embeddings.for_settings(settings)
    assert emb.model_file.parent == cache


def test_missing_onnxruntime_names_the_setting(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed
    with pytest.raises(errors.ConfigError, match="MEMWORKER_EMBEDDING_BACKEND"):
        OnnxEmbedder(MODEL, cache_dir=cache)


def test_unusable_cache_dir_names_the_setting(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(errors.ConfigError, match="MEMWORKER_EMBEDDING_CACHE_DIR"):
        OnnxEmbedder(MODEL, cache_dir=blocker / "cache")


def test_a_model_the_onnx_path_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "with-dense"
    model.mkdir()
    for item in Path(MODEL).iterdir():
        (model / item.name).symlink_to(item)
    (model / "modules.json").unlink()
    (model / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},'
        ' {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]'
    )
    with pytest.raises(errors.ConfigError, match="MEMWORKER_EMBEDDING_BACKEND=torch"):
        OnnxEmbedder(str(model), cache_dir=tmp_path / "cache")


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(errors.ConfigError, match="MEMWORKER_EMBEDDING_BACKEND"):
        Settings.from_env({"MEMWORKER_EMBEDDING_BACKEND": "tensorflow"})
    with pytest.raises(errors.ConfigError, match="MEMWORKER_EMBEDDING_BACKEND"):
        embeddings.load(MODEL, backend="tensorflow")
