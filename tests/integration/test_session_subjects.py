"""Sessions and subjects over the real API (HTTP, Postgres, Redis): a caller that says which
subject it acts for reaches that subject's sessions only. Session ids are chosen by callers
and easy to guess, so naming one is not enough to read or change another subject's session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memworker.sdk import ApiError, Client


def test_a_caller_acting_for_a_subject_is_refused_another_subjects_session(api: str, tenants: dict[str, Any]) -> None:
    """`subject` on a session's routes (the query, or the body of POST .../sessions and
    .../context) says whom the caller acts for: a session of another subject, or a general
    one, is 403 and unchanged; its own session answers as without it; bad subjects are 422."""
    agent = "sessions-bot"
    base = f"/v1/agents/{agent}"
    plan = {"milestones": [{"id": "m1", "title": "verify", "steps": [{"id": "s1", "title": "check"}]}]}
    with Client(api, tenants["bob"]["key"]) as c:
        for sid, subject in (("chat-b", "cust-b"), ("chat-g", None), ("chat-a", "cust-a")):
            c.create_session(agent, sid, goal=f"goal of {sid}", subject=subject)
            c.set_plan(agent, sid, plan["milestones"])
        before = {sid: c.session(agent, sid) for sid in ("chat-b", "chat-g")}
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {tenants['bob']['key']}"}, timeout=30)

    def calls(sid: str, subject: str) -> list[tuple[str, str, dict[str, Any]]]:
        q = {"params": {"subject": subject}}
        return [
            ("POST", f"{base}/sessions", {"json": {"session_id": sid, "subject": subject}}),
            ("GET", f"{base}/sessions/{sid}", q),
            ("GET", f"{base}/sessions/{sid}/working", q),
            ("PATCH", f"{base}/sessions/{sid}/working", {**q, "json": {"intent": "look"}}),
            ("GET", f"{base}/sessions/{sid}/plan", q),
            ("PUT", f"{base}/sessions/{sid}/plan", {**q, "json": plan}),
            ("PATCH", f"{base}/sessions/{sid}/plan/steps/s1", {**q, "json": {"status": "done"}}),
            ("POST", f"{base}/sessions/{sid}/usage", {**q, "json": {"context_used": 0.9}}),
            ("GET", f"{base}/sessions/{sid}/context_calls", q),
            ("POST", f"{base}/context", {"json": {"query": "what next?", "session_id": sid, "subject": subject}}),
        ]

    for sid in ("chat-b", "chat-g"):
        for method, path, kwargs in calls(sid, "cust-a"):
            r = http.request(method, path, **kwargs)
            assert r.status_code == 403, (method, path, r.status_code, r.text)
            assert "cust-a" in r.json()["error"] and f"goal of {sid}" not in r.text
    for method, path, kwargs in calls("chat-a", "cust-a"):
        r = http.request(method, path, **kwargs)
        assert r.status_code in (200, 201), (method, path, r.status_code, r.text)
    assert http.get(f"{base}/sessions/chat-a/working", params={"subject": "a/b"}).status_code == 422
    with Client(api, tenants["bob"]["key"]) as c:
        for sid, session in before.items():
            assert c.session(agent, sid) == session
            assert c.context_calls(agent, sid) == []
        # a caller that names no subject is not restricted (the key's own reach)
        assert c.working(agent, "chat-b")["goal"] == "goal of chat-b"
    http.close()


def refused(call: Callable[[], object], subject: str) -> None:
    """The call is a 403 naming the subject the caller acts for."""
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status == 403 and subject in str(caught.value), caught.value


def test_the_sdk_acting_for_a_subject_is_refused_another_subjects_session(api: str, tenants: dict[str, Any]) -> None:
    """Every session method of the SDK takes `subject=`: another subject's session, or a
    general one, is refused (403) and stays as it was; its own session answers; no subject
    reaches every session; another tenant's session of the same id is not found."""
    agent, milestones = "sdk-bot", [{"id": "m1", "title": "verify", "steps": [{"id": "s1", "title": "check"}]}]
    with Client(api, tenants["bob"]["key"]) as c:
        for sid, subject in (("chat-b", "cust-b"), ("chat-g", None), ("chat-a", "cust-a")):
            c.create_session(agent, sid, goal=f"goal of {sid}", subject=subject)
            c.set_plan(agent, sid, milestones)
        before = {sid: c.session(agent, sid) for sid in ("chat-b", "chat-g")}
        for sid in ("chat-b", "chat-g"):
            for call in (
                lambda: c.create_session(agent, sid, subject="cust-a"),
                lambda: c.session(agent, sid, subject="cust-a"),
                lambda: c.working(agent, sid, subject="cust-a"),
                lambda: c.update_working(agent, sid, subject="cust-a", intent="look"),
                lambda: c.plan(agent, sid, subject="cust-a"),
                lambda: c.set_plan(agent, sid, milestones, title="taken", subject="cust-a"),
                lambda: c.update_step(agent, sid, "s1", subject="cust-a", status="done"),
                lambda: c.report_usage(agent, sid, subject="cust-a", context_used=0.9),
                lambda: c.context_calls(agent, sid, subject="cust-a"),
                lambda: c.context(agent, "what next?", session_id=sid, subject="cust-a"),
            ):
                refused(call, "cust-a")
            assert c.session(agent, sid) == before[sid] and c.context_calls(agent, sid) == []
        # acting for its own subject, every method answers
        assert c.session(agent, "chat-a", subject="cust-a")["subject"] == "cust-a"
        assert c.update_working(agent, "chat-a", subject="cust-a", intent="look")["intent"] == "look"
        assert c.working(agent, "chat-a", subject="cust-a")["goal"] == "goal of chat-a"
        assert c.set_plan(agent, "chat-a", milestones, title="mine", subject="cust-a")["title"] == "mine"
        assert c.update_step(agent, "chat-a", "s1", subject="cust-a", status="done")["revision"] >= 1
        assert c.plan(agent, "chat-a", subject="cust-a")["milestones"][0]["steps"][0]["status"] == "done"
        assert c.report_usage(agent, "chat-a", subject="cust-a", context_used=0.1)["source"] == "reported"
        c.context(agent, "what next?", session_id="chat-a", subject="cust-a")
        assert len(c.context_calls(agent, "chat-a", subject="cust-a")) == 1
        # naming no subject is not restricted: the key's own reach
        assert c.working(agent, "chat-b")["goal"] == "goal of chat-b"
    with Client(api, tenants["alice"]["key"]) as other:
        with pytest.raises(ApiError) as caught:
            other.session(agent, "chat-a", subject="cust-a")
        assert caught.value.status == 404


def test_archive_routes_acting_for_a_subject_reach_its_sessions_only(api: str, tenants: dict[str, Any]) -> None:
    """archive, restore, list and download take `?subject=` like the session's other routes:
    another subject's or a general session is 403 (not archived, restored or read); its own
    answers as without it."""
    agent = "archive-bot"
    with Client(api, tenants["bob"]["key"]) as c:
        for sid, subject in (("chat-b", "cust-b"), ("chat-g", None), ("chat-a", "cust-a")):
            c.create_session(agent, sid, goal=f"goal of {sid}", subject=subject)
        c.archive_session(agent, "chat-b")  # one archived, one open: both refused alike
        for sid in ("chat-b", "chat-g"):
            refused(lambda: c.archive_session(agent, sid, subject="cust-a"), "cust-a")
            refused(lambda: c.restore_session(agent, sid, subject="cust-a"), "cust-a")
            refused(lambda: c.archives(agent, sid, subject="cust-a"), "cust-a")
            refused(lambda: c.download_archive(agent, sid, 1, subject="cust-a"), "cust-a")
        assert c.session(agent, "chat-b")["status"] == "archived" and c.session(agent, "chat-g")["status"] == "open"
        assert [a["version"] for a in c.archives(agent, "chat-b")] == [1]
        assert c.archives(agent, "chat-g") == []

        assert c.archive_session(agent, "chat-a", subject="cust-a")["version"] == 1
        assert [a["version"] for a in c.archives(agent, "chat-a", subject="cust-a")] == [1]
        lines = c.read_archive(agent, "chat-a", 1, subject="cust-a")
        assert lines[0]["session_id"] == "chat-a" and lines[-1]["type"] == "footer"
        assert c.restore_session(agent, "chat-a", subject="cust-a")["status"] == "open"
    http = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {tenants['bob']['key']}"}, timeout=30)
    path = f"/v1/agents/{agent}/sessions/chat-b/archives/1"
    assert http.get(path, params={"subject": "cust-a"}).status_code == 403
    assert http.get(path, params={"subject": "cust-b"}).status_code == 200
    assert http.get(path, params={"subject": "a/b"}).status_code == 422
    http.close()
