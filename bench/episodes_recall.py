"""The product's main path on LoCoMo: episodes in, recall out. Three writes of the same conversations, side by side, through the HTTP
API of one `memworker up` (default settings, default workers, recall k=10, no tuning):

  direct-<conv>    every turn written directly (POST memories/batch), text
                   "Speaker: text [image: caption]" clipped as memworker.domain.memories.clip does,
                   metadata {"dia_id": ...};
  reflect-<conv>   agent policy {"episodic_layer": false} (PUT /v1/agents/{a}/policy): the
                   reflect-only write, sessions posted as episodes;
  episodes-<conv>  the default policy (the episodic layer on: every informative message kept as a
                   'turn' memory beside the reflected items), sessions posted as episodes.

Run:  python bench/episodes_recall.py                      # all 10 conversations (target: under 40 min)
      python bench/episodes_recall.py --conversations 1    # a quick run (said so in the report)

Without --api-url it starts `memworker up` (one worker, API rate limits raised out of the way)
on a temporary data dir and free ports, creates one tenant, and stops it at the end. Data:
/work/shared/benchdata/locomo/locomo10.json (SOURCE.md there; CC BY-NC 4.0).

Episodes. Each LoCoMo session is one episode: messages [{"role": "user", "name": speaker,
"content": text + " [image: caption]" when the turn shares an image}], the episode's
occurred_at = the session's date_time parsed ("1:56 pm on 8 May, 2023", taken as UTC),
session_id "session_<n>". A session is split only when the API would refuse it: while the
rendered content ("name: content" lines, as memworker.ingest.intake.render stores it) is over
MEMWORKER_MAX_CONTENT_BYTES (32 KB by default) or it has more than 500 messages, the chunk is
halved at the middle message (no LoCoMo session comes near either limit: the largest is 6.5 KB
and 47 turns, so every session is one episode). Each memory's provenance maps back to dia_ids
exactly: "episode:<id>#m<i,j>" covers the dia_ids of messages i and j of that episode,
"episode:<id>" alone every message of it; a direct memory covers its metadata dia_id; anything
else (insights and conclusions: "consolidation:<run>") covers nothing.

Order: (c) is posted alone and waited for (its throughput: episodes/s and messages/s from the
first POST to the last stored_at), then the bare embedder's ceiling is measured in this process
on the same turn texts (bench/_common.bare_embedder_rate), then (b) and (a) are written at the
same time. Then every category 1-4 question with evidence is asked of the three agents of its
conversation (POST recall, k=10; the three variants in parallel, each one's questions in order).

Metrics, per variant and category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop),
for conversations 1-5, 6-10 and all:
  R@k      the share of a question's evidence dia_ids covered by the top k memories returned;
  NDCG@10  binary gain: the memory at rank i counts 1 when it covers at least one evidence
           dia_id that no memory ranked above it covers, else 0; DCG = sum gain_i / log2(i + 1);
           ideal DCG = the same sum over min(|evidence|, 10) gains of 1;
  turns@10 the number of distinct dia_ids (any, not only evidence) the top 10 cover;
  redundant@10  returned memories whose dia_ids are all covered by higher-ranked ones (what
           recall's collapse should remove);
  rows/turn     memories the agent holds (GET memories, live) / turns posted.

Options: --conversations N (the first N; the report says it is a subset), --timeout S (wait for
a variant's episodes), --data PATH, and the stack options of bench/_common
(--api-url/--api-key/--data-dir/--admin-database-url, --keep). Writes
bench/results/episodes_recall.md.

What the lifecycle leaves of the episodes path after 60 simulated days, measured against a
frozen twin with questions never asked before the end, is bench/lifecycle.py."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tasks/ (the publisher)

from _common import (  # noqa: E402
    Stack,
    add_stack_args,
    bare_embedder_rate,
    command_line,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    progress,
    run_key,
    stack_from_args,
    write_report,
)
from reflect_vs_raw import CATEGORIES, evidence_ids  # noqa: E402

from memworker import Client  # noqa: E402
from memworker.sdk import ApiError  # noqa: E402

DATA = Path("/work/shared/benchdata/locomo/locomo10.json")
K = 10
VARIANTS = ("direct", "reflect", "episodes")
DIRECT_BATCH = 200
MAX_MESSAGES = 500  # schemas.EpisodeIn.messages max_length
_PROVENANCE = re.compile(r"^episode:([0-9a-fA-F-]{36})(?:#m(\d+(?:,\d+)*))?$")
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # LoCoMo's session_<n>_date_time: "1:56 pm on 8 May, 2023"
SCOPES = (("all", None), ("conversations 1-5", range(0, 5)), ("conversations 6-10", range(5, 10)))


class ProductNotReady(SystemExit):
    """The product does not offer what this bench measures (yet): exit non-zero, label nothing."""


# --- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    content: str  # text + " [image: caption]"

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.content}"


@dataclass(frozen=True)
class Session:
    number: int
    date: str
    when: datetime | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    index: int  # 0-based position in locomo10.json: conversations 1-5 are 0-4
    sample_id: str
    sessions: list[Session]
    questions: list[Question] = field(default_factory=list)
    dropped_ids: int = 0

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


def parse_date(raw: str) -> datetime | None:
    try:
        return datetime.strptime(raw.strip(), DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def load(path: Path, limit: int | None) -> list[Conversation]:
    convs = []
    for index, raw in enumerate(json.loads(path.read_text())[:limit]):
        c = raw["conversation"]
        numbers = sorted(
            int(m.group(1)) for key in c if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(c[key], list)
        )
        sessions = []
        for n in numbers:
            turns = tuple(
                Turn(
                    t["dia_id"],
                    t["speaker"],
                    t["text"] + (f" [image: {t['blip_caption']}]" if t.get("blip_caption") else ""),
                )
                for t in c[f"session_{n}"]
            )
            date = str(c.get(f"session_{n}_date_time", ""))
            sessions.append(Session(n, date, parse_date(date), turns))
        conv = Conversation(index, str(raw["sample_id"]), sessions)
        known = {t.dia_id for t in conv.turns}
        for qa in raw["qa"]:
            if qa.get("category") not in CATEGORIES or not qa.get("evidence"):
                continue
            ids, dropped = evidence_ids(qa["evidence"], known)
            conv.dropped_ids += dropped
            if ids:
                conv.questions.append(Question(qa["question"], int(qa["category"]), tuple(ids)))
        convs.append(conv)
    return convs


# --- writing --------------------------------------------------------------------------------


def chunks(turns: Sequence[Turn], max_bytes: int) -> list[list[Turn]]:
    """The session as one chunk, halved at the middle message while a chunk is over the API's
    content limit (rendered "name: content" lines) or its message limit."""
    todo, out = [list(turns)], []
    while todo:
        chunk = todo.pop(0)
        size = len("\n".join(t.line for t in chunk).encode())
        if (size > max_bytes or len(chunk) > MAX_MESSAGES) and len(chunk) > 1:
            half = len(chunk) // 2
            todo[:0] = [chunk[:half], chunk[half:]]
        else:
            out.append(chunk)
    return out


def episode_bodies(conv: Conversation, variant: str, max_bytes: int) -> tuple[list[dict[str, Any]], list[list[str]]]:
    bodies, dias = [], []
    for s in conv.sessions:
        for j, chunk in enumerate(chunks(s.turns, max_bytes)):
            body: dict[str, Any] = {
                "messages": [{"role": "user", "name": t.speaker, "content": t.content} for t in chunk],
                "session_id": f"session_{s.number}",
                "idempotency_key": f"{variant}:{conv.sample_id}:s{s.number}:c{j}",
                "metadata": {"session_date": s.date},
            }
            if s.when is not None:
                body["occurred_at"] = s.when.isoformat()
            bodies.append(body)
            dias.append([t.dia_id for t in chunk])
    return bodies, dias


def post_episodes(client: Client, agent: str, conv: Conversation, variant: str, max_bytes: int) -> dict[str, list[str]]:
    """POST the conversation's episodes in one batch; episode_id -> dia_id per message index."""
    bodies, dias = episode_bodies(conv, variant, max_bytes)
    accepted = client.add_episodes(agent, bodies)
    return {a["episode_id"]: d for a, d in zip(accepted, dias, strict=True)}


def post_direct(client: Client, agent: str, conv: Conversation, bar: Any) -> None:
    from memworker.domain.memories import clip

    turns = conv.turns
    for i in range(0, len(turns), DIRECT_BATCH):
        batch = turns[i : i + DIRECT_BATCH]
        client.add_memories(
            agent,
            [
                {
                    "text": clip(t.line),
                    "metadata": {"dia_id": t.dia_id},
                    "idempotency_key": f"{conv.sample_id}:{t.dia_id}",
                }
                for t in batch
            ],
        )
        bar.update(len(batch))


def wait_stored(client: Client, agents: Sequence[str], total: int, timeout: float, desc: str) -> dict[str, Any]:
    """Poll the agents' episodes (GET /v1/episodes) until all are stored or dead; returns the
    counts by status and the latest stored_at."""
    started = time.monotonic()
    bar = progress(total=total, desc=desc, unit="ep")
    shown = 0
    while True:
        statuses: Counter[str] = Counter()
        last: datetime | None = None
        for agent in agents:
            for ep in client.list_episodes(agent_id=agent, limit=1000):
                statuses[ep["status"]] += 1
                if ep.get("stored_at"):
                    at = datetime.fromisoformat(ep["stored_at"])
                    last = at if last is None or at > last else last
        done = statuses["stored"] + statuses["dead"]
        bar.update(done - shown)
        shown = done
        if done >= total or time.monotonic() - started > timeout:
            break
        time.sleep(0.5)
    bar.close()
    return {"statuses": dict(statuses), "last_stored": last, "timed_out": done < total}


# --- coverage and scoring ---------------------------------------------------------------------


@dataclass
class Mapper:
    """Which dia_ids a memory covers: its metadata dia_id (direct writes) and the messages its
    provenance names (episodes); anything else covers nothing."""

    episodes: dict[str, list[str]] = field(default_factory=dict)  # episode id -> dia_id per message
    unmapped: Counter[str] = field(default_factory=Counter)  # provenance shapes we could not map

    def covers(self, memory: dict[str, Any]) -> frozenset[str]:
        out: set[str] = set()
        dia = (memory.get("metadata") or {}).get("dia_id")
        if dia:
            out.add(str(dia))
        for source in memory.get("provenance") or []:
            m = _PROVENANCE.match(str(source))
            if m is None or m.group(1) not in self.episodes:
                if str(source).startswith("episode:"):
                    self.unmapped[re.sub(r"[0-9a-fA-F-]{36}", "<id>", str(source))[:40]] += 1
                continue
            dias = self.episodes[m.group(1)]
            if m.group(2) is None:
                out.update(dias)
            else:
                for i in (int(x) for x in m.group(2).split(",")):
                    if i < len(dias):
                        out.add(dias[i])
                    else:
                        self.unmapped["message index past the episode"] += 1
        return frozenset(out)


@dataclass(frozen=True)
class Answer:
    conv: int
    category: int
    evidence: tuple[str, ...]
    hits: tuple[frozenset[str], ...]  # what each returned memory covers, in rank order
    took_ms: float

    def recall_at(self, k: int) -> float:
        got = frozenset().union(*self.hits[:k]) if self.hits else frozenset()
        return len(got & set(self.evidence)) / len(self.evidence)

    def ndcg(self, k: int = K) -> float:
        seen: set[str] = set()
        dcg = 0.0
        for rank, covered in enumerate(self.hits[:k], start=1):
            new = (covered & set(self.evidence)) - seen
            if new:
                dcg += 1.0 / math.log2(rank + 1)
                seen |= new
        ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(self.evidence), k) + 1))
        return dcg / ideal

    def turns(self, k: int = K) -> int:
        return len(frozenset().union(*self.hits[:k])) if self.hits else 0

    def redundant(self, k: int = K) -> int:
        seen: set[str] = set()
        n = 0
        for covered in self.hits[:k]:
            if covered and covered <= seen:
                n += 1
            seen |= covered
        return n


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def select(answers: Sequence[Answer], scope: range | None, category: int | None) -> list[Answer]:
    return [a for a in answers if (scope is None or a.conv in scope) and category in (None, a.category)]


@dataclass
class Store:
    """What one agent holds (GET memories, live rows)."""

    rows: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    tiers: Counter[str] = field(default_factory=Counter)
    covered: set[str] = field(default_factory=set)


def read_store(client: Client, agent: str, mapper: Mapper) -> Store:
    out, cursor = Store(), None
    while True:
        page = client.list_memories(agent, limit=500, cursor=cursor)
        for m in page["memories"]:
            out.rows += 1
            out.kinds[str(m.get("kind"))] += 1
            out.tiers[str(m.get("tier"))] += 1
            out.covered |= mapper.covers(m)
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def ask(client: Client, agent: str, conv: Conversation, mapper: Mapper, bar: Any) -> list[Answer]:
    out = []
    for q in conv.questions:
        resp = client.recall(agent, q.text, k=K)
        hits = tuple(mapper.covers(m) for m in resp["memories"])
        out.append(Answer(conv.index, q.category, q.evidence, hits, float(resp["took_ms"])))
        bar.update(1)
    return out


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Run:
    convs: list[Conversation]
    agents: dict[str, dict[str, str]]  # variant -> sample_id -> agent id
    mappers: dict[str, Mapper] = field(default_factory=dict)  # agent -> mapper
    answers: dict[tuple[str, int], list[Answer]] = field(default_factory=lambda: defaultdict(list))  # (variant, day)
    stores: dict[tuple[str, int], dict[str, Store]] = field(default_factory=dict)  # (variant, day) -> sample -> store
    ingest: dict[str, Any] = field(default_factory=dict)
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)
    embedder: tuple[float, int] = (float("nan"), 0)
    write_s: dict[str, float] = field(default_factory=dict)
    reflector: str = "unknown"
    passes_day0: dict[str, Counter[str]] = field(default_factory=dict)


def client_for(stack: Stack, key: str) -> Client:
    return Client(stack.api_url, key, timeout=600)


def set_policies(client: Client, run: Run) -> None:
    """(b): {"episodic_layer": false}; a 422 means the product has no such field yet."""
    for conv in run.convs:
        agent = run.agents["reflect"][conv.sample_id]
        try:
            out = client.set_policy({"episodic_layer": False}, agent_id=agent)
        except ApiError as exc:
            if exc.status == 422:
                raise ProductNotReady(
                    f"PUT /v1/agents/{agent}/policy {{'episodic_layer': false}} answered 422 ({exc}): this "
                    "product has no episodic_layer policy field yet, so the reflect-only variant cannot be "
                    "told apart from the default one. Nothing measured; run again once the field exists."
                ) from exc
            raise
        if out.get("effective", {}).get("episodic_layer") is not False:
            raise ProductNotReady(f"the policy PUT was accepted but the effective policy says {out.get('effective')}")
    probe = run.agents["episodes"][run.convs[0].sample_id]
    effective = client.set_policy({}, agent_id=probe).get("effective", {})
    if effective.get("episodic_layer") is not True:
        raise ProductNotReady(f"the default policy does not have episodic_layer true: {effective}")


def ingest(stack: Stack, key: str, run: Run, args: argparse.Namespace, max_bytes: int) -> None:
    total_turns = sum(len(c.turns) for c in run.convs)
    with client_for(stack, key) as client:
        set_policies(client, run)
        # (c) alone: its throughput from the first POST to the last stored.
        first_post = datetime.now(UTC)
        started = time.perf_counter()
        n_eps = 0
        for conv in progress(run.convs, desc="(c) POST episodes", unit="conv"):
            agent = run.agents["episodes"][conv.sample_id]
            eps = post_episodes(client, agent, conv, "episodes", max_bytes)
            run.mappers[agent] = Mapper(eps)
            n_eps += len(eps)
        wait = wait_stored(client, list(run.agents["episodes"].values()), n_eps, args.timeout, "(c) episodes stored")
        run.write_s["episodes"] = time.perf_counter() - started
        run.waits["episodes"] = wait
        last = wait["last_stored"] or datetime.now(UTC)
        span = max((last - first_post).total_seconds(), 1e-9)
        run.ingest = {"episodes": n_eps, "messages": total_turns, "seconds": span}
        run.reflector = reflector_name(client, run.agents["episodes"][run.convs[0].sample_id])
    # the ceiling, right after (c)'s ingest, while the stack is otherwise idle
    run.embedder = bare_embedder_rate([t.line for c in run.convs for t in c.turns], desc="bare embedder (turn texts)")
    print(
        f"(c): {n_eps} episodes, {total_turns} messages stored in {span:.1f}s "
        f"({n_eps / span:.2f} episodes/s, {total_turns / span:.1f} messages/s); "
        f"bare embedder {run.embedder[0]:.1f} texts/s (batch {run.embedder[1]})",
        flush=True,
    )

    # (b) episodes and (a) direct writes at the same time
    def write_reflect() -> None:
        with client_for(stack, key) as client:
            started = time.perf_counter()
            n = 0
            for conv in run.convs:
                agent = run.agents["reflect"][conv.sample_id]
                eps = post_episodes(client, agent, conv, "reflect", max_bytes)
                run.mappers[agent] = Mapper(eps)
                n += len(eps)
            run.waits["reflect"] = wait_stored(
                client, list(run.agents["reflect"].values()), n, args.timeout, "(b) episodes stored"
            )
            run.write_s["reflect"] = time.perf_counter() - started

    def write_direct() -> None:
        with client_for(stack, key) as client:
            started = time.perf_counter()
            bar = progress(total=total_turns, desc="(a) direct writes", unit="turn")
            for conv in run.convs:
                agent = run.agents["direct"][conv.sample_id]
                run.mappers[agent] = Mapper()
                post_direct(client, agent, conv, bar)
            bar.close()
            run.write_s["direct"] = time.perf_counter() - started

    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(write_reflect), pool.submit(write_direct)]:
            f.result()


def reflector_name(client: Client, agent: str) -> str:
    names = {
        client.get_episode(agent, ep["episode_id"]).get("reflector")
        for ep in client.list_episodes(agent_id=agent, limit=3)
    }
    return ", ".join(sorted(str(n) for n in names if n)) or "unknown"


def evaluate(stack: Stack, key: str, run: Run, variants: Sequence[str], day: int) -> None:
    """Read every agent's store and ask every question, the variants in parallel (each one's
    questions in order: recall bumps access counts, which feed the ranking's priors)."""
    total = len(variants) * sum(len(c.questions) for c in run.convs)
    bar = progress(total=total, desc=f"recall day {day}", unit="q")
    lock = threading.Lock()

    def one(variant: str) -> None:
        stores: dict[str, Store] = {}
        answers: list[Answer] = []
        with client_for(stack, key) as client:
            for conv in run.convs:
                agent = run.agents[variant][conv.sample_id]
                mapper = run.mappers[agent]
                stores[conv.sample_id] = read_store(client, agent, mapper)
                answers += ask(client, agent, conv, mapper, bar)
        with lock:
            run.stores[(variant, day)] = stores
            run.answers[(variant, day)] = answers

    with ThreadPoolExecutor(len(variants)) as pool:
        for f in [pool.submit(one, v) for v in variants]:
            f.result()
    bar.close()


def consolidation_passes(client: Client, agents: Sequence[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for agent in agents:
        for r in client.consolidation_runs(agent, limit=200):
            out[f"{r['status']}"] += 1
    return out


def cell(values: Sequence[float], digits: int = 3) -> str:
    return " / ".join(fmt(v, digits) for v in values)


def recall_table(run: Run, scope: range | None, variants: Sequence[str], day: int) -> str:
    rows = []
    for label, cat in [("all (1-4)", None)] + [(f"{c} {n}", c) for c, n in CATEGORIES.items()]:
        per = [select(run.answers[(v, day)], scope, cat) for v in variants]
        n = len(per[0])
        if not n:
            continue
        rows.append(
            [
                label,
                n,
                cell([mean([a.recall_at(5) for a in p]) for p in per]),
                cell([mean([a.recall_at(10) for a in p]) for p in per]),
                cell([mean([a.ndcg() for a in p]) for p in per]),
                cell([mean([a.turns() for a in p]) for p in per], 1),
                cell([mean([a.redundant() for a in p]) for p in per], 2),
            ]
        )
    names = " / ".join(variants)
    return md_table(
        ["questions", "n", f"R@5 ({names})", "R@10", "NDCG@10", "turns@10", "redundant@10"],
        rows,
    )


def turns_in(run: Run, scope: range | None) -> int:
    return sum(len(c.turns) for c in run.convs if scope is None or c.index in scope)


def store_rows(run: Run, variant: str, day: int, scope: range | None) -> Store:
    total = Store()
    for c in run.convs:
        if scope is not None and c.index not in scope:
            continue
        s = run.stores[(variant, day)][c.sample_id]
        total.rows += s.rows
        total.kinds.update(s.kinds)
        total.tiers.update(s.tiers)
    return total


def reachable(run: Run, variant: str, day: int, scope: range | None) -> float:
    values = []
    for c in run.convs:
        if scope is not None and c.index not in scope:
            continue
        covered = run.stores[(variant, day)][c.sample_id].covered
        values += [len(covered & set(q.evidence)) / len(q.evidence) for q in c.questions]
    return mean(values)


def storage_table(run: Run, scopes: Sequence[tuple[str, range | None]]) -> str:
    rows = []
    for label, scope in scopes:
        turns = turns_in(run, scope)
        for v in VARIANTS:
            s = store_rows(run, v, 0, scope)
            derived = s.kinds["insight"] + s.kinds["conclusion"]
            rows.append(
                [
                    label,
                    v,
                    f"{s.rows:,}",
                    f"{turns:,}",
                    fmt(s.rows / turns, 3) if turns else "n/a",
                    f"{s.kinds['turn']:,}",
                    f"{s.rows - s.kinds['turn'] - derived:,}",
                    f"{derived:,}",
                    ", ".join(f"{t} {n}" for t, n in sorted(s.tiers.items())),
                    fmt(reachable(run, v, 0, scope), 3),
                ]
            )
    return md_table(
        [
            "conversations",
            "variant",
            "memories",
            "turns posted",
            "rows/turn",
            "kind turn",
            "other items",
            "insights + conclusions",
            "tiers",
            "reachable",
        ],
        rows,
    )


def summary_rows(run: Run) -> list[list[Any]]:
    rows = []
    turns = turns_in(run, None)
    for v in VARIANTS:
        ans = run.answers[(v, 0)]
        rows.append(
            [
                v,
                fmt(mean([a.recall_at(5) for a in ans]), 3),
                fmt(mean([a.recall_at(10) for a in ans]), 3),
                fmt(mean([a.ndcg() for a in ans]), 3),
                fmt(mean([a.turns() for a in ans]), 1),
                fmt(store_rows(run, v, 0, None).rows / turns, 3),
                fmt(percentile([a.took_ms for a in ans], 50), 1),
            ]
        )
    return rows


def report(run: Run, args: argparse.Namespace, total_convs: int, load_before: str, stack: Stack) -> str:
    convs = run.convs
    turns = turns_in(run, None)
    questions = sum(len(c.questions) for c in convs)
    scopes = [(label, scope) for label, scope in SCOPES if any(scope is None or c.index in scope for c in convs)]
    subset = (
        ""
        if len(convs) == total_convs
        else f" **Subset: {len(convs)} of {total_convs} conversations (--conversations {len(convs)}).**"
    )
    episodes_kinds = store_rows(run, "episodes", 0, None).kinds
    state = (
        f"the episodic layer wrote {episodes_kinds['turn']:,} 'turn' memories in (c)"
        if episodes_kinds["turn"]
        else "**(c) holds no 'turn' memory: the product at this state wrote reflected items only, so (b) and (c) "
        "measure the same write**"
    )
    ing = run.ingest
    eps_s, msg_s = ing["episodes"] / ing["seconds"], ing["messages"] / ing["seconds"]
    ceiling, batch = run.embedder
    unmapped: Counter[str] = Counter()
    for m in run.mappers.values():
        unmapped.update(m.unmapped)
    out = [
        "# Episodes in, recall out: LoCoMo through the product's main path",
        "",
        f"{len(convs)} conversations ({', '.join(c.sample_id for c in convs)}), {turns:,} turns, "
        f"{sum(len(c.sessions) for c in convs)} sessions, {questions:,} questions (categories 1-4 with evidence); "
        f"reflector: {run.reflector}; recall k={K}, default policy and settings; {state}.{subset}",
        "",
        "(a) direct = every turn written as a memory; (b) reflect = episodes with the policy's episodic_layer "
        "false (reflected items only); (c) episodes = episodes with the default policy (turns + items).",
        "",
        md_table(
            ["variant", "R@5", "R@10", "NDCG@10", "turns@10", "rows/turn", "recall took_ms p50"], summary_rows(run)
        ),
        "",
        "## Recall at day 0",
        "",
        "Each cell is direct / reflect / episodes.",
        "",
    ]
    for label, scope in scopes:
        out += [f"### {label}", "", recall_table(run, scope, VARIANTS, 0), ""]
    out += [
        "- R@k: share of a question's evidence dia_ids covered by the top k memories returned.",
        "- NDCG@10: binary gain, rank i gains 1 when its memory covers an evidence dia_id not covered by any",
        "  higher-ranked memory; DCG = sum gain_i / log2(i + 1); ideal = min(|evidence|, 10) gains of 1 at ranks 1..n.",
        "- turns@10: distinct dia_ids (any) the top 10 cover; redundant@10: returned memories whose dia_ids are all",
        "  covered by higher-ranked ones (an item and its own turn both taking a slot).",
        "- a memory covers the messages its provenance names (episode:<id>#m<i,j>; episode:<id> = all of them), a",
        "  direct one its metadata dia_id; insights and conclusions (provenance consolidation:<run>) cover nothing.",
        "",
        "## What each agent holds (day 0)",
        "",
        storage_table(run, scopes),
        "",
        "- rows/turn = memories the agent holds (live, GET memories) / turns posted; reachable = share of the",
        "  evidence covered by any stored memory (what a perfect ranking could reach).",
        "- consolidation passes before the day-0 recall (the stack's beat, real clock): "
        + "; ".join(
            f"{v}: {', '.join(f'{k} {n}' for k, n in sorted(c.items())) or 'none'}" for v, c in run.passes_day0.items()
        ),
        "- episodes by final status: "
        + "; ".join(
            f"{v}: {', '.join(f'{k} {n}' for k, n in sorted(w['statuses'].items()))}" for v, w in run.waits.items()
        )
        + ("" if not any(w["timed_out"] for w in run.waits.values()) else " (**timed out waiting**)"),
        f"- write time: (c) {fmt(run.write_s.get('episodes', float('nan')))} s alone; then (b) "
        f"{fmt(run.write_s.get('reflect', float('nan')))} s and (a) {fmt(run.write_s.get('direct', float('nan')))} s "
        "side by side.",
        f"- provenance entries that did not map to a posted message: {sum(unmapped.values())}"
        + (f" ({', '.join(f'{k}: {v}' for k, v in unmapped.most_common(5))})" if unmapped else ""),
        f"- evidence: {sum(c.dropped_ids for c in convs)} malformed or unknown dia_ids dropped.",
        "",
        "## Ingest throughput of (c)",
        "",
        md_table(
            ["", "value"],
            [
                ["episodes / messages", f"{ing['episodes']:,} / {ing['messages']:,}"],
                ["first POST to last stored, s", fmt(ing["seconds"])],
                ["episodes/s", fmt(eps_s, 2)],
                ["messages/s", fmt(msg_s)],
                [f"bare embedder, texts/s (batch {batch}, the same turn texts)", fmt(ceiling)],
                [
                    "messages/s / embedder texts/s",
                    f"{msg_s / ceiling:.0%}" if ceiling == ceiling and ceiling else "n/a",
                ],
            ],
        ),
        "",
        "- the embedder: memworker.models.embeddings.for_settings(Settings.from_env(os.environ)).embed in the bench",
        '  process right after (c) was stored, over every turn text ("Speaker: text"), after a warm-up batch;',
        "  a worker embeds more than one text per message when it writes turns and items (rows/turn above).",
        "",
        "- LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0 (/work/shared/benchdata/locomo/SOURCE.md).",
        "",
        "## Environment",
        "",
        environment_note(load_before, command_line(), stack),
    ]
    return "\n".join(out)


def headline(run: Run) -> str:
    r = {v: mean([a.recall_at(10) for a in run.answers[(v, 0)]]) for v in VARIANTS}
    return ", ".join(f"{v} R@10 {r[v]:.3f}" for v in VARIANTS)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations (a quick run)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for a variant's episodes")
    p.add_argument("--data", type=Path, default=DATA)
    add_stack_args(p)
    args = p.parse_args(argv)
    from memworker.settings import Settings

    load_before = loadavg()
    total_convs = len(json.loads(args.data.read_text()))
    convs = load(args.data, args.conversations)
    max_bytes = Settings.from_env(os.environ).max_content_bytes

    with stack_from_args(args, raise_limits=True) as stack:
        key, tag = run_key(stack, "episodes")
        prefix = "" if stack.process is not None else f"{tag}-"  # a shared stack: fresh agent ids
        run = Run(convs, {v: {c.sample_id: f"{prefix}{v}-{c.sample_id}" for c in convs} for v in VARIANTS})
        ingest(stack, key, run, args, max_bytes)
        with client_for(stack, key) as client:
            for v in VARIANTS:
                run.passes_day0[v] = consolidation_passes(client, list(run.agents[v].values()))
        evaluate(stack, key, run, VARIANTS, 0)
        print(f"day 0: {headline(run)}", flush=True)
        text = report(run, args, total_convs, load_before, stack)
    print()
    print(text)
    print(f"\nwritten to {write_report('episodes_recall.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
