"""One erase removes the text from everything that can return it. A marker (an account
number that PII redaction does not recognise) is put in every place a session can hold
text: an episode's messages (so its reflected item and its turns), a direct memory, the
session's goal and metadata, working memory, plan title, milestone, step output and note,
a logged context call (and its pre_turn webhook payload), and an archive (and the archive's
summary episode, reflected into memories). Then one forget (by memory id, by session, by
episode) and every GET route of the API and every console page is read over HTTP and must
not contain it, nor any row of the tenant in the database; re-archiving and recall must not
bring it back. Each tenant holds the same marker: a forget in one leaves the others whole."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from memworker.sdk import ApiError, Client
from tests.conftest import start_worker, stop_worker
from tests.probes import marked_counts

MARKER = "ZK-7741-QX-3309"
AGENT = "fc-bot"
SID = "s-forget"
HOOK_URL = "http://93.184.216.34/hook"  # public; no sender consumes the webhooks queue here


@pytest.fixture(scope="module")
def ingest_worker(stack: dict[str, Any]) -> Iterator[Any]:
    proc = start_worker(stack["settings"], "fc", queues="ingest")
    yield proc
    stop_worker(proc)


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> Iterator[dict[str, Client]]:
    out = {name: Client(api, t["key"]) for name, t in tenants.items()}
    yield out
    for c in out.values():
        c.close()


@pytest.fixture(scope="module")
def seeded(clients: dict[str, Client], ingest_worker: Any) -> dict[str, dict[str, Any]]:
    """The marker everywhere, in each tenant's same-named agent and session (the three
    tenants at once: their episodes share the worker's batches)."""
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        futures = {name: pool.submit(seed, c) for name, c in clients.items()}
        return {name: f.result() for name, f in futures.items()}


def seed(c: Client) -> dict[str, Any]:
    c.add_webhook(HOOK_URL, ["pre_turn", "post_turn", "archive"])
    c.create_session(AGENT, SID, goal=f"Close account {MARKER} for the user", metadata={"account": MARKER})
    ep = c.add_episode(
        AGENT,
        messages=[
            {"role": "user", "content": f"My account number is {MARKER} and the branch is Leeds."},
            {"role": "assistant", "content": "Thanks, I have noted the branch and the account number."},
        ],
        session_id=SID,
    )
    c.wait_for_episode(AGENT, ep["episode_id"])
    direct = c.add_memory(AGENT, f"The user's savings account is {MARKER}.")
    c.update_working(
        AGENT, SID, add=[{"kind": "constraint", "text": f"Never read {MARKER} aloud"}], intent=f"Check {MARKER}"
    )
    c.set_plan(
        AGENT,
        SID,
        [{"id": "m1", "title": f"Verify {MARKER}", "steps": [{"id": "s1", "title": f"Look up {MARKER}"}]}],
        title=f"Closing {MARKER}",
    )
    c.update_step(AGENT, SID, "s1", progress=50, output=f"Found {MARKER} in the ledger", note=f"{MARKER} is old")
    c.context(AGENT, f"what do we know about {MARKER}", session_id=SID)
    first = c.archive_session(AGENT, SID)
    c.wait_for_episode(AGENT, first["distill_episode_id"])  # the summary: memories that quote the goal
    c.restore_session(AGENT, SID)
    return {"episode_id": ep["episode_id"], "direct_id": direct["id"], "memory_ids": all_memory_ids(c)}


def all_memory_ids(c: Client) -> list[str]:
    return [m["id"] for m in c.list_memories(AGENT, limit=500)["memories"]]


def console(api: str, key: str) -> httpx.Client:
    """A console session over plain HTTP: the sign-in form, its token and cookie."""
    http = httpx.Client(base_url=api, timeout=30, follow_redirects=False)
    form = http.get("/console/login")
    token = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert token is not None
    signed = http.post("/console/login", data={"login_token": token.group(1), "key": key})
    assert signed.status_code == 303, signed.text
    return http


def texts_served(api: str, key: str, c: Client, ids: dict[str, Any]) -> dict[str, str]:
    """Every GET of the API and the console that can show this agent's data, by path."""
    a, s = f"/v1/agents/{AGENT}", f"/v1/agents/{AGENT}/sessions/{SID}"
    paths = [
        f"{a}/memories?limit=500",
        f"{s}",
        f"{s}/working",
        f"{s}/plan",
        f"{s}/context_calls",
        f"{s}/archives",
        f"{a}/sessions",
        f"{a}/episodes/{ids['episode_id']}",
        "/v1/episodes?limit=1000",
        "/v1/usage",
        f"{a}/review?status=open",
        f"{a}/review?status=resolved",
        f"{a}/profile",
        f"{a}/consolidation",
        f"{a}/consolidation/runs",
        f"{a}/retention",
        f"{a}/policy",
        "/v1/webhooks",
    ]
    paths += [f"{a}/memories/{m}" for m in ids["memory_ids"]]
    paths += [f"{a}/memories/{m}/history" for m in ids["memory_ids"]]
    http = httpx.Client(base_url=api, timeout=30, headers={"Authorization": f"Bearer {key}"})
    out = {p: http.get(p).text for p in paths}
    for hook in c.webhooks():
        out[f"deliveries {hook['webhook_id']}"] = http.get(f"/v1/webhooks/{hook['webhook_id']}/deliveries").text
    for arc in c.archives(AGENT, SID) if http.get(s).status_code == 200 else []:
        out[f"archive {arc['version']}"] = str(c.read_archive(AGENT, SID, arc["version"]))
    out["recall"] = str(c.recall(AGENT, MARKER, k=50))
    out["context"] = str(c.context(AGENT, "the user account number")["sections"])  # logged: no marker
    http.close()
    page = console(api, key)
    try:
        pages = ["/console", f"/console/agents/{AGENT}/memories", "/console/episodes", "/console/usage"]
        pages += [f"/console/agents/{AGENT}/{x}" for x in ("consolidation", "review")]
        pages += [f"/console/agents/{AGENT}/memories/{m}" for m in ids["memory_ids"]]
        pages.append(f"/console/agents/{AGENT}/episodes/{ids['episode_id']}")
        for p in pages:
            answer = page.get(p)
            assert answer.status_code in (200, 404), (p, answer.status_code)
            out[p] = answer.text
    finally:
        page.close()
    return out


def leaks(api: str, key: str, c: Client, ids: dict[str, Any]) -> list[str]:
    return [p for p, text in texts_served(api, key, c, ids).items() if MARKER.lower() in text.lower()]


def test_the_marker_is_everywhere_before_any_forget(
    api: str, tenants: dict[str, Any], clients: dict[str, Client], seeded: dict[str, Any]
) -> None:
    c, ids = clients["alice"], seeded["alice"]
    kinds = {m["kind"] for m in c.list_memories(AGENT, limit=500)["memories"] if MARKER in m["text"]}
    assert "turn" in kinds and len(kinds) >= 2  # the turn and the reflected item (and the summary's)
    shown = leaks(api, tenants["alice"]["key"], c, ids)
    for where in ("working", "plan", "context_calls", "archive 1", "recall", f"/console/agents/{AGENT}/memories"):
        assert any(p.endswith(where) or p == where for p in shown), (where, shown)


def forget_and_check(
    api: str,
    stack: dict[str, Any],
    tenants: dict[str, Any],
    clients: dict[str, Client],
    seeded: dict[str, Any],
    name: str,
    others: list[str],
    **selector: Any,
) -> dict[str, Any]:
    c, ids = clients[name], seeded[name]
    receipt = c.forget(AGENT, **selector)
    assert MARKER.lower() not in str(receipt).lower()  # the receipt names ids and counts, never the text
    assert leaks(api, tenants[name]["key"], c, ids) == []
    assert marked_counts(stack["owner_url"], tenants[name]["id"], MARKER) == {}
    for other in others:  # the same marker in other tenants is untouched
        assert marked_counts(stack["owner_url"], tenants[other]["id"], MARKER), other
        assert any(MARKER in h["text"] for h in clients[other].recall(AGENT, MARKER, k=50)["memories"])
    return receipt


def test_forget_by_memory_id_takes_the_turns_copies_session_texts_and_archives(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], seeded: dict[str, Any]
) -> None:
    c, ids = clients["alice"], seeded["alice"]
    items = [
        m
        for m in c.list_memories(AGENT, limit=500)["memories"]
        if m["kind"] != "turn" and f"episode:{ids['episode_id']}" in " ".join(m["provenance"])
    ]
    assert items, "the episode was reflected into at least one item"
    receipt = forget_and_check(
        api, stack, tenants, clients, seeded, "alice", ["bob", "charlie"], memory_ids=[items[0]["id"]]
    )
    assert receipt["memories"]["count"] == 1 and receipt["turns"]["count"] >= 1
    assert receipt["episodes"]["count"] >= 1 and ids["direct_id"] in receipt["copies"]["ids"]
    scrubbed = receipt["scrubbed"]
    assert scrubbed["sessions"] == 1 and scrubbed["working_texts"] >= 2 and scrubbed["plan_texts"] >= 4
    assert scrubbed["context_calls"] == 1 and scrubbed["archives"] == 1 and scrubbed["webhook_deliveries"] >= 1
    working = c.working(AGENT, SID)  # what stays of the session is usable
    assert working["goal"] is None and working["constraints"] == [] and working["decisions"] == []
    rearchive_and_check(api, stack, tenants, c, ids, "alice")


def rearchive_and_check(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], c: Client, ids: dict[str, Any], name: str
) -> None:
    """Archive the session again (its summary reflected), restore the scrubbed first archive:
    the marker comes back nowhere, recall included."""
    again = c.archive_session(AGENT, SID)
    if again["distill_episode_id"]:
        c.wait_for_episode(AGENT, again["distill_episode_id"])
    c.restore_session(AGENT, SID, version=1)
    assert leaks(api, tenants[name]["key"], c, {**ids, "memory_ids": all_memory_ids(c) + ids["memory_ids"]}) == []
    assert marked_counts(stack["owner_url"], tenants[name]["id"], MARKER) == {}


def test_forget_by_session_deletes_the_session_and_everything_it_left(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], seeded: dict[str, Any]
) -> None:
    receipt = forget_and_check(api, stack, tenants, clients, seeded, "bob", ["charlie"], session_id=SID)
    assert receipt["sessions"]["count"] == 1 and receipt["sessions"]["archives"] == 1
    assert receipt["sessions"]["context_calls"] == 1  # restored from the archive, then erased with it
    assert seeded["bob"]["direct_id"] in receipt["copies"]["ids"]  # written outside the session, same text
    with pytest.raises(ApiError) as gone:
        clients["bob"].session(AGENT, SID)
    assert gone.value.status == 404


def test_forget_by_episode_provenance(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], seeded: dict[str, Any]
) -> None:
    ep = seeded["charlie"]["episode_id"]
    receipt = forget_and_check(api, stack, tenants, clients, seeded, "charlie", [], provenance=f"episode:{ep}")
    assert ep in receipt["episodes"]["ids"] and receipt["memories"]["count"] >= 2  # the item and the turn
    assert receipt["scrubbed"]["archives"] == 1 and receipt["scrubbed"]["context_calls"] == 1
    with pytest.raises(ApiError) as gone:
        clients["charlie"].get_episode(AGENT, ep)
    assert gone.value.status == 404
    rearchive_and_check(api, stack, tenants, clients["charlie"], seeded["charlie"], "charlie")
