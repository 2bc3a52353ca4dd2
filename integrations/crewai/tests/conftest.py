"""Fixtures: a real memworker API (MEMWORKER_URL) and two tenants' keys (MEMWORKER_TEST_KEYS,
comma-separated), which ci.sh provides by starting `memworker up`. Each test works on agents
of its own (a random suffix), so tests share one server without seeing each other."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

# crewai's tracing waits up to 5 s per memory save outside a crew run, and it and its
# telemetry would reach for the network: off before crewai is imported.
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    CREWAI_DISABLE_TRACKING="true",
    CREWAI_TRACING_ENABLED="false",
    OTEL_SDK_DISABLED="true",
)

from memworker_crewai import MemworkerStorage  # noqa: E402  # after the environment above


def _need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through integrations/crewai/ci.sh (it starts memworker)")
    return value


@pytest.fixture(scope="session")
def api() -> str:
    return _need("MEMWORKER_URL")


@pytest.fixture(scope="session")
def keys() -> list[str]:
    found = [k for k in _need("MEMWORKER_TEST_KEYS").split(",") if k]
    if len(found) < 2:
        pytest.fail("MEMWORKER_TEST_KEYS needs two tenants' keys, comma-separated")
    return found


@pytest.fixture
def agent_id() -> str:
    return f"crew-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def storage(api: str, keys: list[str], agent_id: str) -> Iterator[MemworkerStorage]:
    with MemworkerStorage(api, keys[0], agent_id=agent_id) as s:
        yield s
