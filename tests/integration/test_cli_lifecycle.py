"""`memworker retention run|status` and `memworker policy apply|show` against the real
database, with three tenants: a policy file lands in its tenant only, bad files and bad
fields are refused by name with nothing applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memworker.cli import main as cli
from memworker.domain import memories
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder
from tests.pg_only import stack  # noqa: F401  (Postgres only: no Redis database)


@pytest.fixture()
def env(stack: dict[str, Any], tenants: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("MEMWORKER_DATABASE_URL", stack["app_url"])
    monkeypatch.setenv("MEMWORKER_ADMIN_DATABASE_URL", stack["owner_url"])
    monkeypatch.setenv("MEMWORKER_REDIS_URL", stack["redis_url"])
    return tenants


def policies(stack: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(stack["owner_url"]) as conn:
        tenants = dict(conn.execute("SELECT name, policy FROM memworker.tenants").fetchall())
        agents = {
            (t, a): p
            for t, a, p in conn.execute(
                "SELECT t.name, a.id, a.policy FROM memworker.agents a JOIN memworker.tenants t ON t.id = a.tenant_id"
            )
        }
    return {"tenants": tenants, "agents": agents}


def test_policy_apply_loads_a_file_into_one_tenant(
    env: Any, stack: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "policy.json"
    f.write_text(
        json.dumps(
            {
                "tenant": "bob",
                "defaults": {"ttl_l1_hours": 72, "decay_days": 14},
                "agents": {"support-bot": {"max_episodic": 200}, "ops-bot": {"unused_days": None}},
            }
        )
    )
    assert cli.main(["policy", "apply", str(f)]) == 0
    assert "2 agent override(s)" in capsys.readouterr().out
    p = policies(stack)
    assert p["tenants"]["bob"] == {"ttl_l1_hours": 72.0, "decay_days": 14.0}
    assert p["agents"][("bob", "support-bot")] == {"max_episodic": 200}
    assert p["agents"][("bob", "ops-bot")] == {"unused_days": None}
    assert p["tenants"]["alice"] == {} and p["tenants"]["charlie"] == {}
    assert cli.main(["policy", "show", "--tenant", "bob", "--agent", "support-bot"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["effective"]["max_episodic"] == 200 and shown["effective"]["decay_days"] == 14.0


def test_policy_apply_refuses_bad_files_by_name_and_applies_nothing(
    env: Any, stack: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = policies(stack)
    cases = {
        "not json {": "not valid JSON at line 1, column 1: Expecting value; hint: a value goes here",
        json.dumps([1, 2]): "top level must be an object",
        json.dumps({"defaults": {}, "extra": 1}): "unknown keys",
        json.dumps(
            {"tenant": "charlie", "defaults": {"ttl_l1_hours": 5}, "agents": {"a1": {"merge_similarity": 3}}}
        ): "agents.a1: policy: merge_similarity",
        json.dumps({"tenant": "charlie", "defaults": {"decay_days": "soon"}}): "decay_days",
    }
    for i, (text, message) in enumerate(cases.items()):
        f = tmp_path / f"bad{i}.json"
        f.write_text(text)
        assert cli.main(["policy", "apply", str(f)]) == 1
        assert message in capsys.readouterr().err
    assert policies(stack) == before  # charlie's defaults were not half-applied


def test_retention_run_and_status(env: Any, stack: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    alice = env["alice"]["id"]
    with db.connect(stack["app_url"]) as conn:
        db.bind_tenant(conn, alice)
        tenancy.ensure_agent(conn, tenant_id=alice, agent_id="cli-bot")
        for text in ("The kiosk reboots at midnight.", "The kiosk reboots at midnight!"):
            store.write_memory(
                conn,
                tenant_id=alice,
                agent_id="cli-bot",
                draft=memories.Draft(text=text),
                embedding=FakeEmbedder().embed([text])[0],
                source_key=f"cli:{text}",
            )
    assert cli.main(["retention", "run", "--tenant", "alice", "--agent", "cli-bot"]) == 0
    out = capsys.readouterr().out
    assert "retention cli-bot: done" in out and "merged            1" in out
    assert cli.main(["retention", "status", "--tenant", "alice", "--agent", "cli-bot"]) == 0
    assert "cli   done" in capsys.readouterr().out
    assert cli.main(["retention", "status", "--tenant", "bob", "--agent", "cli-bot"]) == 1  # bob has no such agent
    assert "agent not found" in capsys.readouterr().err


def test_json_output_of_migrate_and_policy_show(env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`migrate --json` prints what it applied as JSON (here nothing: the database is
    migrated), `migrate --status --json` each migration's state; `policy show` prints JSON
    with or without --json."""
    assert cli.main(["migrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"applied": []}
    assert cli.main(["migrate", "--status", "--json"]) == 0
    states = json.loads(capsys.readouterr().out)
    assert states and {s["state"] for s in states} == {"applied"}
    assert cli.main(["policy", "show", "--tenant", "alice"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert cli.main(["policy", "show", "--tenant", "alice", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == plain and "effective" in plain
