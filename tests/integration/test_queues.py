"""Queue depths come from the Publisher (tasks/publish.py): every priority list kombu's Redis
transport keeps for a queue counts, read through the caller's connection or the publisher's."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import redis

from tasks.celery_app import PRIORITY_STEPS, QUEUES
from tasks.publish import Publisher


def test_queue_depths_count_every_priority_of_every_queue(stack: dict[str, Any]) -> None:
    settings = stack["settings"].replace(ingest_batch_max=2)
    publisher = Publisher.for_settings(settings)
    client = redis.Redis.from_url(stack["redis_url"])
    try:
        assert publisher.queue_depths() == dict.fromkeys(QUEUES, 0)
        assert not publisher.urgent_ingest_waiting()
        tenant = uuid4()
        publisher.ingest(tenant, [uuid4() for _ in range(5)], backlog=0)  # 3 messages: steps 0, 3, 3
        publisher.ingest(tenant, [uuid4()], backlog=100)  # deep in its backlog: the last step
        publisher.consolidate(tenant, "a", uuid4())
        publisher.sweep("retention_tick")
        want = {"ingest": 4, "consolidate": 1, "maintenance": 1, "webhooks": 0}
        assert publisher.queue_depths() == want
        assert publisher.queue_depths(client) == want  # the API's own connection reads the same
        lists = {k.decode() for k in client.keys("ingest*")}
        assert lists == {"ingest", f"ingest\x06\x16{PRIORITY_STEPS[1]}", f"ingest\x06\x16{PRIORITY_STEPS[-1]}"}
        assert publisher.urgent_ingest_waiting()  # a first batch (step 0) waits
    finally:
        client.flushdb()
        client.close()
        publisher.close()
