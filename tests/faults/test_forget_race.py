"""A forget racing the ingest of what it erases, many times over, on real processes: an API
and a Celery worker (each its own process, as `memworker up` runs them) on the module's
database. Each trial opens a session whose goal holds a marker of its own, archives it (the
archive queues its summary episode for the worker) and, after a small random delay, forgets
it (by subject, by session or by the summary episode), so the forget lands before, during or
after the worker's store. When the worker has drained, no row of the tenant may hold any
trial's marker. tests/integration/test_forget_inflight.py forces the same race
deterministically; this run shows it holds against a real worker's timing.

`python -m pytest tests/faults/test_forget_race.py -m faults -s` prints the counts."""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from memworker.sdk import Client
from tests.conftest import start_api, start_worker, stop_worker
from tests.probes import marked_rows

TRIALS = 200
MAX_DELAY_S = 0.12  # about the worker's time from the archive to its commit of the summary
UNLIMITED = {
    "MEMWORKER_RATE_KEY_PER_S": "100000",
    "MEMWORKER_RATE_KEY_BURST": "100000",
    "MEMWORKER_RATE_TENANT_PER_S": "100000",
    "MEMWORKER_RATE_TENANT_BURST": "100000",
}
SELECTORS = ("subject", "session_id", "provenance")
_MARKER = re.compile(r"rk-(7\d{4})")


def marker(trial: int) -> str:
    return f"RK-{71683 + trial}"


@pytest.fixture(scope="module")
def processes(stack: dict[str, Any]) -> Iterator[str]:
    """An API process and an ingest worker process; yields the API's URL."""
    worker = start_worker(stack["settings"], "race", queues="ingest", extra_env=UNLIMITED)
    try:
        api, url = start_api(stack["settings"], "race-api", extra_env=UNLIMITED)
        try:
            yield url
        finally:
            stop_worker(api)
    finally:
        stop_worker(worker)


@pytest.mark.faults
def test_forgets_racing_the_worker_leave_no_marker(
    stack: dict[str, Any], tenants: dict[str, Any], processes: str
) -> None:
    rng = random.Random(71683)
    client = Client(processes, tenants["alice"]["key"])
    receipts: Counter[str] = Counter()
    try:
        for trial in range(TRIALS):
            receipts[_trial(client, rng, trial)] += 1
        _drain(client)
    finally:
        client.close()
    survivors = _surviving_markers(stack, tenants["alice"]["id"])
    print(f"\nforget racing ingest: {TRIALS} trials, {len(survivors)} with a surviving marker; {dict(receipts)}")
    assert survivors == {}, survivors


def _trial(client: Client, rng: random.Random, trial: int) -> str:
    """One archive and its forget; says where the forget landed (what its receipt erased)."""
    agent, sid, subject = f"race-{trial}", f"s-{trial}", f"user-{trial}"
    client.create_session(agent, sid, goal=f"Close account {marker(trial)} for the user", subject=subject)
    archived = client.archive_session(agent, sid)
    episode = archived["distill_episode_id"]
    assert episode
    time.sleep(rng.uniform(0.0, MAX_DELAY_S))
    how = SELECTORS[trial % len(SELECTORS)]
    value = {"subject": subject, "session_id": sid, "provenance": f"episode:{episode}"}[how]
    receipt = client.forget(agent, **{how: value})
    assert episode in receipt["episodes"]["ids"], receipt
    stored = receipt["memories"]["count"] + receipt["turns"]["count"]
    return f"{how}: after the worker's commit" if stored else f"{how}: before the worker's commit"


def _drain(client: Client) -> None:
    """Until the worker has taken every message sent before: one more episode, queued last,
    is stored (the worker takes one task at a time)."""
    sentinel = client.add_episode("race-sentinel", "The drain check for the race trials ran.")
    client.wait_for_episode("race-sentinel", sentinel["episode_id"], timeout=120)
    time.sleep(1.0)


def _surviving_markers(stack: dict[str, Any], tenant_id: Any) -> dict[str, list[str]]:
    """Every trial's marker still held by a row of the tenant: marker -> tables."""
    found: dict[str, list[str]] = {}
    for table, texts in marked_rows(stack["owner_url"], tenant_id, "rk-7").items():
        for text in texts:
            for m in set(_MARKER.findall(text)):
                found.setdefault(f"RK-{m}", []).append(table)
    return found
