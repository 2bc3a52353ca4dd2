"""Consolidation passes against the real database and the real embedding model: what a pass
writes, that it writes it atomically (a real fault mid-pass changes nothing), that it is
idempotent and serialised per agent, the LLM steps failing honestly against a scripted
OpenAI-compatible server, and tenant isolation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.types.json import Jsonb

from memworker import errors, reflection
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.ingest import intake
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.models.llm import OpenAICompatible
from memworker.recall import hybrid as recall
from memworker.sleep import consolidation
from memworker.storage import db, sleep_db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeLLM

OPS = [
    "Postgres 16 upgrade of the orders database is planned for Friday.",
    "The Postgres replica for orders lags ten minutes behind during backups.",
    "We decided to move the nightly backups of Postgres to 03:00 UTC.",
    "Backups of the orders database failed twice last week with a timeout error.",
    "The user prefers short status updates in Slack.",
    "Kafka consumers restart after every deploy of the billing service.",
]
AGAIN = "Kafka consumers restart after every deploy of the search service."  # OPS[5] recurs


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=6)
    yield p
    p.close()


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeLLM]:
    server = FakeLLM(default='{"conclusion": "Backups of the orders database are fragile.", "confidence": 0.8}')
    yield server
    server.close()


def _seed(pool: Any, embedder: Any, tenant: UUID, agent: str, texts: list[str], **draft: Any) -> list[UUID]:
    """Memories as ingest writes them: rule-typed, with entities and topics."""
    vectors = embedder.embed(texts)
    ids = []
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        for text, vec in zip(texts, vectors, strict=True):
            kind = reflection._kind(text)
            d = memories.Draft(
                text=text, kind=kind, entities=reflection.entities_of(text), topics=reflection.topics_of(text), **draft
            )
            mid, _ = store.write_memory(
                conn, tenant_id=tenant, agent_id=agent, draft=d, embedding=vec, source_key=f"seed:{agent}:{text}"
            )
            assert mid is not None
            ids.append(mid)
    return ids


def _pass(
    pool: Any, embedder: Any, settings: Any, tenant: UUID, agent: str, *, client: Any = None, trigger: str = "test"
) -> consolidation.Report:
    with db.tenant_tx(pool, tenant) as conn:
        run_id = consolidation.request_run(conn, tenant_id=tenant, agent_id=agent, trigger=trigger)
    return consolidation.run_pass(pool, embedder, client, settings, tenant_id=tenant, agent_id=agent, run_id=run_id)


def _snapshot(stack: dict[str, Any], tenant: UUID, agent: str) -> dict[str, Any]:
    """Everything a pass may change for one agent, read as the owner."""
    with psycopg.connect(stack["owner_url"]) as conn:
        q = lambda sql: conn.execute(sql, (tenant, agent)).fetchall()  # noqa: E731
        return {
            "memories": q(
                "SELECT id, text, kind, salience, consolidated_at, entities, topics FROM memworker.memories "
                "WHERE tenant_id = %s AND agent_id = %s ORDER BY id"
            ),
            "connections": q(
                "SELECT from_id, to_id, relationship, insight_id FROM memworker.memory_connections "
                "WHERE tenant_id = %s AND agent_id = %s ORDER BY 1, 2, 3"
            ),
            "profiles": q(
                "SELECT version, document FROM memworker.agent_profiles "
                "WHERE tenant_id = %s AND agent_id = %s ORDER BY version"
            ),
            "gates": q(
                "SELECT last_consolidated_at, sessions_since_pass, consolidation_requested "
                "FROM memworker.agents WHERE tenant_id = %s AND id = %s"
            ),
        }


def _owner(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        cur = conn.execute(sql, args)
        return cur.fetchall() if cur.description else []


# --- what a pass writes ----------------------------------------------------------------------


def test_an_offline_pass_links_synthesises_rerates_and_marks_the_window(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    ids = _seed(pool, embedder, alice, "ops", [*OPS, AGAIN])
    r = _pass(pool, embedder, stack["settings"], alice, "ops")
    assert (r.status, r.items_reviewed, r.insights_written) == ("done", 7, 1), r
    assert 1 <= r.connections_made <= 5 and r.salience_rerated >= 2
    assert r.steps["metadata"] == "rules" and r.steps["connections"] == "rules" and r.steps["insight"] == "rules"
    with db.tenant_tx(pool, alice) as conn:
        insight = store.get_memory(conn, tenant_id=alice, agent_id="ops", memory_id=UUID(r.insight_id))
    assert (insight.kind, insight.tier, insight.salience) == ("insight", "L2", pytest.approx(0.8))
    assert insight.provenance == [f"consolidation:{r.run_id}"]
    # what recurs, said once with how often and for whom
    assert insight.text == "2 times: Kafka consumers restart after every deploy of the … service (billing, search)."
    assert set(insight.metadata["evidence"]) <= {str(i) for i in ids}
    conns = _owner(stack, "SELECT from_id, to_id, insight_id FROM memworker.memory_connections WHERE agent_id = 'ops'")
    assert len(conns) == r.connections_made and all(c[2] == UUID(r.insight_id) for c in conns)
    assert all(a != b and {a, b} <= set(ids) for a, b, _ in conns)
    rows = _owner(stack, "SELECT id, salience, consolidated_at FROM memworker.memories WHERE agent_id = 'ops'")
    assert all(c is not None for _, _, c in rows)  # the window and the pass's own products
    linked = {a for a, _, _ in conns} | {b for _, b, _ in conns}
    assert all(s >= 0.6 - 1e-6 for i, s, _ in rows if i in linked)
    (run,) = _owner(
        stack,
        "SELECT status, items_reviewed, connections_made, insights_written, duration_ms, "
        "report->'steps' FROM memworker.consolidation_runs WHERE id = %s",
        UUID(r.run_id),
    )
    assert run[:4] == ("done", 7, r.connections_made, 1) and run[4] >= 0 and run[5]["insight"] == "rules"
    gates = _owner(
        stack,
        "SELECT last_consolidated_at IS NOT NULL, consolidation_failures FROM memworker.agents "
        "WHERE id = 'ops' AND tenant_id = %s",
        alice,
    )
    assert gates == [(True, 0)]


def test_the_insight_reaches_the_agent_through_the_one_recall_path(
    pool: Any, embedder: Any, tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    with db.tenant_tx(pool, alice) as conn:
        hits = recall.recall(
            conn,
            CachedQueryEmbedder(embedder).embed_one("why do Kafka consumers keep restarting?"),
            tenant_id=alice,
            agent_id="ops",
            query=recall.Query("why do Kafka consumers keep restarting?", k=10),
            policy=Policy(),
        )
    assert "insight" in [h["kind"] for h in hits]


def test_topic_groups_become_conclusions_with_their_evidence(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    texts = [f"The invoice export for customer {c} timed out again." for c in ("Acme", "Globex", "Initech", "Umbrella")]
    ids = _seed(pool, embedder, alice, "billing", texts)
    r = _pass(pool, embedder, stack["settings"], alice, "billing")
    assert r.status == "done" and r.conclusions_written >= 1
    with db.tenant_tx(pool, alice) as conn:
        c = store.get_memory(conn, tenant_id=alice, agent_id="billing", memory_id=UUID(r.conclusion_ids[0]))
    assert (c.kind, c.tier) == ("conclusion", "L2") and 0 < c.confidence <= 0.95
    assert set(c.metadata["evidence"]) <= {str(i) for i in ids} and len(c.metadata["evidence"]) >= 3
    assert _owner(
        stack,
        "SELECT count(*) FROM memworker.memories WHERE agent_id = 'billing' AND kind <> 'conclusion' "
        "AND kind <> 'insight'",
    ) == [(4,)]  # the evidence stays


def test_under_min_items_the_pass_is_skipped_with_its_reason(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, "quiet", OPS[:2])
    before = _snapshot(stack, alice, "quiet")
    r = _pass(pool, embedder, stack["settings"], alice, "quiet")
    assert r.status == "skipped" and r.skipped_reason == "too few unconsolidated memories (2 < 3)"
    after = _snapshot(stack, alice, "quiet")
    assert after["memories"] == before["memories"] and after["connections"] == []


def test_the_profile_is_versioned_and_newer_information_merges_in(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    from memworker.sleep import profile

    with db.tenant_tx(pool, alice) as conn:
        doc = profile.load(conn, tenant_id=alice, agent_id="ops")
    assert doc["version"] == 1
    assert [e["text"] for e in doc["sections"]["decisions"]] == [OPS[2]]
    assert OPS[3] in [e["text"] for e in doc["sections"]["errors"]]
    assert [e["text"] for e in doc["sections"]["preferences"]] == [OPS[4]]
    _seed(
        pool,
        embedder,
        alice,
        "ops",
        [
            "The user now prefers long status updates by email.",
            "Deploys of the billing service moved to Tuesdays.",
            "The billing service owner is Dana.",
        ],
        confidence=0.9,
    )
    r = _pass(pool, embedder, stack["settings"], alice, "ops")
    assert r.status == "done" and r.profile_version == 2
    with db.tenant_tx(pool, alice) as conn:
        doc2 = profile.load(conn, tenant_id=alice, agent_id="ops")
        old = profile.load(conn, tenant_id=alice, agent_id="ops", version=1)
    assert [e["text"] for e in doc2["sections"]["preferences"]] == [
        "The user now prefers long status updates by email."
    ]
    assert old == doc  # earlier versions stay as they were


# --- atomic, idempotent, serialised ------------------------------------------------------------


def test_running_again_over_the_same_window_changes_nothing_more(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, "idem", OPS)
    first = _pass(pool, embedder, stack["settings"], alice, "idem")
    assert first.status == "done"
    after_first = _snapshot(stack, alice, "idem")
    again = _pass(pool, embedder, stack["settings"], alice, "idem")
    assert again.status == "skipped" and "too few" in (again.skipped_reason or "")
    replay = consolidation.run_pass(
        pool, embedder, None, stack["settings"], tenant_id=alice, agent_id="idem", run_id=UUID(first.run_id)
    )  # the same task delivered twice
    assert replay.status == "done" and replay.insight_id == first.insight_id
    after = _snapshot(stack, alice, "idem")
    assert after["memories"] == after_first["memories"] and after["connections"] == after_first["connections"]
    assert after["profiles"] == after_first["profiles"]


def test_a_fault_mid_pass_rolls_back_everything_counts_and_backs_off(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, "faulty", OPS)
    before = _snapshot(stack, alice, "faulty")
    # A real fault in the database, late in the pass: marking the window consolidated raises,
    # after the metadata, connections, insight, conclusions and re-rating were written.
    _owner(
        stack,
        """
        CREATE FUNCTION memworker.no_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.agent_id = 'faulty' AND OLD.consolidated_at IS NULL AND NEW.consolidated_at IS NOT NULL THEN
            RAISE EXCEPTION 'disk on fire';
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER no_sleep BEFORE UPDATE ON memworker.memories FOR EACH ROW EXECUTE FUNCTION memworker.no_sleep();
    """,
    )
    from prometheus_client import REGISTRY

    flagged_before = REGISTRY.get_sample_value("memworker_consolidation_flagged_total") or 0.0
    failed_before = REGISTRY.get_sample_value("memworker_consolidation_passes_total", {"outcome": "failed"}) or 0.0
    try:
        for attempt in (1, 2, 3):
            r = _pass(pool, embedder, stack["settings"], alice, "faulty")
            assert r.status == "failed" and "disk on fire" in (r.error or "")
            assert r.flagged is (attempt == 3)
            assert _snapshot(stack, alice, "faulty") == before  # memory exactly as it was
        (row,) = _owner(
            stack,
            "SELECT consolidation_failures, consolidation_last_error, "
            "extract(epoch FROM next_consolidation_at - now()) FROM memworker.agents "
            "WHERE tenant_id = %s AND id = 'faulty'",
            alice,
        )
        assert row[0] == 3 and "disk on fire" in row[1]
        assert 250 < row[2] <= 300  # min(30 min interval, 300 s)
        (run,) = _owner(
            stack,
            "SELECT status, error, report->>'flagged' FROM memworker.consolidation_runs WHERE id = %s",
            UUID(r.run_id),
        )
        assert run[0] == "failed" and "disk on fire" in run[1] and run[2] == "true"
        assert REGISTRY.get_sample_value("memworker_consolidation_flagged_total") == flagged_before + 1
        assert (
            REGISTRY.get_sample_value("memworker_consolidation_passes_total", {"outcome": "failed"})
            == failed_before + 3
        )
    finally:
        _owner(stack, "DROP TRIGGER no_sleep ON memworker.memories; DROP FUNCTION memworker.no_sleep()")
    r = _pass(pool, embedder, stack["settings"], alice, "faulty")
    assert r.status == "done"
    assert _owner(
        stack,
        "SELECT consolidation_failures, next_consolidation_at FROM memworker.agents "
        "WHERE tenant_id = %s AND id = 'faulty'",
        alice,
    ) == [(0, None)]


def test_two_concurrent_passes_for_one_agent_are_serialised(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM
) -> None:
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, "twins", OPS)
    fake_llm.script(("sleep", 3.0, "[]"), "[]", "Backups and Postgres upgrades collide on Fridays.")
    client = OpenAICompatible(fake_llm.url, "m", None, 10)
    settings = stack["settings"].replace(llm_base_url=fake_llm.url)
    with db.tenant_tx(pool, alice) as conn:
        sleep_db.set_agent_policy_field(
            conn,
            tenant_id=alice,
            agent_id="twins",
            field="consolidation_enabled",
            value=Jsonb(True),
        )
    reports: list[consolidation.Report] = []
    asked = len(fake_llm.requests)
    first = threading.Thread(
        target=lambda: reports.append(_pass(pool, embedder, settings, alice, "twins", client=client))
    )
    first.start()
    # the second pass starts once the first holds the agent (it is waiting on its first LLM
    # call), not at a moment a loaded machine may delay past the first pass's end
    deadline = time.monotonic() + 30
    while len(fake_llm.requests) == asked and time.monotonic() < deadline:
        time.sleep(0.01)
    reports.append(_pass(pool, embedder, settings, alice, "twins", client=client))
    first.join()
    client.close()
    assert sorted(r.status for r in reports) == ["busy", "done"]
    busy = next(r for r in reports if r.status == "busy")
    assert busy.llm_calls == 0  # the loser paid for nothing
    assert _owner(stack, "SELECT count(*) FROM memworker.memories WHERE agent_id = 'twins' AND kind = 'insight'") == [
        (1,)
    ]
    # Retried later (as the task does), it finds the window consolidated.
    retry = consolidation.run_pass(
        pool, embedder, None, settings, tenant_id=alice, agent_id="twins", run_id=UUID(busy.run_id)
    )
    assert retry.status == "skipped"


def test_a_retention_sweep_holding_the_agent_makes_a_pass_wait(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, "held", OPS[:4])
    before = _snapshot(stack, alice, "held")
    with db.tenant_tx(pool, alice) as other:
        assert db.try_agent_lock(other, alice, "held")
        r = _pass(pool, embedder, stack["settings"], alice, "held")
        assert r.status == "busy"
    assert _snapshot(stack, alice, "held") == before
    assert _owner(stack, "SELECT status FROM memworker.consolidation_runs WHERE id = %s", UUID(r.run_id)) == [
        ("queued",)
    ]
    assert (
        consolidation.run_pass(
            pool, embedder, None, stack["settings"], tenant_id=alice, agent_id="held", run_id=UUID(r.run_id)
        ).status
        == "done"
    )


# --- the LLM path: every step fails honestly ---------------------------------------------------

META = '[{"id": 1, "entities": ["Postgres"], "topics": ["database"]}, {"id": 2, "entities": ["Postgres"], "topics": ["database"]}]'
CONNS = '```json\n[{"from": 1, "to": 2, "relationship": "same database"}, {"from": 3, "to": 4, "relationship": "backups"}]\n```'


@pytest.fixture()
def llm_agent(pool: Any, embedder: Any, tenants: dict[str, Any], request: pytest.FixtureRequest) -> str:
    agent = "llm-" + request.node.name[5:40].replace("_", "-")
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, agent, OPS)
    with db.tenant_tx(pool, alice) as conn:  # with a paid LLM configured it must be switched on
        sleep_db.set_agent_policy_field(
            conn,
            tenant_id=alice,
            agent_id=agent,
            field="consolidation_enabled",
            value=Jsonb(True),
        )
    return agent


def test_with_a_paid_llm_consolidation_is_off_until_switched_on(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM
) -> None:
    alice = tenants["alice"]["id"]
    _seed(pool, embedder, alice, "paid", OPS)
    asked = len(fake_llm.requests)
    r = _pass(pool, embedder, stack["settings"].replace(llm_base_url=fake_llm.url), alice, "paid")
    assert r.status == "skipped" and r.skipped_reason == "consolidation is disabled for this agent"
    assert r.llm_calls == 0 and len(fake_llm.requests) == asked


def _llm_pass(
    pool: Any,
    embedder: Any,
    stack: dict[str, Any],
    tenants: dict[str, Any],
    fake_llm: FakeLLM,
    agent: str,
    *answers: Any,
    timeout: float = 5,
) -> consolidation.Report:
    fake_llm.script(*answers)
    client = OpenAICompatible(fake_llm.url, "m", None, timeout)
    try:
        return _pass(
            pool,
            embedder,
            stack["settings"].replace(llm_base_url=fake_llm.url),
            tenants["alice"]["id"],
            agent,
            client=client,
        )
    finally:
        client.close()
        fake_llm.answers.clear()


def test_llm_steps_with_fences_and_prose_all_count(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM, llm_agent: str
) -> None:
    r = _llm_pass(
        pool,
        embedder,
        stack,
        tenants,
        fake_llm,
        llm_agent,
        "Sure:\n" + META + "\nDone.",
        CONNS,
        "Insight: Postgres backups and upgrades keep colliding.",
    )
    assert r.status == "done" and r.steps["metadata"] == "llm" and r.steps["connections"] == "llm"
    assert (r.connections_made, r.insights_written) == (2, 1)
    assert r.llm_calls >= 3 and r.tokens_in == 100 * r.llm_calls and r.tokens_out == 20 * r.llm_calls
    rows = _owner(stack, "SELECT text, metadata->>'by' FROM memworker.memories WHERE id = %s", UUID(r.insight_id))
    assert rows == [("Postgres backups and upgrades keep colliding.", "llm")]
    (calls,) = _owner(
        stack, "SELECT llm_calls, tokens_in FROM memworker.consolidation_runs WHERE id = %s", UUID(r.run_id)
    )
    assert calls == (r.llm_calls, r.tokens_in)


def test_malformed_metadata_json_does_not_block(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM, llm_agent: str
) -> None:
    r = _llm_pass(pool, embedder, stack, tenants, fake_llm, llm_agent, "[{not json", CONNS, "A cross-cutting insight.")
    assert r.status == "done" and r.steps["metadata"].startswith("rules (llm step skipped: malformed answer")
    assert r.connections_made == 2 and r.insights_written == 1


def test_malformed_connections_json_still_writes_the_insight(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM, llm_agent: str
) -> None:
    r = _llm_pass(pool, embedder, stack, tenants, fake_llm, llm_agent, META, "{{{ garbage", "Still an insight.")
    assert r.status == "done" and r.steps["connections"].startswith("skipped: malformed answer")
    assert (r.connections_made, r.insights_written) == (0, 1)


def test_an_empty_insight_answer_skips_the_insight(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM, llm_agent: str
) -> None:
    r = _llm_pass(pool, embedder, stack, tenants, fake_llm, llm_agent, META, CONNS, "   ")
    assert r.status == "done" and r.insights_written == 0 and r.insight_id is None
    assert r.steps["insight"] == "skipped: empty insight answer"
    assert r.connections_made == 2  # kept, with no insight to point at
    assert _owner(
        stack, "SELECT count(*) FROM memworker.memory_connections WHERE agent_id = %s AND insight_id IS NULL", llm_agent
    ) == [(2,)]
    assert _owner(
        stack,
        "SELECT count(*) FROM memworker.memories WHERE agent_id = %s AND consolidated_at IS NULL",
        llm_agent,
    ) == [(0,)]


def test_self_links_and_links_past_the_cap_are_rejected(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM, llm_agent: str
) -> None:
    pairs = [{"from": 3, "to": 3, "relationship": "self"}, {"from": 1, "to": 40, "relationship": "far"}]
    pairs += [{"from": a, "to": b, "relationship": "r"} for a in range(1, 7) for b in range(1, 7) if a < b]
    import json

    r = _llm_pass(pool, embedder, stack, tenants, fake_llm, llm_agent, META, json.dumps(pairs), "Insight.")
    assert r.connections_made == 5
    assert r.rejected_connections["self-link"] == 1 and r.rejected_connections["outside window"] == 1
    assert _owner(
        stack, "SELECT count(*) FROM memworker.memory_connections WHERE agent_id = %s AND from_id = to_id", llm_agent
    ) == [(0,)]


def test_timeouts_and_errors_skip_their_step_and_the_pass_goes_on(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any], fake_llm: FakeLLM, llm_agent: str
) -> None:
    r = _llm_pass(
        pool,
        embedder,
        stack,
        tenants,
        fake_llm,
        llm_agent,
        ("status", 500),
        ("sleep", 2.5, CONNS),
        ("garbage", "<html>"),
        timeout=1,
    )
    assert r.status == "done" and r.items_reviewed == 6
    assert "llm answered 500" in r.steps["metadata"] and "llm timeout" in r.steps["connections"]
    assert "not a chat completion" in r.steps["insight"] and r.insights_written == 0


# --- gates, tenants -----------------------------------------------------------------------------


def test_an_episode_that_says_save_progress_requests_a_pass(pool: Any, tenants: dict[str, Any]) -> None:
    bob = tenants["bob"]["id"]
    with db.tenant_tx(pool, bob) as conn:
        intake.accept(conn, tenant_id=bob, agent_id="saver", episodes=[intake.NewEpisode("Nice work today.")])
        gates = sleep_db.agent_gates(conn, tenant_id=bob, agent_id="saver")
        assert gates is not None and gates.consolidation_requested is False
        intake.accept(conn, tenant_id=bob, agent_id="saver", episodes=[intake.NewEpisode("OK, save progress please.")])
        gates = sleep_db.agent_gates(conn, tenant_id=bob, agent_id="saver")
        assert gates is not None and gates.consolidation_requested is True


def test_a_pass_never_touches_another_tenants_agent_of_the_same_name(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice, charlie = tenants["alice"]["id"], tenants["charlie"]["id"]
    _seed(pool, embedder, charlie, "ops", OPS)
    before = _snapshot(stack, charlie, "ops")
    r = _pass(pool, embedder, stack["settings"], alice, "ops")
    assert r.status == "skipped"  # alice's ops has nothing new; charlie's six are not hers
    assert _snapshot(stack, charlie, "ops") == before
    with db.tenant_tx(pool, alice) as conn:
        runs = sleep_db.runs_list(conn, tenant_id=alice, agent_id="ops", limit=100)
    with db.tenant_tx(pool, charlie) as conn:
        assert sleep_db.runs_list(conn, tenant_id=charlie, agent_id="ops", limit=100) == []
    with pytest.raises(errors.NotFound):  # alice's run is invisible to charlie
        consolidation.run_pass(
            pool, embedder, None, stack["settings"], tenant_id=charlie, agent_id="ops", run_id=runs[0].id
        )
