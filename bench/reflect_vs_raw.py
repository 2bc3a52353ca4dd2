"""Reflective write vs raw turns on LoCoMo: recall@10 of the evidence
turns and the number of memories stored, side by side.

Run:  python bench/reflect_vs_raw.py                     # all 10 conversations
      python bench/reflect_vs_raw.py --conversations 3   # a subset (said so in the report)
      python bench/reflect_vs_raw.py --api-url URL --data-dir DIR

Without --api-url it starts `memworker up` on a temporary data dir and free ports and stops
it at the end. It reads /work/shared/benchdata/locomo/locomo10.json (see SOURCE.md there)
and, for each conversation, uses two agents of a fresh tenant:

  A (reflect): each session becomes one episode, POSTed as messages
     [{"role": "user", "content": "Speaker: text [image: caption]"}, ...] (split into chunks
     of --turns-per-episode turns, and always below the 32 KB content limit); the workers'
     reflector (offline unless the stack has an LLM configured) writes the memories. Each
     memory's provenance "episode:<id>#m<i,j>" maps back to the dia_ids of those messages
     ("episode:<id>" alone: every turn of that episode); a near-duplicate that strengthened
     an existing memory adds its provenance to it.
  B (raw): every turn stored as one direct memory (POST memories/batch), its text
     "Speaker: text [image: caption]" clipped to 280 characters, metadata {"dia_id": ...}.

After every episode is stored it asks each category 1-4 question that has evidence
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; malformed evidence ids are repaired
where obvious, unknown ones dropped) with recall k=10 against both agents. A memory covers
the dia_ids its provenance (A) or metadata (B) points to; recall@10 is the share of a
question's evidence dia_ids covered by the 10 memories returned. It also reports the
"reachable" share: evidence covered by any memory the agent stored at all (the ceiling
recall could reach). Writes bench/results/reflect_vs_raw.md."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Stack,
    add_stack_args,
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

from memworker import Client  # noqa: E402

DATA = Path("/work/shared/benchdata/locomo/locomo10.json")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
K = 10
MAX_CONTENT_BYTES = 32768
RAW_BATCH = 200
_PROVENANCE = re.compile(r"^episode:([0-9a-f-]{36})(?:#m([\d,]+))?$")
_DIA = re.compile(r"^D(\d+):(\d+)$")


# --- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str  # "Speaker: text [image: caption]"


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    sessions: list[tuple[str, list[Turn]]]  # (date, turns)
    questions: list[Question] = field(default_factory=list)
    dropped_ids: int = 0
    dropped_questions: int = 0

    @property
    def turns(self) -> list[Turn]:
        return [t for _, ts in self.sessions for t in ts]


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [image: {turn['blip_caption']}]"
    return text


def evidence_ids(raw: list[str], known: set[str]) -> tuple[list[str], int]:
    """Known dia_ids of an evidence list ("D8:6; D9:17" split, "D30:05" -> "D30:5"); and how
    many entries were dropped."""
    out, dropped = [], 0
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry).strip()):
            if not part:
                continue
            m = _DIA.match(part)
            dia = f"D{int(m.group(1))}:{int(m.group(2))}" if m else part
            if dia in known:
                if dia not in out:
                    out.append(dia)
            else:
                dropped += 1
    return out, dropped


def load(path: Path, limit: int | None) -> list[Conversation]:
    convs = []
    for raw in json.loads(path.read_text())[:limit]:
        c = raw["conversation"]
        numbers = sorted(
            int(m.group(1)) for key in c if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(c[key], list)
        )
        sessions = [
            (str(c.get(f"session_{n}_date_time", "")), [Turn(t["dia_id"], turn_text(t)) for t in c[f"session_{n}"]])
            for n in numbers
        ]
        conv = Conversation(str(raw["sample_id"]), sessions)
        known = {t.dia_id for t in conv.turns}
        for qa in raw["qa"]:
            if qa.get("category") not in CATEGORIES or not qa.get("evidence"):
                continue
            ids, dropped = evidence_ids(qa["evidence"], known)
            conv.dropped_ids += dropped
            if not ids:
                conv.dropped_questions += 1
                continue
            conv.questions.append(Question(qa["question"], int(qa["category"]), tuple(ids)))
        convs.append(conv)
    return convs


# --- A: the reflective write -------------------------------------------------------------------


def episode_chunks(turns: list[Turn], per_episode: int) -> list[list[Turn]]:
    """The session as one chunk, or chunks of per_episode turns; each under the content limit."""
    size = per_episode if per_episode > 0 else len(turns)
    chunks = [turns[i : i + size] for i in range(0, len(turns), size)]
    out: list[list[Turn]] = []
    while chunks:
        chunk = chunks.pop(0)
        rendered = "\n".join(f"user: {t.text}" for t in chunk)
        if len(rendered.encode()) > MAX_CONTENT_BYTES and len(chunk) > 1:
            half = len(chunk) // 2
            chunks[:0] = [chunk[:half], chunk[half:]]
        else:
            out.append(chunk)
    return out


def post_episodes(client: Client, agent: str, conv: Conversation, per_episode: int) -> dict[str, list[str]]:
    """POST the conversation's episodes; returns episode_id -> dia_id per message index."""
    bodies, dia_lists = [], []
    for n, (date, turns) in enumerate(conv.sessions, start=1):
        for j, chunk in enumerate(episode_chunks(turns, per_episode)):
            bodies.append(
                {
                    "messages": [{"role": "user", "content": t.text} for t in chunk],
                    "session_id": f"session_{n}",
                    "idempotency_key": f"{conv.sample_id}:s{n}:c{j}",
                    "metadata": {"session_date": date},
                }
            )
            dia_lists.append([t.dia_id for t in chunk])
    accepted = client.add_episodes(agent, bodies)
    return {a["episode_id"]: dias for a, dias in zip(accepted, dia_lists, strict=True)}


def wait_stored(client: Client, agents: list[str], expected: dict[str, int], timeout: float) -> dict[str, int]:
    """Poll each agent's episodes until all are stored or dead; returns counts by status."""
    started = time.perf_counter()
    total = sum(expected.values())
    bar = progress(total=total, desc="episodes stored", unit="ep")
    done_before = 0
    statuses: dict[str, int] = {}
    while True:
        statuses = defaultdict(int)
        for agent in agents:
            for ep in client.list_episodes(agent_id=agent, limit=1000):
                statuses[ep["status"]] += 1
        done = statuses["stored"] + statuses["dead"]
        bar.update(done - done_before)
        done_before = done
        if done >= total or time.perf_counter() - started > timeout:
            break
        time.sleep(1.0)
    bar.close()
    return dict(statuses)


def covered_by_provenance(memory: dict[str, Any], episodes: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    for source in memory.get("provenance") or []:
        m = _PROVENANCE.match(source)
        if not m or m.group(1) not in episodes:
            continue
        dias = episodes[m.group(1)]
        if m.group(2) is None:
            out.update(dias)
        else:
            out.update(dias[int(i)] for i in m.group(2).split(",") if int(i) < len(dias))
    return out


# --- B: raw turns ------------------------------------------------------------------------------------


def post_raw(client: Client, agent: str, conv: Conversation) -> int:
    from memworker.domain.memories import clip

    turns = conv.turns
    for i in range(0, len(turns), RAW_BATCH):
        client.add_memories(
            agent,
            [
                {
                    "text": clip(t.text),
                    "metadata": {"dia_id": t.dia_id},
                    "idempotency_key": f"{conv.sample_id}:{t.dia_id}",
                }
                for t in turns[i : i + RAW_BATCH]
            ],
        )
    return len(turns)


def covered_by_metadata(memory: dict[str, Any]) -> set[str]:
    dia = (memory.get("metadata") or {}).get("dia_id")
    return {dia} if dia else set()


# --- asking -----------------------------------------------------------------------------------------


def all_memories(client: Client, agent: str) -> list[dict[str, Any]]:
    out, cursor = [], None
    while True:
        page = client.list_memories(agent, limit=500, cursor=cursor)
        out += page["memories"]
        cursor = page.get("next_cursor")
        if not cursor:
            return out


@dataclass
class Side:
    name: str
    recall: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    reachable: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    memories: int = 0
    chars: int = 0
    took_ms: list[float] = field(default_factory=list)
    write_s: float = 0.0

    def mean(self, table: dict[int, list[float]], category: int | None = None) -> float:
        values = [v for c, vs in table.items() if category in (None, c) for v in vs]
        return sum(values) / len(values) if values else float("nan")

    def count(self, category: int | None = None) -> int:
        return sum(len(vs) for c, vs in self.recall.items() if category in (None, c))


def evaluate(client: Client, side: Side, agent: str, conv: Conversation, covers: Any, bar: Any) -> None:
    stored = all_memories(client, agent)
    side.memories += len(stored)
    side.chars += sum(len(m["text"]) for m in stored)
    everything = set().union(*(covers(m) for m in stored)) if stored else set()
    for q in conv.questions:
        resp = client.recall(agent, q.text, k=K)
        side.took_ms.append(float(resp["took_ms"]))
        got = set().union(*(covers(m) for m in resp["memories"])) if resp["memories"] else set()
        side.recall[q.category].append(len(got & set(q.evidence)) / len(q.evidence))
        side.reachable[q.category].append(len(everything & set(q.evidence)) / len(q.evidence))
        bar.update(1)


# --- report ----------------------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    convs: list[Conversation],
    a: Side,
    b: Side,
    statuses: dict[str, int],
    n_episodes: int,
    reflector: str,
    load_before: str,
    total_convs: int,
    stack: Stack,
) -> str:
    groups: list[tuple[str, int | None]] = [("all (1-4)", None)] + [(f"{c} {n}", c) for c, n in CATEGORIES.items()]
    rows = [
        [
            label,
            a.count(cat),
            fmt(a.mean(a.recall, cat), 3),
            fmt(b.mean(b.recall, cat), 3),
            fmt(a.mean(a.reachable, cat), 3),
            fmt(b.mean(b.reachable, cat), 3),
        ]
        for label, cat in groups
    ]
    turns = sum(len(c.turns) for c in convs)
    size_rows = [
        ["memories stored", f"{a.memories:,}", f"{b.memories:,}"],
        ["memories per turn", fmt(a.memories / turns, 3), fmt(b.memories / turns, 3)],
        ["characters stored (memory text)", f"{a.chars:,}", f"{b.chars:,}"],
        ["write time, s (A: POST until all stored; B: POST memories/batch)", fmt(a.write_s), fmt(b.write_s)],
        [
            "recall took_ms p50 / p95 (B asks second: its query embedding is a cache hit)",
            f"{fmt(percentile(a.took_ms, 50))} / {fmt(percentile(a.took_ms, 95))}",
            f"{fmt(percentile(b.took_ms, 50))} / {fmt(percentile(b.took_ms, 95))}",
        ],
    ]
    subset = (
        ""
        if len(convs) == total_convs
        else f" **Subset: {len(convs)} of {total_convs} conversations (--conversations {len(convs)}).**"
    )
    dropped_q = sum(c.dropped_questions for c in convs)
    dropped_ids = sum(c.dropped_ids for c in convs)
    return "\n".join(
        [
            "# Reflective write vs raw turns (LoCoMo)",
            "",
            f"{len(convs)} conversations ({', '.join(c.sample_id for c in convs)}), {turns:,} turns, "
            f"{n_episodes} episodes ({'whole sessions' if args.turns_per_episode <= 0 else f'{args.turns_per_episode} turns each'})"
            f", reflector: {reflector}; recall k={K}, default policy.{subset}",
            "",
            "A = reflective write (episodes -> worker -> memories); B = every turn stored raw as a direct memory.",
            "",
            md_table(["questions", "n", "A recall@10", "B recall@10", "A reachable", "B reachable"], rows),
            "",
            md_table(["", "A reflect", "B raw"], size_rows),
            "",
            "- recall@10: share of a question's evidence dia_ids covered by the 10 memories returned; a",
            "  reflected memory covers the turns named by its provenance (message indexes), a raw one its own turn.",
            "- reachable: share of the evidence covered by any memory the agent stored at all: what recall",
            "  could reach with perfect ranking.",
            f"- episodes by final status: {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}.",
            f"- evidence: {dropped_ids} malformed or unknown dia_ids dropped; {dropped_q} questions left without "
            "evidence skipped.",
            "- LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0 (/work/shared/benchdata/locomo/SOURCE.md).",
            "",
            "## Environment",
            "",
            environment_note(load_before, command_line(), stack),
        ]
    )


def reflector_name(client: Client, agent: str) -> str:
    """The reflector that stored the agent's episodes (from the episode records)."""
    names = {
        client.get_episode(agent, ep["episode_id"]).get("reflector")
        for ep in client.list_episodes(agent_id=agent, limit=3)
    }
    return ", ".join(sorted(n for n in names if n)) or "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    p.add_argument(
        "--turns-per-episode",
        type=int,
        default=0,
        help="split sessions into episodes of this many turns (0: one episode per session)",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for episodes to be stored")
    p.add_argument("--data", type=Path, default=DATA)
    add_stack_args(p)
    args = p.parse_args(argv)
    load_before = loadavg()
    total_convs = len(json.loads(args.data.read_text()))
    convs = load(args.data, args.conversations)
    a, b = Side("reflect"), Side("raw")

    with stack_from_args(args, raise_limits=True) as stack:
        key, run = run_key(stack, "rvr")
        agent_a = {c.sample_id: f"rvr-{run}-{c.sample_id}-reflect" for c in convs}
        agent_b = {c.sample_id: f"rvr-{run}-{c.sample_id}-raw" for c in convs}
        with Client(stack.api_url, key, timeout=300) as client:
            started = time.perf_counter()
            episodes: dict[str, dict[str, list[str]]] = {}
            for c in progress(convs, desc="A: POST episodes", unit="conv"):
                episodes[c.sample_id] = post_episodes(client, agent_a[c.sample_id], c, args.turns_per_episode)
            statuses = wait_stored(
                client, list(agent_a.values()), {c.sample_id: len(episodes[c.sample_id]) for c in convs}, args.timeout
            )
            a.write_s = time.perf_counter() - started
            started = time.perf_counter()
            for c in progress(convs, desc="B: POST raw turns", unit="conv"):
                post_raw(client, agent_b[c.sample_id], c)
            b.write_s = time.perf_counter() - started
            print(
                f"A: episodes stored in {a.write_s:.0f}s (statuses {statuses}); B: turns written in {b.write_s:.0f}s",
                flush=True,
            )
            reflector = reflector_name(client, agent_a[convs[0].sample_id])
            bar = progress(total=2 * sum(len(c.questions) for c in convs), desc="recall", unit="q")
            for c in convs:
                eps = episodes[c.sample_id]
                evaluate(client, a, agent_a[c.sample_id], c, lambda m, eps=eps: covered_by_provenance(m, eps), bar)
                evaluate(client, b, agent_b[c.sample_id], c, covered_by_metadata, bar)
            bar.close()
        text = report(
            args,
            convs,
            a,
            b,
            statuses,
            sum(len(e) for e in episodes.values()),
            reflector,
            load_before,
            total_convs,
            stack,
        )
    print()
    print(text)
    print(f"\nwritten to {write_report('reflect_vs_raw.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
