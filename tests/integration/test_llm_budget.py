"""A tenant's daily LLM budget (policy llm_tokens_per_day): the tokens its reflection and sleep
spend are counted per UTC day by the database itself; once they reach the budget, reflection
uses the offline rules and a sleep pass runs without the LLM, until the day turns. Other tenants
are not touched. Real Postgres, the real ingest (processing.process) and a real HTTP LLM server
(memworker.testing.FakeLLM: 100 tokens in and 20 out per call)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest

from memworker import keys, metrics, reflection
from memworker.ingest import intake, processing
from memworker.models import llm
from memworker.sessions import hooks
from memworker.sleep import consolidation
from memworker.storage import db
from memworker.tenancy import service as tenancy
from memworker.testing import FakeLLM

PER_CALL = 120  # FakeLLM's usage: 100 prompt + 20 completion tokens
SAID = [
    "The staging cluster moved to the Frankfurt region last week.",
    "Priya owns the billing service since the reorg in March.",
    "The on-call rotation now changes every Tuesday at 9 am.",
    "Our Postgres replicas run version 16.4 since the upgrade.",
]


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[db.Pool]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


@pytest.fixture()
def fake() -> Iterator[FakeLLM]:
    server = FakeLLM(echo=True)
    yield server
    server.close()


def _owner(stack: dict[str, Any], sql: str, *params: Any) -> list[Any]:
    with psycopg.connect(stack["owner_url"], autocommit=True) as conn:
        cur = conn.execute(sql.encode(), params)  # type: ignore[call-overload]
        return cur.fetchall() if cur.description else []


def _reflect(pool: db.Pool, settings: Any, embedder: Any, reflector: Any, tenant: UUID, agent: str, said: str) -> str:
    """One episode through the real ingest; the reflector its row records."""
    with db.tenant_tx(pool, tenant) as conn:
        ((episode, _),) = intake.accept(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            episodes=[intake.NewEpisode("", messages=[{"role": "user", "content": said}])],
        )
    out = processing.process(
        pool, embedder, reflector, settings, tenant_id=tenant, episode_ids=[episode], post_turn=hooks.episode_stored
    )
    assert out.stored == [episode]
    with db.tenant_tx(pool, tenant) as conn:
        row = conn.execute("SELECT reflector FROM episodes WHERE id = %s", (episode,)).fetchone()
    assert row is not None
    return str(row["reflector"])


def _budget(pool: db.Pool, tenant: UUID) -> tenancy.LlmBudget:
    with db.tenant_tx(pool, tenant) as conn:
        return tenancy.llm_budget(conn, tenant)


def test_a_spent_budget_pauses_the_llm_until_the_day_turns(
    stack: dict[str, Any], tenants: dict[str, Any], pool: db.Pool, embedder: Any, fake: FakeLLM, api: str
) -> None:
    alice, bob = tenants["alice"]["id"], tenants["bob"]["id"]
    settings = stack["settings"]
    _owner(
        stack,
        "UPDATE memworker.tenants SET policy = policy || %s WHERE id = %s",
        json.dumps({"llm_tokens_per_day": 200}),
        alice,
    )
    client = llm.OpenAICompatible(fake.url, "fake", None, 10.0)
    reflector = reflection.LLMReflector(client)
    paused_before = metrics.LLM_BUDGET_PAUSED.labels(str(alice), "reflect")._value.get()

    assert _budget(pool, alice) == tenancy.LlmBudget(200, 0) and not _budget(pool, alice).paused
    # 120 tokens, then 240: the second call runs (the budget is checked before a batch), the third does not
    assert [_reflect(pool, settings, embedder, reflector, alice, "ops", s) for s in SAID[:3]] == [
        client.name,
        client.name,
        "offline",
    ]
    assert len(fake.requests) == 2
    assert _budget(pool, alice) == tenancy.LlmBudget(200, 2 * PER_CALL) and _budget(pool, alice).paused
    assert metrics.LLM_BUDGET_PAUSED.labels(str(alice), "reflect")._value.get() == paused_before + 1

    # another tenant, with no budget, still reflects with the LLM; its spend is its own
    assert _reflect(pool, settings, embedder, reflector, bob, "ops", SAID[0]) == client.name
    assert _budget(pool, bob) == tenancy.LlmBudget(None, PER_CALL)
    assert _budget(pool, alice).spent_today == 2 * PER_CALL

    # a sleep pass of the spent tenant runs on the rules, and calls nobody
    calls = len(fake.requests)
    with db.tenant_tx(pool, alice) as conn:
        run_id = consolidation.request_run(conn, tenant_id=alice, agent_id="ops", trigger="test")
    report = consolidation.run_pass(pool, embedder, client, settings, tenant_id=alice, agent_id="ops", run_id=run_id)
    assert report.llm_calls == 0 and len(fake.requests) == calls, report
    assert metrics.LLM_BUDGET_PAUSED.labels(str(alice), "sleep")._value.get() >= 1

    # GET /v1/usage says so, to the tenant's keys only
    seen = httpx.get(f"{api}/v1/usage", headers={"Authorization": f"Bearer {tenants['alice']['key']}"}, timeout=10)
    assert seen.status_code == 200, seen.text
    assert seen.json()["llm_budget"] == {"tokens_per_day": 200, "spent_today": 2 * PER_CALL, "paused": True}
    other = httpx.get(f"{api}/v1/usage", headers={"Authorization": f"Bearer {tenants['bob']['key']}"}, timeout=10)
    assert other.json()["llm_budget"] == {"tokens_per_day": None, "spent_today": PER_CALL, "paused": False}
    # a key limited to some agents sees their usage, not the whole tenant's spend
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, alice)
        limited, _ = keys.create(conn, tenant_id=alice, name="ops only", agent_ids=["ops"])
        conn.commit()
    seen = httpx.get(f"{api}/v1/usage", headers={"Authorization": f"Bearer {limited}"}, timeout=10)
    assert seen.status_code == 200 and "llm_budget" not in seen.json(), seen.text

    # the next UTC day starts from nothing: the LLM reflects again
    _owner(stack, "UPDATE memworker.llm_spend SET day = day - 1 WHERE tenant_id = %s", alice)
    assert not _budget(pool, alice).paused
    assert _reflect(pool, settings, embedder, reflector, alice, "ops", SAID[3]) == client.name
    assert _budget(pool, alice) == tenancy.LlmBudget(200, PER_CALL)


def test_the_budget_is_a_policy_field_with_a_clear_error(
    stack: dict[str, Any], tenants: dict[str, Any], pool: db.Pool
) -> None:
    charlie = tenants["charlie"]["id"]
    for bad in (0, -5, "lots", 1.5, True):
        _owner(
            stack,
            "UPDATE memworker.tenants SET policy = %s WHERE id = %s",
            json.dumps({"llm_tokens_per_day": bad}),
            charlie,
        )
        with db.tenant_tx(pool, charlie) as conn, pytest.raises(Exception, match="llm_tokens_per_day must be null"):
            tenancy.llm_budget(conn, charlie)
    _owner(stack, "UPDATE memworker.tenants SET policy = '{}' WHERE id = %s", charlie)
    assert _budget(pool, charlie) == tenancy.LlmBudget(None, 0)
