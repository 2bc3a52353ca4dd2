"""Recall on real user-assistant conversations (BEAM, 100K size), through the HTTP API of a
default `memworker up`, beside whole-message baselines ranked in this process in the same run.

Run:  python bench/assistant_recall.py                          # BEAM conversations 1-10
      python bench/assistant_recall.py --conversations 1        # a quick run
      python bench/assistant_recall.py --single-agent           # + all of them in one agent
      python bench/assistant_recall.py --locomo 10              # + LoCoMo, the same scoring
      python bench/ab.py --base A --bench-from-head -- assistant_recall.py --conversations 1 --ingest-only
                                                                # ingest rate, A/B against commit A

Data: /work/shared/benchdata/beam/100K/<n>/ (chat.json, probing_questions.json; SOURCE.md there:
Tavakoli et al., arXiv 2510.27246, evaluation only, never copied into this repository).

Writing, as an agent would. One agent per conversation (`beam-<n>`); one episode per exchange
(a user message and the assistant answers that follow it, roles "user"/"assistant", whole
texts), session_id per batch of the chat, occurred_at the user message's time_anchor (the last
one seen carried forward when a message has none). A user message's trailing "->-> i,j" marker
is not part of what was said and is stripped. An episode the API refuses as too large (413) is
clipped to fit: the limit is read from the 413's text when it names one, else the episode's
longest message is halved until the API takes it; the report counts the clipped messages. The
episodes of a conversation go in one batch POST; the wait polls GET /v1/usage until every
episode is stored or dead, and messages/s is messages posted / (first POST to last stored_at).

Scoring. Each hit covers the messages its provenance names ("episode:<id>#m<i,j>": messages i and j
of that episode, "episode:<id>": all of it, anything else: none), from the table of what was
posted. The hits are walked in rank order, collecting distinct messages, at most the first 10 (a
hit naming a whole exchange adds its messages in order until 10, so it cannot count as ten
answers). R@5 / R@10: the share of a question's gold messages among the first 5 / 10 distinct
messages; NDCG@10: binary gain over those distinct messages, ideal = min(|gold|, 10). Messages per
hit: distinct messages the top 10 hits cover / hits returned, summed over the questions.

Baselines over whole messages (one document per message, the same texts, markers stripped,
never clipped), per conversation: BM25 (Lucene IDF, k1 1.2, b 0.75, lowercase [a-z0-9]+ tokens),
dense (the product's embedder, memworker.models.embeddings.for_settings of this environment's
settings, full precision for documents and queries alike; cosine; long texts truncated by the
model as it does), fused 0.5*minmax(BM25)+0.5*minmax(dense), and "best fused": the weight
w in 0.1..0.9 on BM25 with the best mean R@10 over the set, chosen after seeing the answers (an
oracle over weights: an upper bound for a fixed-weight fusion, not a method).

--single-agent: the same conversations also go into one agent (`beam-all`); each conversation's
questions are asked of it too, each question of both agents one after the other (the order
alternating), so both see the same load; quality, latency p50/p95 and the p50 ratio side by side.
The baselines for it rank the pooled messages of all the conversations.

--locomo N: the first N LoCoMo conversations too (one episode per session, as
bench/episodes_recall.py writes them; categories 1-4), scored the same way. 0 (default) skips it;
LoCoMo's own figures come from bench/episodes_recall.py.

Writes bench/results/assistant_recall.md."""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stack,
    add_stack_args,
    command_line,
    environment_note,
    fmt,
    git_commit,
    loadavg,
    md_table,
    percentile,
    progress,
    run_key,
    stack_from_args,
    write_report,
)
from locomo_recall import BM25, minmax  # noqa: E402

from memworker import Client  # noqa: E402
from memworker.recall import stats as recall_stats  # noqa: E402
from memworker.sdk import ApiError  # noqa: E402

BEAM = Path("/work/shared/benchdata/beam/100K")
K = 10
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(1, 10))
_MARKER = re.compile(r"\s*->->\s*\S{1,16}\s*$")
_PROVENANCE = re.compile(r"^episode:([0-9a-fA-F-]{36})(?:#m(\d+(?:,\d+)*))?$")
# "episode content over N bytes" or "episode content is S bytes, over the limit of N": the content
# limit, not the request body's (a batch too large as a whole is split instead)
_CONTENT_LIMIT = re.compile(r"content (?:is [\d,]+ bytes, )?over (?:the limit of )?([\d,]+)")
_TOKEN = re.compile(r"[a-z0-9]+")
_DATE_FORMATS = ("%B-%d-%Y", "%b-%d-%Y", "%B %d, %Y", "%Y-%m-%d")


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    category: str
    gold: frozenset[str]


@dataclass
class Conv:
    """One conversation: its messages (key -> text, in order), the episode bodies an agent
    posts, the message keys of each body's messages, and the questions with gold evidence."""

    corpus: str  # "BEAM" or "LoCoMo"
    name: str  # the agent id of its own agent
    texts: dict[str, str]
    bodies: list[dict[str, Any]]
    body_keys: list[list[str]]
    questions: list[Question] = field(default_factory=list)
    dropped_gold: int = 0


def strip_marker(text: str) -> tuple[str, bool]:
    out = _MARKER.sub("", text)
    return out, out != text


def parse_anchor(raw: Any) -> datetime | None:
    if not isinstance(raw, str):
        return None
    for f in _DATE_FORMATS:
        try:
            return datetime.strptime(raw.strip(), f).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def flat_ids(raw: Any) -> list[Any]:
    """source_chat_ids as one list: a list, a dict of lists, or nested lists of them."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        return [x for v in raw.values() for x in flat_ids(v)]
    if isinstance(raw, list):
        return [x for v in raw for x in flat_ids(v)]
    return [raw]


def exchanges(batch: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """A batch's messages cut into exchanges: each user message with the answers after it."""
    out: list[list[dict[str, Any]]] = []
    for turn in batch.get("turns") or []:
        for m in turn:
            if m.get("role") == "user" or not out:
                out.append([m])
            else:
                out[-1].append(m)
    return out


def load_beam(root: Path, n: int, markers: Counter[str]) -> Conv:
    chat = json.loads((root / str(n) / "chat.json").read_text())
    name = f"beam-{n}"
    conv = Conv("BEAM", name, {}, [], [])
    when: datetime | None = None
    for b, batch in enumerate(chat):
        when = parse_anchor(batch.get("time_anchor")) or when
        for j, ex in enumerate(exchanges(batch)):
            msgs, keys = [], []
            for m in ex:
                text, stripped = strip_marker(str(m["content"]))
                markers["stripped"] += stripped
                markers["left"] += "->->" in text
                if m.get("role") == "user":
                    when = parse_anchor(m.get("time_anchor")) or when
                key = f"{n}:{m['id']}"
                conv.texts[key] = text
                msgs.append({"role": m["role"], "content": text})
                keys.append(key)
            body: dict[str, Any] = {
                "messages": msgs,
                "session_id": f"batch-{batch.get('batch_number', b + 1)}",
                "idempotency_key": f"{name}:b{b}:e{j}",
            }
            if when is not None:
                body["occurred_at"] = when.isoformat()
            conv.bodies.append(body)
            conv.body_keys.append(keys)
    probes = json.loads((root / str(n) / "probing_questions.json").read_text())
    for category, items in probes.items():
        for q in items:
            ids = {f"{n}:{x}" for x in flat_ids(q.get("source_chat_ids"))}
            gold = frozenset(ids & conv.texts.keys())
            conv.dropped_gold += len(ids - gold)
            if gold:
                conv.questions.append(Question(str(q["question"]), category, gold))
    return conv


def load_locomo(limit: int) -> list[Conv]:
    """The first `limit` LoCoMo conversations, written as bench/episodes_recall.py writes them."""
    import episodes_recall as er
    from reflect_vs_raw import CATEGORIES

    out = []
    for c in er.load(er.DATA, limit):
        bodies, dias = er.episode_bodies(c, "assistant-recall", 1 << 30)  # one episode per session
        key = f"locomo-{c.sample_id}"
        conv = Conv("LoCoMo", key, {f"{key}:{t.dia_id}": t.line for t in c.turns}, bodies, [])
        conv.body_keys = [[f"{key}:{d}" for d in ds] for ds in dias]
        conv.dropped_gold = c.dropped_ids
        conv.questions = [
            Question(q.text, f"{q.category} {CATEGORIES[q.category]}", frozenset(f"{key}:{e}" for e in q.evidence))
            for q in c.questions
        ]
        out.append(conv)
    return out


def conversation_list(raw: str) -> list[int]:
    """ "1-10", "1,3,5" or "2-4,7"."""
    out: list[int] = []
    for part in raw.split(","):
        lo, _, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return sorted(set(out))


# --- writing ---------------------------------------------------------------------------------------


@dataclass
class Clipper:
    """The API's episode content limit once a 413 named it, and the messages clipped to fit it."""

    limit: int | None = None
    clipped: set[str] = field(default_factory=set)
    refusals: int = 0


def rendered_bytes(body: dict[str, Any]) -> int:
    # the episode's content as memworker.ingest.intake.render stores it: "name: content" lines
    return len("\n".join(f"{m.get('name') or m['role']}: {m['content']}" for m in body["messages"]).encode())


def clip_body(body: dict[str, Any], keys: Sequence[str], limit: int, clipper: Clipper) -> None:
    """Cut the longest message (by UTF-8 bytes, on a character boundary) until the rendered
    episode fits `limit`."""
    msgs = body["messages"]
    while (over := rendered_bytes(body) - limit) > 0:
        i = max(range(len(msgs)), key=lambda x: len(msgs[x]["content"].encode()))
        raw = msgs[i]["content"].encode()
        keep = max(1, len(raw) - over)
        if keep >= len(raw):
            return  # nothing left to cut: the API says why it refuses it
        msgs[i]["content"] = raw[:keep].decode(errors="ignore").rstrip() or raw[:keep].decode(errors="ignore")
        clipper.clipped.add(keys[i])


def post_batch(
    client: Client, agent: str, bodies: list[dict[str, Any]], keys: list[list[str]], clipper: Clipper
) -> list[str]:
    """POST bodies as one batch; on a 413 learn the content limit and clip, split a batch the API
    finds too large as a whole, and halve a lone episode's longest message when the 413 names no
    limit. Idempotency keys make a retried batch harmless."""
    if clipper.limit is not None:
        for b, k in zip(bodies, keys):
            clip_body(b, k, clipper.limit, clipper)
    try:
        return [a["episode_id"] for a in client.add_episodes(agent, bodies)]
    except ApiError as exc:
        if exc.status != 413:
            raise
        clipper.refusals += 1
        found = _CONTENT_LIMIT.search(str(exc))
        limit = int(found.group(1).replace(",", "")) if found else None
        if limit is not None and (clipper.limit is None or limit < clipper.limit):
            clipper.limit = limit
            return post_batch(client, agent, bodies, keys, clipper)
        if len(bodies) > 1:
            half = len(bodies) // 2
            return post_batch(client, agent, bodies[:half], keys[:half], clipper) + post_batch(
                client, agent, bodies[half:], keys[half:], clipper
            )
        size = rendered_bytes(bodies[0])
        if size <= 1:
            raise
        clip_body(bodies[0], keys[0], size // 2, clipper)
        return post_batch(client, agent, bodies, keys, clipper)


@dataclass
class Ingest:
    agents: list[str]
    episodes: int
    messages: int
    seconds: float
    statuses: Counter[str]
    timed_out: bool


def wait_stored(
    client: Client, agents: Sequence[str], total: int, timeout: float, desc: str
) -> tuple[Counter[str], bool]:
    """Poll GET /v1/usage until every episode of the agents is stored or dead."""
    started = time.monotonic()
    bar = progress(total=total, desc=desc, unit="ep")
    shown = 0
    wanted = set(agents)
    while True:
        rows = [a for a in client.usage()["agents"] if a["agent_id"] in wanted]
        counts = Counter({"stored": sum(a["stored"] for a in rows), "dead": sum(a["dead"] for a in rows)})
        done = counts["stored"] + counts["dead"]
        bar.update(done - shown)
        shown = done
        if done >= total or time.monotonic() - started > timeout:
            bar.close()
            return counts, done < total
        time.sleep(0.5)


def last_stored(client: Client, agents: Sequence[str]) -> datetime | None:
    last: datetime | None = None
    for agent in agents:
        for ep in client.list_episodes(agent_id=agent, status="stored", limit=1000):
            if ep.get("stored_at"):
                at = datetime.fromisoformat(ep["stored_at"])
                last = at if last is None or at > last else last
    return last


def ingest(
    client: Client, plan: list[tuple[str, Conv]], mapper: Mapper, clipper: Clipper, timeout: float, desc: str
) -> Ingest:
    """Post each (agent, conversation) as its episodes and wait until all are stored."""
    first = datetime.now(UTC)
    n_eps = n_msgs = 0
    for agent, conv in progress(plan, desc=f"{desc}: POST", unit="conv"):
        bodies = [json.loads(json.dumps(b)) for b in conv.bodies]  # clipping edits them
        ids = post_batch(client, agent, bodies, conv.body_keys, clipper)
        mapper.episodes.update(zip(ids, conv.body_keys, strict=True))
        n_eps += len(ids)
        n_msgs += sum(len(k) for k in conv.body_keys)
    agents = sorted({a for a, _ in plan})
    counts, timed_out = wait_stored(client, agents, n_eps, timeout, f"{desc}: stored")
    end = last_stored(client, agents) or datetime.now(UTC)
    return Ingest(agents, n_eps, n_msgs, max((end - first).total_seconds(), 1e-9), counts, timed_out)


# --- recall and scoring ----------------------------------------------------------------------------


@dataclass
class Mapper:
    """episode id -> message keys, from what was posted; a hit's provenance -> message keys."""

    episodes: dict[str, list[str]] = field(default_factory=dict)
    unmapped: Counter[str] = field(default_factory=Counter)

    def covers(self, hit: dict[str, Any]) -> list[str]:
        out: list[str] = []
        for source in hit.get("provenance") or []:
            m = _PROVENANCE.match(str(source))
            if m is None or m.group(1) not in self.episodes:
                if str(source).startswith("episode:"):
                    self.unmapped["episode provenance not posted here"] += 1
                continue
            keys = self.episodes[m.group(1)]
            idx = range(len(keys)) if m.group(2) is None else [int(x) for x in m.group(2).split(",")]
            for i in idx:
                if i < len(keys):
                    out.append(keys[i])
                else:
                    self.unmapped["message index past the episode"] += 1
        return out


@dataclass(frozen=True)
class Answer:
    corpus: str
    conv: str
    category: str
    gold: frozenset[str]
    hits: tuple[tuple[str, ...], ...]  # the messages each hit covers, in rank order
    took_ms: float = math.nan  # server side
    wall_ms: float = math.nan  # client side

    def distinct(self, k: int = K) -> list[str]:
        out: list[str] = []
        for covered in self.hits:
            for key in covered:
                if key not in out:
                    out.append(key)
                    if len(out) == k:
                        return out
        return out

    def recall_at(self, k: int) -> float:
        return len(self.gold & set(self.distinct(K)[:k])) / len(self.gold)

    def ndcg(self) -> float:
        dcg = sum(1.0 / math.log2(i + 2) for i, key in enumerate(self.distinct(K)) if key in self.gold)
        return dcg / sum(1.0 / math.log2(i + 2) for i in range(min(len(self.gold), K)))

    def covered(self) -> int:
        return len({key for covered in self.hits[:K] for key in covered})


def ask(client: Client, agent: str, conv: Conv, q: Question, mapper: Mapper) -> Answer:
    started = time.perf_counter()
    resp = client.recall(agent, q.text, k=K)
    wall = (time.perf_counter() - started) * 1000
    hits = tuple(tuple(mapper.covers(m)) for m in resp["memories"])
    return Answer(conv.corpus, conv.name, q.category, q.gold, hits, float(resp.get("took_ms", math.nan)), wall)


def ask_all(
    client: Client, convs: Sequence[Conv], mapper: Mapper, prefix: str, single: str | None
) -> dict[str, list[Answer]]:
    """Every question of its conversation's agent and, with single, of the one agent too: the
    two one after the other, the order alternating, so both see the same load."""
    out: dict[str, list[Answer]] = {"memworker": [], "memworker, one agent": []}
    asked = sum(len(c.questions) * (2 if single and c.corpus == "BEAM" else 1) for c in convs)
    bar = progress(total=asked, desc="recall", unit="q")
    n = 0
    for conv in convs:
        for q in conv.questions:
            order = [("memworker", prefix + conv.name)]
            if single and conv.corpus == "BEAM":
                order.append(("memworker, one agent", single))
            if n % 2:
                order.reverse()
            for label, agent in order:
                out[label].append(ask(client, agent, conv, q, mapper))
                bar.update(1)
            n += 1
    bar.close()
    return out


# --- baselines -------------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def embedder() -> Any:
    from memworker.models.embeddings import for_settings
    from memworker.settings import Settings

    return for_settings(Settings.from_env(os.environ))


def baselines(
    pools: Sequence[tuple[Sequence[Conv], str]], vectors: dict[str, np.ndarray], queries: dict[str, np.ndarray]
) -> dict[str, list[Answer]]:
    """BM25, dense and fused (w on BM25, each w) rankings of whole messages; pools: (the
    conversations whose messages form one corpus, whose questions are asked of it)."""
    out: dict[str, list[Answer]] = {}
    for convs, suffix in pools:
        keys = [k for c in convs for k in c.texts]
        bm25 = BM25([tokens(c.texts[k]) for c in convs for k in c.texts])
        matrix = np.vstack([vectors[k] for k in keys])
        for conv in convs:
            for q in conv.questions:
                b, d = bm25.scores(tokens(q.text)), matrix @ queries[q.text]
                ranked = {"BM25": b, "dense": d} | {
                    f"fused w={w}": w * minmax(b) + (1 - w) * minmax(d) for w in WEIGHTS
                }
                for name, scores in ranked.items():
                    top = np.argsort(-scores, kind="stable")[:K]
                    hits = tuple((keys[i],) for i in top)
                    out.setdefault(name + suffix, []).append(Answer(conv.corpus, conv.name, q.category, q.gold, hits))
    return out


def embed_all(convs: Sequence[Conv]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    emb = embedder()
    keys = [k for c in convs for k in c.texts]
    texts = [c.texts[k] for c in convs for k in c.texts]
    qs = sorted({q.text for c in convs for q in c.questions})
    vecs: list[np.ndarray] = []
    step = 32
    for i in progress(range(0, len(texts), step), desc="baseline: embed messages", unit="batch"):
        vecs.append(emb.embed(texts[i : i + step]))
    qv = emb.embed(qs)
    return dict(zip(keys, np.vstack(vecs), strict=True)), dict(zip(qs, qv, strict=True))


# --- the report --------------------------------------------------------------------------------------


def mean(values: Iterable[float]) -> float:
    xs = list(values)
    return sum(xs) / len(xs) if xs else math.nan


def r10(answers: Sequence[Answer]) -> float:
    return mean(a.recall_at(10) for a in answers)


def best_weight(systems: dict[str, list[Answer]], corpus: str, suffix: str = "") -> float:
    return max(WEIGHTS, key=lambda w: r10([a for a in systems[f"fused w={w}{suffix}"] if a.corpus == corpus]))


def shown_systems(systems: dict[str, list[Answer]], corpus: str, suffix: str = "") -> dict[str, list[Answer]]:
    """memworker, BM25, dense, fused 0.5 and the best fused (oracle weight) over one corpus."""
    w = best_weight(systems, corpus, suffix)
    names = {
        "BM25": f"BM25{suffix}",
        "dense": f"dense{suffix}",
        "fused 0.5": f"fused w=0.5{suffix}",
        f"best fused (w={w}, oracle)": f"fused w={w}{suffix}",
    }
    return {label: [a for a in systems[name] if a.corpus == corpus] for label, name in names.items()}


def metric_table(systems: dict[str, list[Answer]], metric: Callable[[Answer], float]) -> str:
    labels = list(systems)
    first = systems[labels[0]]
    cats = sorted({a.category for a in first})
    rows = []
    for label, cat in [("all", None)] + [(c, c) for c in cats]:
        n = len([a for a in first if cat in (None, a.category)])
        rows.append(
            [label, n] + [fmt(mean(metric(a) for a in systems[s] if cat in (None, a.category)), 3) for s in labels]
        )
    return md_table(["questions", "n", *labels], rows)


def per_conversation(systems: dict[str, list[Answer]]) -> str:
    labels = list(systems)
    convs = list(dict.fromkeys(a.conv for a in systems[labels[0]]))
    rows = [
        [c, len([a for a in systems[labels[0]] if a.conv == c])]
        + [fmt(r10([a for a in systems[s] if a.conv == c]), 3) for s in labels]
        for c in convs
    ]
    return md_table(["conversation", "n", *labels], rows)


def hit_summary(answers: Sequence[Answer]) -> str:
    hits = sum(min(len(a.hits), K) for a in answers)
    covered = sum(a.covered() for a in answers)
    return (
        f"messages per hit: {fmt(covered / hits if hits else math.nan, 2)} ({covered:,} distinct messages over "
        f"{hits:,} hits); questions with no hit covering any message: {sum(1 for a in answers if a.covered() == 0)}"
    )


def corpus_section(corpus: str, convs: Sequence[Conv], systems: dict[str, list[Answer]]) -> list[str]:
    mine = [c for c in convs if c.corpus == corpus]
    shown = {"memworker": [a for a in systems["memworker"] if a.corpus == corpus]} | shown_systems(systems, corpus)
    out = [
        f"## {corpus}: {len(mine)} conversations, {sum(len(c.texts) for c in mine):,} messages, "
        f"{sum(len(c.bodies) for c in mine):,} episodes, {sum(len(c.questions) for c in mine)} questions with gold evidence",
        "",
        hit_summary(shown["memworker"]) + ".",
        "",
    ]
    for title, metric in (
        ("R@5", lambda a: a.recall_at(5)),
        ("R@10", lambda a: a.recall_at(10)),
        ("NDCG@10", lambda a: a.ndcg()),
    ):
        out += [f"### {title}", "", metric_table(shown, metric), ""]
    out += ["### R@10 per conversation", "", per_conversation(shown), ""]
    return out


def latency_row(label: str, answers: Sequence[Answer]) -> list[Any]:
    wall, took = [a.wall_ms for a in answers], [a.took_ms for a in answers]
    return [
        label,
        len(answers),
        fmt(mean(a.recall_at(5) for a in answers), 3),
        fmt(r10(answers), 3),
        fmt(mean(a.ndcg() for a in answers), 3),
        fmt(percentile(wall, 50)),
        fmt(percentile(wall, 95)),
        fmt(percentile(took, 50)),
        fmt(percentile(took, 95)),
    ]


def single_section(convs: Sequence[Conv], systems: dict[str, list[Answer]], agent: str, *, swept: bool) -> list[str]:
    own = [a for a in systems["memworker"] if a.corpus == "BEAM"]
    one = systems["memworker, one agent"]
    ratio = percentile([a.wall_ms for a in one], 50) / percentile([a.wall_ms for a in own], 50)
    took = percentile([a.took_ms for a in one], 50) / percentile([a.took_ms for a in own], 50)
    pooled = shown_systems(systems, "BEAM", " (pooled)")
    beam = [c for c in convs if c.corpus == "BEAM"]
    return [
        f"## One agent holding all {len(beam)} BEAM conversations (`{agent}`)",
        "",
        "Each question asked of its conversation's own agent and of the one agent, one after the other"
        + (
            "; every agent's retention sweep ran first (the one agent is served from the HNSW index)."
            if swept
            else "; no sweep ran first (an agent past the exact-scan size is served exactly until its first sweep)."
        ),
        "",
        md_table(
            ["agent", "questions", "R@5", "R@10", "NDCG@10", "client p50 ms", "p95", "server took p50 ms", "p95"],
            [latency_row("one per conversation", own), latency_row("one for all", one)],
        ),
        "",
        f"**p50 one agent / per-conversation agents: {ratio:.2f}x client side, {took:.2f}x server side (took_ms).**",
        "",
        hit_summary(one) + ".",
        "",
        "Baselines over the pooled messages of all the conversations (R@10 per category):",
        "",
        metric_table({"memworker, one agent": one} | pooled, lambda a: a.recall_at(10)),
        "",
    ]


def ingest_table(ingests: dict[str, Ingest], clipped: dict[str, int]) -> str:
    rows = []
    for label, ing in ingests.items():
        rows.append(
            [
                label,
                f"{ing.episodes:,}",
                f"{ing.messages:,}",
                clipped.get(label, 0),
                ", ".join(f"{k} {v}" for k, v in sorted(ing.statuses.items()))
                + (" (**timed out**)" if ing.timed_out else ""),
                fmt(ing.seconds),
                fmt(ing.messages / ing.seconds, 2),
                fmt(ing.episodes / ing.seconds, 2),
            ]
        )
    return md_table(
        [
            "agents",
            "episodes",
            "messages",
            "messages clipped",
            "final status",
            "first POST to last stored, s",
            "messages/s",
            "episodes/s",
        ],
        rows,
    )


def reflector_name(client: Client, agent: str) -> str:
    names = {
        client.get_episode(agent, ep["episode_id"]).get("reflector")
        for ep in client.list_episodes(agent_id=agent, limit=3)
    }
    return ", ".join(sorted(str(n) for n in names if n)) or "unknown"


@dataclass
class Run:
    convs: list[Conv]
    prefix: str = ""
    single: str | None = None
    mapper: Mapper = field(default_factory=Mapper)
    ingests: dict[str, Ingest] = field(default_factory=dict)
    clipped: dict[str, int] = field(default_factory=dict)
    limit: int | None = None
    refusals: int = 0
    reflector: str = "unknown"
    systems: dict[str, list[Answer]] = field(default_factory=dict)
    markers: Counter[str] = field(default_factory=Counter)
    baseline_s: float = math.nan
    commit: str = ""  # the code the stack started on (others may commit while it runs)
    sweep: bool = False  # each agent's retention sweep ran before the questions
    sleep: bool = False  # each agent's consolidation pass ran (and was waited for) before the questions
    passes: Counter[str] = field(default_factory=Counter)  # the agents' consolidation runs by status, when asked


def write_and_ask(client: Client, run: Run, timeout: float, *, ask: bool = True) -> None:
    """Each corpus into its own agents, then (with --single-agent) BEAM into one agent, each
    ingest alone and waited for; then (ask) every question."""
    plans: dict[str, list[tuple[str, Conv]]] = {}
    for corpus in dict.fromkeys(c.corpus for c in run.convs):
        plans[f"{corpus}, one agent per conversation"] = [
            (run.prefix + c.name, c) for c in run.convs if c.corpus == corpus
        ]
    if run.single:
        plans["BEAM, one agent for all"] = [(run.single, c) for c in run.convs if c.corpus == "BEAM"]
    for label, plan in plans.items():
        clipper = Clipper(run.limit)
        run.ingests[label] = ingest(client, plan, run.mapper, clipper, timeout, label)
        run.clipped[label] = len(clipper.clipped)
        run.limit, run.refusals = clipper.limit, run.refusals + clipper.refusals
        print(
            f"{label}: {run.ingests[label].messages} messages in {run.ingests[label].seconds:.1f}s, "
            f"{len(clipper.clipped)} clipped, {run.ingests[label].messages / run.ingests[label].seconds:.2f} messages/s",
            flush=True,
        )
    if not ask:
        return
    agents = dict.fromkeys([agent for plan in plans.values() for agent, _ in plan])
    if run.sleep:  # an agent as it is after its quiet hours: one consolidation pass each, waited for
        for agent in progress(agents, desc="consolidation pass", unit="agent"):
            client.wait_for_run(agent, client.consolidate(agent), timeout=timeout)
    for agent in agents:
        run.passes.update(r["status"] for r in client.consolidation_runs(agent, limit=200))
    if run.sweep:  # what a large agent is served after its first scheduled sweep: the HNSW index
        for agent in progress(agents, desc="retention sweep", unit="agent"):
            client.run_retention(agent)
        time.sleep(recall_stats.STATS_TTL_S + 1)  # the API reads an agent's size and index state once a minute
    run.reflector = reflector_name(client, run.prefix + run.convs[0].name)
    run.systems = ask_all(client, run.convs, run.mapper, run.prefix, run.single)


def report(run: Run, args: argparse.Namespace, load_before: str, stack: Stack) -> str:
    corpora = list(dict.fromkeys(c.corpus for c in run.convs))
    beam = [c for c in run.convs if c.corpus == "BEAM"]
    out = [
        "# Recall on real user-assistant conversations (BEAM 100K), through the HTTP API",
        "",
        f"BEAM conversations {args.conversations} ({len(beam)}), one agent each, one episode per exchange (user "
        f"message + the assistant's answers), recall k={K}, default policy and settings; reflector: {run.reflector}. "
        "Baselines rank whole messages of the same conversation in this process (R@k over the first k distinct "
        "messages the hits cover; see the script's docstring).",
        "",
        "## Ingest",
        "",
        ingest_table(run.ingests, run.clipped),
        "",
        f"- the API's episode content limit, as a 413 named it: {f'{run.limit} bytes' if run.limit else 'never hit'} "
        f"({run.refusals} refused POSTs); a clipped message is cut (its longest part first) until its exchange fits; "
        "the baselines keep the whole texts.",
        f"- consolidation passes before the questions, by status: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(run.passes.items())) or 'none'}"
        + (
            " (one pass per agent was run and waited for after the ingests: --sleep)."
            if run.sleep
            else " (the passes the schedule ran during the run: an agent is due after 3 quiet minutes)."
        ),
        f"- trailing '->->' markers stripped from {run.markers['stripped']} messages; messages still holding '->->': "
        f"{run.markers['left']}.",
        f"- gold message ids not in their conversation (dropped): {sum(c.dropped_gold for c in run.convs)}; provenance "
        "entries not mapped to a posted message: "
        + (", ".join(f"{k} {v}" for k, v in run.mapper.unmapped.items()) or "none")
        + ".",
        "",
    ]
    for corpus in corpora:
        out += corpus_section(corpus, run.convs, run.systems)
    if run.single:
        out += single_section(run.convs, run.systems, run.single, swept=run.sweep)
    own = run.systems["memworker"]
    out += [
        "## Recall latency (one agent per conversation)",
        "",
        md_table(
            ["questions", "n", "R@5", "R@10", "NDCG@10", "client p50 ms", "p95", "server took p50 ms", "p95"],
            [latency_row(corpus, [a for a in own if a.corpus == corpus]) for corpus in corpora],
        ),
        "",
        "- questions asked one at a time by one client; client = the POST's wall time in this process.",
        f"- baselines: embedder {embedder_note()}; messages and questions embedded after the stack stopped "
        f"({fmt(run.baseline_s)} s). Best fused: the w (on BM25) of 0.1..0.9 with the best mean R@10 over the "
        "corpus, chosen after seeing the answers: an oracle over weights, an upper bound for a fixed weight.",
        "- BEAM: Tavakoli et al., arXiv 2510.27246 (evaluation only; /work/shared/benchdata/beam/SOURCE.md)."
        + (" LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0." if "LoCoMo" in corpora else ""),
        "",
        "## Environment",
        "",
        environment_note(load_before, command_line(), stack),
        f"- the stack started on commit {run.commit}; the commit above is the tree's when the report was written",
    ]
    return "\n".join(out)


def embedder_note() -> str:
    from memworker.settings import Settings

    s = Settings.from_env(os.environ)
    path = Path(s.embedding_model)
    name = path.parent.name if path.name == "model" else path.name  # a package's model folder: name the package
    return f"{name} ({s.embedding_backend}, fp32, {s.embedding_threads} thread(s))"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conversations", default="1-10", help="BEAM conversations: a list or range, e.g. 1-10, 1,3")
    p.add_argument("--locomo", type=int, default=0, help="also the first N LoCoMo conversations (0: none)")
    p.add_argument("--single-agent", action="store_true", help="also all BEAM conversations in one agent")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for one ingest's episodes")
    p.add_argument("--data", type=Path, default=BEAM, help="the BEAM size folder holding <n>/chat.json")
    p.add_argument("--save", type=Path, help="also pickle the measured run here")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="after the ingests, run each agent's retention sweep (POST .../retention/run) before asking: "
        "an agent past the exact-scan size is then served from the HNSW index, as after its first scheduled sweep",
    )
    p.add_argument(
        "--sleep",
        action="store_true",
        help="after the ingests, run one consolidation pass per agent (POST .../consolidate) and wait for it before "
        "asking: each agent as it is after its quiet hours, not only as the passes scheduled during the run left it",
    )
    p.add_argument(
        "--ingest-only",
        action="store_true",
        help="write and wait, print the ingest lines, ask nothing and write no report (for bench/ab.py)",
    )
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before, commit = loadavg(), git_commit()
    markers: Counter[str] = Counter()
    convs = [load_beam(args.data, n, markers) for n in conversation_list(args.conversations)]
    convs += load_locomo(args.locomo) if args.locomo else []
    with stack_from_args(args) as stack:
        key, tag = run_key(stack, "assistant")
        prefix = "" if stack.process is not None else f"{tag}-"  # a shared stack: fresh agent ids
        run = Run(
            convs,
            prefix,
            f"{prefix}beam-all" if args.single_agent else None,
            markers=markers,
            commit=commit,
            sweep=args.sweep,
            sleep=args.sleep,
        )
        with Client(stack.api_url, key, timeout=600) as client:
            write_and_ask(client, run, args.timeout, ask=not args.ingest_only)
    if args.ingest_only:
        return 0
    started = time.perf_counter()
    vectors, queries = embed_all(convs)
    beam = [c for c in convs if c.corpus == "BEAM"]
    pools: list[tuple[Sequence[Conv], str]] = [([c], "") for c in convs]
    if args.single_agent and beam:
        pools.append((beam, " (pooled)"))
    run.systems |= baselines(pools, vectors, queries)
    run.baseline_s = time.perf_counter() - started
    if args.save:
        with open(args.save, "wb") as f:  # the measured run, to render the report again
            pickle.dump((run, vars(args), load_before), f)
    text = report(run, args, load_before, stack)
    print()
    print(text)
    print(f"\nwritten to {write_report('assistant_recall.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
