"""With an agent's redact_pii, no text a tenant can store keeps the raw value: one marker (an
email address and a card number) is written into every field of every write route, then the
whole database (every table, every column, as JSON text) and the session's archive are
searched for it. Through the real API."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from memworker.sdk import Client

EMAIL = "pii.marker.7731@example.org"
CARD = "4111 1111 1111 1111"
MARK = f"{EMAIL} card {CARD}"
AGENT = "pii-bot"


def _found_in_database(stack: dict[str, Any], needles: tuple[str, ...]) -> list[str]:
    """Where (table) any needle appears in any row, every column rendered as JSON text."""
    hits = []
    with psycopg.connect(stack["owner_url"]) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'memworker' ORDER BY tablename"
            ).fetchall()
        ]
        for table in tables:
            for needle in needles:
                row = conn.execute(
                    f"SELECT count(*) FROM memworker.{table} t WHERE strpos(to_jsonb(t)::text, %s) > 0", (needle,)
                ).fetchone()
                if row and row[0]:
                    hits.append(f"{table}: {needle}")
    return hits


@pytest.fixture(scope="module")
def client(api: str, tenants: dict[str, Any]) -> Any:
    with Client(api, tenants["charlie"]["key"]) as c:
        c.add_memory(AGENT, "the agent exists")
        c.set_policy({"redact_pii": True}, agent_id=AGENT)
        yield c


def test_no_stored_text_keeps_the_raw_value(client: Client, stack: dict[str, Any]) -> None:
    c = client
    hook = c.add_webhook("http://93.184.216.34/hook", ["pre_turn", "post_turn", "archive"], agent_ids=[AGENT])
    assert hook["secret"]
    sid = c.create_session(AGENT, "pii-session", goal=f"goal {MARK}", metadata={"who": MARK})["session_id"]
    c.update_working(
        AGENT,
        sid,
        goal=f"new goal {MARK}",
        intent=f"intent {MARK}",
        add=[{"kind": "constraint", "text": f"constraint {MARK}"}, {"kind": "question", "text": f"q {MARK}"}],
    )
    plan = c.set_plan(
        AGENT,
        sid,
        [
            {
                "id": "m1",
                "title": f"milestone {MARK}",
                "steps": [
                    {"id": "s1", "title": f"step {MARK}", "output": f"out {MARK}", "note": f"note {MARK}"},
                    {"id": "s2", "title": "second step"},
                ],
            }
        ],
        title=f"plan {MARK}",
    )
    assert MARK not in json.dumps(plan)
    c.update_step(AGENT, sid, "s2", status="done", output=f"step output {MARK}", note=f"step note {MARK}")
    ctx = c.context(AGENT, f"what about {MARK}", session_id=sid)
    assert ctx["context_call_id"]
    m = c.add_memory(AGENT, f"memory {MARK}", metadata={"m": MARK})
    c.update_memory(AGENT, m["id"], text=f"patched {MARK}")
    c.promote(AGENT, m["id"], "L2", f"reason {MARK}")
    c.add_episode(AGENT, f"episode {MARK}", session_id=sid, metadata={"e": MARK})
    c.add_episode(AGENT, messages=[{"role": "user", "name": "Ann", "content": f"said {MARK}"}], session_id=sid)

    # what the routes answer
    answers = [
        c.session(AGENT, sid),
        c.working(AGENT, sid),
        c.plan(AGENT, sid),
        c.context_calls(AGENT, sid),
        c.list_memories(AGENT, limit=100),
    ]
    for answer in answers:
        text = json.dumps(answer)
        assert EMAIL not in text and "4111" not in text, text[:500]
    assert "[EMAIL]" in json.dumps(c.plan(AGENT, sid))
    assert "[EMAIL]" in json.dumps(c.context_calls(AGENT, sid))

    c.archive_session(AGENT, sid)
    archive = json.dumps(c.read_archive(AGENT, sid, 1))
    assert EMAIL not in archive and "4111" not in archive, archive[:500]
    assert "[EMAIL]" in archive

    # and nowhere in the database: memories, episodes, sessions, plans, context calls,
    # history, webhook payloads, ...
    assert _found_in_database(stack, (EMAIL, "4111 1111")) == []


def test_a_context_query_that_redaction_lengthens_is_still_served(client: Client) -> None:
    """'a@b.co' (6 characters) is stored as '[EMAIL]' (7): a query at the edge's limit grows past
    it once redacted, and the packer recalls with its head instead of refusing the call."""
    query = ("mail a@b.co " * 400)[:4000]
    out = client.context(AGENT, query)
    assert out["tokens"] > 0 and "a@b.co" not in json.dumps(out)
