"""Long messages: does recall through episodes find a long message as well as the same message
written directly, and as well as a plain dense search over whole messages?

The conversations are LoCoMo's, rewritten with long messages in one of two shapes (--shape):

  answers  (default) the first speaker's turns are short user messages; each turn of the other
           speaker opens a long assistant message, filled up to --words words with the text of
           another conversation's turns (an answer that goes on at length; what the filler says
           is never evidence, so the long messages mostly compete with the short ones);
  fold     one turn becomes a short user message, then the turns that follow are folded into
           one assistant message until it holds --words words (every folded turn kept whole,
           as "Speaker: text"; a session's end closes it): the evidence is mostly inside the
           long messages.

The first message of a session starts with the session's date in brackets. A question's
evidence is the set of messages that now hold its evidence turns (message level: a long
message counts once).

Three ways to the same messages, through the HTTP API of one default `memworker up`, and one
baseline computed here, side by side in one run (recall k=10, default policy):

  episodes  the conversation posted as episodes of 20 consecutive messages, each message
            {"role": "user", "content": "<user|assistant>: <text>"} (no name, no dates);
  direct    every message written as one memory (POST memories/batch), its content clipped as
            memworker.domain.memories.clip does (280 characters), metadata naming the message;
  dense     no stack: cosine between the question's embedding and each whole message's
            (the same content string), the 10 nearest messages; the embedder is the one a
            worker of this environment builds (memworker.models.embeddings.for_settings).

R@10: the share of a question's evidence messages covered by the 10 results (a memory covers
the messages its provenance or metadata names, bench/episodes_recall.Mapper). Also printed for
the episodes path, to say where it loses: how many memories a recall returns, how many distinct
messages its top 10 cover, how many of them are turns and items, how many memories collapsed
into the hits, R@10 with the recall asked for k=30 and cut at 10 distinct messages (what a
wider pool before the collapse would give), and R@10 by the length of the evidence message.

Run:  python bench/long_messages.py                       # the first 2 conversations (about 5 min)
      python bench/long_messages.py --conversations 10    # all of them (the answers shape: ~25 min)
      python bench/long_messages.py --shape fold
Options: --shape, --words N (the assistant message's minimum, 250), --conversations N,
--timeout S, --data PATH, --out NAME, and the stack options of bench/_common. Writes
bench/results/long_messages.md. Data:
/work/shared/benchdata/locomo/locomo10.json (SOURCE.md there; CC BY-NC 4.0)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stack,
    add_stack_args,
    command_line,
    environment_note,
    loadavg,
    md_table,
    progress,
    run_key,
    stack_from_args,
    write_report,
)
from episodes_recall import DATA, Answer, Conversation, Mapper, load, mean, wait_stored  # noqa: E402
from reflect_vs_raw import CATEGORIES  # noqa: E402

from memworker import Client  # noqa: E402
from memworker.domain.memories import MAX_TEXT_CHARS, clip  # noqa: E402

K = 10
WIDE_K = 30
EPISODE_MESSAGES = 20
DIRECT_BATCH = 200
VARIANTS = ("episodes", "direct", "dense")


# --- the long-message conversations ----------------------------------------------------------


@dataclass(frozen=True)
class Message:
    key: str  # "<sample>:m<n>", n its position in the conversation
    role: str  # "user" or "assistant"
    text: str

    @property
    def content(self) -> str:
        return f"{self.role}: {self.text}"


@dataclass(frozen=True)
class LongQuestion:
    text: str
    category: int
    evidence: tuple[str, ...]  # message keys


@dataclass
class LongConversation:
    index: int
    sample_id: str
    messages: list[Message]
    questions: list[LongQuestion] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)  # dia_id -> message key

    def emit(self, role: str, parts: list[str], dias: list[str]) -> None:
        key = f"{self.sample_id}:m{len(self.messages)}"
        self.messages.append(Message(key, role, " ".join(parts)))
        self.where.update((d, key) for d in dias)

    def ask(self, conv: Conversation) -> LongConversation:
        """The conversation's questions, each evidence turn as the message that holds it."""
        for q in conv.questions:
            keys = tuple(dict.fromkeys(self.where[d] for d in q.evidence if d in self.where))
            if keys:
                self.questions.append(LongQuestion(q.text, q.category, keys))
        return self


def fold(conv: Conversation, words: int, padding: Sequence[str]) -> LongConversation:
    """Shape "fold": short user messages and long assistant ones made of the turns that follow."""
    out = LongConversation(conv.index, conv.sample_id, [])
    for s in conv.sessions:
        turns = list(s.turns)
        i, head = 0, f"[{s.date}] " if s.date else ""
        while i < len(turns):
            out.emit("user", [head + turns[i].line], [turns[i].dia_id])
            head, i = "", i + 1
            j = i
            while j < len(turns) and sum(len(t.line.split()) for t in turns[i:j]) < words:
                j += 1
            if j > i:
                out.emit("assistant", [t.line for t in turns[i:j]], [t.dia_id for t in turns[i:j]])
            i = j
    return out.ask(conv)


def answers(conv: Conversation, words: int, padding: Sequence[str]) -> LongConversation:
    """Shape "answers": the first speaker's turns are short user messages; each turn of the
    other speaker opens a long assistant message, filled up to `words` words with text of
    another conversation (what it says is never evidence here)."""
    out = LongConversation(conv.index, conv.sample_id, [])
    first = conv.sessions[0].turns[0].speaker
    at = 0
    for s in conv.sessions:
        head = f"[{s.date}] " if s.date else ""
        for t in s.turns:
            if t.speaker == first:
                out.emit("user", [head + t.line], [t.dia_id])
            else:
                parts = [head + t.line]
                while sum(len(p.split()) for p in parts) < words:
                    parts.append(padding[at % len(padding)])
                    at += 1
                out.emit("assistant", parts, [t.dia_id])
            head = ""
    return out.ask(conv)


SHAPES = {"answers": answers, "fold": fold}


# --- writing ---------------------------------------------------------------------------------


def post_episodes(client: Client, agent: str, conv: LongConversation) -> dict[str, list[str]]:
    """The conversation as episodes of EPISODE_MESSAGES messages; episode id -> message keys."""
    bodies, keys = [], []
    for j in range(0, len(conv.messages), EPISODE_MESSAGES):
        chunk = conv.messages[j : j + EPISODE_MESSAGES]
        bodies.append(
            {
                "messages": [{"role": "user", "content": m.content} for m in chunk],
                "idempotency_key": f"long:{conv.sample_id}:{j}",
            }
        )
        keys.append([m.key for m in chunk])
    accepted = client.add_episodes(agent, bodies)
    return {a["episode_id"]: k for a, k in zip(accepted, keys, strict=True)}


def post_direct(client: Client, agent: str, conv: LongConversation) -> None:
    for i in range(0, len(conv.messages), DIRECT_BATCH):
        batch = conv.messages[i : i + DIRECT_BATCH]
        client.add_memories(
            agent,
            [{"text": clip(m.content), "metadata": {"dia_id": m.key}, "idempotency_key": m.key} for m in batch],
        )


# --- asking ----------------------------------------------------------------------------------


@dataclass
class Diagnostics:
    """What the episodes path's recalls returned, per question."""

    returned: list[int] = field(default_factory=list)  # memories a k=10 recall returned
    distinct: list[int] = field(default_factory=list)  # distinct messages its hits cover
    turns: list[int] = field(default_factory=list)  # hits that are turns
    items: list[int] = field(default_factory=list)  # hits that are reflected items (or other kinds)
    collapsed: list[int] = field(default_factory=list)  # memories collapsed into the hits
    wide: list[Answer] = field(default_factory=list)  # k=30 cut at 10 distinct messages


def first_distinct(hits: Sequence[frozenset[str]], n: int) -> tuple[frozenset[str], ...]:
    """The leading hits until they cover n distinct messages (the last may overshoot)."""
    out: list[frozenset[str]] = []
    seen: set[str] = set()
    for h in hits:
        if len(seen) >= n:
            break
        if h - seen:
            out.append(h)
            seen |= h
    return tuple(out)


def ask(client: Client, agent: str, conv: LongConversation, mapper: Mapper, diag: Diagnostics | None) -> list[Answer]:
    out = []
    for q in conv.questions:
        resp = client.recall(agent, q.text, k=K, explain=diag is not None)
        hits = tuple(mapper.covers(m) for m in resp["memories"])
        out.append(Answer(conv.index, q.category, q.evidence, hits, float(resp["took_ms"])))
        if diag is not None:
            mems = resp["memories"]
            diag.returned.append(len(mems))
            diag.distinct.append(len(frozenset().union(*hits)) if hits else 0)
            diag.turns.append(sum(1 for m in mems if m["kind"] == "turn"))
            diag.items.append(sum(1 for m in mems if m["kind"] != "turn"))
            diag.collapsed.append(sum(len(m.get("collapsed") or []) for m in mems))
            wide = client.recall(agent, q.text, k=WIDE_K)
            whits = first_distinct([mapper.covers(m) for m in wide["memories"]], K)
            diag.wide.append(Answer(conv.index, q.category, q.evidence, whits, float(wide["took_ms"])))
    return out


def dense(convs: Sequence[LongConversation]) -> list[Answer]:
    """Cosine over each whole message's embedding, the 10 nearest messages per question."""
    from memworker.models.embeddings import for_settings
    from memworker.settings import Settings

    embedder = for_settings(Settings.from_env(os.environ))
    out = []
    for conv in progress(convs, desc="dense baseline", unit="conv"):
        mvec = _unit(embedder.embed([m.content for m in conv.messages]))
        qvec = _unit(embedder.embed([q.text for q in conv.questions]))
        order = np.argsort(-(qvec @ mvec.T), axis=1, kind="stable")[:, :K]
        for q, row in zip(conv.questions, order, strict=True):
            hits = tuple(frozenset({conv.messages[int(j)].key}) for j in row)
            out.append(Answer(conv.index, q.category, q.evidence, hits, 0.0))
    return out


def _unit(vectors: Any) -> Any:
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Run:
    convs: list[LongConversation]
    answers: dict[str, list[Answer]] = field(default_factory=dict)
    diag: Diagnostics = field(default_factory=Diagnostics)
    rows: dict[str, int] = field(default_factory=dict)
    write_s: float = 0.0


def write_and_ask(stack: Stack, key: str, run: Run, timeout: float, prefix: str) -> None:
    agents = {v: {c.sample_id: f"{prefix}long-{v}-{c.sample_id}" for c in run.convs} for v in ("episodes", "direct")}
    mappers: dict[str, Mapper] = {}
    with Client(stack.api_url, key, timeout=600) as client:
        started = time.perf_counter()
        n_eps = 0
        for conv in progress(run.convs, desc="POST episodes + direct", unit="conv"):
            eps = post_episodes(client, agents["episodes"][conv.sample_id], conv)
            mappers[agents["episodes"][conv.sample_id]] = Mapper(eps)
            n_eps += len(eps)
            post_direct(client, agents["direct"][conv.sample_id], conv)
            mappers[agents["direct"][conv.sample_id]] = Mapper()
        wait = wait_stored(client, list(agents["episodes"].values()), n_eps, timeout, "episodes stored")
        run.write_s = time.perf_counter() - started
        if wait["timed_out"]:
            raise SystemExit(f"episodes not stored in {timeout:.0f}s: {wait['statuses']}")
        for v, by_conv in agents.items():
            run.rows[v] = sum(_count(client, a) for a in by_conv.values())

    def one(variant: str) -> list[Answer]:
        with Client(stack.api_url, key, timeout=600) as client:
            out: list[Answer] = []
            for conv in progress(run.convs, desc=f"recall {variant}", unit="conv"):
                agent = agents[variant][conv.sample_id]
                out += ask(client, agent, conv, mappers[agent], run.diag if variant == "episodes" else None)
            return out

    with ThreadPoolExecutor(2) as pool:
        futures = {v: pool.submit(one, v) for v in agents}
        run.answers.update({v: f.result() for v, f in futures.items()})


def _count(client: Client, agent: str) -> int:
    n, cursor = 0, None
    while True:
        page = client.list_memories(agent, limit=500, cursor=cursor)
        n += len(page["memories"])
        cursor = page.get("next_cursor")
        if not cursor:
            return n


# --- the report ------------------------------------------------------------------------------


def r_at(answers: Sequence[Answer], category: int | None = None) -> float:
    return mean([a.recall_at(K) for a in answers if category in (None, a.category)])


def _long_keys(run: Run) -> set[str]:
    return {m.key for c in run.convs for m in c.messages if len(m.content) > MAX_TEXT_CHARS}


def by_length(answers: Sequence[Answer], long_keys: set[str], want_long: bool) -> float:
    """R@10 over the evidence messages of one length class (longer than a memory's limit, or not)."""
    got = total = 0
    for a in answers:
        covered = frozenset().union(*a.hits[:K]) if a.hits else frozenset()
        for e in a.evidence:
            if (e in long_keys) == want_long:
                total += 1
                got += e in covered
    return got / total if total else float("nan")


def report(run: Run, args: argparse.Namespace, load_before: str, stack: Stack, total: int) -> str:
    msgs = [m for c in run.convs for m in c.messages]
    longs = [m for m in msgs if m.role == "assistant"]
    words = [len(m.text.split()) for m in longs]
    n_q = sum(len(c.questions) for c in run.convs)
    subset = "" if len(run.convs) == total else f" (a subset: the first {len(run.convs)} of {total})"
    a = run.answers
    rows = [["all (1-4)", n_q, *(f"{r_at(a[v]):.3f}" for v in VARIANTS)]]
    for cat, name in CATEGORIES.items():
        n = sum(1 for x in a["episodes"] if x.category == cat)
        rows.append([f"{cat} {name}", n, *(f"{r_at(a[v], cat):.3f}" for v in VARIANTS)])
    lk = _long_keys(run)
    rows.append(["evidence in long messages", "", *(f"{by_length(a[v], lk, True):.3f}" for v in VARIANTS)])
    rows.append(["evidence in short messages", "", *(f"{by_length(a[v], lk, False):.3f}" for v in VARIANTS)])
    d = run.diag
    diag_rows = [
        ["memories returned by a k=10 recall", f"{mean(d.returned):.2f}"],
        ["distinct messages the top 10 cover", f"{mean(d.distinct):.2f}"],
        ["turns / other kinds among them", f"{mean(d.turns):.2f} / {mean(d.items):.2f}"],
        ["memories collapsed into the hits", f"{mean(d.collapsed):.2f}"],
        [f"R@10, recall k={WIDE_K} cut at 10 distinct messages", f"{r_at(d.wide):.3f}"],
    ]
    return "\n".join(
        [
            "# Long messages: episodes vs direct writes vs a dense baseline",
            "",
            f"{len(run.convs)} LoCoMo conversations{subset} rewritten as short user messages and long "
            f"assistant ones (at least {args.words} words: {len(longs)} of {len(msgs)} messages, "
            f"{mean(words):.0f} words on average, {sum(len(m.content) > MAX_TEXT_CHARS for m in msgs)} "
            f"longer than {MAX_TEXT_CHARS} characters); {n_q} questions (categories 1-4), evidence at "
            f"message level; recall k={K}, default policy and settings.",
            "",
            md_table(["questions", "n", "R@10 episodes", "R@10 direct (clipped)", "R@10 dense (whole messages)"], rows),
            "",
            f"- episodes / direct / dense, all: {r_at(a['episodes']) / r_at(a['dense']):.3f} x and "
            f"{r_at(a['direct']) / r_at(a['dense']):.3f} x the dense baseline.",
            f"- rows held: episodes {run.rows['episodes']:,} (turns and items), direct {run.rows['direct']:,}; "
            f"written and stored in {run.write_s:.0f} s.",
            "",
            "## Where the episodes path's top 10 goes (per question, mean)",
            "",
            md_table(["measure", "value"], diag_rows),
            "",
            "- LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0 (/work/shared/benchdata/locomo/SOURCE.md).",
            "",
            "## Environment",
            "",
            environment_note(load_before, command_line(), stack),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conversations", type=int, default=2, help="the first N conversations (10: all)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="answers", help="how the long messages are made")
    p.add_argument("--words", type=int, default=250, help="an assistant message's minimum length in words")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds to wait for the episodes")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--out", default="long_messages.md", help="report file name in bench/results")
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before = loadavg()
    convs = load(args.data, None)
    shape = SHAPES[args.shape]
    # the padding of conversation i is the text of conversation i + 1's turns
    pads = [[t.content for t in convs[(c.index + 1) % len(convs)].turns] for c in convs]
    run = Run([shape(c, args.words, pads[c.index]) for c in convs[: args.conversations]])
    run.answers["dense"] = dense(run.convs)
    with stack_from_args(args, raise_limits=True) as stack:
        key, tag = run_key(stack, "long")
        prefix = "" if stack.process is not None else f"{tag}-"
        write_and_ask(stack, key, run, args.timeout, prefix)
        text = report(run, args, load_before, stack, len(convs))
    print()
    print(text)
    print(f"\nwritten to {write_report(args.out, text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
