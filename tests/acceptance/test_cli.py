"""The operator's command line, run as a subprocess against the module's database and API."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memworker.local import embedded
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


def _bare_env() -> dict[str, str]:
    """The environment of a user who set no MEMWORKER_* variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}


def test_a_command_away_from_any_stack_creates_nothing_and_says_where_to_look(tmp_path: Path) -> None:
    """Run from a folder where no stack runs, a command opens no database of its own there:
    it says that none runs and how to point at one, and exits non-zero."""
    for argv in (["tenant", "list"], ["key", "list", "--tenant", "dev"], ["migrate", "--status"]):
        out = subprocess.run(
            [sys.executable, "-m", "memworker", *argv],
            cwd=tmp_path,
            env=_bare_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 1, (argv, out.stdout, out.stderr)
        assert "no `memworker up` is running" in out.stderr, out.stderr
        assert "--data-dir" in out.stderr and "MEMWORKER_DATA_DIR" in out.stderr, out.stderr
        assert "MEMWORKER_DATABASE_URL" in out.stderr, out.stderr
        assert list(tmp_path.iterdir()) == [], argv  # no ./.memworker, no Postgres


def test_every_list_and_show_command_takes_json() -> None:
    """A command that lists or shows something prints JSON with --json."""
    from memworker.cli.main import _parser

    def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path, parser
        for action in subs:
            for name, child in action.choices.items():
                yield from leaves(child, (*path, name))

    shows = ("list", "show", "status", "usage", "deliveries", "archives")
    missing = [
        " ".join(path)
        for path, parser in leaves(_parser(), ())
        if path[-1] in shows and not any("--json" in a.option_strings for a in parser._actions)
    ]
    assert missing == []


def test_lists_in_json_and_key_limits_shown(run: Any, tenants: dict[str, Any]) -> None:
    made = run("key", "create", "--tenant", "bob", "--agents", "ops-bot", "--pools", "faq", "--json")
    assert made.returncode == 0, made.stderr
    prefix = json.loads(made.stdout)["prefix"]
    listing = run("key", "list", "--tenant", "bob")
    line = next(ln for ln in listing.stdout.splitlines() if ln.startswith(prefix))
    assert "agents ops-bot" in line and "pools faq" in line, line
    keys = json.loads(run("key", "list", "--tenant", "bob", "--json").stdout)
    limited = next(k for k in keys if k["prefix"] == prefix)
    assert limited["agents"] == ["ops-bot"] and limited["pools"] == ["faq"]
    assert next(k for k in keys if k["prefix"] != prefix)["agents"] is None  # the tenant's first key: all
    names = {t["name"] for t in json.loads(run("tenant", "list", "--json").stdout)}
    assert {"alice", "bob", "charlie"} <= names
    key = tenants["bob"]["key"]
    episodes = run("episodes", "list", "--json", key=key)
    assert episodes.returncode == 0 and isinstance(json.loads(episodes.stdout), list), episodes.stderr
    usage = run("usage", "--json", key=key)
    assert usage.returncode == 0 and "agents" in json.loads(usage.stdout), usage.stderr


def test_api_commands_say_which_key_they_act_as(run: Any, tenants: dict[str, Any], tmp_path: Path, api: str) -> None:
    key = tenants["charlie"]["key"]
    out = run("episodes", "list", key=key)
    assert out.returncode == 0, out.stderr
    assert "MEMWORKER_API_KEY" in out.stderr and key.split("_")[1] in out.stderr, out.stderr
    assert key not in out.stderr  # the prefix, never the secret
    # without MEMWORKER_API_KEY: the dev key of the data dir's `memworker up`, and it says so,
    # also when the API then refuses (charlie has no pool faq)
    (tmp_path / "dev-api-key").write_text(key + "\n")
    dev = run("--data-dir", str(tmp_path), "proposals", "list", "--pool", "faq")
    assert dev.returncode == 1 and "pool not found" in dev.stderr, dev.stderr
    assert "dev key" in dev.stderr and "tenant 'dev'" in dev.stderr and "MEMWORKER_API_KEY" in dev.stderr


def test_a_malformed_json_argument_names_the_argument_line_and_column(run: Any, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"title": "ship",\n "milestones": [{\'title\': "a"}]}')
    out = run("session", "plan", "--agent", "a1", "s1", "--set", str(plan), key="mwk_unused_unused")
    assert out.returncode == 1, out.stderr
    assert "--set" in out.stderr and "line 2, column 18" in out.stderr and "double quotes" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    missing = run("session", "plan", "--agent", "a1", "s1", "--set", str(tmp_path / "nope.json"), key="mwk_x_y")
    assert missing.returncode == 1 and "--set" in missing.stderr and "Traceback" not in missing.stderr
    policy = tmp_path / "policy.json"
    policy.write_text('{"defaults": {"decay_days": 14,}}')
    bad = run("policy", "apply", str(policy))
    assert bad.returncode == 1 and "line 1, column 32" in bad.stderr and "trailing comma" in bad.stderr, bad.stderr


def test_an_unreachable_api_is_an_api_error_naming_the_url_and_a_hint() -> None:
    from memworker.sdk import ApiError, Unreachable

    url = f"http://127.0.0.1:{embedded.free_port()}"  # nothing listens there
    with Client(url, "mwk_x_y") as client, pytest.raises(ApiError) as caught:
        client.usage()
    assert isinstance(caught.value, Unreachable)
    assert url in str(caught.value) and "memworker up" in str(caught.value)
    with Client(url, "mwk_x_y") as client, pytest.raises(Unreachable):
        client.download_archive("a", "s", 1)
    host, port = url.rsplit(":", 1)
    env = {**_bare_env(), "MEMWORKER_API_KEY": "mwk_x_y", "MEMWORKER_API_PORT": port}
    out = subprocess.run(
        [sys.executable, "-m", "memworker", "usage"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1 and url in out.stderr and "memworker up" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
