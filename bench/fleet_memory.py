"""Fleet memory: agents that each serve many subjects (customers) with conflicting facts, through
the API of one `memworker up` stack (offline reflector, real embeddings).

    python bench/fleet_memory.py [--agents 10] [--subjects 10] [--facts 20] [--updates 0: all] [--queries 40]
    (the issue's full size: --agents 100 --subjects 20 --facts 20, about 40 min on a busy 2-core machine;
    40 agents took 17 min: bench/results/fleet_memory.md)

Every subject of every agent is told its own value of the same attributes (city, plan and
seats, contact preference, account manager...): the same sentences with different values, so
any governance step that crosses subjects shows. Measured, in the same run:

1. Isolation after ingest, a retention sweep (merge, supersede, review) and consolidation
   passes on the first agent: memories confirmed or merged with another subject's episode
   (provenance), reviews pairing two subjects, insights and conclusions whose evidence mixes
   subjects (all should be 0).
2. R@5 per subject: each fact's question asked with the subject, against the same facts in a
   single-subject agent (one per subject of the first agent, no subject, consolidated once
   like the fleet agent's subjects) as the baseline.
3. Knowledge updates within subjects (tests/data/knowledge_updates.jsonl, each pair in a
   subject of the first agent): updates superseded or reviewed, paraphrases confirmed, near
   misses not confirmed (each wrong pair printed).
4. Recall latency through the API: one agent vs POST /v1/recall over 10 agents, p50 / p95.

Prints the figures and writes bench/results/fleet_memory.md."""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import knowledge_updates as ku
from bench._common import (
    add_stack_args,
    command_line,
    create_tenant,
    environment_note,
    fmt,
    loadavg,
    md_table,
    percentile,
    stack_from_args,
    write_report,
)
from memworker.sdk import Client

CITIES = ["Lyon", "Porto", "Oslo", "Turin", "Austin", "Leeds", "Kyoto", "Quito", "Perth", "Gdansk", "Malmo", "Cork"]
PLANS = ["Enterprise", "Starter", "Growth", "Scale", "Team", "Premium", "Basic", "Business"]
NAMES = ["Priya", "Rahul", "Maria", "Jonas", "Elif", "Kofi", "Hiro", "Nadia", "Sven", "Tara", "Omar", "Ines"]
CHANNELS = ["email", "phone", "chat", "letter", "video"]
LANGS = ["French", "Portuguese", "Norwegian", "Italian", "Spanish", "Japanese", "Polish", "Swedish", "German"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
TOOLS = ["Salesforce", "HubSpot", "Pipedrive", "Zoho", "Dynamics", "Copper"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
DBS = ["Postgres", "MySQL", "Oracle", "MongoDB", "Cassandra", "SQLite"]
SSO = ["Okta", "Auth0", "Keycloak", "OneLogin", "Ping"]
INDUSTRIES = ["retail", "logistics", "banking", "healthcare", "gaming", "farming", "insurance", "energy"]

# (fact template, question): values come from the subject's random draw
ATTRIBUTES: list[tuple[str, str]] = [
    ("The customer lives in {city}.", "Where does the customer live?"),
    ("The customer's account plan is {plan} with {seats} seats.", "What plan is the customer on and how many seats?"),
    ("The customer prefers to be contacted by {ch1}, never by {ch2}.", "How does the customer want to be contacted?"),
    ("The customer's account manager is {name}.", "Who is the customer's account manager?"),
    ("The customer's monthly budget is {budget} euros.", "What is the customer's monthly budget?"),
    ("The customer's preferred language is {lang}.", "Which language does the customer prefer?"),
    ("The customer's contract renews on {month} {day}.", "When does the customer's contract renew?"),
    ("The customer uses {crm} as their CRM.", "Which CRM does the customer use?"),
    ("The customer's onboarding call is on {weekday}.", "Which day is the customer's onboarding call?"),
    ("The customer's database is {db}.", "Which database does the customer run?"),
    ("The customer's SSO provider is {sso}.", "Which SSO provider does the customer use?"),
    ("The customer's industry is {industry}.", "What industry is the customer in?"),
    ("The customer's company has {staff} employees.", "How many employees does the customer's company have?"),
    ("The customer's office is on floor {floor}.", "Which floor is the customer's office on?"),
    ("The customer's support tier is {tier}.", "What support tier does the customer have?"),
    ("The customer's billing contact is {name2}.", "Who is the customer's billing contact?"),
    ("The customer's fiscal year starts in {month2}.", "When does the customer's fiscal year start?"),
    ("The customer's warehouse is in {city2}.", "Where is the customer's warehouse?"),
    ("The customer's invoice limit is {limit} dollars.", "What is the customer's invoice limit?"),
    ("The customer's renewal owner is {name3}.", "Who owns the customer's renewal?"),
]
FACTS_PER_EPISODE = 4  # the offline reflector keeps at most 5 items per episode


def subject_facts(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(fact, question) for one subject: its own draw of every value."""
    ch1, ch2 = rng.sample(CHANNELS, 2)
    values = {
        "city": rng.choice(CITIES),
        "city2": rng.choice(CITIES),
        "plan": rng.choice(PLANS),
        "seats": rng.randint(2, 900),
        "ch1": ch1,
        "ch2": ch2,
        "name": rng.choice(NAMES),
        "name2": rng.choice(NAMES),
        "name3": rng.choice(NAMES),
        "budget": rng.randrange(500, 90_000, 50),
        "lang": rng.choice(LANGS),
        "month": rng.choice(MONTHS),
        "month2": rng.choice(MONTHS),
        "day": rng.randint(1, 28),
        "crm": rng.choice(TOOLS),
        "weekday": rng.choice(DAYS),
        "db": rng.choice(DBS),
        "sso": rng.choice(SSO),
        "industry": rng.choice(INDUSTRIES),
        "staff": rng.randint(3, 50_000),
        "floor": rng.randint(1, 60),
        "tier": rng.choice(["Gold", "Silver", "Bronze", "Platinum"]),
        "limit": rng.randrange(1_000, 500_000, 500),
    }
    return [(t.format(**values), q) for t, q in ATTRIBUTES[:n]]


def ingest(c: Client, agent: str, facts: list[str], subject: str | None, owner: dict[str, str | None]) -> list[str]:
    """The facts as episodes of FACTS_PER_EPISODE sentences; owner: episode id -> subject."""
    bodies = [
        {"content": " ".join(facts[i : i + FACTS_PER_EPISODE]), **({"subject": subject} if subject else {})}
        for i in range(0, len(facts), FACTS_PER_EPISODE)
    ]
    ids = [ep["episode_id"] for ep in c.add_episodes(agent, bodies)]
    owner.update({i: subject for i in ids})
    return ids


def wait_all(c: Client, episodes: list[tuple[str, str]]) -> None:
    """Until every (agent, episode id) is stored; RuntimeError for one that died."""
    for agent, eid in episodes:
        status = c.wait_for_episode(agent, eid, timeout=1800)["status"]
        if status != "stored":
            raise RuntimeError(f"episode {eid} of {agent} ended {status}")


def all_memories(c: Client, agent: str) -> list[dict[str, Any]]:
    out, cursor = [], None
    while True:
        page = c.list_memories(agent, limit=500, cursor=cursor)
        out += page["memories"]
        cursor = page["next_cursor"]
        if not cursor:
            return out


def crossings(c: Client, agent: str, owner: dict[str, str | None]) -> dict[str, int]:
    """Memories holding another subject's episode, reviews pairing two subjects, derived
    memories whose evidence mixes subjects."""
    mems = all_memories(c, agent)
    subject_of = {m["id"]: m["subject"] for m in mems}
    crossed = 0
    for m in mems:
        episodes = {p.split("#", 1)[0].removeprefix("episode:") for p in m["provenance"] if p.startswith("episode:")}
        if any(e in owner and owner[e] != m["subject"] for e in episodes):
            crossed += 1
    reviews = c.reviews(agent, status="open", limit=500)
    mixed_reviews = sum(
        1
        for r in reviews
        if r["newer"]["id"] in subject_of
        and r["older"]["id"] in subject_of
        and subject_of[r["newer"]["id"]] != subject_of[r["older"]["id"]]
    )
    derived = [m for m in mems if m["kind"] in ("insight", "conclusion", "summary")]
    mixed = sum(
        1
        for m in derived
        if {subject_of.get(e, m["subject"]) for e in m["metadata"].get("evidence", [])} - {m["subject"]}
    )
    return {
        "memories": len(mems),
        "crossed": crossed,
        "reviews": len(reviews),
        "mixed_reviews": mixed_reviews,
        "derived": len(derived),
        "mixed_derived": mixed,
    }


def interleaved(pairs: list[dict[str, str]]) -> list[dict[str, str]]:
    """The pairs with their shapes taken in turn, so that a prefix samples every shape."""
    by_shape = [[p for p in pairs if p["shape"] == shape] for shape in ku.SHAPES]
    return [p for row in zip(*by_shape, strict=False) for p in row] + [
        p for group in by_shape for p in group[min(len(g) for g in by_shape) :]
    ]


def recall_at_5(c: Client, agent: str, subject: str | None, facts: list[tuple[str, str]]) -> float:
    found = 0
    for fact, question in facts:
        options = {"subject": subject} if subject else {}
        hits = c.recall(agent, question, k=5, **options)["memories"]
        found += any(h["text"] == fact for h in hits)
    return found / len(facts)


def latency(c: Client, agents: list[str], queries: list[str]) -> tuple[list[float], list[float]]:
    one, many = [], []
    for q in queries:
        t = time.perf_counter()
        c.recall(agents[0], q, k=5)
        one.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        c.recall_agents(agents, q, k=5)
        many.append((time.perf_counter() - t) * 1000)
    return one, many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--subjects", type=int, default=10)
    parser.add_argument("--facts", type=int, default=20, help=f"facts per subject (at most {len(ATTRIBUTES)})")
    parser.add_argument(
        "--updates", type=int, default=0, help="knowledge-update pairs to run (0: all of the data file)"
    )
    parser.add_argument("--queries", type=int, default=40, help="latency queries")
    parser.add_argument("--consolidation-passes", type=int, default=6)
    parser.add_argument("--seed", type=int, default=23)
    add_stack_args(parser)
    args = parser.parse_args()
    if not 1 <= args.facts <= len(ATTRIBUTES):
        parser.error(f"--facts: 1..{len(ATTRIBUTES)}")
    load_before = loadavg()
    rng = random.Random(args.seed)
    agents = [f"fleet-{a:03d}" for a in range(args.agents)]
    subjects = [f"cust-{s:03d}" for s in range(args.subjects)]
    facts = {(a, s): subject_facts(rng, args.facts) for a in agents for s in subjects}
    report: list[str] = ["# Fleet memory", ""]
    with stack_from_args(args, raise_limits=True) as stack:
        _, key = create_tenant(stack, "fleet")
        c = Client(stack.api_url, key, timeout=120)
        owner: dict[str, str | None] = {}
        started = time.perf_counter()
        sent: list[tuple[str, str]] = []
        for a in agents:
            for s in subjects:
                sent += [(a, e) for e in ingest(c, a, [f for f, _ in facts[(a, s)]], s, owner)]
        first = agents[0]
        for s in subjects:  # the baseline: each subject's facts alone in an agent of its own
            sent += [(f"solo-{s}", e) for e in ingest(c, f"solo-{s}", [f for f, _ in facts[(first, s)]], None, {})]
        wait_all(c, sent)
        ingest_s = time.perf_counter() - started
        print(f"ingested {len(facts) * args.facts} facts in {ingest_s:.0f} s", flush=True)
        sweep = c.run_retention(first)
        for _ in range(args.consolidation_passes):
            run = c.wait_for_run(first, c.consolidate(first), timeout=600)
            if run["status"] != "done":
                break
        for s in subjects:  # the baseline agents get their pass too: their own derived memories compete
            c.wait_for_run(f"solo-{s}", c.consolidate(f"solo-{s}"), timeout=600)
        iso = crossings(c, first, owner)
        r5 = [recall_at_5(c, first, s, facts[(first, s)]) for s in subjects]
        base = [recall_at_5(c, f"solo-{s}", None, facts[(first, s)]) for s in subjects]
        pairs = interleaved(ku.load_pairs())[: args.updates or None]
        got: dict[str, dict[str, int]] = {shape: {} for shape in ku.SHAPES}
        live: list[tuple[str, str]] = []
        for i, p in enumerate(pairs):
            how, old = ku.outcome_of(c, first, subjects[i % len(subjects)], p["older"], p["newer"])
            got[p["shape"]][how] = got[p["shape"]].get(how, 0) + 1
            if not _right(p["shape"], how):
                print(f"wrong at ingest: {p['shape']} ({how}): {p['older']!r} -> {p['newer']!r}", flush=True)
            if how == "both live" and old is not None:
                live.append((p["shape"], old))
        c.run_retention(first)  # near-duplicates dedup let through are merged by the sweep
        for shape, old in live:
            if c.get_memory(first, old)["id"] != old:  # a merged-away id resolves to its survivor
                got[shape]["both live"] -= 1
                got[shape]["merged by the sweep"] = got[shape].get("merged by the sweep", 0) + 1
        fleet10 = agents[: min(10, len(agents))]
        queries = [q for _, q in ATTRIBUTES[: args.facts]] * (args.queries // args.facts + 1)
        latency(c, fleet10, queries[:5])  # warm the query-embedding cache and the plans
        one, many = latency(c, fleet10, queries[: args.queries])
        c.close()
        note = environment_note(load_before, command_line(), stack)
    report += _tables(args, iso, sweep, r5, base, got, one, many, len(fleet10), ingest_s)
    report += ["", note]
    text = "\n".join(report)
    print(text, flush=True)
    print(f"\nwritten {write_report('fleet_memory.md', text)}")


def _right(shape: str, how: str) -> bool:
    """A pair's outcome at ingest is the one its shape wants."""
    if shape == "paraphrase":
        return how == "confirmed"
    if shape == "near-miss":
        return how != "confirmed"
    return how in ("superseded", "reviewed")


def _tables(
    args: argparse.Namespace,
    iso: dict[str, int],
    sweep: dict[str, Any],
    r5: list[float],
    base: list[float],
    got: dict[str, dict[str, int]],
    one: list[float],
    many: list[float],
    n_many: int,
    ingest_s: float,
) -> list[str]:
    mean = sum(r5) / len(r5)
    mean_base = sum(base) / len(base)
    rows = []
    for shape in ku.SHAPES:
        n = sum(got[shape].values())
        late = got[shape].get("merged by the sweep", 0)
        if shape == "paraphrase":
            right = got[shape].get("confirmed", 0)
        elif shape == "near-miss":  # two facts: right when neither confirmed nor merged
            right, late = n - got[shape].get("confirmed", 0), -late
        else:
            right = got[shape].get("superseded", 0) + got[shape].get("reviewed", 0)
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(got[shape].items()) if v)
        rows.append(
            [shape, n, f"{100 * right / max(n, 1):.1f} %", f"{100 * (right + late) / max(n, 1):.1f} %", outcomes]
        )
    p50_one, p50_many = percentile(one, 50), percentile(many, 50)
    return [
        f"{args.agents} agents x {args.subjects} subjects x {args.facts} facts "
        f"({args.agents * args.subjects * args.facts} facts; ingest {ingest_s:.0f} s). Isolation, R@5 and "
        "updates measured on the first agent.",
        "",
        "## Isolation (first agent, after a retention sweep and consolidation passes)",
        "",
        md_table(
            [
                "memories",
                "crossed (another subject's episode in provenance)",
                "open reviews",
                "reviews across subjects",
                "insights/conclusions/summaries",
                "mixing subjects",
            ],
            [
                [
                    iso["memories"],
                    iso["crossed"],
                    iso["reviews"],
                    iso["mixed_reviews"],
                    iso["derived"],
                    iso["mixed_derived"],
                ]
            ],
        ),
        "",
        f"Retention sweep: {', '.join(f'{k} {v}' for k, v in sorted(sweep.items()) if isinstance(v, int))}",
        "",
        "## R@5 of a subject's own facts",
        "",
        md_table(
            ["", "mean R@5", "min", "subjects"],
            [
                ["fleet agent, recall with subject", f"{mean:.3f}", f"{min(r5):.3f}", len(r5)],
                ["single-subject agents (baseline)", f"{mean_base:.3f}", f"{min(base):.3f}", len(base)],
                ["ratio", f"{mean / mean_base:.3f}" if mean_base else "-", "", ""],
            ],
        ),
        "",
        "## Knowledge updates within subjects (first agent, populated)",
        "",
        "Right: an update superseded or reviewed; a paraphrase confirmed at ingest; a near miss (two facts "
        "in nearly the same words) not confirmed; with the sweep: also a paraphrase merged by the retention "
        "sweep run after the pairs (a near miss merged by it is wrong).",
        "",
        md_table(["shape", "pairs", "right at ingest", "right with the sweep", "outcomes"], rows),
        "",
        "## Recall latency through the API",
        "",
        md_table(
            ["", "p50 ms", "p95 ms", "queries"],
            [
                ["one agent", fmt(p50_one), fmt(percentile(one, 95)), len(one)],
                [f"POST /v1/recall over {n_many} agents", fmt(p50_many), fmt(percentile(many, 95)), len(many)],
                ["ratio (p50)", f"{p50_many / p50_one:.2f}", "", ""],
            ],
        ),
    ]


if __name__ == "__main__":
    main()
