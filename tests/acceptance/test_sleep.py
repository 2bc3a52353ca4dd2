"""Sleep through the real API, Redis and a real `celery worker` process: a requested pass,
the beat's sweep (fired twice), the reports, the status and the profile over HTTP."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from celery import Celery

from memworker.sdk import ApiError, Client

OPS = [
    "Postgres 16 upgrade of the orders database is planned for Friday.",
    "The Postgres replica for orders lags ten minutes behind during backups.",
    "We decided to move the nightly backups of Postgres to 03:00 UTC.",
    "Backups of the orders database failed twice last week with a timeout error.",
    "The user prefers short status updates in Slack.",
]


# one statement made twice: what an offline pass writes an insight about
RECURRING = [f"Kafka consumers restart after every deploy of the {s} service." for s in ("billing", "search")]


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["alice"]["key"])


def _owner(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        cur = conn.execute(sql, args)
        return cur.fetchall() if cur.description else []


def test_a_requested_pass_runs_in_a_worker_and_recall_finds_its_insight(alice: Client, worker: Any) -> None:
    alice.add_memories("sleeper", [{"text": t} for t in [*OPS, *RECURRING]])
    run_id = alice.consolidate("sleeper")
    run = alice.wait_for_run("sleeper", run_id, timeout=90)
    assert run["status"] == "done", run
    assert (run["trigger"], run["items_reviewed"], run["insights_written"]) == ("api", 7, 1)
    assert run["connections_made"] >= 1 and run["steps"]["insight"] == "rules"
    hits = alice.recall("sleeper", "why do Kafka consumers keep restarting?", k=10)["memories"]
    insight = next(h for h in hits if h["kind"] == "insight")
    assert insight["provenance"] == [f"consolidation:{run_id}"] and insight["id"] == run["insight_id"]
    prof = alice.profile("sleeper")
    assert prof["version"] == 1 and [e["text"] for e in prof["sections"]["decisions"]] == [OPS[2]]
    assert alice.profile("sleeper", version=1) == prof
    status = alice.consolidation_status("sleeper")
    assert status["enabled"] is True and status["flagged"] is False and status["consolidation_failures"] == 0
    assert status["last_consolidated_at"] is not None and status["consolidation_requested"] is False
    (usage,) = alice.usage("sleeper")["agents"]  # sleep's LLM use is counted beside ingest's
    assert usage["sleep"] == {"runs": 1, "llm_calls": 0, "tokens_in": 0, "tokens_out": 0}


def test_other_tenants_get_404_for_everything_sleep_adds(api: str, tenants: dict[str, Any], alice: Client) -> None:
    bob = Client(api, tenants["bob"]["key"])
    for call in (
        lambda: bob.consolidate("sleeper"),
        lambda: bob.consolidation_runs("sleeper"),
        lambda: bob.consolidation_status("sleeper"),
        lambda: bob.profile("sleeper"),
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        alice.profile("sleeper", version=7)
    assert err.value.status == 404


def test_a_pass_for_an_agent_with_consolidation_off_is_refused(alice: Client, stack: dict[str, Any]) -> None:
    alice.add_memory("switched-off", "The staging cluster is in Frankfurt.")
    _owner(stack, "UPDATE memworker.agents SET policy = '{\"consolidation_enabled\": false}' WHERE id = 'switched-off'")
    with pytest.raises(ApiError) as err:
        alice.consolidate("switched-off")
    assert err.value.status == 422 and "consolidation is off" in str(err.value)
    assert alice.consolidation_status("switched-off")["enabled"] is False


def test_the_beat_sweep_fired_twice_runs_each_due_agent_once(alice: Client, worker: Any, stack: dict[str, Any]) -> None:
    agents = [f"fleet-{i}" for i in range(4)]
    for a in agents:
        alice.add_memories(a, [{"text": f"{t} ({a})"} for t in [*OPS[:4], *RECURRING]])
    _owner(stack, "UPDATE memworker.agents SET created_at = now() - interval '2 hours' WHERE id LIKE 'fleet-%%'")
    window = datetime.now(UTC).replace(second=0, microsecond=0).isoformat()
    app = Celery(broker=stack["redis_url"])
    for _ in range(2):  # two beats by mistake
        app.send_task("memworker.consolidation_sweep", args=[window], queue="maintenance")
    app.close()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        runs = {a: alice.consolidation_runs(a) for a in agents}
        if all(r and r[0]["status"] in ("done", "skipped", "failed") for r in runs.values()):
            break
        time.sleep(0.5)
    for a, r in runs.items():
        assert [(x["trigger"], x["status"]) for x in r] == [("time", "done")], (a, r)
        assert r[0]["run_key"].startswith("beat:")
    assert _owner(
        stack, "SELECT count(*) FROM memworker.memories WHERE agent_id LIKE 'fleet-%%' AND kind = 'insight'"
    ) == [(4,)]


def test_an_episode_asking_to_save_progress_gets_the_agent_a_pass(
    alice: Client, worker: Any, stack: dict[str, Any]
) -> None:
    for t in OPS[:3]:
        alice.add_memory("saver", t)
    ep = alice.add_episode("saver", "Good session. Please save progress before we stop.")
    alice.wait_for_episode("saver", ep["episode_id"])
    assert alice.consolidation_status("saver")["consolidation_requested"] is True
    # The agent is due once quiet; the test skips the 3 quiet minutes by ageing its last episode.
    _owner(stack, "UPDATE memworker.agents SET last_episode_at = now() - interval '10 minutes' WHERE id = 'saver'")
    app = Celery(broker=stack["redis_url"])
    app.send_task("memworker.consolidation_sweep", queue="maintenance")
    app.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = alice.consolidation_runs("saver")
        if runs and runs[0]["status"] == "done":
            break
        time.sleep(0.5)
    assert runs and (runs[0]["trigger"], runs[0]["status"]) == ("requested", "done")
