"""Sessions and subjects over the real API (HTTP, Postgres, Redis): a caller that says which
subject it acts for reaches that subject's sessions only. Session ids are chosen by callers
and easy to guess, so naming one is not enough to read or change another subject's session."""

from __future__ import annotations

from typing import Any

import httpx

from memworker.sdk import Client


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
