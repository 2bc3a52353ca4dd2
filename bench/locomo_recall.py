"""LoCoMo turn-level recall: the quality gate for memworker's default recall configuration.

Run:  python bench/locomo_recall.py  [--api-url URL --api-key KEY] [--conversations N]

Without --api-url it starts `memworker up` on a temporary data dir and free ports, and stops
it at the end. It loads /work/shared/benchdata/locomo/locomo10.json (10 conversations), writes
every dialog turn as one memory of its own agent per conversation (text "Speaker: text",
plus " [image: caption]" when the turn shared a photo, clipped to 280 characters; metadata
{dia_id, speaker, session_date}), then asks every category 1-4 question that has evidence
through the public API (recall, k=10, explain=True). Each recall bumps the access counts of
what it returns, as in production.

In the same run it ranks exactly the same texts, per conversation, with four in-process
baselines: plain BM25 (Lucene IDF, k1=1.2, b=0.75, lowercase \\w+ tokens, no stemming),
MiniLM dense cosine, RRF of the two (k=60) and a 0.5/0.5 weighted sum of min-max normalised
scores.

It prints a markdown table (system x R@5, R@10, NDCG@10 for categories 1-4 together and per
category), the published reference baselines, and writes the same report to
bench/results/locomo_recall.md (keeping that file's "What we tried" section)."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from memworker import Client
from memworker.domain.memories import clip
from memworker.domain.policy import Policy

DATA = Path("/work/shared/benchdata/locomo/locomo10.json")
RESULTS = Path(__file__).resolve().parent / "results" / "locomo_recall.md"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
K = 10
REFERENCE = {  # published turn-level baselines, categories 1-4: (R@5, R@10)
    "BM25": (0.439, 0.518),
    "MiniLM dense": (0.350, 0.439),
    "RRF (k=60)": (0.462, 0.564),
    "weighted sum 0.5/0.5": (0.512, 0.598),
}
TRIED_MARK = "## What we tried"
EMBED_CACHE = Path(tempfile.gettempdir()) / "memworker-bench-embeddings"


# --- data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # the memory text, the same for every system
    session_date: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped_ids: list[str] = field(default_factory=list)  # malformed or unknown evidence ids
    no_evidence: int = 0  # category 1-4 questions that come without evidence
    skipped_questions: int = 0  # category 1-4 questions left without evidence once ids are checked


def memory_text(turn: dict[str, Any]) -> str:
    """What was said, by whom, and the caption of a shared photo; clipped to the API limit."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    return clip(text)


def _turns(conv: dict[str, Any]) -> list[Turn]:
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conv
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conv[key], list)
    )
    out = []
    for n, key in sessions:
        date = str(conv.get(f"session_{n}_date_time", ""))
        for t in conv[key]:
            out.append(Turn(t["dia_id"], t["speaker"], memory_text(t), date))
    return out


def _conversation(raw: dict[str, Any]) -> Conversation:
    turns = _turns(raw["conversation"])
    known = {t.dia_id for t in turns}
    conv = Conversation(str(raw["sample_id"]), turns, [])
    for qa in raw["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        if not qa.get("evidence"):
            conv.no_evidence += 1
            continue
        evidence = tuple(dict.fromkeys(e for e in qa["evidence"] if e in known))
        conv.skipped_ids += [e for e in qa["evidence"] if e not in known]
        if not evidence:
            conv.skipped_questions += 1
            continue
        conv.questions.append(Question(qa["question"], int(qa["category"]), evidence))
    return conv


def load_locomo(path: Path = DATA, limit: int | None = None) -> list[Conversation]:
    raw = json.loads(path.read_text())
    return [_conversation(c) for c in raw[:limit]]


# --- metrics ----------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


def ndcg_at(ranked: Sequence[str], evidence: Sequence[str], k: int = K) -> float:
    gold = set(evidence)
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal


Scores = dict[str, float]  # metric name -> mean


def summarise(rankings: list[list[str]], questions: list[Question]) -> dict[str, Scores]:
    """{'all': {...}, 'cat1': {...}, ...} of R@5, R@10, NDCG@10 (and n)."""
    groups: dict[str, list[tuple[list[str], Question]]] = {"all": []}
    for ranked, q in zip(rankings, questions, strict=True):
        groups["all"].append((ranked, q))
        groups.setdefault(f"cat{q.category}", []).append((ranked, q))
    out = {}
    for name, items in groups.items():
        out[name] = {
            "R@5": float(np.mean([recall_at(r, q.evidence, 5) for r, q in items])),
            "R@10": float(np.mean([recall_at(r, q.evidence, 10) for r, q in items])),
            "NDCG@10": float(np.mean([ndcg_at(r, q.evidence) for r, q in items])),
            "n": len(items),
        }
    return out


# --- baselines --------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def simple_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    """Plain Okapi BM25 with Lucene's IDF over one conversation's turns."""

    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.tfs = [Counter(d) for d in docs]
        self.lens = np.array([len(d) for d in docs], dtype=np.float64)
        self.avgdl = float(self.lens.mean()) if docs else 0.0
        df = Counter(t for tf in self.tfs for t in tf)
        n = len(docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: list[str]) -> np.ndarray:
        out = np.zeros(len(self.tfs))
        norm = self.k1 * (1 - self.b + self.b * self.lens / self.avgdl)
        for term in set(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self.tfs], dtype=np.float64)
            out += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def rrf(bm25: np.ndarray, dense: np.ndarray, k: int = 60) -> np.ndarray:
    """Reciprocal rank fusion; BM25 lists only documents sharing a term with the query."""
    out = np.zeros(len(dense))
    for scores, mask in ((bm25, bm25 > 0), (dense, np.ones(len(dense), dtype=bool))):
        order = [i for i in np.argsort(-scores, kind="stable") if mask[i]]
        for rank, i in enumerate(order):
            out[i] += 1 / (k + rank + 1)
    return out


def top_ids(scores: np.ndarray, ids: list[str], k: int = K) -> list[str]:
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


BASELINES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "BM25": lambda b, d: b,
    "MiniLM dense": lambda b, d: d,
    "RRF (k=60)": rrf,
    "weighted sum 0.5/0.5": lambda b, d: 0.5 * minmax(b) + 0.5 * minmax(d),
}


def model_path() -> str:
    from memworker.settings import Settings

    return Settings().embedding_model


def embed_cached(texts: list[str], use_cache: bool = True) -> np.ndarray:
    """MiniLM vectors of texts (unit length), cached on disk by model and texts: the model is
    deterministic, and reruns on a busy 2-core machine should not pay for them twice."""
    from memworker.models import embeddings

    key = hashlib.sha256("\x00".join([model_path(), *texts]).encode()).hexdigest()[:20]
    path = EMBED_CACHE / f"{key}.npy"
    if use_cache and path.exists():
        cached: np.ndarray = np.load(path)
        return cached
    vecs = embeddings.load(model_path()).embed(texts)
    if use_cache:
        EMBED_CACHE.mkdir(parents=True, exist_ok=True)
        np.save(path, vecs)
    return vecs


def bar(**kwargs: object) -> tqdm:
    """A progress bar that redraws less often when stderr is a log file, not a terminal."""
    return tqdm(mininterval=0.2 if sys.stderr.isatty() else 15, **kwargs)


def run_baselines(convs: list[Conversation], use_cache: bool = True) -> dict[str, list[list[str]]]:
    """Each baseline's top-10 dia_ids per question, in question order."""
    out: dict[str, list[list[str]]] = {name: [] for name in BASELINES}
    n_turns = sum(len(c.turns) for c in convs)
    with bar(total=n_turns, desc="baselines: embed turns", unit="turn") as b:
        doc_vecs = []
        for c in convs:
            doc_vecs.append(embed_cached([t.text for t in c.turns], use_cache))
            b.update(len(c.turns))
    for c, vecs in bar(iterable=list(zip(convs, doc_vecs)), desc="baselines: ask", unit="conv"):
        ids = [t.dia_id for t in c.turns]
        bm25 = BM25([simple_tokens(t.text) for t in c.turns])
        qvecs = embed_cached([q.text for q in c.questions], use_cache)
        for q, qv in zip(c.questions, qvecs):
            b, d = bm25.scores(simple_tokens(q.text)), vecs @ qv
            for name, fuse in BASELINES.items():
                out[name].append(top_ids(fuse(b, d), ids))
    return out


# --- memworker through its API ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def memworker_stack(keep: bool = False) -> Iterator[Callable[[], tuple[str, str]]]:
    """Start `memworker up` on a temporary data dir; yield a function that waits until it
    is up and returns (api_url, api_key); stop it on exit."""
    data_dir = Path(tempfile.mkdtemp(prefix="bench-locomo-"))
    argv = [
        "memworker",
        "--data-dir",
        str(data_dir),
        "up",
        "--port",
        str(free_port()),
        "--flower-port",
        str(free_port()),
    ]
    log = open(data_dir / "up.log", "w+b")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield lambda: _wait_up(proc, data_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)


def _wait_up(proc: subprocess.Popen[bytes], data_dir: Path, timeout: float = 240) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    path = data_dir / "up.log"
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace")
        if "memworker is up" in text:
            stack = json.loads((data_dir / "stack.json").read_text())
            return stack["api_url"], (data_dir / "dev-api-key").read_text().strip()
        if proc.poll() is not None:
            raise RuntimeError(f"memworker up exited with {proc.returncode}:\n{text}")
        time.sleep(0.5)
    raise RuntimeError(f"memworker up did not come up in {timeout:.0f}s; see {path}")


def agent_id(conv: Conversation, suffix: str) -> str:
    return f"locomo-{conv.sample_id}-{suffix}"


def load_memworker(client: Client, convs: list[Conversation], suffix: str, batch: int = 500) -> None:
    n_turns = sum(len(c.turns) for c in convs)
    with bar(total=n_turns, desc="memworker: load turns", unit="turn") as b:
        for c in convs:
            for i in range(0, len(c.turns), batch):
                chunk = c.turns[i : i + batch]
                client.add_memories(
                    agent_id(c, suffix),
                    [
                        {
                            "text": t.text,
                            "kind": "event",
                            "metadata": {"dia_id": t.dia_id, "speaker": t.speaker, "session_date": t.session_date},
                        }
                        for t in chunk
                    ],
                )
                b.update(len(chunk))


Rankings = list[list[str]]  # top-10 dia_ids per question, in question order


def ask_memworker(client: Client, convs: list[Conversation], suffix: str) -> tuple[Rankings, list[float]]:
    """Top-10 dia_ids per question (question order) and the server's took_ms per recall."""
    rankings, took = [], []
    with bar(total=sum(len(c.questions) for c in convs), desc="memworker: ask", unit="q") as b:
        for c in convs:
            for q in c.questions:
                res = client.recall(agent_id(c, suffix), q.text, k=K, explain=True)
                rankings.append([m["metadata"]["dia_id"] for m in res["memories"]])
                took.append(float(res["took_ms"]))
                b.update()
    return rankings, took


def run_memworker(convs: list[Conversation], api_url: str, api_key: str) -> tuple[Rankings, list[float]]:
    suffix = time.strftime("%Y%m%d%H%M%S") + f"-{os.getpid()}"
    client = Client(api_url, api_key, timeout=120)
    try:
        load_memworker(client, convs, suffix)
        return ask_memworker(client, convs, suffix)
    finally:
        client.close()


# --- report -----------------------------------------------------------------------------


def table(results: dict[str, dict[str, Scores]]) -> str:
    groups = ["all"] + [f"cat{c}" for c in CATEGORIES]
    head = ["system"] + [f"{_label(g)} {m}" for g in groups for m in ("R@5", "R@10", "NDCG@10")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, res in results.items():
        cells = [f"{res[g][m]:.3f}" if g in res else "-" for g in groups for m in ("R@5", "R@10", "NDCG@10")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _label(group: str) -> str:
    return "cat 1-4" if group == "all" else f"{group[3:]} {CATEGORIES[int(group[3:])]}"


def reference_table() -> str:
    lines = ["| system (published) | cat 1-4 R@5 | cat 1-4 R@10 |", "|---|---|---|"]
    lines += [f"| {name} | {r5:.3f} | {r10:.3f} |" for name, (r5, r10) in REFERENCE.items()]
    return "\n".join(lines)


def report(results: dict[str, dict[str, Scores]], convs: list[Conversation], took: list[float], elapsed: float) -> str:
    n_q = sum(len(c.questions) for c in convs)
    counts = ", ".join(
        f"cat {c}: {results['memworker']['cat' + str(c)]['n']}" for c in CATEGORIES if f"cat{c}" in results["memworker"]
    )
    skipped_ids = [e for c in convs for e in c.skipped_ids]
    p = Policy()
    return "\n".join(
        [
            "# LoCoMo turn-level recall (memworker vs baselines)",
            "",
            f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns (one memory each), "
            f"{n_q} questions of categories 1-4 with evidence ({counts}); "
            f"{len(skipped_ids)} malformed/unknown evidence ids skipped "
            f"({', '.join(map(repr, skipped_ids))}), "
            f"questions skipped: {sum(c.no_evidence for c in convs)} without evidence, "
            f"{sum(c.skipped_questions for c in convs)} left without valid evidence.",
            f"Memory text: `Speaker: text` (+ ` [image: caption]`), clipped to 280 chars; k={K}. "
            f"Recall latency (server took_ms): median {np.median(took):.1f} ms, p95 "
            f"{np.percentile(took, 95):.1f} ms. Run time {elapsed:.0f} s (load average at the end "
            f"{os.getloadavg()[1]:.1f} on {os.cpu_count()} CPUs; latency and time depend on it).",
            f"memworker defaults: bm25 weight {p.recall_bm25_weight}, vector weight "
            f"{p.recall_vector_weight}, prior weight {p.recall_prior_weight}, vector floor "
            f"{p.recall_vector_floor}, candidates {p.recall_candidates}.",
            "",
            table(results),
            "",
            "Published reference baselines (for comparison):",
            "",
            reference_table(),
            "",
        ]
    )


def write_results(text: str, path: Path = RESULTS) -> None:
    """Replace the measured part of the results file; keep its 'What we tried' section."""
    tried = ""
    if path.exists():
        old = path.read_text()
        if TRIED_MARK in old:
            tried = old[old.index(TRIED_MARK) :]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + ("\n" + tried if tried else ""))


# --- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--api-url", help="use a running memworker instead of starting one")
    ap.add_argument("--api-key", help="API key for --api-url")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--conversations", type=int, help="only the first N conversations (quick runs)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="markdown report to write")
    ap.add_argument("--keep-data-dir", action="store_true", help="keep the temporary stack's data dir")
    ap.add_argument(
        "--no-cache", action="store_true", help=f"re-embed the baselines' texts instead of using {EMBED_CACHE}"
    )
    args = ap.parse_args(argv)
    if bool(args.api_url) != bool(args.api_key):
        ap.error("--api-url and --api-key go together")
    started = time.monotonic()
    convs = load_locomo(args.data, args.conversations)
    questions = [q for c in convs for q in c.questions]
    given = (args.api_url, args.api_key)
    stack = contextlib.nullcontext(lambda: given) if args.api_url else memworker_stack(keep=args.keep_data_dir)
    with stack as wait_up:
        baseline_rankings = run_baselines(convs, not args.no_cache)  # while the stack starts
        mw_rankings, took = run_memworker(convs, *wait_up())
    results = {"memworker": summarise(mw_rankings, questions)}
    results |= {name: summarise(r, questions) for name, r in baseline_rankings.items()}
    text = report(results, convs, took, time.monotonic() - started)
    print(text)
    write_results(text, args.out)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
