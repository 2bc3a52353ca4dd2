"""`memworker up` as a user runs it: a subprocess on a fresh data dir."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis

from memworker.local import embedded
from memworker.local.stack import Stack
from memworker.sdk import Client


def test_up_serves_runs_a_worker_task_and_stops_every_child(tmp_path: Path) -> None:
    port, flower_port = embedded.free_port(), embedded.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    argv = [
        sys.executable,
        "-m",
        "memworker",
        "--data-dir",
        str(tmp_path / "data"),
        "up",
        "--port",
        str(port),
        "--flower-port",
        str(flower_port),
    ]
    log = open(tmp_path / "up.log", "w+b")
    up = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: b"memworker is up" in (tmp_path / "up.log").read_bytes(), 240, up, tmp_path)
        banner = (tmp_path / "up.log").read_text()
        assert api in banner and f"http://127.0.0.1:{flower_port}" in banner
        key = (tmp_path / "data" / "dev-api-key").read_text().strip()
        assert key in banner
        # the secrets are the user's alone, and Flower asks for its login (printed)
        data = tmp_path / "data"
        for private in ("dev-api-key", "stack.json", "flower-password", "pgpass", "redis-password"):
            assert stat.S_IMODE((data / private).stat().st_mode) == 0o600, private
        # and nothing else in it is open to other local users: logs, metrics files, beat's
        # schedule (the embedded servers' folders keep the modes the servers set)
        _wait(lambda: any((data / "prometheus").glob("*.db")) and any(data.glob("beat-schedule*")), 60, up, tmp_path)
        for root, dirs, files in os.walk(data):
            rel = Path(root).relative_to(data)
            if rel.parts and rel.parts[0] in ("pg", "pg-replica", "redis", "run"):
                continue
            for name in files + [d for d in dirs if rel.parts or d not in ("pg", "pg-replica", "redis", "run")]:
                mode = stat.S_IMODE((Path(root) / name).lstat().st_mode)
                assert mode & 0o077 == 0, (str(rel / name), oct(mode))
        flower_auth = ("admin", (data / "flower-password").read_text().strip())
        assert f"login admin / {flower_auth[1]}" in banner
        assert "@127.0.0.1:" in json.loads((data / "stack.json").read_text())["redis_url"]  # redis://:pw@...
        assert httpx.get(f"{api}/healthz").json()["status"] == "ok"

        client = Client(api, key)
        ep = client.add_episode("up-bot", "The nightly backup runs at 03:00 UTC on the replica.")
        assert client.wait_for_episode("up-bot", ep["episode_id"], timeout=120)["status"] == "stored"

        _wait(lambda: _flower_workers(flower_port, flower_auth) >= 2, 60, up, tmp_path)  # worker + webhook sender
        for auth in (None, ("admin", "wrong")):
            r = httpx.get(f"http://127.0.0.1:{flower_port}/api/workers", auth=auth, timeout=5)
            assert r.status_code == 401, (auth, r.status_code)
        assert httpx.get(f"http://127.0.0.1:{flower_port}/", timeout=5).status_code == 401  # the UI too

        # metrics from the worker processes reach the API's /metrics (multiprocess mode)
        _wait(
            lambda: 'memworker_episodes_total{outcome="stored"} 1.0' in httpx.get(f"{api}/metrics").text,
            30,
            up,
            tmp_path,
        )
        text = httpx.get(f"{api}/metrics").text
        for name in (
            'memworker_queue_depth{queue="ingest"}',
            'memworker_queue_depth{queue="webhooks"}',
            'memworker_task_seconds_count{state="SUCCESS",task="memworker.ingest"}',
            "memworker_http_request_seconds_bucket",
            "memworker_recall_seconds",
        ):
            assert name in text, name

        stack_json = (data / "stack.json").read_bytes()
        again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and "already running" in again.stderr and api in again.stderr
        # the refused start left the running stack's file, so the CLI still finds the stack
        assert (data / "stack.json").read_bytes() == stack_json
        listed = subprocess.run(
            [sys.executable, "-m", "memworker", "--data-dir", str(data), "tenant", "list"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0 and " dev " in listed.stdout, listed.stderr
        beat_log = (data / "logs" / "beat.log").read_text()
        assert " INFO " not in beat_log, beat_log[-2000:]  # beat runs under --loglevel warning

        family = psutil.Process(up.pid).children(recursive=True)
        assert len(family) >= 7  # postgres, redis, api, worker (+ pool child), webhooks, beat, flower
        assert any("webhooks@" in " ".join(p.cmdline()) and "-Q webhooks" in " ".join(p.cmdline()) for p in family)
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(60)
        finally:
            if up.poll() is None:
                up.kill()
            log.close()
    assert up.returncode == 0
    time.sleep(0.5)
    survivors = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert survivors == [], [p.cmdline() for p in survivors]


def _flower_workers(port: int, auth: tuple[str, str]) -> int:
    try:
        url = f"http://127.0.0.1:{port}/api/workers"
        return len(httpx.get(url, params={"refresh": "1"}, auth=auth, timeout=5).json())
    except (httpx.HTTPError, ValueError):
        return 0


def _wait(ok: object, timeout: float, up: subprocess.Popen[bytes], tmp: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert up.poll() is None, (tmp / "up.log").read_text()
        if ok():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out; log:\n{(tmp / 'up.log').read_text()}")


def test_a_refused_up_leaves_the_running_stack_alone(tmp_path: Path) -> None:
    """A second `memworker up` on a data dir another one holds changes nothing there (its
    stack.json, the modes of its files) and says where the running one serves."""
    data = tmp_path / "data"
    data.mkdir()
    lock = os.open(data / "up.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held as the running `memworker up` holds it
    os.write(lock, str(os.getpid()).encode())
    running = json.dumps({"pid": os.getpid(), "api_url": "http://127.0.0.1:8999", "flower_url": "x"})
    (data / "stack.json").write_text(running)
    (data / "notes.txt").write_text("mine")
    (data / "notes.txt").chmod(0o644)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    try:
        out = subprocess.run(
            [sys.executable, "-m", "memworker", "--data-dir", str(data), "up"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(lock)
    assert out.returncode == 1, out.stderr
    assert "already running" in out.stderr and "http://127.0.0.1:8999" in out.stderr, out.stderr
    assert (data / "stack.json").read_text() == running
    assert stat.S_IMODE((data / "notes.txt").stat().st_mode) == 0o644
    assert sorted(p.name for p in data.iterdir()) == ["notes.txt", "stack.json", "up.lock"]


def test_beat_under_loglevel_warning_logs_no_info(stack: dict[str, Any], tmp_path: Path) -> None:
    """Beat as `memworker up` starts it (--loglevel warning) sends its ticks without an INFO
    line each, whatever MEMWORKER_LOG_LEVEL says of memworker's own loggers."""
    settings = stack["settings"].replace(data_dir=tmp_path, access_drain_every_s=0.5, log_level="INFO")
    beat = next(s for s in Stack(settings)._services("unused") if s.name == "beat")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    env.update(settings.to_env())
    log = tmp_path / "beat.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(beat.argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    client = redis.Redis.from_url(stack["redis_url"])
    try:
        deadline = time.monotonic() + 60
        while not list(client.scan_iter(match="maintenance*")):  # beat sent a tick
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        time.sleep(2)  # several more ticks
    finally:
        client.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    text = log.read_text()
    assert "Sending due task" not in text and " INFO " not in text, text[-2000:]
