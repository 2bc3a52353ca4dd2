"""Knowledge-update pairs (the earlier bench, kept for bench/fleet_memory.py and
bench/pool_matches.py, which import its pairs and outcome_of through bench/knowledge_updates.py):
how often a statement that says the opposite of a live memory is taken
for an update (superseded or reviewed) rather than a confirmation, how often a true
paraphrase still confirms, and that a near miss (another person, product or place said in
nearly the same words) never does. The pairs are tests/data/knowledge_updates.jsonl (swapped
roles, negations, changed values, paraphrases, near misses).

    python bench/knowledge_update_pairs.py [--rules-only] [--api-url URL --api-key KEY --data-dir DIR]

1. The rules (pure, every pair): memworker.domain.rules.changed (what dedup, supersede,
   review and merge ask), against the contradiction rule alone (the rule before knowledge
   updates), in the same run; and dedup's whole decision (rules.confirms) at each pair's
   real cosine (the bundled embedder) with the default policy, against the cosine-and-words
   rule alone (dedup_similarity, no restated bar).
2. Through the API (unless --rules-only): per pair, one subject; the older statement as an
   episode, then the newer one; the outcome read back from the older memory (superseded,
   under review, or confirmed by the newer episode). Offline reflector, real embeddings.

Prints the rates and writes bench/results/knowledge_update_pairs.md."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    add_stack_args,
    command_line,
    create_tenant,
    environment_note,
    loadavg,
    md_table,
    stack_from_args,
    write_report,
)
from memworker.domain import rules
from memworker.domain.policy import Policy
from memworker.models import embeddings
from memworker.sdk import Client
from memworker.settings import Settings

PAIRS = Path(__file__).resolve().parent.parent / "tests" / "data" / "knowledge_updates.jsonl"
SHAPES = ("swap", "negation", "value", "paraphrase", "near-miss")
UPDATES = ("swap", "negation", "value")


def load_pairs() -> list[dict[str, str]]:
    return [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]


def cosines(pairs: list[dict[str, str]]) -> list[float]:
    """Each pair's cosine under the bundled embedder (what ingest's dedup compares)."""
    embedder = embeddings.load(Settings().embedding_model)
    vectors = np.asarray(embedder.embed([t for p in pairs for t in (p["older"], p["newer"])]), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(pairs))]


def right_by_rules(p: dict[str, str]) -> bool:
    """changed() says what the pair is: an update changes, a paraphrase and a near miss do not
    (a near miss is two facts; at most a changed value, which is not a confirmation either)."""
    how = rules.changed(p["older"], p["newer"])
    return how is not None if p["shape"] in UPDATES else how is None or p["shape"] == "near-miss"


def rule_rates(pairs: list[dict[str, str]]) -> tuple[list[list[Any]], list[str]]:
    """Per shape: the share judged right by rules.changed and by contradiction() alone; the
    share dedup decides right (only a paraphrase confirms) with the restated bar and without."""
    policy, cos = Policy(), cosines(pairs)
    rows, misses = [], []
    for shape in SHAPES:
        mine = [(p, c) for p, c in zip(pairs, cos, strict=True) if p["shape"] == shape]
        want = shape in UPDATES
        now = sum(right_by_rules(p) for p, _ in mine)
        before = sum((rules.contradiction(p["older"], p["newer"]) is not None) == want for p, _ in mine)
        dedup = [
            rules.confirms(
                p["older"], p["newer"], c, similarity=policy.dedup_similarity, restated=policy.dedup_restated_similarity
            )
            for p, c in mine
        ]
        strict = [rules.confirms(p["older"], p["newer"], c, similarity=policy.dedup_similarity) for p, c in mine]
        ok = [d == (shape == "paraphrase") for d in dedup]
        ok_strict = sum(d == (shape == "paraphrase") for d in strict)
        misses += [f"{shape}: {p['older']!r} -> {p['newer']!r}" for p, _ in mine if not right_by_rules(p)]
        misses += [
            f"{shape} (dedup, cosine {c:.3f}): {p['older']!r} -> {p['newer']!r}"
            for (p, c), good in zip(mine, ok, strict=True)
            if not good
        ]
        n = len(mine)
        rows.append(
            [
                shape,
                n,
                f"{100 * now / n:.1f} %",
                f"{100 * before / n:.1f} %",
                f"{100 * sum(ok) / n:.1f} %",
                f"{100 * ok_strict / n:.1f} %",
            ]
        )
    return rows, misses


def outcome(c: Client, agent: str, subject: str, older: str, newer: str) -> str:
    """superseded, reviewed, confirmed, both live, or no item (the reflector kept none)."""
    return outcome_of(c, agent, subject, older, newer)[0]


def outcome_of(c: Client, agent: str, subject: str, older: str, newer: str) -> tuple[str, str | None]:
    """(outcome, the older memory's id)."""
    first = c.add_episode(agent, older, subject=subject, metadata={"kind": "older"})
    old_ids = c.wait_for_episode(agent, first["episode_id"])["memory_ids"]
    second = c.add_episode(agent, newer, subject=subject, metadata={"kind": "newer"})
    new_ids = c.wait_for_episode(agent, second["episode_id"])["memory_ids"]
    if not old_ids or not new_ids:
        return "no item", None
    old = old_ids[0]
    if old in new_ids:
        return "confirmed", old
    if c.get_memory(agent, old)["superseded_by"]:
        return "superseded", old
    if any(r["older"]["id"] == old for r in c.reviews(agent, limit=500)):
        return "reviewed", old
    return "both live", old


def api_rates(pairs: list[dict[str, str]], args: argparse.Namespace) -> tuple[list[list[Any]], str]:
    with stack_from_args(args) as stack:
        _, key = create_tenant(stack, "knowledge-updates")
        c = Client(stack.api_url, key)
        got: dict[str, Counter[str]] = {s: Counter() for s in SHAPES}
        live: list[tuple[str, str]] = []  # (shape, older id) of the pairs left as two memories
        for i, p in enumerate(pairs):
            how, old = outcome_of(c, "ku-bench", f"pair-{i}", p["older"], p["newer"])
            got[p["shape"]][how] += 1
            if how == "both live" and old is not None:
                live.append((p["shape"], old))
        # the retention sweep merges near-duplicates dedup let through (a looser cosine bar)
        c.run_retention("ku-bench")
        for shape, old in live:
            if c.get_memory("ku-bench", old)["id"] != old:  # a merged-away id resolves to its survivor
                got[shape]["both live"] -= 1
                got[shape]["merged by the sweep"] += 1
        c.close()
        note = environment_note(args.load_before, command_line(), stack)
    rows = []
    for shape in SHAPES:
        n = sum(got[shape].values())
        if shape == "paraphrase":
            right, late = got[shape]["confirmed"], got[shape]["merged by the sweep"]
        elif shape == "near-miss":  # right: kept as a fact of its own, at ingest and by the sweep
            right = n - got[shape]["confirmed"]
            late = -got[shape]["merged by the sweep"]
        else:
            right, late = got[shape]["superseded"] + got[shape]["reviewed"], 0
        rows.append(
            [shape, n, f"{100 * right / n:.1f} %", f"{100 * (right + late) / n:.1f} %"]
            + [
                got[shape][k]
                for k in ("superseded", "reviewed", "confirmed", "merged by the sweep", "both live", "no item")
            ]
        )
    return rows, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules-only", action="store_true", help="skip the run through the API")
    add_stack_args(parser)
    args = parser.parse_args()
    args.load_before = loadavg()
    pairs = load_pairs()
    rows, misses = rule_rates(pairs)
    out = [
        "# Knowledge-update pairs",
        "",
        f"{len(pairs)} pairs from tests/data/knowledge_updates.jsonl. Right: an update (swap, negation, "
        "value) judged a change; a paraphrase judged no change and confirmed by dedup; a near miss "
        "(two facts in nearly the same words) never confirmed.",
        "",
        "## The rules",
        "",
        md_table(
            [
                "shape",
                "pairs",
                "right (rules.changed)",
                "right (contradiction alone, before)",
                "right (dedup: rules.confirms at the pair's cosine)",
                "right (dedup without the restated bar)",
            ],
            rows,
        ),
        "",
        "Misses: " + ("; ".join(misses) if misses else "none"),
    ]
    print("\n".join(out), flush=True)
    if not args.rules_only:
        api_rows, note = api_rates(pairs, args)
        part = [
            "",
            "## Through the API (ingest: dedup, then supersede or review)",
            "",
            "Right: an update superseded or reviewed; a paraphrase confirmed at ingest (folded into the "
            "older memory); a near miss not confirmed; with the sweep: also a paraphrase merged by the "
            "retention sweep that follows (a near miss merged by it is wrong).",
            "",
            md_table(
                [
                    "shape",
                    "pairs",
                    "right at ingest",
                    "right with the sweep",
                    "superseded",
                    "reviewed",
                    "confirmed",
                    "merged by the sweep",
                    "both live",
                    "no item",
                ],
                api_rows,
            ),
            "",
            note,
        ]
        print("\n".join(part), flush=True)
        out += part
    path = write_report("knowledge_update_pairs.md", "\n".join(out))
    print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
