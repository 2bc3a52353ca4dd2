"""Export and import (docs/export.md) at the sizes of a large agent, each rate a ratio to a
baseline measured in the same run against the same stack, through its HTTP API.

Run:  python bench/portability.py                                   # sizes 2,000 and 10,000
      python bench/portability.py --memories 10000,100000           # the brief's sizes

It starts `memworker up` (1 worker, default settings) on a temporary data dir, then:
  baseline  --n memories written by POST .../memories/batch, --batch a call (memories/s: embedding,
            redaction, governance, postings): the direct batch-write rate;
  embedder  the bare embedder, memworker.models.embeddings.for_settings(Settings()) (the API's
            model, backend, batch size and thread count), on --sample of the same sentences in
            batches of 64 while the stack is idle, before and after the sizes; the better run is
            the ceiling (as bench/ingest.py measures it);
  per size  a generated export (TextMaker sentences, random unit vectors) restored into a new
            agent (memories/s, vectors taken from the file); that agent exported with
            ?embeddings=true (memories/s, streamed to nothing); the same sentences in an export
            without vectors restored into another agent (memories/s, every text embedded by the
            API); the API processes' peak RSS (sampled from /proc every 20 ms) during each.
Targets, at the largest size: restore with embeddings >= 10 x batch write; restore without
embeddings >= 0.8 x the embedder's own rate; export >= 50 x batch write; the API's peak RSS flat
across sizes (the largest size's peak within 1.25 x the smallest's). Writes
bench/results/portability.md (or $MEMWORKER_BENCH_RESULTS/portability.md).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stack,
    TextMaker,
    add_stack_args,
    command_line,
    environment_note,
    fmt,
    loadavg,
    md_table,
    start_stack,
    stop_stack,
    write_report,
)

EMBED_BATCH = 64


def api_pids(stack: Stack) -> list[int]:
    """The API processes of the stack we started: memworker.api.serve on its port and the
    uvicorn processes it runs (one per core by default)."""
    import psutil

    port = stack.api_url.rsplit(":", 1)[1]
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "memworker.api.serve" in cmd and f"--port {port} " in cmd + " ":
            out.append(int(entry.name))
    return sorted({p for pid in out for p in [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]})


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The peak RSS of some processes while a block runs, sampled every 20 ms: their sum
    (peak), and the largest one process reaches (one_peak: the process serving the request)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak, self.one_peak, self._stop = pids, 0.0, 0.0, threading.Event()

    def __enter__(self) -> PeakRss:
        self.before = sum(rss_mb(p) for p in self.pids)
        self.one_before = max(rss_mb(p) for p in self.pids)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            each = [rss_mb(p) for p in self.pids]
            self.peak, self.one_peak = max(self.peak, sum(each)), max(self.one_peak, *each)
            time.sleep(0.02)

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self.thread.join()


def batch_write(http: httpx.Client, agent: str, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        r = http.post(
            f"/v1/agents/{agent}/memories/batch", json={"memories": [{"text": t} for t in texts[i : i + batch]]}
        )
        r.raise_for_status()
    return time.perf_counter() - started


def export_to(http: httpx.Client, agent: str, path: Path | None) -> tuple[float, int]:
    """(seconds, bytes) of an export with embeddings, to a file or to nothing."""
    started, size = time.perf_counter(), 0
    with http.stream("GET", f"/v1/agents/{agent}/export", params={"embeddings": "true"}) as r:
        r.raise_for_status()
        out = path.open("wb") if path else None
        for chunk in r.iter_bytes():
            size += len(chunk)
            if out:
                out.write(chunk)
        if out:
            out.close()
    return time.perf_counter() - started, size


def restore(http: httpx.Client, agent: str, path: Path) -> tuple[float, dict[str, Any]]:
    def body() -> Any:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                yield chunk

    started = time.perf_counter()
    r = http.post(f"/v1/agents/{agent}/import", content=body(), headers={"content-type": "application/x-ndjson"})
    r.raise_for_status()
    return time.perf_counter() - started, r.json()


def synthetic_export(path: Path, n: int, model: str, seed: int, *, vectors: bool = True) -> None:
    """A memworker export of n memories: sentences from TextMaker (the same for a seed), random
    unit vectors when `vectors`, else none (the import embeds each text)."""
    texts, rng = TextMaker(seed), np.random.default_rng(seed)
    now = datetime.now(UTC).isoformat()
    with path.open("w") as f:
        header = {"format": "memworker-export", "version": 1, "agent": "synthetic", "subject": None, "model": model}
        header |= {"dim": 384, "embeddings": vectors, "embedding_encoding": "f32le-base64", "exported_at": now}
        f.write(json.dumps(header) + "\n")
        for _ in range(n):
            v = rng.standard_normal(384).astype("<f4")
            v /= np.linalg.norm(v)
            text = texts.sentence()
            line = {
                "type": "memory", "id": str(uuid.uuid4()), "agent": "synthetic", "text": text, "kind": "fact",
                "tier": "L1", "salience": 0.5, "confidence": 0.7, "access_count": 0, "last_access_at": None,
                "created_at": now, "updated_at": now, "expires_at": None, "valid_from": now, "valid_to": None,
                "superseded_by": None, "consolidated_at": None, "session_id": None, "entities": [], "topics": [],
                "provenance": ["api"], "metadata": {}, "source_key": f"bench:{uuid.uuid4()}", "trust": "api",
                "flags": [], "confirmations": 0, "confirmed_at": None, "decayed_at": None, "subject": None,
                "carried_by": None, "parts": 1, "doc_len": len(text.split()),
                "events": [{"event": "created", "reason": "", "actor": "api", "related_ids": [], "created_at": now}],
            }  # fmt: skip
            if vectors:
                line["embedding"] = base64.b64encode(v.tobytes()).decode()
            f.write(json.dumps(line) + "\n")
        f.write(json.dumps({"type": "end", "counts": {"memory": n}}) + "\n")


def embedder_rate(texts: list[str]) -> float:
    """Texts/s of the bare embedder (the API's model, backend, batch size and threads), batches of 64."""
    from memworker.models.embeddings import for_settings
    from memworker.settings import Settings

    embedder = for_settings(Settings())
    embedder.embed(texts[:EMBED_BATCH])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(texts), EMBED_BATCH):
        embedder.embed(texts[i : i + EMBED_BATCH])
    return len(texts) / (time.perf_counter() - started)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="memories of the batch-write baseline (default 1000)")
    ap.add_argument("--memories", default="2000,10000", help="agent sizes (default 2000,10000)")
    ap.add_argument("--batch", type=int, default=100, help="memories per batch-write call (default 100)")
    ap.add_argument("--sample", type=int, default=3000, help="texts of the bare embedder's run (default 3000)")
    add_stack_args(ap)
    args = ap.parse_args()
    sizes = [int(s) for s in args.memories.split(",")]
    load = loadavg()
    stack = start_stack(1)
    tmp = Path(tempfile.mkdtemp(prefix="memworker-portability-"))
    maker = TextMaker(3)
    sample = [maker.sentence() for _ in range(args.sample)]
    try:
        http = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=None)
        pids = api_pids(stack)
        print(f"API processes: {pids}", flush=True)
        base = _baseline(http, args.n, args.batch, tmp)
        ceiling = [embedder_rate(sample)]
        print(f"bare embedder: {ceiling[0]:.0f} texts/s", flush=True)
        rows = [_size(http, pids, size, tmp, base["model"]) for size in sizes]
        ceiling.append(embedder_rate(sample))
        print(f"bare embedder again: {ceiling[1]:.0f} texts/s", flush=True)
    finally:
        stop_stack(stack, keep=args.keep)
    text = _report(base, ceiling, rows, environment_note(load, command_line(), stack))
    print(text)
    print(f"report: {write_report('portability.md', text)}")
    return 0


def _baseline(http: httpx.Client, n: int, batch: int, tmp: Path) -> dict[str, Any]:
    maker = TextMaker(7)
    texts = [maker.sentence() for _ in range(n)]
    write_s = batch_write(http, "baseline", texts, batch)
    print(f"batch write: {n} in {write_s:.1f}s = {n / write_s:.1f}/s", flush=True)
    path = tmp / "baseline.ndjson"
    export_to(http, "baseline", path)
    header = json.loads(path.open().readline())
    return {"write": n / write_s, "n": n, "batch": batch, "model": header["model"]}


def _size(http: httpx.Client, pids: list[int], size: int, tmp: Path, model: str) -> dict[str, float]:
    path = tmp / f"synthetic-{size}.ndjson"
    synthetic_export(path, size, model, seed=size)
    mb = path.stat().st_size / 1e6
    with PeakRss(pids) as r_in:
        restore_s, report = restore(http, f"big-{size}", path)
    assert report["memories_written"] == size and report["reembedded"] == 0, report
    path.unlink()
    with PeakRss(pids) as r_out:
        export_s, _ = export_to(http, f"big-{size}", None)
    synthetic_export(path, size, model, seed=size, vectors=False)
    with PeakRss(pids) as r_plain:
        plain_s, report = restore(http, f"plain-{size}", path)
    assert report["memories_written"] == size and report["reembedded"] == size, report
    path.unlink()
    row = {
        "size": size, "before": r_in.before, "mb": mb,
        "restore": size / restore_s, "restore_peak": r_in.peak,
        "export": size / export_s, "export_peak": r_out.peak,
        "plain": size / plain_s, "plain_peak": r_plain.peak,
        "one_before": r_in.one_before, "one_peak": max(r_in.one_peak, r_out.one_peak, r_plain.one_peak),
    }  # fmt: skip
    print(f"size {size}: restore {row['restore']:.0f}/s peak {r_in.peak:.0f} MB; export {row['export']:.0f}/s peak "
          f"{r_out.peak:.0f} MB; restore without vectors {row['plain']:.0f}/s peak {r_plain.peak:.0f} MB", flush=True)  # fmt: skip
    return row


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _report(base: dict[str, Any], ceiling: list[float], rows: list[dict[str, float]], env: str) -> str:
    write, embed = base["write"], max(ceiling)
    first, last = rows[0], rows[-1]
    peak = [r["one_peak"] for r in rows]
    flat = peak[-1] <= 1.25 * peak[0]
    big = f"{last['size']:,}"
    target_rows = [
        [f"restore of {big} with embeddings", fmt(last["restore"], 0), f"{last['restore'] / write:.1f} x batch write",
         ">= 10 x", _met(last["restore"] >= 10 * write)],
        [f"restore of {big} without embeddings", fmt(last["plain"], 0), f"{last['plain'] / embed:.2f} x the embedder",
         ">= 0.8 x", _met(last["plain"] >= 0.8 * embed)],
        [f"export of {big} with embeddings", fmt(last["export"], 0), f"{last['export'] / write:.1f} x batch write",
         ">= 50 x", _met(last["export"] >= 50 * write)],
        [f"API process peak RSS, {big} vs {first['size']:,}", f"{peak[-1]:.0f} vs {peak[0]:.0f} MB",
         f"{peak[-1] / peak[0]:.2f} x", "<= 1.25 x", _met(flat)],
    ]  # fmt: skip
    size_rows = [
        [f"{r['size']:,}", fmt(r["mb"]), fmt(r["restore"], 0), f"{r['restore'] / write:.1f}", fmt(r["export"], 0),
         f"{r['export'] / write:.1f}", fmt(r["plain"], 0), f"{r['plain'] / embed:.2f}", fmt(r["before"], 0),
         fmt(r["restore_peak"], 0), fmt(r["export_peak"], 0), fmt(r["plain_peak"], 0), fmt(r["one_before"], 0),
         fmt(r["one_peak"], 0)]
        for r in rows
    ]  # fmt: skip
    return "\n\n".join(
        [
            "# Export and import (bench/portability.py)",
            f"Baselines of the same run, same stack: the direct batch write (POST .../memories/batch, {base['batch']} a call) "
            f"wrote {base['n']:,} memories at {write:.1f}/s; the bare embedder ran at {embed:.0f} texts/s (the "
            f"better of {', '.join(f'{c:.0f}' for c in ceiling)}, before and after the sizes).",
            md_table(["target", "memories/s", "ratio", "target", ""], target_rows),
            "Every size (rates in memories/s; x: the ratio to the batch write, or to the embedder for the "
            "restore without vectors; RSS in MB: the API processes' sum (the serve process and its uvicorn "
            "processes) before the size's first restore and at its peak during each step, and the largest one "
            "process before and at its peak over the three steps, the figure the flatness target compares):",
            md_table(
                [
                    "memories",
                    "file MB",
                    "restore",
                    "x",
                    "export",
                    "x",
                    "restore w/o vectors",
                    "x embedder",
                    "RSS before",
                    "peak restore",
                    "peak export",
                    "peak restore w/o",
                    "1 process before",
                    "1 process peak",
                ],
                size_rows,
            ),  # fmt: skip
            env,
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
