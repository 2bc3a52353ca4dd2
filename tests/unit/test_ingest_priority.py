"""Fair ingest's pure part: an ingest message's priority by how deep in its tenant's backlog it
sits (memworker.ingest.intake.urgency, tasks/publish.py; the rest in tests/acceptance/test_fair_ingest.py)."""

from __future__ import annotations

from typing import Any

from memworker.ingest import intake
from tasks.celery_app import PRIORITY_STEPS, make_celery
from tasks.publish import Publisher


def test_urgency_follows_the_depth_of_the_tenants_backlog() -> None:
    batch = 32
    assert [intake.urgency(p, batch) for p in (0, 31, 32, 127, 128, 511, 512, 10_000)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert len(PRIORITY_STEPS) == len(intake.URGENCY_BATCHES) + 1  # one kombu step per urgency
    assert list(PRIORITY_STEPS) == sorted(PRIORITY_STEPS)  # kombu's Redis transport pops 0 first


class _Recording(Publisher):
    def __init__(self) -> None:
        from memworker.settings import Settings

        super().__init__(make_celery(Settings(redis_url="redis://127.0.0.1:1/0")), ingest_batch_max=32)
        self.sent: list[tuple[int, int | None]] = []

    def _send(
        self, name: str, args: list[Any], queue: str, countdown: float | None = None, priority: int | None = None
    ) -> None:
        self.sent.append((len(args[1]), priority))


def test_a_tenant_with_nothing_queued_goes_first_and_a_deep_backlog_last() -> None:
    p = _Recording()
    p.ingest("t", [f"e{i}" for i in range(600)])  # a first request of 600: its first batch urgent
    assert p.sent[0] == (32, 0) and p.sent[1] == (32, 3) and p.sent[4] == (32, 6) and p.sent[-1] == (24, 9)
    p.sent.clear()
    p.ingest("t", ["lone"], backlog=3)  # a short backlog: still the most urgent step
    p.ingest("t", ["more"], backlog=512)  # behind 16 batches of its own: the last step
    assert p.sent == [(1, 0), (1, 9)]
    p.close()
