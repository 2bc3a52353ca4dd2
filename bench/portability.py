"""Export and import (docs/export.md): how fast a memworker export is restored and exported,
each as a ratio to the direct batch-write rate (POST .../memories/batch) measured in the same
run, and the API process's resident memory while it exports and restores agents of growing size.

Run:  python bench/portability.py                             # N=2000, RSS at 2,000 and 10,000
      python bench/portability.py --n 5000 --memories 10000,100000

It starts `memworker up` (1 worker, one API process, rate limits raised) on a temporary data dir.
  baseline  --n memories written by POST .../memories/batch, 500 a call (memories/s: embedding,
            redaction, governance, postings);
  export    the same agent exported with ?embeddings=true (memories/s, streamed to nothing);
  restore   that file imported into another agent (memories/s, vectors taken from the file);
  memory    for each --memories size an agent is filled by restoring a generated export (random
            unit vectors, realistic sentences), then exported with embeddings; the API process's
            peak RSS (sampled from /proc every 20 ms) during each restore and export.
Targets: restore >= 10 x batch-write, export >= 50 x batch-write, peak RSS flat across sizes
(the largest size's peak within 1.25 x the smallest's). Writes bench/results/portability.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
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
    RAISED_LIMITS,
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

BATCH = 500


def api_pids(stack: Stack) -> list[int]:
    """The API processes of the stack we started (memworker.api.serve on its port)."""
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
    return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRss:
    """The peak RSS of some processes while a block runs, sampled every 20 ms."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak, self._stop = pids, 0.0, threading.Event()

    def __enter__(self) -> PeakRss:
        self.before = sum(rss_mb(p) for p in self.pids)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(rss_mb(p) for p in self.pids))
            time.sleep(0.02)

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self.thread.join()


def batch_write(http: httpx.Client, agent: str, texts: list[str]) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        r = http.post(
            f"/v1/agents/{agent}/memories/batch", json={"memories": [{"text": t} for t in texts[i : i + BATCH]]}
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


def synthetic_export(path: Path, n: int, model: str, seed: int) -> None:
    """A memworker export of n memories: sentences from TextMaker, random unit vectors."""
    texts, rng = TextMaker(seed), np.random.default_rng(seed)
    now = datetime.now(UTC).isoformat()
    with path.open("w") as f:
        header = {"format": "memworker-export", "version": 1, "agent": "synthetic", "subject": None, "model": model}
        header |= {"dim": 384, "embeddings": True, "embedding_encoding": "f32le-base64", "exported_at": now}
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
                "embedding": base64.b64encode(v.tobytes()).decode(),
            }  # fmt: skip
            f.write(json.dumps(line) + "\n")
        f.write(json.dumps({"type": "end", "counts": {"memory": n}}) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="memories of the rate comparison (default 2000)")
    ap.add_argument("--memories", default="2000,10000", help="agent sizes of the memory check (default 2000,10000)")
    add_stack_args(ap)
    args = ap.parse_args()
    sizes = [int(s) for s in args.memories.split(",")]
    load = loadavg()
    os.environ.setdefault("MEMWORKER_API_WORKERS", "1")
    stack = start_stack(1, raise_limits=True, env={**RAISED_LIMITS, "MEMWORKER_API_WORKERS": "1"})
    tmp = Path(tempfile.mkdtemp(prefix="memworker-portability-"))
    try:
        http = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=None)
        pids = api_pids(stack)
        print(f"API processes: {pids}", flush=True)
        rates, report = _rates(http, args.n, tmp)
        memory = _memory(http, pids, sizes, tmp, report["model"])
    finally:
        stop_stack(stack, keep=args.keep)
    text = _report(args, rates, memory, environment_note(load, command_line(), stack))
    print(text)
    print(f"report: {write_report('portability.md', text)}")
    return 0


def _rates(http: httpx.Client, n: int, tmp: Path) -> tuple[dict[str, float], dict[str, Any]]:
    maker = TextMaker(7)
    texts = [maker.sentence() for _ in range(n)]
    write_s = batch_write(http, "baseline", texts)
    print(f"batch write: {n} in {write_s:.1f}s = {n / write_s:.0f}/s", flush=True)
    path = tmp / "baseline.ndjson"
    export_s, size = export_to(http, "baseline", path)
    print(f"export: {n} in {export_s:.2f}s ({size / 1e6:.1f} MB)", flush=True)
    restore_s, report = restore(http, "restored", path)
    assert report["memories_written"] == n and report["reembedded"] == 0, report
    print(f"restore: {n} in {restore_s:.2f}s", flush=True)
    header = json.loads(path.open().readline())
    return {"write": n / write_s, "export": n / export_s, "restore": n / restore_s, "n": n, "mb": size / 1e6}, header


def _memory(http: httpx.Client, pids: list[int], sizes: list[int], tmp: Path, model: str) -> list[dict[str, float]]:
    rows = []
    for size in sizes:
        path = tmp / f"synthetic-{size}.ndjson"
        synthetic_export(path, size, model, seed=size)
        agent = f"big-{size}"
        with PeakRss(pids) as r_in:
            restore_s, _ = restore(http, agent, path)
        path.unlink()
        with PeakRss(pids) as r_out:
            export_s, nbytes = export_to(http, agent, None)
        print(f"size {size}: restore {restore_s:.1f}s peak {r_in.peak:.0f} MB; export {export_s:.1f}s peak "
              f"{r_out.peak:.0f} MB", flush=True)  # fmt: skip
        rows.append({"size": size, "before": r_in.before, "restore_peak": r_in.peak, "restore_rate": size / restore_s,
                     "export_peak": r_out.peak, "export_rate": size / export_s, "mb": nbytes / 1e6})  # fmt: skip
    return rows


def _report(args: argparse.Namespace, rates: dict[str, float], memory: list[dict[str, float]], env: str) -> str:
    restore_x, export_x = rates["restore"] / rates["write"], rates["export"] / rates["write"]
    first, last = memory[0], memory[-1]
    flat = max(last["restore_peak"], last["export_peak"]) <= 1.25 * max(first["restore_peak"], first["export_peak"])
    rate_rows = [
        ["batch write (baseline)", fmt(rates["write"], 0), "1.0", ""],
        ["restore, with embeddings", fmt(rates["restore"], 0), fmt(restore_x), "met" if restore_x >= 10 else "NOT met"],
        ["export, with embeddings", fmt(rates["export"], 0), fmt(export_x), "met" if export_x >= 50 else "NOT met"],
    ]
    mem_rows = [
        [f"{m['size']:,}", fmt(m["before"], 0), fmt(m["restore_peak"], 0), fmt(m["restore_rate"], 0),
         fmt(m["export_peak"], 0), fmt(m["export_rate"], 0), fmt(m["mb"])]
        for m in memory
    ]  # fmt: skip
    return "\n\n".join(
        [
            "# Export and import (bench/portability.py)",
            f"Rates over {rates['n']:,} memories (the export file: {rates['mb']:.1f} MB), as a ratio to the "
            "direct batch-write rate of the same run. Targets: restore >= 10 x, export >= 50 x.",
            md_table(["path", "memories/s", "x batch write", "target"], rate_rows),
            "The API process's resident memory (MB) around a restore and an export with embeddings of an "
            f"agent of each size (the largest size's peak within 1.25 x the smallest's: {'flat' if flat else 'NOT flat'}). "
            f"Default sizes are small to keep the run short; `--memories 10000,100000` measures the brief's sizes.",
            md_table(
                ["memories", "RSS before", "peak restore", "restore/s", "peak export", "export/s", "file MB"], mem_rows
            ),
            env,
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
