"""`memworker demo`: drive a running stack (or start the embedded one) with fleet traffic."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from memworker import errors, runtime
from memworker.settings import Settings


def register(sub: Any) -> None:
    d = sub.add_parser(
        "demo",
        help="simulate a fleet of agents against a running stack and summarise",
        description="Posts multi-session traffic for many agents, waits for it to be stored, "
        "runs a sleep pass per agent, then prints throughput, memories, insights, "
        "recall examples with explanations and recall latency. With no running "
        "stack it starts the embedded one itself (and stops it afterwards).",
    )
    d.add_argument("--agents", type=int, default=100)
    d.add_argument("--episodes", type=int, default=20, help="episodes per agent")
    d.add_argument("--seed", type=int, default=7)
    d.set_defaults(func=cmd_demo)


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from memworker.cli.common import client as _client
    from memworker.local import demo

    started: subprocess.Popen[bytes] | None = None
    if not runtime.stack_file(settings).exists() and not settings.api_key:
        print(f"no running stack on {settings.data_dir}; starting the embedded one ...", flush=True)
        started = subprocess.Popen(
            [sys.executable, "-m", "memworker", "--data-dir", str(settings.data_dir), "up"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        _wait_for_stack(settings, started)
    try:
        with _client(settings) as client:
            print(demo.run(client, agents=args.agents, episodes=args.episodes, seed=args.seed).render())
    finally:
        if started is not None:
            started.send_signal(signal.SIGTERM)
            started.wait(60)
    return 0


def _wait_for_stack(settings: Settings, proc: subprocess.Popen[bytes], timeout: float = 240.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise errors.MemworkerError("memworker up exited; run it by hand to see why")
        path = runtime.stack_file(settings)
        if path.exists():
            try:
                if httpx.get(json.loads(path.read_text())["api_url"] + "/healthz", timeout=2).status_code == 200:
                    return
            except (httpx.HTTPError, ValueError, KeyError):
                pass
        time.sleep(0.5)
    raise errors.MemworkerError("the embedded stack did not become healthy in time")
