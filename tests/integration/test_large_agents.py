"""Large agents: the bounded recall statement (impact-ordered postings, HNSW candidates) returns
what the exact one returns; the HNSW index holds an agent once large_agents.index put it in;
the bounded duplicate lookup finds what a scan of every memory finds; sweep statements run
under the policy's timeout; the embedded Postgres sizes its buffers from the machine."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
import pytest

from memworker import errors
from memworker.domain import memories, tokens
from memworker.domain.policy import Policy
from memworker.lifecycle import retention
from memworker.local import embedded
from memworker.recall import hybrid as recall
from memworker.storage import db, large_agents, store
from memworker.tenancy import service as tenancy

DIM = 384
# A small vocabulary, as templated agent logs have: every term is common. "deploy" is in every
# memory, so with a cut budget its postings (600) pass recall.POSTINGS_PER_TERM.
WORDS = [
    "cache", "billing", "queue", "worker", "latency", "timeout", "retry", "shard", "replica", "index",
    "vacuum", "backup", "restore", "alert", "pager", "ticket", "customer", "invoice", "refund", "login",
    "token", "session", "upload", "export", "report", "metric", "budget", "release", "rollback", "canary",
    "staging", "region", "cluster", "node", "disk", "memory", "network", "proxy", "router", "schema",
]  # fmt: skip


def _vector(text: str, rng: np.random.Generator) -> np.ndarray:
    """Texts sharing terms lie close, as with a real embedder (a fixed vector per term)."""
    v = np.sum(
        [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(DIM) for t in tokens.tokenize(text)], axis=0
    )
    v = v / np.linalg.norm(v) + 0.3 * rng.standard_normal(DIM) / np.sqrt(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _texts(n: int, seed: int) -> list[str]:
    r = random.Random(seed)
    return [f"deploy {' '.join(r.sample(WORDS, r.randint(3, 9)))} {i % 7}" for i in range(n)]


def _write(pool: Any, tenant: UUID, agent: str, texts: list[str], seed: int, key: str = "test") -> list[UUID]:
    rng = np.random.default_rng(seed)
    ids = []
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        for i, text in enumerate(texts):
            mid, _ = store.write_memory(
                conn,
                tenant_id=tenant,
                agent_id=agent,
                draft=memories.Draft(text, tier="L1" if i % 5 else "L2"),
                embedding=_vector(text, rng),
                source_key=f"{key}:{agent}:{i}",
            )
            ids.append(mid)
    return ids


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


@pytest.fixture(scope="module")
def fixture_agent(pool: Any, tenants: dict[str, Any]) -> tuple[UUID, str]:
    tenant = tenants["alice"]["id"]
    _write(pool, tenant, "big", _texts(600, 1), 1)
    assert large_agents.index(pool, tenant_id=tenant, agent_id="big") == 600
    return tenant, "big"


def test_index_marks_the_agent_and_takes_in_its_new_memories_later(
    pool: Any, stack: dict[str, Any], fixture_agent: tuple[UUID, str]
) -> None:
    """A write into a large agent stores the memory pending (no insert into the graph); the
    next index() moves it in."""
    tenant, agent = fixture_agent
    assert large_agents.index(pool, tenant_id=tenant, agent_id=agent) == 0  # ready, nothing pending
    (later,) = _write(pool, tenant, agent, ["deploy canary region after the refund alert"], 9, key="later")
    with psycopg.connect(stack["owner_url"]) as conn:
        ready = conn.execute(
            "SELECT ann, ann_ready FROM memworker.agents WHERE tenant_id = %s AND id = %s", (tenant, agent)
        )
        assert ready.fetchone() == (True, True)
        outside = conn.execute(
            "SELECT count(*) FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s AND NOT ann",
            (tenant, agent),
        ).fetchone()
        assert outside == (1,)
        state = "SELECT ann, ann_pending FROM memworker.memories WHERE id = %s"
        assert conn.execute(state, (later,)).fetchone() == (False, True)
        assert large_agents.index(pool, tenant_id=tenant, agent_id=agent) == 1
        assert conn.execute(state, (later,)).fetchone() == (True, False)
        impacts = conn.execute(
            "SELECT count(*) FILTER (WHERE impact IS NULL), count(*) FROM memworker.memory_terms WHERE memory_id = %s",
            (later,),
        ).fetchone()
        assert impacts is not None and impacts[0] == 0 and impacts[1] > 0


def test_small_agent_stays_out_of_the_index(pool: Any, stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    tenant = tenants["bob"]["id"]
    _write(pool, tenant, "small", _texts(20, 2), 2)
    assert large_agents.index_if_large(pool, tenant_id=tenant, agent_id="small", live=20) == 0
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute(
            "SELECT bool_or(ann) FROM memworker.memories WHERE tenant_id = %s AND agent_id = 'small'", (tenant,)
        ).fetchone()
        assert row == (False,)


@pytest.mark.parametrize("budget", [recall.POSTINGS_BUDGET, 300], ids=["every-posting", "cut-postings"])
def test_bounded_recall_returns_what_the_exact_statement_returns(
    pool: Any, fixture_agent: tuple[UUID, str], budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the budget cut below the agent's postings, the common terms ("deploy", in all
    600) are read only POSTINGS_PER_TERM deep: the candidates still hold the exact top 10."""
    tenant, agent = fixture_agent
    monkeypatch.setattr(recall, "POSTINGS_BUDGET", budget)
    monkeypatch.setattr(recall, "POSTINGS_PER_TERM", 100 if budget < recall.POSTINGS_BUDGET else 200)
    assert _agree(pool, tenant, agent, 3, 12) >= 100


def _agree(pool: Any, tenant: UUID, agent: str, seed: int, queries: int) -> int:
    """Bounded and exact recall of the same queries: the same hits, scores and BM25; returns
    how many hits were compared."""
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(queries):
        text = " ".join(r.sample(WORDS, r.randint(1, 4))) + (" deploy" if r.random() < 0.5 else "")
        query = recall.Query(text, k=10, explain=True)
        qvec = _vector(text, rng)
        got = {}
        for path in ("exact", "bounded"):
            with db.tenant_tx(pool, tenant) as conn:
                got[path] = recall.recall(
                    conn, qvec, tenant_id=tenant, agent_id=agent, query=query, policy=Policy(), path=path
                )
        assert [h["id"] for h in got["bounded"]] == [h["id"] for h in got["exact"]], text
        for b, e in zip(got["bounded"], got["exact"], strict=True):
            # scores are answered rounded to 6 places: one float sum in another order may round
            # to the neighbouring last digit
            assert b["score"] == pytest.approx(e["score"], abs=2e-6)
            assert b["signals"]["bm25"] == pytest.approx(e["signals"]["bm25"], rel=1e-9)
        checked += len(got["exact"])
    return checked


def test_pending_memories_are_found_before_the_index_takes_them_in(
    pool: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    """Memories written into a large agent after it went into the index wait outside it
    (pending) until the next index(): the bounded statement scans them exactly, so it still
    returns what the exact statement returns, and again once they are in."""
    tenant = tenants["charlie"]["id"]
    _write(pool, tenant, "growing", _texts(300, 11), 11)
    assert large_agents.index(pool, tenant_id=tenant, agent_id="growing") == 300
    _write(pool, tenant, "growing", [f"{t} pending" for t in _texts(200, 12)], 12, key="later")
    with psycopg.connect(stack["owner_url"]) as conn:
        pending = conn.execute(
            "SELECT count(*) FILTER (WHERE ann_pending AND NOT ann) FROM memworker.memories"
            " WHERE tenant_id = %s AND agent_id = 'growing'",
            (tenant,),
        ).fetchone()
        assert pending == (200,)
    assert _agree(pool, tenant, "growing", 13, 8) >= 60
    assert large_agents.index(pool, tenant_id=tenant, agent_id="growing") == 200
    assert _agree(pool, tenant, "growing", 14, 4) >= 30


def test_filters_keep_the_exact_statement(pool: Any, fixture_agent: tuple[UUID, str]) -> None:
    """A kinds, time or metadata filter could reject most of a bounded candidate set."""
    tenant, agent = fixture_agent
    query = recall.Query("billing refund", k=10, kinds=("fact",))
    params = recall._params(_vector("billing refund", np.random.default_rng(0)), tenant, agent, query, Policy())
    with db.tenant_tx(pool, tenant) as conn:
        assert recall._bounded(conn, params, "bounded") is None
        bounded = recall._bounded(conn, params | {"kinds": None}, "bounded")
        assert bounded is not None and len(bounded["dfs"]) == len(params["terms"])


def test_bounded_duplicate_lookup_finds_what_a_full_scan_finds(pool: Any, fixture_agent: tuple[UUID, str]) -> None:
    tenant, agent = fixture_agent
    rng = np.random.default_rng(5)
    with db.tenant_tx(pool, tenant) as conn:
        rows = conn.execute(
            "SELECT id, text, embedding::text AS e FROM memworker.memories WHERE tenant_id = %s AND agent_id = %s"
            " ORDER BY id LIMIT 25",
            (tenant, agent),
        ).fetchall()
        for row in rows:
            words = row["text"].split()
            variant = " ".join([words[0], *reversed(words[1:])])  # the same words, another order
            vec = np.array(row["e"].strip("[]").split(","), dtype=np.float32)
            vec = vec + 0.01 * rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
            vec /= np.linalg.norm(vec)
            found = store.find_duplicate(
                conn, tenant_id=tenant, agent_id=agent, text=variant, embedding=vec, threshold=0.9
            )
            # the full scan: the nearest memory of the agent, if it says the same
            nearest = conn.execute(
                "SELECT id, text, 1 - (embedding <=> %s) AS cos FROM memworker.memories"
                " WHERE tenant_id = %s AND agent_id = %s ORDER BY embedding <=> %s LIMIT 1",
                (vec, tenant, agent, vec),
            ).fetchone()
            expected = (
                nearest["id"] if nearest["cos"] >= 0.9 and memories.says_the_same(variant, nearest["text"]) else None
            )
            assert found == expected == row["id"]


def test_sweep_statements_run_under_the_policy_timeout(pool: Any, tenants: dict[str, Any]) -> None:
    tenant = tenants["charlie"]["id"]
    policy = Policy(retention_statement_timeout_s=7)
    sweep = retention._Sweep(pool, tenant, "a", policy, None, retention.Report("a"), 1.0)  # type: ignore[arg-type]
    with sweep._tx() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == {"statement_timeout": "7s"}
    with db.tenant_tx(pool, tenant) as conn:  # the setting ended with the sweep's transaction
        assert conn.execute("SHOW statement_timeout").fetchone() != {"statement_timeout": "7s"}
    with pytest.raises(errors.Unavailable) as raised, db.tenant_tx(pool, tenant) as conn:
        db.statement_timeout(conn, 1)
        conn.execute("SELECT pg_sleep(3)")
    assert isinstance(raised.value.__cause__, psycopg.errors.QueryCanceled)


def test_embedded_postgres_sizes_its_memory_from_the_machine(stack: dict[str, Any], services: dict[str, str]) -> None:
    if services["pg_external"]:
        pytest.skip("the test owner's own server has its own settings")
    wanted = dict(arg.split("=", 1) for arg in embedded.memory_settings()[1::2])
    with db.connect(stack["owner_url"]) as conn:
        for name in ("shared_buffers", "effective_cache_size"):
            row = conn.execute(
                "SELECT pg_size_bytes(current_setting(%s)) AS got, pg_size_bytes(%s) AS want", (name, wanted[name])
            ).fetchone()
            assert row is not None and row["got"] == row["want"], name
            # never under the fixed 256MB it had before it was sized from the machine
            assert row["got"] >= 256 * 2**20, name
