"""Knowledge updates through a real worker, as an agent sends them: the older statement as one
episode, the update, in other words, as a later one. The stale memory is superseded at write
time (its history and the newer memory's name each other), its turn leaves recall with it, and
recall answers with the new value; statements that only look alike stay live."""

from __future__ import annotations

from typing import Any

import pytest

from memworker.sdk import Client

UPDATES = [
    ("We use Datadog for monitoring.", "Monitoring moved over to Grafana last sprint.", "Grafana", "Datadog"),
    ("Our on-call number is 555-0134.", "New on-call number: 555-0188.", "555-0188", "555-0134"),
    ("Sam lives in Lisbon.", "Sam moved to Porto in the spring.", "Porto", "Lisbon"),
    ("Best way to reach me is WhatsApp.", "Please use Signal, I deleted WhatsApp.", "Signal", "WhatsApp"),
    ("The launch date is March 3.", "Launch slipped to March 17.", "March 17", "March 3"),
]
LOOK_ALIKES = [
    ("Alice's office is in room 4.", "Bob's office is in room 7."),
    ("We use Postgres for the main database.", "We also use Redis for caching."),
    ("Our servers run on AWS in Frankfurt.", "We're thinking about moving our servers to GCP next year."),
    ("Rent is 1,350 a month.", "When we moved in five years ago, rent was 950."),
]


@pytest.fixture(scope="module")
def client(api: str, tenants: dict[str, Any], worker: Any) -> Client:
    return Client(api, tenants["alice"]["key"])


def _send(c: Client, agent: str, text: str) -> dict[str, Any]:
    ep = c.add_episode(agent, messages=[{"role": "user", "content": text}])
    stored = c.wait_for_episode(agent, ep["episode_id"])
    assert stored["status"] == "stored", stored
    return stored


def _current(c: Client, agent: str, memory_id: str) -> bool:
    versions = c.history(agent, memory_id)["versions"]
    return bool(next(v for v in versions if str(v["id"]) == memory_id)["current"])


@pytest.mark.parametrize(("older", "newer", "new_value", "old_value"), UPDATES)
def test_an_everyday_update_supersedes_the_stale_fact_and_recall_answers_the_new_value(
    client: Client, older: str, newer: str, new_value: str, old_value: str
) -> None:
    agent = f"upd-{abs(hash(older)) % 10**8}"
    stale = _send(client, agent, older)["memory_ids"]
    fresh = _send(client, agent, newer)["memory_ids"]
    assert stale and fresh
    story = client.history(agent, stale[0])
    versions = [str(v["id"]) for v in story["versions"]]
    assert versions[0] == stale[0] and versions[-1] in fresh and not _current(client, agent, stale[0])
    # the chain reads both ways: the old names the new, the new names what it replaced
    events = {(e["event"], str(e["memory_id"])): [str(r) for r in e["related_ids"]] for e in story["events"]}
    assert events[("superseded", stale[0])] == [versions[-1]]
    assert events[("supersedes", versions[-1])] == [stale[0]]
    # the sentence that stated the old value is what was said, kept, but no longer served
    hits = client.recall(agent, newer, k=5)["memories"]
    assert hits and new_value in hits[0]["text"]
    assert not any(old_value in h["text"] and new_value not in h["text"] for h in hits), hits


@pytest.mark.parametrize(("older", "newer"), LOOK_ALIKES)
def test_statements_that_only_look_alike_both_stay_live(client: Client, older: str, newer: str) -> None:
    agent = f"alike-{abs(hash(older)) % 10**8}"
    ids = _send(client, agent, older)["memory_ids"] + _send(client, agent, newer)["memory_ids"]
    client.run_retention(agent)
    assert len(ids) >= 2 and all(_current(client, agent, m) for m in ids)
    assert client.reviews(agent) == []


def test_an_update_never_crosses_tenants(api: str, tenants: dict[str, Any], client: Client) -> None:
    other = Client(api, tenants["bob"]["key"])
    mine = _send(client, "cross-upd", "The standup is at 9:30 every morning.")["memory_ids"]
    _send(other, "cross-upd", "Standup got moved to 10:15.")
    assert mine and _current(client, "cross-upd", mine[0])
