"""Episode idempotency keys: a key names one episode of an agent. The same episode again (same
subject, same content) answers with the first one (duplicate); another episode under a used
key (another subject, or other content) is a 409 that says why and writes nothing, never a
silent drop of what was sent. Real API, Postgres and Redis (docs/episodes.md)."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest

from memworker.sdk import Client

AGENT = "keyed-bot"


@pytest.fixture(scope="module")
def http(api: str, tenants: dict[str, Any]) -> Any:
    with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {tenants['alice']['key']}"}, timeout=60) as c:
        yield c


def _episodes(stack: dict[str, Any], agent: str) -> list[tuple[str, str | None, str]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        rows = conn.execute(
            "SELECT idempotency_key, subject, content FROM memworker.episodes WHERE agent_id = %s ORDER BY created_at",
            (agent,),
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def test_a_key_used_for_another_subject_is_a_409_and_writes_nothing(http: httpx.Client, stack: dict[str, Any]) -> None:
    url = f"/v1/agents/{AGENT}/episodes"
    first = http.post(url, json={"content": "Customer B renews in May.", "subject": "cust-B", "idempotency_key": "t-1"})
    assert first.status_code == 202 and first.json()["duplicate"] is False, first.text
    before = _episodes(stack, AGENT)
    other = http.post(
        url, json={"content": "Customer A renews in June.", "subject": "cust-A", "idempotency_key": "t-1"}
    )
    assert other.status_code == 409, other.text
    assert "t-1" in other.json()["error"] and "subject" in other.json()["error"]
    assert "cust-B" not in other.text and "renews" not in other.text  # nothing of the other episode
    general = http.post(url, json={"content": "Customer A renews in June.", "idempotency_key": "t-1"})
    assert general.status_code == 409, general.text
    assert _episodes(stack, AGENT) == before


def test_a_key_used_for_other_content_is_a_409(http: httpx.Client, stack: dict[str, Any]) -> None:
    url = f"/v1/agents/{AGENT}/episodes"
    first = http.post(
        url, json={"content": "The VPN rotates keys weekly.", "subject": "cust-C", "idempotency_key": "t-2"}
    )
    assert first.status_code == 202, first.text
    before = _episodes(stack, AGENT)
    other = http.post(
        url, json={"content": "The VPN rotates keys daily.", "subject": "cust-C", "idempotency_key": "t-2"}
    )
    assert other.status_code == 409 and "content" in other.json()["error"], other.text
    assert _episodes(stack, AGENT) == before


def test_the_same_episode_again_is_a_duplicate(http: httpx.Client, stack: dict[str, Any]) -> None:
    url = f"/v1/agents/{AGENT}/episodes"
    body = {
        "messages": [{"role": "user", "content": "My plan is Team."}],
        "subject": "cust-D",
        "idempotency_key": "t-3",
    }
    first = http.post(url, json=body)
    again = http.post(url, json={**body, "metadata": {"retry": 1}})  # metadata is not what a key names
    assert first.status_code == again.status_code == 202, again.text
    assert again.json() == {**first.json(), "duplicate": True}


def test_a_batch_with_a_mismatch_is_refused_whole(http: httpx.Client, stack: dict[str, Any]) -> None:
    url = f"/v1/agents/{AGENT}/episodes/batch"
    http.post(
        f"/v1/agents/{AGENT}/episodes", json={"content": "Batch base.", "subject": "cust-E", "idempotency_key": "t-4"}
    )
    before = _episodes(stack, AGENT)
    batch = {
        "episodes": [
            {"content": "A new episode in the batch.", "idempotency_key": "t-5"},
            {"content": "Batch base.", "subject": "cust-F", "idempotency_key": "t-4"},
        ]
    }
    r = http.post(url, json=batch)
    assert r.status_code == 409, r.text
    assert _episodes(stack, AGENT) == before  # not even the new one
    twice = {"episodes": [{"content": "One.", "idempotency_key": "t-6"}, {"content": "Two.", "idempotency_key": "t-6"}]}
    assert http.post(url, json=twice).status_code == 409
    assert _episodes(stack, AGENT) == before


def test_a_retry_is_a_duplicate_whether_redaction_was_on_or_off(
    api: str, http: httpx.Client, tenants: dict[str, Any]
) -> None:
    agent = "keyed-redacted"
    body = {"content": "Call me on 020 7946 0958.", "subject": "cust-G", "idempotency_key": "t-7"}
    with Client(api, tenants["alice"]["key"]) as c:
        c.set_policy({"redact_pii": True}, agent_id=agent)
        first = http.post(f"/v1/agents/{agent}/episodes", json=body)
        again = http.post(f"/v1/agents/{agent}/episodes", json=body)  # stored redacted, sent raw again
        assert again.status_code == 202 and again.json()["episode_id"] == first.json()["episode_id"], again.text
        c.set_policy({"redact_pii": False}, agent_id=agent)
        later = http.post(f"/v1/agents/{agent}/episodes", json=body)
        assert later.status_code == 202 and later.json()["duplicate"] is True, later.text
        c.set_policy({"redact_pii": False}, agent_id="keyed-plain")
        raw = http.post("/v1/agents/keyed-plain/episodes", json=body)
        c.set_policy({"redact_pii": True}, agent_id="keyed-plain")
        after = http.post("/v1/agents/keyed-plain/episodes", json=body)  # stored raw, would store redacted now
        assert after.status_code == 202 and after.json()["episode_id"] == raw.json()["episode_id"], after.text


def test_keys_of_one_agent_do_not_bind_another(http: httpx.Client) -> None:
    body = {"content": "Another agent, another episode.", "subject": "cust-A", "idempotency_key": "t-1"}
    r = http.post("/v1/agents/keyed-other/episodes", json=body)
    assert r.status_code == 202 and r.json()["duplicate"] is False, r.text
