"""The fleet simulator: realistic multi-session traffic from many agents against a running
stack, then a sleep pass for every agent, then a summary an operator can read.

    memworker demo --agents 100 --episodes 20"""

from __future__ import annotations

import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from memworker.domain import memories
from memworker.sdk import Client, Recalled

ROLES = ["support", "devops", "research", "sales", "tutor"]
PEOPLE = ["Ana", "Bo", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana"]
SYSTEMS = ["billing", "search", "auth", "ledger", "gateway", "scheduler", "reporting"]
TEMPLATES = [
    "{p} prefers answers by email rather than phone calls.",
    "We decided to move the {s} service to Postgres 16 next sprint.",
    "The {s} deploy failed because the migration timed out after {n} minutes.",
    "{p} reported that the {s} dashboard is slow on Mondays.",
    "To restart {s} safely, drain the queue first, then roll the pods one by one.",
    "Lesson learned: the {s} cache must be warmed before traffic switches over.",
    "{p} asked for a summary of open {s} incidents every Friday.",
    "The {s} error rate went up to {n} percent after the last release.",
    "{p} likes short bullet-point answers and dislikes long reports.",
    "Turns out the {s} outage was caused by an expired TLS certificate.",
]
# The recall examples ask what an agent was told: a question for a template, its answer that
# template's sentence with the same names (any number: the agent may have been told more than one).
QUESTIONS = {
    0: "How does {p} want to be contacted?",
    2: "Why did the {s} deploy fail?",
    1: "What did we decide about the {s} service?",
    4: "How do we restart {s} safely?",
    9: "What caused the {s} outage?",
}


@dataclass(frozen=True)
class Told:
    """A question an agent can answer from what it was told, and the sentence that answers it."""

    question: str
    answer: str
    template: int  # which of TEMPLATES the answer is

    def answered_by(self, text: str) -> bool:
        """Whether a memory says the answer: every word of it but its numbers."""
        words = set(memories.normalise(text).split())
        return all(w in words for w in memories.normalise(self.answer).split() if not w.isdigit())


@dataclass
class Summary:
    agents: int
    episodes: int
    ingest_s: float
    memories_per_agent: float
    insights: int
    recall_ms: list[float] = field(default_factory=list)
    examples: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)
    asked: int = 0  # questions about what the agent was told
    right_first: int = 0  # of them, answered by the first memory recall returned
    shown: set[int] = field(default_factory=set)  # the templates the examples ask about

    def render(self) -> str:
        rate = self.episodes / self.ingest_s if self.ingest_s else 0.0
        lat = sorted(self.recall_ms)
        p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))] if lat else 0.0
        lines = [
            "",
            "memworker demo summary",
            "----------------------",
            f"agents {self.agents}, episodes {self.episodes}: {rate:.1f} episodes/s accepted to stored",
            f"memories per agent (mean) {self.memories_per_agent:.1f}; insights written by sleep {self.insights}",
            f"recall latency server-side p50 {statistics.median(lat) if lat else 0:.1f} ms, p95 {p95:.1f} ms "
            f"over {len(lat)} recalls",
            f"questions about what an agent was told answered by the first memory: {self.right_first} of {self.asked}",
            "",
            "recall examples (score: bm25 / vector / prior):",
        ]
        for agent, question, hits in self.examples:
            lines.append(f"  [{agent}] {question}")
            for h in hits[:3]:
                s = h.get("signals", {})
                lines.append(
                    f"    {h['score']:.3f} ({s.get('bm25', 0):.2f} / {s.get('vector', 0):.2f} / "
                    f"{s.get('prior', 0):.3f}) {h['kind']:<10} {h['text'][:90]}"
                )
        return "\n".join(lines)


def _episode(rng: random.Random) -> tuple[str, list[Told]]:
    """Three sentences of the templates, and the questions they answer."""
    picks = rng.sample(range(len(TEMPLATES)), 3)
    sentences, told = [], []
    for t in picks:
        slots = {"p": rng.choice(PEOPLE), "s": rng.choice(SYSTEMS), "n": rng.randint(2, 40)}
        sentence = TEMPLATES[t].format(**slots)
        sentences.append(sentence)
        if t in QUESTIONS:
            told.append(Told(QUESTIONS[t].format(**slots), sentence, t))
    return " ".join(sentences), told


def run(client: Client, *, agents: int, episodes: int, seed: int = 7, sessions: int = 3) -> Summary:
    """Post agents × episodes, wait for them to be stored, run sleep, recall; return the summary."""
    rng = random.Random(seed)
    names = [f"demo-{ROLES[i % len(ROLES)]}-{i:03d}" for i in range(agents)]
    posted: list[tuple[str, str]] = []
    told: dict[str, list[Told]] = {name: [] for name in names}
    started = time.monotonic()
    with tqdm(total=agents * episodes, desc="episodes", unit="ep") as bar:
        for name in names:
            batch = []
            for j in range(episodes):
                content, answers = _episode(rng)
                told[name] += answers
                batch.append(
                    {
                        "content": content,
                        "session_id": f"{name}-s{j * sessions // episodes}",
                        "idempotency_key": f"{name}-{j}-{seed}",
                    }
                )
            for out in client.add_episodes(name, batch):
                posted.append((name, out["episode_id"]))
            bar.update(episodes)
    with tqdm(total=len(posted), desc="stored", unit="ep") as bar:
        for name, eid in posted:
            client.wait_for_episode(name, eid, timeout=600)
            bar.update(1)
    ingest_s = time.monotonic() - started

    runs = []
    for name in tqdm(names, desc="sleep", unit="agent"):
        try:
            runs.append((name, client.consolidate(name)))
        except Exception as exc:  # consolidation off for this tenant: say so, go on
            tqdm.write(f"sleep not run for {name}: {exc}")
    insights = 0
    deadline = time.monotonic() + 300
    for name, _ in runs:
        while time.monotonic() < deadline:
            reports = client.consolidation_runs(name, limit=1)
            if reports and reports[0]["status"] in ("done", "skipped", "failed"):
                insights += int(reports[0].get("insights_written") or 0)
                break
            time.sleep(0.2)

    memories = [len(client.list_memories(n, limit=500)["memories"]) for n in names]
    summary = Summary(agents, len(posted), ingest_s, statistics.mean(memories), insights)

    asked = [(name, rng.choice(told[name])) for name in names * 3 if told[name]]

    def ask(job: tuple[str, Told]) -> tuple[str, Told, Recalled]:
        name, t = job
        return name, t, client.recall(name, t.question, k=5, explain=True)

    with ThreadPoolExecutor(max_workers=8) as pool:
        for name, t, out in tqdm(pool.map(ask, asked), total=len(asked), desc="recall", unit="q"):
            summary.recall_ms.append(out["took_ms"])
            hits = out["memories"]
            right = bool(hits) and t.answered_by(hits[0]["text"])
            summary.right_first += right
            summary.asked += 1
            # an example per kind of question, the first asked, ranked right or not: right_first says how often
            if len(summary.examples) < 3 and t.template not in summary.shown:
                summary.shown.add(t.template)
                summary.examples.append((name, t.question, hits))
    return summary
