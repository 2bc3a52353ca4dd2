"""Offline tuning harness for memworker's recall ranking on LoCoMo (not the quality gate).

Run:  python bench/locomo_tune.py [--split]

It reproduces the `recall` block of memworker/storage/queries/core.sql in numpy over the same memory
texts and questions as bench/locomo_recall.py (per-conversation BM25 with Lucene IDF over
memworker's tokenizer, exact cosine, the per-signal candidate pools, the vector floor, the
normalisation, the weighted fusion and the access-count prior, with each recall bumping
the access counts of its top 10 in question order), then prints R@5 / R@10 for a list of
configurations (one line each; --split also shows conversations 1-5 and 6-10 separately,
to see whether a choice holds on both halves). Embeddings are cached as in locomo_recall.py.
The final figures must come from bench/locomo_recall.py, through the API."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_recall as lr  # noqa: E402

from memworker.domain import tokens  # noqa: E402
from memworker.domain.policy import Policy  # noqa: E402

# Stop lists: "seed" is memworker's list before tuning (without the interrogatives),
# "current" is memworker.domain.tokens.STOP_WORDS as it is now, "seed+wh" adds the interrogatives to
# the seed list, and "extended" adds further general-English function words to that.
WH = frozenset(["how", "when", "where", "why", "whose"])
EXTENDED = frozenset(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "any",
        "because",
        "before",
        "below",
        "between",
        "both",
        "down",
        "during",
        "each",
        "few",
        "from",
        "further",
        "here",
        "how",
        "more",
        "most",
        "other",
        "out",
        "over",
        "own",
        "same",
        "some",
        "under",
        "until",
        "up",
        "when",
        "where",
        "why",
        "while",
        "whose",
        "again",
        "once",
        "only",
        "nor",
        "off",
    ]
)
SEED_STOP = tokens.STOP_WORDS - WH
STOP_LISTS = {
    "current": tokens.STOP_WORDS,
    "seed": SEED_STOP,
    "none": frozenset(),
    "seed+wh": SEED_STOP | WH,
    "extended": SEED_STOP | WH | EXTENDED,
}
_P = Policy()


@dataclass(frozen=True)
class Config:
    """Defaults: memworker's current defaults (policy.py, tokens.py, queries.sql)."""

    name: str = "current defaults"
    stem: bool = True
    stop: str = "current"  # a key of STOP_LISTS
    w_bm25: float = _P.recall_bm25_weight
    w_vector: float = _P.recall_vector_weight
    w_prior: float = _P.recall_prior_weight
    floor: float = _P.recall_vector_floor
    candidates: int = _P.recall_candidates
    bm25_norm: str = "max"  # max (bm25 / max) | minmax (over the relevant candidates)
    # minmax (over the relevant candidates) | raw | max (cos/max) | zscore
    # | floor ((cos-floor)/(max-floor))
    vector_norm: str = "minmax"
    fusion: str = "weighted"  # weighted | rrf
    k1: float = 1.2
    b: float = 0.75
    bump: bool = True


# --- tokenization variants --------------------------------------------------------------


def tokenizer(cfg: Config) -> Callable[[str], list[str]]:
    stop = STOP_LISTS[cfg.stop]

    def tok(text: str) -> list[str]:
        saved = tokens.STOP_WORDS
        tokens.STOP_WORDS = stop
        try:
            return tokens.tokenize(text, stem=cfg.stem)
        finally:
            tokens.STOP_WORDS = saved

    return tok


# --- data with cached embeddings --------------------------------------------------------


@dataclass
class Corpus:
    conv: lr.Conversation
    doc_vecs: np.ndarray
    q_vecs: np.ndarray


def load() -> list[Corpus]:
    convs = lr.load_locomo()
    return [
        Corpus(c, lr.embed_cached([t.text for t in c.turns]), lr.embed_cached([q.text for q in c.questions]))
        for c in convs
    ]


# --- the ranking, as in queries.sql:recall ----------------------------------------------


class TermIndex:
    def __init__(self, docs: list[list[str]]) -> None:
        self.tfs = [Counter(d) for d in docs]
        self.lens = np.array([len(d) for d in docs], dtype=np.float64)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, tf in enumerate(self.tfs):
            for t, c in tf.items():
                self.postings.setdefault(t, []).append((i, c))

    def bm25(self, terms: list[str], k1: float, b: float) -> np.ndarray:
        n = len(self.tfs)
        avgdl = float(self.lens.mean())
        out = np.zeros(n)
        for term in sorted(set(terms)):
            post = self.postings.get(term)
            if not post:
                continue
            idf = math.log(1 + (n - len(post) + 0.5) / (len(post) + 0.5))
            for i, tf in post:
                out[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.lens[i] / avgdl))
        return out


def rank(cfg: Config, bm: np.ndarray, cos: np.ndarray, access: np.ndarray, k: int = lr.K) -> np.ndarray:
    """Indices of the top k, best first."""
    has_terms = np.flatnonzero(bm > 0)
    by_bm25 = has_terms[np.argsort(-bm[has_terms], kind="stable")[: cfg.candidates]]
    by_vec = np.argsort(-cos, kind="stable")[: cfg.candidates]
    cand = np.union1d(by_bm25, by_vec)
    cand = cand[(bm[cand] > 0) | (cos[cand] >= cfg.floor)]
    if len(cand) == 0:
        return cand
    b, v = bm[cand], cos[cand]
    if cfg.fusion == "rrf":
        fused = _rrf_scores(b, v)
    else:
        fused = cfg.w_bm25 * _norm(b, cfg.bm25_norm) + cfg.w_vector * _vnorm(v, cfg)
    score = fused + cfg.w_prior * np.minimum(0.1 * access[cand], 1.0)
    return cand[np.argsort(-score, kind="stable")[:k]]


def _norm(x: np.ndarray, how: str) -> np.ndarray:
    hi = x.max()
    if how == "max":
        return x / hi if hi > 0 else np.zeros_like(x)
    lo = x.min()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def _vnorm(v: np.ndarray, cfg: Config) -> np.ndarray:
    if cfg.vector_norm == "raw":
        return v
    if cfg.vector_norm == "max":
        return v / v.max() if v.max() > 0 else np.zeros_like(v)
    if cfg.vector_norm == "zscore":
        return (v - v.mean()) / v.std() if v.std() > 0 else np.zeros_like(v)
    lo, hi = (cfg.floor if cfg.vector_norm == "floor" else v.min()), v.max()
    return np.clip((v - lo) / (hi - lo), 0, None) if hi > lo else np.ones_like(v)


def _rrf_scores(b: np.ndarray, v: np.ndarray, k: int = 60) -> np.ndarray:
    out = np.zeros(len(b))
    for scores, mask in ((b, b > 0), (v, np.ones(len(v), dtype=bool))):
        order = [i for i in np.argsort(-scores, kind="stable") if mask[i]]
        for r, i in enumerate(order):
            out[i] += 1 / (k + r + 1)
    return out


def evaluate(cfg: Config, corpora: list[Corpus]) -> list[tuple[list[str], lr.Question, int]]:
    """(top-10 dia_ids, question, conversation index) for every question."""
    tok = tokenizer(cfg)
    out = []
    for ci, c in enumerate(corpora):
        ids = [t.dia_id for t in c.conv.turns]
        index = TermIndex([tok(t.text) for t in c.conv.turns])
        access = np.zeros(len(ids))
        for q, qv in zip(c.conv.questions, c.q_vecs):
            top = rank(cfg, index.bm25(tok(q.text), cfg.k1, cfg.b), c.doc_vecs @ qv, access)
            if cfg.bump:
                access[top] += 1
            out.append(([ids[i] for i in top], q, ci))
    return out


def line(cfg: Config, results: list[tuple[list[str], lr.Question, int]], split: bool) -> str:
    def rs(items: list[tuple[list[str], lr.Question, int]]) -> str:
        s = lr.summarise([r for r, _, _ in items], [q for _, q, _ in items])
        cats = " ".join(
            f"c{c}={s[f'cat{c}']['R@5']:.3f}/{s[f'cat{c}']['R@10']:.3f}" for c in lr.CATEGORIES if f"cat{c}" in s
        )
        a = s["all"]
        return f"{a['R@5']:.3f}/{a['R@10']:.3f} ndcg {a['NDCG@10']:.3f} [{cats}]"

    text = f"{cfg.name:<44} {rs(results)}"
    if split:
        half_a = rs([x for x in results if x[2] < 5])[:11]
        half_b = rs([x for x in results if x[2] >= 5])[:11]
        text += f" | A {half_a} | B {half_b}"
    return text


# --- the configurations ----------------------------------------------------------------

SEED = Config(name="seed defaults", stop="seed", w_bm25=0.4, w_vector=0.6, w_prior=0.03, floor=0.15, candidates=60)


def configs() -> Iterator[Config]:
    """Round 1 around the seed defaults, a grid, round 2 around the current defaults."""
    yield from around(SEED, "R1")
    yield from grid()
    yield from around(Config(), "R2")


def around(base: Config, tag: str) -> Iterator[Config]:
    """One change at a time from base."""
    v = dataclasses.replace
    yield v(base, name=f"{tag} {base.name}")
    yield v(base, name=f"{tag} no stemming", stem=False)
    for stop in STOP_LISTS:
        if stop != base.stop and not (stop == "current" and base.stop == "seed+wh"):
            yield v(base, name=f"{tag} stop list {stop}", stop=stop)
    for w in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7):
        if w != base.w_bm25:
            yield v(base, name=f"{tag} bm25 {w} / vector {1 - w:.2f}", w_bm25=w, w_vector=round(1 - w, 2))
    for p in (0.0, 0.01, 0.02, 0.05, 0.1):
        yield v(base, name=f"{tag} prior {p}", w_prior=p)
    yield v(base, name=f"{tag} no access bumps", bump=False)
    for f in (0.0, 0.3):
        yield v(base, name=f"{tag} vector floor {f}", floor=f)
    for n in (20, 30, 40, 100, 200, 1000):
        yield v(base, name=f"{tag} candidates {n}", candidates=n)
    yield v(base, name=f"{tag} bm25 min-max", bm25_norm="minmax")
    yield v(base, name=f"{tag} vector raw cosine", vector_norm="raw")
    yield v(base, name=f"{tag} vector cos/max", vector_norm="max")
    yield v(base, name=f"{tag} vector (cos-floor)/(max-floor)", vector_norm="floor")
    yield v(base, name=f"{tag} vector z-score", vector_norm="zscore")
    yield v(base, name=f"{tag} rrf fusion (prior 0)", fusion="rrf", w_prior=0.0)
    yield v(base, name=f"{tag} bm25 k1 0.9 b 0.4", k1=0.9, b=0.4)
    yield v(base, name=f"{tag} bm25 b 0.5", b=0.5)
    yield v(base, name=f"{tag} bm25 k1 0.9", k1=0.9)


def grid() -> Iterator[Config]:
    for stop in ("seed", "seed+wh"):
        for vnorm in ("minmax", "raw", "max"):
            for w in (0.4, 0.5, 0.6):
                for p in (0.0, 0.01, 0.03):
                    yield Config(
                        name=f"G stop={stop} v={vnorm} w={w} p={p}",
                        stop=stop,
                        vector_norm=vnorm,
                        w_bm25=w,
                        w_vector=round(1 - w, 2),
                        w_prior=p,
                    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", action="store_true", help="also show conversations 1-5 and 6-10")
    ap.add_argument("--only", help="run only configurations whose name contains this")
    args = ap.parse_args(argv)
    corpora = load()
    for cfg in configs():
        if args.only and args.only not in cfg.name:
            continue
        print(line(cfg, evaluate(cfg, corpora), args.split), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
