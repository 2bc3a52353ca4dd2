"""int8 query embeddings (MEMWORKER_QUERY_EMBEDDING_PRECISION=int8) against fp32 ones, over the
same fp32-stored memories, in one run: recall quality on LoCoMo, the vectors' agreement, and
the CPU per query.

Run:  python bench/episodes_recall.py --keep        # writes LoCoMo through episodes, keeps the data
      python -m memworker --data-dir DIR/data up &   # that data dir's stack, running again
      python bench/query_precision.py --data-dir DIR/data

It reads the agents episodes_recall.py wrote (direct-<conv> and episodes-<conv>: every turn
as a memory, and the default episodes path), maps each memory to the LoCoMo turns it covers
as that bench does (episode ids from the episodes' idempotency keys), and asks every question
of categories 1-4 with evidence twice: with the query embedded by the fp32 model (the
product's embedder, embeddings.for_settings) and by its int8 copy (embeddings.load with
precision="int8"), in turn, the order alternating question by question. Each recall is
memworker.recall.hybrid.recall (the API's statement, k=10, the agent's effective policy) on the app
role's connection in the tenant's transaction, without the access bump: both see the same
rows, so only the query vector differs. (The API's recalls bump access counts, which feed the
priors; episodes_recall.py's figures include that, these do not.)

Reported: R@5, R@10 and NDCG@10 per variant and category for both, their difference, the share
of questions whose top 10 is the same list; cosine between the two vectors of each distinct
question (min, p1, mean); CPU per question (thread CPU time of the embed call, one question at
a time, alternating) p50 and mean, and the ratio. Writes bench/results/query_precision.md
(--no-write: print only)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_line, environment_note, loadavg, md_table, percentile, progress, write_report  # noqa: E402
from episodes_recall import DATA, Answer, Conversation, Mapper, episode_bodies, load, mean  # noqa: E402

from memworker.tenancy import service as tenancy

K = 10
VARIANTS = ("episodes", "direct")
CATEGORY = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}


def connect(data_dir: Path) -> tuple[Any, Any]:
    """(owner connection, app-role pool) of the running stack on data_dir."""
    from memworker.storage import db

    info = json.loads((data_dir / "stack.json").read_text())
    return db.connect(info["admin_database_url"]), db.open_pool(info["database_url"], max_size=1)


def agents_of(owner: Any, convs: list[Conversation]) -> tuple[Any, dict[tuple[str, str], str]]:
    """(tenant id, (variant, sample_id) -> agent id) of the newest run on the stack."""
    found: dict[tuple[str, str], tuple[Any, str]] = {}
    rows = owner.execute(
        "SELECT tenant_id, agent_id, max(created_at) AS at FROM memworker.memories "
        "WHERE agent_id ~ '(^|-)(episodes|direct)-' GROUP BY 1, 2 ORDER BY at"
    ).fetchall()
    for r in rows:
        for v in VARIANTS:
            for c in convs:
                if r["agent_id"] == f"{v}-{c.sample_id}" or r["agent_id"].endswith(f"-{v}-{c.sample_id}"):
                    found[(v, c.sample_id)] = (r["tenant_id"], r["agent_id"])
    missing = [f"{v}-{c.sample_id}" for v in VARIANTS for c in convs if (v, c.sample_id) not in found]
    if missing:
        raise SystemExit(f"no agents {missing[:3]}...: run bench/episodes_recall.py --keep on this stack first")
    tenants = {t for t, _ in found.values()}
    if len(tenants) != 1:
        raise SystemExit(f"the agents are in {len(tenants)} tenants; use a stack with one episodes_recall run")
    return tenants.pop(), {k: a for k, (_, a) in found.items()}


def mapper_for(owner: Any, agent: str, conv: Conversation) -> Mapper:
    """episode id -> dia_id per message, from the episodes' idempotency keys (the bodies
    episodes_recall.py posted, in the same order)."""
    bodies, dias = episode_bodies(conv, "episodes", 10**9)
    by_key = {b["idempotency_key"]: d for b, d in zip(bodies, dias, strict=True)}
    mapper = Mapper()
    rows = owner.execute("SELECT id, idempotency_key FROM memworker.episodes WHERE agent_id = %s", [agent]).fetchall()
    for r in rows:
        if r["idempotency_key"] in by_key:
            mapper.episodes[str(r["id"])] = by_key[r["idempotency_key"]]
    return mapper


class Embedders:
    """The two query embedders and the CPU each spent per question."""

    def __init__(self) -> None:
        from memworker.models import embeddings
        from memworker.settings import Settings

        s = Settings.from_env(os.environ)
        self.models = {
            "fp32": embeddings.for_settings(s),
            "int8": embeddings.load(
                s.embedding_model,
                s.embedding_batch_size,
                s.embedding_threads,
                backend="onnx",
                cache_dir=s.embedding_cache_dir,
                precision="int8",
            ),
        }
        self.cpu_ms: dict[str, list[float]] = defaultdict(list)
        self.vectors: dict[str, dict[str, np.ndarray]] = {}  # question -> precision -> vector
        for m in self.models.values():
            m.embed(["warm up"])

    def both(self, text: str, first: str) -> dict[str, np.ndarray]:
        if text not in self.vectors:
            order = [first, *(p for p in self.models if p != first)]
            out = {}
            for p in order:
                started = time.thread_time()
                out[p] = self.models[p].embed([text])[0]
                self.cpu_ms[p].append((time.thread_time() - started) * 1000)
            self.vectors[text] = out
        return self.vectors[text]


def ask_all(
    pool: Any, tenant: Any, owner: Any, convs: list[Conversation], agents: dict[tuple[str, str], str], emb: Embedders
) -> tuple[dict[tuple[str, str], list[Answer]], dict[str, int]]:
    """(variant, precision) -> answers; variant -> questions whose top 10 is the same list."""
    from memworker.recall import hybrid as recall
    from memworker.storage import db

    answers: dict[tuple[str, str], list[Answer]] = defaultdict(list)
    same: dict[str, int] = defaultdict(int)
    bar = progress(total=len(VARIANTS) * sum(len(c.questions) for c in convs), desc="recall", unit="q")
    n = 0
    for conv in convs:
        for v in VARIANTS:
            agent = agents[(v, conv.sample_id)]
            mapper = mapper_for(owner, agent, conv)
            with db.tenant_tx(pool, tenant) as conn:
                policy = tenancy.policy_for(conn, tenant_id=tenant, agent_id=agent)
                for q in conv.questions:
                    vecs = emb.both(q.text, "fp32" if n % 2 == 0 else "int8")
                    n += 1
                    ids = {}
                    for p, vec in vecs.items():
                        query = recall.Query(q.text, K)
                        hits = recall.recall(conn, vec, tenant_id=tenant, agent_id=agent, query=query, policy=policy)
                        ids[p] = [h["id"] for h in hits]
                        covered = tuple(mapper.covers(h) for h in hits)
                        answers[(v, p)].append(Answer(conv.index, q.category, q.evidence, covered, 0.0))
                    same[v] += ids["fp32"] == ids["int8"]
                    bar.update(1)
    bar.close()
    return answers, same


def quality_table(answers: dict[tuple[str, str], list[Answer]], same: dict[str, int]) -> str:
    rows = []
    for v in VARIANTS:
        for cat in (None, 1, 2, 3, 4):
            pair = [[a for a in answers[(v, p)] if cat in (None, a.category)] for p in ("fp32", "int8")]
            cells: list[Any] = [v, "all (1-4)" if cat is None else CATEGORY[cat], len(pair[0])]
            for metric in (lambda a: a.recall_at(5), lambda a: a.recall_at(K), lambda a: a.ndcg(K)):
                f, i = (mean([metric(a) for a in side]) for side in pair)
                cells.append(f"{f:.3f} / {i:.3f} / {i - f:+.3f}")
            if cat is None:
                cells.append(f"{same[v]} of {len(pair[0])}")
            else:
                cells.append("")
            rows.append(cells)
    head = ["variant", "questions", "n", "R@5 (fp32 / int8 / diff)", "R@10", "NDCG@10", "same top 10"]
    return md_table(head, rows)


def report(
    args: argparse.Namespace, convs: list[Conversation], answers: Any, same: Any, emb: Embedders, before: str
) -> str:
    f32 = np.array([v["fp32"] for v in emb.vectors.values()])
    i8 = np.array([v["int8"] for v in emb.vectors.values()])
    cos = np.sum(f32 * i8, axis=1)
    cpu = {p: emb.cpu_ms[p] for p in ("fp32", "int8")}
    r10 = {p: mean([a.recall_at(K) for a in answers[("episodes", p)]]) for p in ("fp32", "int8")}
    diff = r10["int8"] - r10["fp32"]
    lines = [
        "# int8 query embeddings over fp32-stored memories (LoCoMo)",
        "",
        f"{len(convs)} conversations, {sum(len(c.questions) for c in convs)} questions (categories 1-4 with "
        f"evidence), {len(emb.vectors)} distinct question texts; the memories episodes_recall.py wrote "
        "(fp32 vectors); recall k=10 in-process without the access bump, fp32 and int8 queries in turn.",
        "",
        f"**LoCoMo R@10 through episodes: fp32 {r10['fp32']:.4f}, int8 {r10['int8']:.4f} "
        f"({diff:+.4f}; the bound: ±0.005, {'within' if abs(diff) <= 0.005 else 'OUTSIDE'}).**",
        "",
        quality_table(answers, same),
        "",
        "| query vectors | n | min | p1 | p5 | mean |",
        "|---|---|---|---|---|---|",
        f"| cosine(int8, fp32) per question | {len(cos)} | {cos.min():.4f} | {np.percentile(cos, 1):.4f} "
        f"| {np.percentile(cos, 5):.4f} | {cos.mean():.4f} |",
        "",
        "| CPU per question (ms, one at a time, 1 thread) | n | p50 | mean | p95 |",
        "|---|---|---|---|---|",
    ]
    for p in ("fp32", "int8"):
        lines.append(
            f"| {p} | {len(cpu[p])} | {percentile(cpu[p], 50):.2f} | {mean(cpu[p]):.2f} | {percentile(cpu[p], 95):.2f} |"
        )
    lines += [
        "",
        f"- int8 / fp32 CPU per question: p50 {percentile(cpu['int8'], 50) / percentile(cpu['fp32'], 50):.2f}, "
        f"mean {mean(cpu['int8']) / mean(cpu['fp32']):.2f} (same process, alternating).",
        "- R@k, NDCG@10: as bench/episodes_recall.py computes them (a memory covers the turns its provenance "
        "or metadata names).",
        "",
        environment_note(before, command_line(), None),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data-dir", type=Path, required=True, help="the data dir of a running stack episodes_recall.py wrote"
    )
    p.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    before = loadavg()
    convs = load(args.data, args.conversations)
    owner, pool = connect(args.data_dir)
    try:
        tenant, agents = agents_of(owner, convs)
        emb = Embedders()
        answers, same = ask_all(pool, tenant, owner, convs, agents, emb)
    finally:
        pool.close()
        owner.close()
    text = report(args, convs, answers, same, emb, before)
    print(text)
    if not args.no_write:
        print(f"\nwritten to {write_report('query_precision.md', text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
