"""docker-compose.yml and ops/Dockerfile rehearsed without Docker (tests/topology.py): every
service started as its own process with compose's command and environment, in depends_on
order, against separately started Postgres and Redis stand-ins; then the stack is used the
way an operator and an agent would use it."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import topology
from tests.topology import REHEARSED, STAND_INS, Rehearsal


@pytest.fixture(scope="module")
def stack() -> Iterator[Rehearsal]:
    r = Rehearsal(scale={"worker": 2})  # `docker compose up --scale worker=2`
    try:
        # The image's build-time assertions (migrations found, model shipped, ONNX export
        # loadable), in the image's environment, while the stand-ins start.
        build_env = {k: r.map_path(v, r.paths("api")) for k, v in topology.image_env().items()}
        build = subprocess.Popen(
            ["sh", "-c", " && ".join(topology.build_checks())],
            cwd=topology.ROOT,
            env={"PATH": f"{r.venv_bin}:/usr/bin:/bin", "HOME": str(Path.home()), **build_env},  # as root
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        r.start_stand_ins()
        out, _ = build.communicate(timeout=120)
        assert build.returncode == 0, out.decode(errors="replace")[-3000:]
        r.up()
        yield r
    finally:
        r.close()


def test_every_service_is_started_in_depends_on_order(stack: Rehearsal) -> None:
    names = [c.rsplit("-", 1)[0] if c not in stack.services else c for c in stack.started]
    assert set(names) == set(stack.services) == set(REHEARSED) | set(STAND_INS)
    assert names.index("migrate") < min(names.index(s) for s in ("api", "worker", "webhooks", "beat"))
    assert stack.procs["migrate"].returncode == 0  # the one-shot ran and succeeded
    for container, proc in stack.procs.items():
        if container != "migrate":
            assert proc.poll() is None, f"{container} exited:\n{stack.log_tail(container)}"
        if container not in STAND_INS and stack.user and container != "migrate":
            # the image's USER (ops/Dockerfile), not root
            uid = Path(f"/proc/{proc.pid}/status").read_text().split("\nUid:")[1].split()[0]
            assert int(uid) == stack.uid, container


def test_api_is_healthy_and_an_episode_goes_through_the_worker_to_recall(stack: Rehearsal) -> None:
    stack.wait_healthy("api", timeout=60)  # compose's own healthcheck command
    api = stack.url("api", 8420)
    assert httpx.get(f"{api}/healthz", timeout=10).status_code == 200
    # The admin path of the runbook: `docker compose run --rm migrate memworker tenant create`.
    created = json.loads(stack.run("migrate", ["memworker", "tenant", "create", "acme", "--json"]))
    headers = {"Authorization": f"Bearer {created['api_key']}"}
    text = "The deploy of the billing service moved to Thursdays after the rehearsal."
    r = httpx.post(
        f"{api}/v1/agents/ops-bot/episodes",
        json={"content": text, "idempotency_key": "rehearsal-1"},
        headers=headers,
        timeout=30,
    )
    assert r.status_code == 202, r.text
    episode_id = r.json()["episode_id"]
    deadline = time.monotonic() + 90
    status = ""
    while time.monotonic() < deadline:
        got = httpx.get(f"{api}/v1/agents/ops-bot/episodes/{episode_id}", headers=headers, timeout=10)
        status = got.json()["status"]
        if status == "stored":
            break
        time.sleep(0.5)
    assert status == "stored", f"episode {status}; worker log:\n{stack.log_tail('worker-1')}"
    hits = httpx.post(
        f"{api}/v1/agents/ops-bot/recall", json={"query": "when is the billing deploy?"}, headers=headers, timeout=30
    ).json()["memories"]
    assert any("Thursday" in h["text"] for h in hits), hits
    # The runbook's operator commands: keys through the owner URL (migrate), episodes through
    # the API from inside the api container (its port 8420 is mapped here, hence the variable).
    prefix = stack.run("migrate", ["memworker", "key", "list", "--tenant", "acme"]).split()[0]
    assert prefix in created["api_key"]
    listed = stack.run(
        "api",
        ["memworker", "episodes", "list", "--status", "stored"],
        env={"MEMWORKER_API_KEY": created["api_key"], "MEMWORKER_API_PORT": str(stack.ports["api"][8420])},
    )
    assert episode_id in listed, listed
    # The long-running services connect as the app role; the owner URL stays with migrate.
    assert "MEMWORKER_ADMIN_DATABASE_URL" not in stack.env("api")


def test_flower_answers_with_its_login_and_sees_the_workers(stack: Rehearsal) -> None:
    flower = stack.url("flower", 5555)
    user, _, password = stack.secrets["FLOWER_BASIC_AUTH"].partition(":")
    assert httpx.get(f"{flower}/api/workers", timeout=10).status_code == 401
    assert httpx.get(f"{flower}/api/workers", auth=(user, "wrong"), timeout=10).status_code == 401
    # Every queue the workers consume, and with a hostname per container one node per worker
    # container, as Flower's inspect sees them. A busy node can miss one inspect's 1 s reply
    # window, so what the polls saw is added up.
    expected = {"ingest", "consolidate", "maintenance", "webhooks"}
    hosts = {"worker-1", "worker-2", "webhooks-1"} if stack.uts else set()
    deadline = time.monotonic() + 90
    queues: set[str] = set()
    nodes: set[str] = set()
    while time.monotonic() < deadline and not (expected <= queues and hosts <= nodes):
        r = httpx.get(f"{flower}/api/workers", params={"refresh": "1"}, auth=(user, password), timeout=30)
        assert r.status_code == 200, r.text
        queues |= {q["name"] for node in r.json().values() for q in node.get("active_queues") or []}
        nodes |= {name.split("@")[-1] for name in r.json()}
        time.sleep(1)
    assert expected <= queues and hosts <= nodes, f"{queues} {nodes}\n{stack.log_tail('webhooks')}"


def test_beat_keeps_its_schedule_on_its_volume(stack: Rehearsal) -> None:
    schedule = shlex.split(" ".join(stack.argv("beat")))[-1]
    volume = stack.paths("beat")["/var/lib/memworker/beat"]
    assert schedule.startswith(str(volume))
    deadline = time.monotonic() + 30
    while not any(volume.glob("celerybeat-schedule*")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert any(volume.glob("celerybeat-schedule*")), stack.log_tail("beat")
