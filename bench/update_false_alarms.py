"""What the knowledge-update rules decide among one real conversation's own statements.

A long conversation holds few real updates and many statements on one topic: every verdict the
rules give there (supersede or review) is a candidate false alarm, and a supersede also retires
the turn the statement came from. This counts them on conversations nobody wrote the rules
against, beside the same rules with the statement-length bounds off (the rules before them), in
the same run.

    python bench/update_false_alarms.py [--beam 1-10] [--locomo 10] [--show 20]

Pure (no server): each episode as bench/assistant_recall.py writes it (BEAM: one per exchange;
LoCoMo: one per session) through the offline reflector and reflection.settle (the kinds'
examples); each new item of a kind the rules judge (rules.CHANGING_KINDS) against the earlier items governance would compare it with
(lifecycle/governance.py: its 8 nearest at cosine >= 0.15, and those sharing one of its 2 rarest
terms), with memworker.domain.rules.judge and the default policy. A conversation's true updates
are few (BEAM's knowledge_update questions: 2 per conversation); the printed sample shows what
the verdicts were. Writes bench/results/update_false_alarms.md."""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import assistant_recall as ar  # noqa: E402
from _common import command_line, environment_note, loadavg, md_table, progress, write_report  # noqa: E402

from memworker import reflection  # noqa: E402
from memworker.domain import rules, tokens, updates  # noqa: E402
from memworker.domain.policy import Policy  # noqa: E402

NEAREST, MIN_COSINE, RARE_TERMS = 8, 0.15, 2  # governance's update candidates, as its constants say
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def items_of(conv: ar.Conv, embedder: Any) -> list[rules.Fact]:
    """The conversation's reflected items of the judged kinds, in the order they were said, as
    the write keeps them (reflection.settle)."""
    out: list[rules.Fact] = []
    for body in conv.bodies:
        messages = body["messages"]
        result = reflection.settled(reflection.OfflineReflector().reflect(reflection.Episode("", messages)), embedder)
        for item in result.items:
            if item.kind in rules.CHANGING_KINDS:
                speaker = messages[item.messages[0]].get("name") if item.messages else None
                when = T0 + timedelta(minutes=len(out))
                out.append(rules.Fact(str(len(out)), item.text, item.kind, "L1", item.confidence, when, 0, speaker))
    return out


def compared(facts: list[rules.Fact], vectors: np.ndarray) -> Iterator[tuple[rules.Fact, rules.Fact]]:
    """(older, newer) for each item and each earlier one governance would compare it with."""
    terms = [set(tokens.tokenize(f.text)) for f in facts]
    df = Counter(t for ts in terms for t in ts)
    for j in range(1, len(facts)):
        cos = vectors[:j] @ vectors[j]
        near = [int(i) for i in np.argsort(-cos)[:NEAREST] if cos[i] >= MIN_COSINE]
        rare = set(sorted(terms[j], key=lambda t: (df[t], t))[:RARE_TERMS])
        sharing = [i for i in range(j) if rare & terms[i]]
        for i in dict.fromkeys(near + sharing):
            yield facts[i], facts[j]


class Unbounded:
    """The rules with the statement-length bounds off: the rules before them."""

    def __enter__(self) -> None:
        self.saved = updates._MAX_STATEMENT_TERMS, updates._MAX_CLAUSED_TERMS
        updates._MAX_STATEMENT_TERMS = updates._MAX_CLAUSED_TERMS = 1 << 30

    def __exit__(self, *_: object) -> None:
        updates._MAX_STATEMENT_TERMS, updates._MAX_CLAUSED_TERMS = self.saved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--beam", default="1-10", help="BEAM conversations (a list or range; '' for none)")
    p.add_argument("--locomo", type=int, default=10, help="the first N LoCoMo conversations")
    p.add_argument("--show", type=int, default=20, help="verdicts of today's rules to print, sampled")
    args = p.parse_args(argv)
    load_before = loadavg()
    markers: Counter[str] = Counter()
    convs = [ar.load_beam(ar.BEAM, n, markers) for n in ar.conversation_list(args.beam)] if args.beam else []
    convs += ar.load_locomo(args.locomo) if args.locomo else []
    embedder = ar.embedder()
    policy = Policy()
    counts: Counter[tuple[str, str, str]] = Counter()
    shown: list[tuple[str, rules.Verdict]] = []
    for conv in progress(convs, desc="conversations", unit="conv"):
        facts = items_of(conv, embedder)
        counts[(conv.corpus, "", "items")] += len(facts)
        if len(facts) < 2:
            continue
        vectors = np.vstack([embedder.embed([f.text for f in facts[i : i + 64]]) for i in range(0, len(facts), 64)])
        for older, newer in compared(facts, vectors):
            counts[(conv.corpus, "", "pairs")] += 1
            verdict = rules.judge(older, newer, policy)
            if verdict is not None:
                counts[(conv.corpus, "bounded", verdict.action)] += 1
                shown.append((conv.name, verdict))
            with Unbounded():
                before = rules.judge(older, newer, policy)
            if before is not None:
                counts[(conv.corpus, "unbounded", before.action)] += 1
    rows = []
    for corpus in dict.fromkeys(c.corpus for c in convs):
        n = counts[(corpus, "", "items")]
        for rule, label in (("unbounded", "without the length bounds (before)"), ("bounded", "today's rules")):
            sup, rev = counts[(corpus, rule, "supersede")], counts[(corpus, rule, "review")]
            rows.append(
                [corpus, label, n, counts[(corpus, "", "pairs")], sup, rev, f"{100 * (sup + rev) / max(n, 1):.1f}"]
            )
    random.Random(0).shuffle(shown)
    sample = [
        f"- {name}, {v.action} ({v.reason.split(' changed')[0].split(' contradiction')[0]}): "
        f"{v.older.text[:150]!r} -> {v.newer.text[:150]!r}"
        for name, v in shown[: args.show]
    ]
    report = "\n".join(
        [
            "# Knowledge-update verdicts among one real conversation's own statements",
            "",
            f"BEAM conversations {args.beam or 'none'} (one episode per exchange) and the first {args.locomo} LoCoMo "
            "conversations (one per session), through the offline reflector; each new item judged against the earlier "
            "items governance compares it with. Few of these are real updates (BEAM asks about 2 per conversation).",
            "",
            md_table(
                ["corpus", "rules", "items", "pairs compared", "supersede", "review", "verdicts per 100 items"], rows
            ),
            "",
            f"## A sample of today's verdicts ({min(args.show, len(shown))} of {len(shown)})",
            "",
            *(sample or ["- none"]),
            "",
            "## Environment",
            "",
            environment_note(load_before, command_line()),
        ]
    )
    print(report)
    print(f"\nwritten to {write_report('update_false_alarms.md', report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
