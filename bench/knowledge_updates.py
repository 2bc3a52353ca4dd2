"""Knowledge updates: when a newer statement changes a live fact (same subject, same attribute,
new value), is the stale memory superseded (or sent to review) and does recall answer with
the new value; and do look-alike statements that are both true stay live.

The cases are bench/data/knowledge_updates/{dev,test}.jsonl (bench/knowledge_update_cases.py:
handwritten, from LoCoMo sessions, from BEAM's knowledge_update and contradiction_resolution
questions), split by a fixed hash of the id; the test half is frozen, tune on dev only.

    python bench/knowledge_updates.py [--split dev|test|all] [--limit N] [--rules-only]
        [--show-test-failures] [--concurrency 8] [--api-url URL --api-key KEY --data-dir DIR]

Through the API (a `memworker up` with default settings, offline reflector, real embeddings),
one fresh agent per case: the older messages as one episode (waited until stored), the newer
as a second one (waited), a retention sweep, then the question through recall (k = 3), read
back from the memories, their supersession and the open reviews. Then a sleep pass
(consolidation) and another sweep, and the same again. Per case:

- update, handled: every stale item of the older episode (its reflected items holding
  old_value) superseded or in an open review, and a live memory holding new_value in recall's
  top 3 above any holding only old_value; of those, superseded outright. Merged: a live fact
  holding both values that is not a newer message's own sentence ("Loki instead of
  Elasticsearch"), or the newer episode confirmed the older memory. After sleep, a live
  summary, conclusion or insight holding old_value (and not new_value) is a failure (stale
  derived).
- both_true: a false alarm when a memory of either episode is superseded or put in review.
- contradiction: right when a review is opened; a winner (one superseded) is counted apart.

--rules-only: no server; memworker.domain.rules.changed(older, newer) on every (older, newer)
message pair of each case (a quick loop for tuning; it skips the reflector, so it judges the
raw messages, not the items ingest compares).

Prints the tables per split and source, the dev failures (the test ones with
--show-test-failures), and writes bench/results/knowledge_updates.md. The earlier pairs bench
is bench/knowledge_update_pairs.py; its names stay importable from here."""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    add_stack_args,
    command_line,
    environment_note,
    loadavg,
    md_table,
    run_key,
    stack_from_args,
    write_report,
)
from bench.knowledge_update_cases import SOURCES, Case, load_cases
from bench.knowledge_update_pairs import SHAPES, UPDATES, load_pairs, outcome, outcome_of  # noqa: F401 - kept names
from memworker.sdk import ApiError, Client

DERIVED = ("summary", "conclusion", "insight")
K = 3


def has(text: str, value: str) -> bool:
    """value said in text as a whole phrase, case-insensitive ("Go" is not in "ago")."""
    return re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text, re.IGNORECASE) is not None


# --- one case through the API ------------------------------------------------------------


@dataclass
class Seen:
    """What a case left in memory at one stage (after the sweep, or after sleep and a sweep)."""

    old_items: int = 0  # reflected items of the older episode (0: nothing could be superseded)
    stale_superseded: bool = False  # every stale item superseded
    stale_handled: bool = False  # every stale item superseded or in an open review
    reviews: int = 0  # open reviews of the agent
    superseded_any: bool = False  # an item of either episode superseded
    merged: bool = False  # a live fact holds both values, or the newer episode confirmed the older
    new_first: bool = False  # recall's top 3: new_value above any hit holding only old_value
    stale_derived: list[str] = field(default_factory=list)
    top: list[str] = field(default_factory=list)
    sleep: str = ""  # the consolidation run's status (after sleep)


@dataclass
class Result:
    case: Case
    stages: dict[str, Seen] = field(default_factory=dict)
    error: str = ""


def add_and_wait(c: Client, agent: str, texts: list[str], subject: str | None, timeout: float) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": t} for t in texts]}
    if subject:
        body["subject"] = subject
    ep = c.add_episode(agent, **body)
    deadline = time.monotonic() + timeout
    while True:
        got = c.get_episode(agent, ep["episode_id"])
        if got["status"] in ("stored", "dead", "failed") or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def item_state(c: Client, agent: str, memory_id: str, value: str) -> tuple[str, str]:
    """(state, the id it resolves to): superseded; live (it, or the survivor it was merged
    into, still holds value); replaced (merged into a memory that no longer holds value, or
    gone)."""
    try:
        m = c.get_memory(agent, memory_id)
    except ApiError:
        return "replaced", memory_id
    if m["superseded_by"]:
        return "superseded", m["id"]
    return ("live" if has(m["text"], value) or m["id"] == memory_id else "replaced"), m["id"]


def look(c: Client, agent: str, case: Case, eps: tuple[dict[str, Any], dict[str, Any]]) -> Seen:
    old, new = case["old_value"], case["new_value"]
    old_ids, new_ids = eps[0].get("memory_ids") or [], eps[1].get("memory_ids") or []
    live = c.list_memories(agent, limit=500)["memories"]
    reviews = c.reviews(agent, limit=100)
    in_review = {r[side]["id"] for r in reviews for side in ("older", "newer")}
    states = {i: item_state(c, agent, i, old) for i in old_ids}
    states |= {i: item_state(c, agent, i, new) for i in new_ids if i not in states}
    texts_by_id = {m["id"]: m["text"] for m in live}
    # the stale items: the older episode's items that held old_value (all of them if none did)
    stale = [i for i in old_ids if has(texts_by_id.get(states[i][1], ""), old) or states[i][0] != "live"]
    stale = stale or list(old_ids)
    facts = [m for m in live if m["kind"] != "turn" and m["kind"] not in DERIVED]
    said_later = " ".join(case["newer"])  # a newer statement that names the old value is not a merge
    hits = c.recall(agent, case["question"], k=K, **({"subject": case["subject"]} if case.get("subject") else {}))
    texts = [h["text"] for h in hits["memories"]]
    first_new = next((i for i, t in enumerate(texts) if has(t, new)), None)
    first_old = next((i for i, t in enumerate(texts) if has(t, old) and not has(t, new)), None)
    return Seen(
        old_items=len(old_ids),
        stale_superseded=bool(stale) and all(states[i][0] == "superseded" for i in stale),
        stale_handled=bool(stale)
        and all(states[i][0] != "live" or i in in_review or states[i][1] in in_review for i in stale),
        reviews=len(reviews),
        superseded_any=any(state == "superseded" for state, _ in states.values()),
        merged=any(has(m["text"], old) and has(m["text"], new) and m["text"] not in said_later for m in facts)
        or any(i in new_ids for i in old_ids),
        new_first=first_new is not None and (first_old is None or first_new < first_old),
        stale_derived=[
            m["text"] for m in live if m["kind"] in DERIVED and has(m["text"], old) and not has(m["text"], new)
        ],
        top=texts,
    )


def sleep_pass(c: Client, agent: str) -> str:
    try:
        run = c.wait_for_run(agent, c.consolidate(agent), timeout=300)
    except ApiError as exc:
        return f"refused ({exc.status})"
    return str(run["status"])


def run_case(api_url: str, key: str, tag: str, case: Case) -> Result:
    result = Result(case)
    agent, subject = f"ku-{tag}-{case['id']}", case.get("subject")
    try:
        with Client(api_url, key, timeout=60, retries=10) as c:
            eps = (
                add_and_wait(c, agent, case["older"], subject, 600),
                add_and_wait(c, agent, case["newer"], subject, 600),
            )
            c.run_retention(agent)
            result.stages["ingest"] = look(c, agent, case, eps)
            status = sleep_pass(c, agent)
            c.run_retention(agent)
            result.stages["sleep"] = look(c, agent, case, eps)
            result.stages["sleep"].sleep = status
    except (ApiError, TimeoutError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return result


# --- verdicts ---------------------------------------------------------------------------


def handled(s: Seen) -> bool:
    return s.old_items > 0 and s.stale_handled and s.new_first


def false_alarm(s: Seen) -> bool:
    return s.superseded_any or s.reviews > 0


def contradiction_outcome(s: Seen) -> str:
    return "review" if s.reviews > 0 else "winner" if s.superseded_any else "nothing"


def what_happened(r: Result, stage: str) -> str | None:
    """Why a case failed at a stage, or None when it did not."""
    if r.error:
        return r.error
    s, label = r.stages[stage], r.case["label"]
    if label == "both_true":
        if not false_alarm(s):
            return None
        return "; ".join(
            x for x in ("superseded/merged" * s.superseded_any, f"{s.reviews} review(s)" * (s.reviews > 0)) if x
        )
    if label == "contradiction":
        got = contradiction_outcome(s)
        return None if got == "review" else f"no review ({got})"
    why = []
    if s.old_items == 0:
        why.append("the older episode gave no item")
    elif not s.stale_handled:
        why.append("stale item still live, no review")
    if s.merged:
        why.append("merged into one memory (or confirmed)")
    if not s.new_first:
        why.append("recall top 3 has no new value above the old")
    if stage == "sleep" and s.stale_derived:
        why.append(f"stale derived: {s.stale_derived[0][:120]!r}")
    return "; ".join(why) or None


# --- tables -----------------------------------------------------------------------------


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} % ({part})" if whole else "-"


def groups(results: list[Result], label: str, splits: Iterable[str]) -> Iterable[tuple[str, str, list[Result]]]:
    for split in splits:
        mine = [r for r in results if r.case["split"] == split and r.case["label"] == label and not r.error]
        if not mine:
            continue
        for source in (*SOURCES, "all"):
            part = [r for r in mine if source in ("all", r.case["source"])]
            if part:
                yield split, source, part


def update_rows(results: list[Result], splits: Iterable[str]) -> list[list[Any]]:
    rows = []
    for split, source, rs in groups(results, "update", splits):
        ing, slp = [r.stages["ingest"] for r in rs], [r.stages["sleep"] for r in rs]
        n = len(rs)
        rows.append(
            [
                split,
                source,
                n,
                pct(sum(map(handled, ing)), n),
                pct(sum(handled(s) and s.stale_superseded for s in ing), n),
                pct(sum(s.stale_handled and not s.stale_superseded for s in ing), n),
                pct(sum(s.merged for s in ing), n),
                pct(sum(s.new_first for s in ing), n),
                pct(sum(s.old_items == 0 for s in ing), n),
                pct(sum(handled(s) and not s.stale_derived for s in slp), n),
                pct(sum(bool(s.stale_derived) for s in slp), n),
            ]
        )
    return rows


def both_true_rows(results: list[Result], splits: Iterable[str]) -> list[list[Any]]:
    rows = []
    for split, source, rs in groups(results, "both_true", splits):
        ing, slp = [r.stages["ingest"] for r in rs], [r.stages["sleep"] for r in rs]
        n = len(rs)
        rows.append(
            [
                split,
                source,
                n,
                pct(sum(map(false_alarm, ing)), n),
                pct(sum(s.superseded_any for s in ing), n),
                pct(sum(s.reviews > 0 for s in ing), n),
                pct(sum(s.merged for s in ing), n),
                pct(sum(map(false_alarm, slp)), n),
            ]
        )
    return rows


def contradiction_rows(results: list[Result], splits: Iterable[str]) -> list[list[Any]]:
    rows = []
    for split, source, rs in groups(results, "contradiction", splits):
        n = len(rs)
        cells: list[Any] = [split, source, n]
        for stage in ("ingest", "sleep"):
            got = [contradiction_outcome(r.stages[stage]) for r in rs]
            cells += [pct(got.count(x), n) for x in ("review", "winner", "nothing")]
        rows.append(cells)
    return rows


def failures(results: list[Result], split: str) -> list[str]:
    out = []
    for r in results:
        if r.case["split"] != split:
            continue
        for stage in ("ingest", "sleep"):
            why = what_happened(r, stage)
            if why is None:
                continue
            c = r.case
            top = " | ".join(t[:90] for t in r.stages[stage].top) if stage in r.stages else ""
            out.append(
                f"- {c['id']} ({c['label']}, {c['attribute']}, after {stage}): {why}\n"
                f"  older: {' / '.join(c['older'])[:220]!r}\n  newer: {' / '.join(c['newer'])[:220]!r}\n"
                f"  question: {c['question']!r}, new {c['new_value']!r}, old {c['old_value']!r}; top {K}: {top[:300]}"
            )
            break  # the first stage that fails says enough
    return out


def api_report(results: list[Result], splits: list[str], show_test: bool) -> list[str]:
    update_head = [
        "split",
        "source",
        "updates",
        "handled",
        "superseded outright",
        "in review",
        "merged",
        f"new above old in top {K}",
        "older gave no item",
        "handled after sleep",
        "stale derived after sleep",
    ]
    out = [
        "## Updates (after the sweep; then after a sleep pass and another sweep)",
        "",
        md_table(update_head, update_rows(results, splits)),
        "",
        "## Look-alikes that are both true (false alarm: superseded or put in review)",
        "",
        md_table(
            [
                "split",
                "source",
                "cases",
                "false alarm",
                "superseded",
                "review opened",
                "merged/confirmed",
                "false alarm after sleep",
            ],
            both_true_rows(results, splits),
        ),
        "",
        "## Contradictions (right: a review; a winner is one side superseded)",
        "",
        md_table(
            [
                "split",
                "source",
                "cases",
                "review",
                "winner",
                "nothing",
                "review after sleep",
                "winner after sleep",
                "nothing after sleep",
            ],
            contradiction_rows(results, splits),
        ),
    ]
    errors = [f"- {r.case['id']}: {r.error}" for r in results if r.error]
    if errors:
        out += ["", f"Errors ({len(errors)} cases, left out of the tables):", *errors]
    sleeps: dict[str, int] = {}
    for r in results:
        if "sleep" in r.stages:
            sleeps[r.stages["sleep"].sleep] = sleeps.get(r.stages["sleep"].sleep, 0) + 1
    out += ["", "Sleep passes: " + ", ".join(f"{k or 'none'} {v}" for k, v in sorted(sleeps.items()))]
    for split in splits:
        if split == "test" and not show_test:
            continue
        fails = failures(results, split)
        out += ["", f"## Failures, {split} ({len(fails)})", "", *fails]
    return out


# --- the rules alone ----------------------------------------------------------------------


def rules_report(cases: list[Case], splits: list[str]) -> list[str]:
    from memworker.domain import rules

    def judged(case: Case) -> bool:
        return any(rules.changed(o, n) is not None for o in case["older"] for n in case["newer"])

    rows = []
    for split in splits:
        for label, meaning in (("update", "detected"), ("both_true", "false alarm"), ("contradiction", "changed")):
            for source in (*SOURCES, "all"):
                part = [
                    c for c in cases if c["split"] == split and c["label"] == label and source in ("all", c["source"])
                ]
                if part:
                    rows.append([split, label, source, len(part), meaning, pct(sum(map(judged, part)), len(part))])
    return [
        "## The rule alone (memworker.domain.rules.changed on every older x newer message pair; no reflector)",
        "",
        md_table(["split", "label", "source", "cases", "measure", "rate"], rows),
    ]


def mixed(cases: list[Case]) -> list[Case]:
    """The cases taking turns by (source, label), each group in file order, so that --limit N
    takes some of every kind."""
    by: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        by.setdefault((c["source"], c["label"]), []).append(c)
    queues = list(by.values())
    out: list[Case] = []
    while queues:
        out += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return out


def run_api(cases: list[Case], args: argparse.Namespace, log: Callable[[str], None]) -> tuple[list[Result], str]:
    with stack_from_args(args, raise_limits=True) as stack:
        key, tag = run_key(stack, "knowledge-updates")
        results: list[Result] = []
        started = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            for r in pool.map(lambda case: run_case(stack.api_url, key, str(tag), case), cases):
                results.append(r)
                if len(results) % 25 == 0:
                    log(f"{len(results)}/{len(cases)} cases, {time.perf_counter() - started:.0f}s")
        note = environment_note(args.load_before, command_line(), stack)
        note += f"\n- {len(cases)} cases in {time.perf_counter() - started:.0f}s, {args.concurrency} at a time"
    return results, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument(
        "--limit", type=int, default=0, help="N cases of each split, every source and label taking turns (0: all)"
    )
    parser.add_argument("--rules-only", action="store_true", help="no server: the pure rule on the message pairs")
    parser.add_argument("--show-test-failures", action="store_true", help="also print the test split's failures")
    parser.add_argument("--concurrency", type=int, default=8, help="cases run at once against the API")
    parser.add_argument("--note", default="", help="a line for the report, e.g. which code the server ran")
    add_stack_args(parser)
    args = parser.parse_args()
    args.load_before = loadavg()
    splits = ["dev", "test"] if args.split == "all" else [args.split]
    cases = [c for s in splits for c in mixed(load_cases(s))[: args.limit or None]]
    counts = {lab: sum(c["label"] == lab for c in cases) for lab in ("update", "both_true", "contradiction")}
    out = [
        "# Knowledge updates",
        "",
        f"{len(cases)} cases of bench/data/knowledge_updates ({', '.join(splits)}): "
        + ", ".join(f"{v} {k}" for k, v in counts.items())
        + ". Handwritten, from LoCoMo sessions and from BEAM's questions (bench/knowledge_update_cases.py).",
        "",
    ]
    if args.rules_only:
        out += rules_report(cases, splits)
    else:
        results, note = run_api(cases, args, lambda line: print(line, flush=True))
        out += api_report(results, splits, args.show_test_failures) + ["", note]
        out += [f"- {args.note}"] if args.note else []
    print("\n".join(out), flush=True)
    name = "knowledge_updates_rules.md" if args.rules_only else "knowledge_updates.md"
    print(f"\nwritten {write_report(name, chr(10).join(out))}")


if __name__ == "__main__":
    main()
