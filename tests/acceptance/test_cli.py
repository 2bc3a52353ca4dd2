"""The operator's command line, run as a subprocess against the module's database and API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from memworker.sdk import Client


@pytest.fixture(scope="module")
def run(stack: dict[str, Any], api: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    env.update(stack["settings"].to_env())
    host, port = api.rsplit(":", 1)
    env.update({"MEMWORKER_API_HOST": host.split("//")[1], "MEMWORKER_API_PORT": port})

    def call(*args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memworker", *args],
            env={**env, **({"MEMWORKER_API_KEY": key} if key else {})},
            capture_output=True,
            text=True,
            timeout=120,
        )

    return call


def test_tenant_create_json_prints_exactly_one_object(run: Any, api: str) -> None:
    out = run("tenant", "create", "dora", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"tenant_id", "api_key"}
    Client(api, data["api_key"]).add_memory("cli-bot", "Dora's team deploys on Tuesdays.")
    again = run("tenant", "create", "dora", "--json")
    assert again.returncode == 1 and "exists" in again.stderr


def test_key_create_list_revoke(run: Any, api: str) -> None:
    made = run("key", "create", "--tenant", "dora", "--scopes", "memories:read", "--json")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    listing = run("key", "list", "--tenant", "dora")
    assert key["prefix"] in listing.stdout and "memories:read" in listing.stdout
    assert run("key", "revoke", "--tenant", "dora", key["prefix"]).returncode == 0
    assert "revoked" in run("key", "list", "--tenant", "dora").stdout
    bad = run("key", "create", "--tenant", "dora", "--scopes", "root")
    assert bad.returncode == 1 and "unknown scopes" in bad.stderr


def test_recall_and_usage_through_the_api(run: Any, tenants: dict[str, Any], api: str) -> None:
    key = tenants["alice"]["key"]
    Client(api, key).add_memory("cli-bot", "The staging database is called pluto.")
    out = run("recall", "--agent", "cli-bot", "--explain", "what is the staging database called", key=key)
    assert out.returncode == 0, out.stderr
    assert "pluto" in out.stdout and "bm25=" in out.stdout
    assert run("usage", key=key).returncode == 0


def test_migrate_status_and_helpful_errors(run: Any) -> None:
    status = run("migrate", "--status")
    assert status.returncode == 0 and "applied  0001_init.sql" in status.stdout
    unknown = run("key", "list", "--tenant", "nobody")
    assert unknown.returncode == 1 and "no tenant named 'nobody'" in unknown.stderr
    assert "MEMWORKER_DATABASE_URL" in run("--help").stdout
