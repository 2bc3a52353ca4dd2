"""Forwarded headers count only from configured proxies: the API as `memworker up` and compose
run it (`python -m memworker.api.serve`) ignores X-Forwarded-For from a local caller by
default, so rotating the header neither dodges the failed-authentication bucket nor spends
another address's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from memworker.api import serve
from memworker.errors import ConfigError
from memworker.local import embedded
from memworker.settings import Settings
from tests.conftest import stop_worker


def test_no_proxy_is_trusted_by_default() -> None:
    assert Settings().trusted_proxies == ""
    assert serve.proxy_options(Settings())["proxy_headers"] is False
    opts = serve.proxy_options(Settings.from_env({"MEMWORKER_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7"}))
    assert opts == {"proxy_headers": True, "forwarded_allow_ips": ["10.0.0.0/8", "192.168.1.7"]}


def test_a_trusted_proxy_must_be_an_address_or_network() -> None:
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
        Settings.from_env({"MEMWORKER_TRUSTED_PROXIES": "proxy.example.com"})
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
        Settings.from_env({"MEMWORKER_TRUSTED_PROXIES": "*"})


@pytest.fixture(scope="module")
def served_api(stack: dict[str, Any]) -> Any:
    """The API as `memworker up` runs it, with default settings (no trusted proxy)."""
    settings: Settings = stack["settings"]
    port = embedded.free_port()
    log = open(settings.data_dir / "serve-api.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memworker.api.serve", "--port", str(port)],
        env={**os.environ, **settings.to_env()},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            assert proc.poll() is None, f"the API exited; see {settings.data_dir}/serve-api.log"
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.3)
        yield url
    finally:
        stop_worker(proc)


def test_rotating_x_forwarded_for_does_not_dodge_the_failed_auth_bucket(served_api: str) -> None:
    statuses = []
    with httpx.Client(base_url=served_api, timeout=10) as http:
        for i in range(45):
            r = http.get(
                "/v1/agents/a/memories",
                headers={"Authorization": f"Bearer mwk_bad_{i}", "X-Forwarded-For": f"203.0.113.{i}"},
            )
            statuses.append(r.status_code)
    assert set(statuses) <= {401, 429}, statuses
    assert 429 in statuses, statuses  # one bucket: the TCP peer's, whatever the header says
