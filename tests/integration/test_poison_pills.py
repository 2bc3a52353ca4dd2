"""No poison pills: every date the API accepts reads back (out of range in UTC is a 422 that
stores nothing), and an episode whose row cannot be read fails alone: it spends its attempts
and ends dead with a reason while the tenant's other agents, and other tenants, keep flowing.
Through the real API, Redis and a real worker process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memworker.sdk import Client

EDGE_DATES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


def _h(tenant: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant['key']}"}


def _count(stack: dict[str, Any], table: str) -> int:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute(f"SELECT count(*) FROM memworker.{table}").fetchone()
    assert row is not None
    return int(row[0])


def _episode_state(stack: dict[str, Any], episode_id: str) -> tuple[str, int, str | None]:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute(
            "SELECT status, attempts, last_error FROM memworker.episodes WHERE id = %s", (episode_id,)
        ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


@pytest.mark.parametrize("when", EDGE_DATES + ["1899-12-31T23:59:59Z", "9000-01-01T00:00:00Z"])
def test_dates_out_of_range_in_utc_are_refused_everywhere(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], when: str
) -> None:
    h = _h(tenants["alice"])
    memory_id = httpx.post(
        f"{api}/v1/agents/alice/memories", json={"text": f"a memory to patch {when}"}, headers=h, timeout=30
    ).json()["id"]
    before = {t: _count(stack, t) for t in ("episodes", "memories")}
    bodies = [
        ("POST", "/v1/agents/alice/episodes", {"content": "x", "occurred_at": when}),
        ("POST", "/v1/agents/alice/episodes/batch", {"episodes": [{"content": "x", "occurred_at": when}]}),
        (
            "POST",
            "/v1/agents/alice/episodes",
            {"messages": [{"role": "user", "content": "x", "occurred_at": when}]},
        ),
        ("POST", "/v1/agents/alice/memories", {"text": "a dated memory", "expires_at": when}),
        ("POST", "/v1/agents/alice/memories/batch", {"memories": [{"text": "dated", "expires_at": when}]}),
        ("PATCH", f"/v1/agents/alice/memories/{memory_id}", {"expires_at": when}),
        ("POST", "/v1/agents/alice/recall", {"query": "x", "since": when}),
        ("POST", "/v1/agents/alice/forget", {"session_id": "s", "before": when}),
    ]
    for method, path, body in bodies:
        r = httpx.request(method, api + path, json=body, headers=h, timeout=30)
        assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert "datetimes must be" in r.text, r.text[:300]
    assert {t: _count(stack, t) for t in ("episodes", "memories")} == before


def test_dates_at_the_bounds_are_accepted_and_read_back(api: str, tenants: dict[str, Any]) -> None:
    with Client(api, tenants["alice"]["key"]) as c:
        for when in ("1900-01-01T00:00:00Z", "8999-12-31T09:59:59-14:00"):
            m = c.add_memory("edges", f"memory until {when}", expires_at=when)
            assert c.get_memory("edges", m["id"])["expires_at"] is not None
        r = c.add_episode("edges", "an old chat", occurred_at="1900-01-01T10:00:00+09:00")
        assert c.get_episode("edges", r["episode_id"])["occurred_at"].startswith("1900-01-01")


def test_the_issue_dates_give_422_and_the_victim_is_stored(api: str, tenants: dict[str, Any], worker: Any) -> None:
    for when in EDGE_DATES:
        r = httpx.post(
            f"{api}/v1/agents/alice/episodes",
            json={"content": "x", "occurred_at": when},
            headers=_h(tenants["alice"]),
            timeout=30,
        )
        assert r.status_code == 422, r.text[:300]
    with Client(api, tenants["alice"]["key"]) as c:
        victim = c.add_episode("bob", "victim: the deploy window is Thursday at noon")
        assert c.wait_for_episode("bob", victim["episode_id"])["status"] == "stored"


def _plant(stack: dict[str, Any], tenant_id: Any, agent: str, how: str) -> str:
    """A queued episode written straight into the table, unreadable in the way `how` says."""
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(
            "INSERT INTO memworker.agents (tenant_id, id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (tenant_id, agent),
        )
        if how == "date":  # year 0 in UTC: Postgres keeps it, Python's datetime cannot hold it
            sql = (
                "INSERT INTO memworker.episodes (tenant_id, agent_id, content, occurred_at, enqueued_at, created_at)"
                " VALUES (%s, %s, 'poison date', '0001-01-01 00:00:00+14', now(), now() - interval '1 hour')"
                " RETURNING id"
            )
        else:  # a saved reflection that is not the shape a reflection decodes from
            sql = (
                "INSERT INTO memworker.episodes (tenant_id, agent_id, content, reflection, enqueued_at, created_at)"
                " VALUES (%s, %s, 'poison reflection', '\"garbage\"'::jsonb, now(), now() - interval '1 hour')"
                " RETURNING id"
            )
        row = conn.execute(sql, (tenant_id, agent)).fetchone()
        assert row is not None
        conn.commit()
    return str(row[0])


def test_unreadable_rows_go_dead_while_other_agents_and_tenants_flow(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], worker: Any
) -> None:
    alice = tenants["alice"]
    bad = [_plant(stack, alice["id"], "mallory", how) for how in ("date", "reflection")]
    # the oldest queued episodes of the tenant: an opportunistic claim takes them with the victim's
    with Client(api, alice["key"]) as a, Client(api, tenants["bob"]["key"]) as b:
        victim = a.add_episode("victim-agent", "victim: the backup job runs at two in the morning")
        other = b.add_episode("bob-agent", "other tenant: the office moves to Leeds in May")
        assert a.wait_for_episode("victim-agent", victim["episode_id"])["status"] == "stored"
        assert b.wait_for_episode("bob-agent", other["episode_id"])["status"] == "stored"
        assert a.recall("victim-agent", "when does the backup job run")["memories"]
    deadline = time.monotonic() + 90
    states = [_episode_state(stack, e) for e in bad]
    while any(s[0] != "dead" for s in states) and time.monotonic() < deadline:
        time.sleep(0.5)
        states = [_episode_state(stack, e) for e in bad]
    max_attempts = stack["settings"].episode_max_attempts
    for (status, attempts, error), what in zip(states, ("unreadable episode", "unreadable saved reflection")):
        assert status == "dead" and attempts == max_attempts, states
        assert error is not None and error.startswith(what), error
    # and the tenant still takes and stores new episodes afterwards
    with Client(api, alice["key"]) as a:
        after = a.add_episode("victim-agent", "after: the release train leaves on Fridays")
        assert a.wait_for_episode("victim-agent", after["episode_id"])["status"] == "stored"


def test_the_date_repair_migration_makes_stored_rows_readable(
    api: str, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    """sql/0015_date_repair.sql, run again over rows written around the API: an episode out of
    range in UTC takes its created_at, memories' expiries move to the bounds, and all read."""
    alice = tenants["alice"]
    with Client(api, alice["key"]) as c:
        early, late = (c.add_memory("repaired", f"a memory expiring {w}")["id"] for w in ("early", "late"))
    episode = _plant(stack, alice["id"], "repaired", "date")
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute("UPDATE memworker.memories SET expires_at = '0001-01-01 00:00:00+14' WHERE id = %s", (early,))
        conn.execute("UPDATE memworker.memories SET expires_at = '9999-12-31 23:59:59-14' WHERE id = %s", (late,))
        conn.commit()
    h = _h(alice)
    assert httpx.get(f"{api}/v1/agents/repaired/episodes/{episode}", headers=h, timeout=30).status_code == 500
    repair = (Path(__file__).resolve().parents[2] / "sql" / "0015_date_repair.sql").read_text()
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(repair)  # type: ignore[arg-type]
        conn.commit()
    got = httpx.get(f"{api}/v1/agents/repaired/episodes/{episode}", headers=h, timeout=30)
    assert got.status_code == 200, got.text[:300]
    assert got.json()["occurred_at"] == got.json()["created_at"]
    with Client(api, alice["key"]) as c:
        assert c.get_memory("repaired", early)["expires_at"].startswith("1900-01-01")
        assert c.get_memory("repaired", late)["expires_at"] is None
