"""Embedding backends: torch (sentence-transformers) against onnx (onnxruntime on the ONNX
export of the same weights, memworker.models.onnx_embedder), measured in the same run.

Run:  python bench/embedding_backends.py                       # 1,000 texts, 300 queries, threads 1 and 2
      python bench/embedding_backends.py --texts 256 --queries 100 --rounds 2 --no-startup   # quicker

Method. Both embedders are the product's classes on the bundled all-MiniLM-L6-v2
(SentenceTransformerEmbedder and OnnxEmbedder, batch size 64), in this process, no stack.
The ONNX export is taken from the cache (MEMWORKER_EMBEDDING_CACHE_DIR or ~/.cache/memworker;
exported first if missing, and the time that took is reported). For each thread count in
--threads (the product's MEMWORKER_EMBEDDING_THREADS is 1; torch.set_num_threads for torch,
the session's intra-op threads for onnx):

1. single-query latency: --queries short recall-like queries (bench/_common.TextMaker, each
   one different, never seen before by either embedder), one embed([query]) call each;
   torch and onnx alternate query by query (and which goes first alternates), so the noise
   of a shared machine falls on both; p50/p95 of the wall time per call;
2. batch throughput: --texts realistic agent sentences embedded in calls of 64; --rounds
   rounds, each one pass per backend, the order alternating by round; texts/s per pass,
   the median pass reported (and the best);
3. identity: the per-row cosine between the two backends' vectors for every text and query.

Then, unless --no-startup: a fresh process per backend (alternating, --startup-runs each)
timed from launch to its first vector via memworker.models.embeddings.load (1 thread, the export
cached), with its peak RSS: what a worker or API process pays to start.

Ratios are onnx/torch: below 1 for latency and above 1 for throughput mean onnx is faster.
Prints markdown and writes bench/results/embedding_backends.md (--no-write: print only)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    TextMaker,
    command_line,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    progress,
    write_report,
)

BATCH = 64
BACKENDS = ("torch", "onnx")
STARTUP = """
import sys, time
from memworker.models import embeddings
emb = embeddings.load(sys.argv[1], 64, 1, backend=sys.argv[2], cache_dir=None if sys.argv[3] == '-' else sys.argv[3])
emb.embed(["the first vector"])
# VmHWM, not ru_maxrss: the latter keeps the forking parent's high-water mark across exec
hwm_kb = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(time.time(), hwm_kb, "torch" in sys.modules)
"""


@dataclass
class Figures:
    latency_ms: dict[str, list[float]] = field(default_factory=lambda: {b: [] for b in BACKENDS})
    rate: dict[str, list[float]] = field(default_factory=lambda: {b: [] for b in BACKENDS})
    cosines: list[float] = field(default_factory=list)


def unique_queries(n: int, seed: int) -> list[str]:
    maker, seen, out = TextMaker(seed), set(), []
    while len(out) < n:
        q = maker.query()
        while q in seen:  # the vocabulary is small: a ticket number keeps every query new
            q = f"{maker.query()} ticket {maker.rng.randint(1000, 99999)}"
        seen.add(q)
        out.append(q)
    return out


def measure(embedders: dict[str, Any], threads: int, queries: list[str], texts: list[str], rounds: int) -> Figures:
    import torch

    torch.set_num_threads(threads)  # the torch embedder's threads are the process's
    fig = Figures()
    for emb in embedders.values():  # warm-up: first calls allocate
        emb.embed(texts[:BATCH])
        emb.embed(["warm up"])
    vecs: dict[str, list[np.ndarray]] = {b: [] for b in BACKENDS}
    for i, q in enumerate(progress(queries, desc=f"single queries ({threads} thread(s))", unit="q")):
        for b in BACKENDS if i % 2 == 0 else BACKENDS[::-1]:
            t = time.perf_counter()
            v = embedders[b].embed([q])
            fig.latency_ms[b].append((time.perf_counter() - t) * 1000)
            vecs[b].append(v)
    for r in progress(range(rounds), desc=f"batch rounds ({threads} thread(s))", unit="round"):
        for b in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
            out = []
            t = time.perf_counter()
            for s in range(0, len(texts), BATCH):
                out.append(embedders[b].embed(texts[s : s + BATCH]))
            fig.rate[b].append(len(texts) / (time.perf_counter() - t))
            if r < 2:
                vecs[b] += out
    fig.cosines = np.sum(np.vstack(vecs["torch"]) * np.vstack(vecs["onnx"]), axis=1).tolist()
    return fig


def startup(model: str, cache_dir: str, runs: int) -> dict[str, list[tuple[float, float, bool]]]:
    """(seconds from launch to the first vector, peak RSS MB, torch imported) per fresh process."""
    out: dict[str, list[tuple[float, float, bool]]] = {b: [] for b in BACKENDS}
    for r in progress(range(runs), desc="fresh processes", unit="round"):
        for b in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
            t = time.time()
            done = subprocess.run(
                [sys.executable, "-c", STARTUP, model, b, cache_dir], capture_output=True, text=True, check=True
            )
            end, rss_kb, torch_loaded = done.stdout.split()
            out[b].append((float(end) - t, int(rss_kb) / 1024, torch_loaded == "True"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1000, help="texts for batch throughput")
    parser.add_argument("--queries", type=int, default=300, help="single queries per thread count")
    parser.add_argument("--rounds", type=int, default=8, help="batch passes per backend and thread count")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--startup-runs", type=int, default=3, help="fresh processes per backend")
    parser.add_argument("--no-startup", action="store_true", help="skip the fresh-process figures")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    load_before = loadavg()

    from memworker.models.embeddings import SentenceTransformerEmbedder
    from memworker.models.onnx_embedder import (
        OnnxEmbedder,
        default_cache_dir,
        ensure_exported,
        model_key,
        read_spec,
    )
    from memworker.settings import Settings

    settings = Settings.from_env(os.environ)
    model = settings.embedding_model
    cache_dir = settings.embedding_cache_dir or default_cache_dir()
    spec = read_spec(model)
    was_cached = (cache_dir / f"embedding-{model_key(spec)}.onnx").is_file()
    t = time.perf_counter()
    model_file = ensure_exported(spec, cache_dir)
    export_s = time.perf_counter() - t
    thread_counts = [int(x) for x in args.threads.split(",")]
    texts = [TextMaker(args.seed).sentence() for _ in range(args.texts)]
    all_queries = unique_queries(args.queries * len(thread_counts), args.seed + 1)
    torch_emb = SentenceTransformerEmbedder(model, batch_size=BATCH)
    results: dict[int, Figures] = {}
    for k, n in enumerate(thread_counts):
        onnx_emb = OnnxEmbedder(model, batch_size=BATCH, threads=n, model_file=model_file)
        results[n] = measure(
            {"torch": torch_emb, "onnx": onnx_emb},
            n,
            all_queries[k * args.queries : (k + 1) * args.queries],
            texts,
            args.rounds,
        )
    starts = None if args.no_startup else startup(model, str(settings.embedding_cache_dir or "-"), args.startup_runs)
    print(report(args, results, starts, model_file, export_s, was_cached, load_before))


def report(
    args: argparse.Namespace,
    results: dict[int, Figures],
    starts: Any,
    model_file: Path,
    export_s: float,
    was_cached: bool,
    load_before: str,
) -> str:
    rows, verdict = [], []
    for n, fig in results.items():
        lat = {b: (percentile(fig.latency_ms[b], 50), percentile(fig.latency_ms[b], 95)) for b in BACKENDS}
        rate = {b: statistics.median(fig.rate[b]) for b in BACKENDS}
        # each round ran the two passes back to back: their ratio cancels the machine's drift
        paired = statistics.median(o / t for o, t in zip(fig.rate["onnx"], fig.rate["torch"]))
        for b in BACKENDS:
            rows.append(
                [
                    n,
                    b,
                    fmt(lat[b][0], 2),
                    fmt(lat[b][1], 2),
                    fmt(rate[b]),
                    fmt(max(fig.rate[b])),
                    " ".join(f"{x:.0f}" for x in fig.rate[b]),
                ]
            )
        rows.append(
            [
                n,
                "**onnx/torch**",
                f"**{lat['onnx'][0] / lat['torch'][0]:.2f}**",
                f"**{lat['onnx'][1] / lat['torch'][1]:.2f}**",
                f"**{rate['onnx'] / rate['torch']:.2f}**",
                f"{max(fig.rate['onnx']) / max(fig.rate['torch']):.2f}",
                f"per round: {' '.join(f'{o / t:.2f}' for o, t in zip(fig.rate['onnx'], fig.rate['torch']))}"
                + f" (median **{paired:.2f}**)",
            ]
        )
        verdict.append(
            (n, lat["onnx"][0] < lat["torch"][0] and paired > 1 and rate["onnx"] > rate["torch"], min(fig.cosines))
        )
    text = [
        "# Embedding backends: torch against onnx",
        "",
        (
            f"all-MiniLM-L6-v2 (bundled), batch size {BATCH}; {args.queries} never-repeated single queries "
            f"per thread count (torch and onnx alternating query by query), {args.texts} sentences x "
            f"{args.rounds} rounds per backend for throughput (order alternating by round); seed {args.seed}."
        ),
        "",
        md_table(
            [
                "threads",
                "backend",
                "single query p50 (ms)",
                "p95 (ms)",
                "batch texts/s (median pass)",
                "best pass",
                "every pass (texts/s, by round)",
            ],
            rows,
        ),
        "",
        "Ratios are onnx/torch: below 1 for latency, above 1 for throughput mean onnx is faster.",
        "",
        md_table(
            [
                "threads",
                "onnx faster: single query p50, batch median pass and median round ratio",
                "min cosine onnx vs torch (every text and query)",
                "identical (>= 0.9999)",
            ],
            [
                [n, "yes" if faster else "no", f"{cos:.7f}", "yes" if cos >= 0.9999 else "no"]
                for n, faster, cos in verdict
            ],
        ),
        "",
    ]
    if starts:
        srows = []
        for b in BACKENDS:
            secs, rss, torch_loaded = zip(*starts[b])
            srows.append(
                [
                    b,
                    fmt(statistics.median(secs), 2),
                    fmt(statistics.median(rss), 0),
                    "yes" if any(torch_loaded) else "no",
                ]
            )
        text += [
            (
                "Fresh process, launch to first vector (embeddings.load, 1 thread, export cached), "
                f"median of {args.startup_runs}:"
            ),
            "",
            md_table(["backend", "seconds", "peak RSS (MB)", "imports torch"], srows),
            "",
        ]
    text += [
        f"- ONNX export: {model_file.name} in {model_file.parent} "
        + ("(already cached)" if was_cached else f"(exported in this run, {export_s:.1f} s)"),
        "",
        "## Environment",
        "",
        environment_note(load_before, command_line()),
    ]
    out = "\n".join(text)
    if not args.no_write:
        print(f"wrote {write_report('embedding_backends.md', out)}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
