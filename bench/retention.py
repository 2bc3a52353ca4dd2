"""Retention sweep throughput: N agents x M memories (default 1,000 x 1,000), swept three
times with the clock moved: a first sweep over a fleet that never had one (every rule has
work), an hourly sweep an hour later, and the daily one (when decay rewrites rows).

Rows are loaded directly as the owner (INSERT ... SELECT, no embedding model: vectors come
from a pool of random unit vectors), then the sweeps run exactly as the beat runs them
(memworker.lifecycle.retention.sweep_agent through the app role's pool, row-level security on), with
--workers threads sweeping agents in parallel. Writes bench/results/retention.md.

    python bench/retention.py                       # embedded Postgres in a temp dir
    python bench/retention.py --agents 50 --memories 1000 --no-report   # a quick look"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

from memworker.domain import tokens  # noqa: E402
from memworker.lifecycle import retention
from memworker.local import embedded
from memworker.storage import db, migrate

# The per-agent mix (fractions of M): what a fleet looks like after 100 days without a sweep.
POLICY = {"max_episodic": 150}  # tenant defaults in the bench: the cap binds for most agents
DAYS = 100
BASE_VECTORS = 997


def vocabulary(n: int, seed: int) -> list[str]:
    """Made-up words the BM25 tokenizer keeps as they are (not stop words, not stemmed)."""
    rng = random.Random(seed)
    syll = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        w = "".join(rng.choice(syll) for _ in range(rng.randint(2, 3)))
        if w not in seen and tokens.tokenize(w) == [w]:
            seen.add(w)
            words.append(w)
    return words


LOAD_SQL = """
INSERT INTO memworker.memories (tenant_id, agent_id, text, kind, tier, salience, confidence,
    access_count, last_access_at, created_at, updated_at, valid_from, expires_at, provenance,
    source_key, content_hash, doc_len, embedding)
SELECT a.tenant_id, a.id, g.text, g.kind, g.tier, g.salience, g.confidence, g.access,
       CASE WHEN g.access > 0 THEN g.created + (g.age * random()) END,
       g.created, g.created, g.created,
       CASE WHEN g.expired THEN %(now)s - interval '1 hour' END,
       ARRAY['episode:' || gen_random_uuid()], 'bench:' || a.id || ':' || g.i, md5(g.text), g.doc_len, b.v
FROM memworker.agents a
CROSS JOIN LATERAL (
  SELECT i,
         -- planted pairs: i = 10k+1 repeats 10k (a near-duplicate); i = 100k+51 changes a version
         CASE WHEN i %% 100 = 50 THEN 'service ' || a.n || ' uses version 3.0'
              WHEN i %% 100 = 51 THEN 'service ' || a.n || ' uses version 3.' || (i %% 7 + 1)
              WHEN i %% 10 = 1 THEN t.dup_text
              ELSE t.text END AS text,
         CASE WHEN i %% 100 = 50 OR i %% 100 = 51 THEN 'fact'
              WHEN r1 < 0.03 THEN 'insight' WHEN r1 < 0.05 THEN 'conclusion' ELSE 'fact' END AS kind,
         CASE WHEN r2 < 0.05 THEN 'L0' WHEN r2 < 0.85 THEN 'L1' WHEN r2 < 0.99 THEN 'L2' ELSE 'L3' END AS tier,
         round((0.3 + 0.6 * random())::numeric, 2)::real AS salience,
         CASE WHEN i %% 100 = 51 THEN 0.95 ELSE round((0.5 + 0.4 * random())::numeric, 2) END::real AS confidence,
         CASE WHEN r3 < 0.4 THEN 0 ELSE 1 + floor(random() * 6)::int END AS access,
         %(now)s - make_interval(secs => (random() * %(days)s * 86400)::int) AS created,
         make_interval(secs => (random() * 20 * 86400)::int) AS age,
         r4 < 0.05 AS expired, t.doc_len,
         1 + ((CASE WHEN i %% 10 = 1 THEN i - 1 ELSE i END) * 31 + a.n) %% %(base)s AS vec
  FROM (SELECT i, random() AS r1, random() AS r2, random() AS r3, random() AS r4
        FROM generate_series(0, %(memories)s - 1) AS i) s
  CROSS JOIN LATERAL (
    SELECT string_agg(w, ' ') AS text, count(*) AS doc_len,
           string_agg(w, ' ') || ' !' AS dup_text
    -- Zipf-like: u^3 favours the first words (the commonest is in about half the memories)
    FROM (SELECT (%(vocab)s::text[])[1 + floor(array_length(%(vocab)s::text[], 1) * power(
                   (abs(hashtextextended(a.id || ':' || (CASE WHEN s.i %% 10 = 1 THEN s.i - 1 ELSE s.i END)
                        || ':' || j, 7)) %% 1000003) / 1000003.0, 3))::int] AS w
          FROM generate_series(1, 6 + (abs(hashtext(a.id || (CASE WHEN s.i %% 10 = 1 THEN s.i - 1 ELSE s.i END))) %% 9)) j) ws
  ) t
) g
JOIN bench_vectors b ON b.i = g.vec
WHERE a.tenant_id = %(tenant_id)s
"""

TERMS_SQL = """
INSERT INTO memworker.memory_terms (tenant_id, agent_id, term, memory_id, tf)
SELECT m.tenant_id, m.agent_id, w, m.id, count(*)
FROM memworker.memories m, regexp_split_to_table(m.text, ' ') AS w
WHERE m.tenant_id = %(tenant_id)s AND w <> '!' AND w <> ''
GROUP BY m.tenant_id, m.agent_id, w, m.id
"""


def load(
    owner_url: str, *, tenants: int, agents: int, memories: int, seed: int
) -> tuple[list[tuple[UUID, str]], datetime, float]:
    """Create the tenants and agents and load their memories; returns (agents, clock, seconds)."""
    started = time.perf_counter()
    vocab = vocabulary(3000, seed)
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((BASE_VECTORS, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out: list[tuple[UUID, str]] = []
    with psycopg.connect(owner_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SELECT setseed(%s)", (seed / 1000,))
        conn.execute("CREATE TEMP TABLE bench_vectors (i int PRIMARY KEY, v vector(384))")
        with conn.cursor().copy("COPY bench_vectors (i, v) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i, v in enumerate(vectors, 1):
                copy.write_row((i, v))
        now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        per_tenant = agents // tenants
        for t in range(tenants):
            (tid,) = conn.execute(
                "INSERT INTO memworker.tenants (name, policy) VALUES (%s, %s) RETURNING id",
                (f"bench-{t}", psycopg.types.json.Jsonb(POLICY)),
            ).fetchone()  # type: ignore[misc]
            ids = [f"agent-{t}-{a}" for a in range(per_tenant + (1 if t < agents % tenants else 0))]
            conn.execute("INSERT INTO memworker.agents (tenant_id, id) SELECT %s, unnest(%s::text[])", (tid, ids))
            conn.execute("ALTER TABLE memworker.agents ADD COLUMN IF NOT EXISTS n int")  # scratch: the agent number
            conn.execute("UPDATE memworker.agents SET n = abs(hashtext(id)) %% 100000 WHERE tenant_id = %s", (tid,))
            conn.execute(
                LOAD_SQL,
                {
                    "tenant_id": tid,
                    "now": now,
                    "days": DAYS,
                    "memories": memories,
                    "vocab": vocab,
                    "base": BASE_VECTORS,
                },
            )
            conn.execute(TERMS_SQL, {"tenant_id": tid})
            out += [(tid, a) for a in ids]
            print(
                f"  loaded tenant {t + 1}/{tenants}: {len(ids)} agents, {time.perf_counter() - started:.0f} s",
                flush=True,
            )
        conn.execute("ALTER TABLE memworker.agents DROP COLUMN n")
        conn.execute("VACUUM ANALYZE")
    return out, now, time.perf_counter() - started


def sweep_all(app_url: str, agents: list[tuple[UUID, str]], now: datetime, workers: int, key: str) -> dict[str, Any]:
    pool = db.open_pool(app_url, min_size=workers, max_size=workers + 1, name="bench-retention")
    try:
        started = time.perf_counter()

        def one(agent: tuple[UUID, str]) -> retention.Report:
            return retention.sweep_agent(
                pool, tenant_id=agent[0], agent_id=agent[1], now=now, run_key=f"bench:{key}", trigger="bench"
            )

        with ThreadPoolExecutor(workers) as ex:
            reports = list(ex.map(one, agents))
        wall = time.perf_counter() - started
    finally:
        pool.close()
    return {"wall": wall, "reports": reports}


def summarise(name: str, result: dict[str, Any]) -> dict[str, Any]:
    reports: list[retention.Report] = result["reports"]
    statuses = {s: sum(1 for r in reports if r.status == s) for s in {r.status for r in reports}}
    total = {k: sum(getattr(r, k) for r in reports) for k in retention.COUNTS}
    phases: dict[str, int] = {}
    for r in reports:
        for k, v in r.phase_ms.items():
            phases[k] = phases.get(k, 0) + v
    ms = [r.duration_ms for r in reports]
    return {
        "name": name,
        "wall": result["wall"],
        "agents": len(reports),
        "statuses": statuses,
        "total": total,
        "changed": sum(r.changed for r in reports),
        "p50": _common.percentile(ms, 50),
        "p95": _common.percentile(ms, 95),
        "max": max(ms),
        "phases": phases,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--memories", type=int, default=1000, help="per agent")
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2, help="agents swept in parallel (threads)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--admin-database-url", help="an empty database to use instead of an embedded Postgres")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument("--no-report", action="store_true", help="print only; do not write bench/results")
    args = parser.parse_args()
    load_before = _common.loadavg()
    temp = Path(tempfile.mkdtemp(prefix="memworker-bench-retention-"))
    child = None
    try:
        if args.admin_database_url:
            owner_url = args.admin_database_url
        else:
            child, owner_url = embedded.start_postgres(temp)
        migrate.migrate(owner_url)
        app_url = db.app_url(owner_url) if not args.admin_database_url else owner_url
        print(f"loading {args.agents} agents x {args.memories} memories ...", flush=True)
        agents, now, load_s = load(
            owner_url, tenants=args.tenants, agents=args.agents, memories=args.memories, seed=args.seed
        )
        with psycopg.connect(owner_url) as conn:
            rows = conn.execute("SELECT count(*) FROM memworker.memories").fetchone()[0]  # type: ignore[index]
            size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()[0]  # type: ignore[index]
        print(f"loaded {rows:,} memories in {load_s:.0f} s ({size}); sweeping ...", flush=True)
        runs = []
        for name, when, key in (
            ("first sweep (100-day backlog)", now, "first"),
            ("hourly sweep, 1 h later", now + timedelta(hours=1), "hourly"),
            ("daily sweep, 25 h later (decay step)", now + timedelta(hours=25), "daily"),
        ):
            s = summarise(name, sweep_all(app_url, agents, when, args.workers, key))
            runs.append(s)
            print(f"{name}: {s['wall']:.1f} s, {s['changed']:,} rows changed, statuses {s['statuses']}", flush=True)
        report = render(args, rows, size, load_s, runs, load_before)
        print(report)
        if not args.no_report:
            print(f"wrote {_common.write_report('retention.md', report)}")
    finally:
        if child is not None:
            child.stop()
        if not args.keep:
            shutil.rmtree(temp, ignore_errors=True)
    return 0


def render(
    args: argparse.Namespace, rows: int, size: str, load_s: float, runs: list[dict[str, Any]], load_before: str
) -> str:
    scanned = [r["total"]["scanned"] for r in runs]
    table = _common.md_table(
        [
            "sweep",
            "agents",
            "wall (s)",
            "agents/s",
            "live rows scanned",
            "rows scanned/s",
            "rows changed",
            "rows changed/s",
            "per agent p50 (ms)",
            "p95 (ms)",
            "max (ms)",
            "statuses",
        ],
        [
            [
                r["name"],
                r["agents"],
                _common.fmt(r["wall"]),
                _common.fmt(r["agents"] / r["wall"]),
                f"{n:,}",
                _common.fmt(n / r["wall"], 0),
                f"{r['changed']:,}",
                _common.fmt(r["changed"] / r["wall"], 0),
                _common.fmt(r["p50"], 0),
                _common.fmt(r["p95"], 0),
                _common.fmt(r["max"], 0),
                ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items())),
            ]
            for r, n in zip(runs, scanned)
        ],
    )
    counts = _common.md_table(
        ["sweep"] + [k for k in retention.COUNTS if k not in ("scanned",)],
        [[r["name"]] + [f"{r['total'][k]:,}" for k in retention.COUNTS if k != "scanned"] for r in runs],
    )
    phase_names = list(runs[0]["phases"])
    phases = _common.md_table(
        ["sweep"] + [f"{p} (s)" for p in phase_names],
        [[r["name"]] + [_common.fmt(r["phases"].get(p, 0) / 1000 / args.workers) for p in phase_names] for r in runs],
    )
    return f"""# Retention sweep

{args.agents:,} agents x {args.memories:,} memories ({rows:,} rows, {args.tenants} tenants; database {size}
after loading in {load_s:.0f} s), swept by {args.workers} worker thread(s), each agent in batches of 500 rows
per short transaction under its advisory lock, through the app role (row-level security on).

{table}

Rows changed per sweep (expired, forgotten by age x never recalled, by 90 days unused, by the
cap, decayed, promoted, merged, superseded; reviews queued; batches = short transactions):

{counts}

Time per phase (summed over agents, divided by the worker count: roughly wall seconds):

{phases}

- The data: per agent, memories created uniformly over the last {DAYS} days; 5 % L0, 80 % L1,
  14 % L2, 1 % L3; 3 % insights and 2 % conclusions; 40 % never recalled; 5 % past their TTL;
  one near-duplicate per 10 memories, and per 100 an old and a changed version of one fact
  ("service N uses version 3.0" then "... 3.x" at confidence 0.95). Tenant policy: max_episodic {POLICY["max_episodic"]}, the rest default.
  Vectors come from a pool of {BASE_VECTORS} random unit vectors (duplicates share theirs).
- The first sweep is the worst case: a fleet that never had retention, so every rule has
  work and every row is new to the merge/contradiction check. The hourly sweep is the
  steady state (nothing new, decay rewrites a row at most once a day). The daily sweep is
  the one where decay rewrites the surviving rows (salience and confidence).
- rows scanned/s counts the agents' live memories at the start of each sweep; rows changed
  counts each row a rule changed (a decayed row also counted under another rule counts twice).
- Every agent holds 20 "service N uses version 3.x" memories of one subject, so many pairs
  contradict: the sure (0.95) newer ones supersede, the rest (a newer one under 0.9 against
  an older one) go to review, hence the large review count of the first sweep.
- The first sweep spends most of its time in repair (merge and contradiction checks of
  1,000 new memories per agent, 80 merges and ~50 supersedes/reviews each); afterwards only
  memories written or changed since the last sweep are looked at.

## Environment

{_common.environment_note(load_before, _common.command_line())}
"""


if __name__ == "__main__":
    sys.exit(main())
