"""Two worker processes on one Redis and one Postgres: every episode is processed once."""

from __future__ import annotations

from typing import Any

import psycopg

from memworker.sdk import Client
from tests.conftest import start_worker, stop_worker


def test_two_workers_store_every_episode_exactly_once(stack: dict[str, Any], api: str, tenants: dict[str, Any]) -> None:
    workers = [start_worker(stack["settings"], f"scale{i}") for i in range(2)]
    try:
        ids: list[str] = []
        for name in ("alice", "bob", "charlie"):
            c = Client(api, tenants[name]["key"])
            for agent in range(3):
                out = c.add_episodes(
                    f"fleet-{agent}",
                    [
                        {"content": f"{name} agent {agent} finished job {i} on node {i % 5}; the job took {i} minutes."}
                        for i in range(40)
                    ],
                )
                ids += [(name, f"fleet-{agent}", e["episode_id"]) for e in out]  # type: ignore[misc]
        for name, agent, eid in ids:  # type: ignore[misc]
            assert Client(api, tenants[name]["key"]).wait_for_episode(agent, eid, timeout=180)["status"] == "stored"
    finally:
        for w in workers:
            stop_worker(w)
    with psycopg.connect(stack["owner_url"]) as conn:
        total, distinct, episodes = conn.execute(
            "SELECT count(*), count(DISTINCT source_key), count(DISTINCT split_part(source_key, ':', 2)) "
            "FROM memworker.memories WHERE agent_id LIKE 'fleet-%'"
        ).fetchone()
        attempts = conn.execute(
            "SELECT max(attempts), min(attempts) FROM memworker.episodes WHERE agent_id LIKE 'fleet-%'"
        ).fetchone()
        hosts = conn.execute(
            "SELECT count(*) FROM memworker.episodes WHERE agent_id LIKE 'fleet-%' AND cardinality(memory_ids) = 0"
        ).fetchone()
    assert total == distinct  # no memory written twice
    assert episodes == len(ids) == 360  # every episode yielded its memories
    assert attempts == (1, 1)  # and each was claimed exactly once
    assert hosts == (0,)
