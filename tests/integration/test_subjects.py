"""Subjects: one agent serving many people. Every governance decision stays within one
subject (dedup and confirmation, supersede, review, merge), and every read for a subject
(recall, context, listing, profile) returns that subject's memories and the agent's general
ones, never another subject's. Real API, worker, Postgres and Redis."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from memworker import keys
from memworker.integrations import mcp_server
from memworker.integrations.langgraph import MemworkerStore
from memworker.sdk import ApiError, Client
from memworker.storage import db

AGENT = "support-bot"
EMAIL_FIRST = "The customer prefers to be contacted by email, never by phone."
PHONE_FIRST = "The customer prefers to be contacted by phone, never by email."
PLAN_A = "The customer's account plan is Enterprise with 40 seats."
PLAN_B = "The customer's account plan is Starter with 3 seats."


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


@pytest.fixture(scope="module")
def fleet(clients: dict[str, Client], worker: Any) -> dict[str, Any]:
    """Two customers of one agent, told opposite things, plus one general memory."""
    c = clients["alice"]
    episodes = [
        c.add_episode(AGENT, f"{EMAIL_FIRST} {PLAN_A}", subject="cust-a"),
        c.add_episode(AGENT, f"{PHONE_FIRST} {PLAN_B}", subject="cust-b"),
    ]
    for ep in episodes:
        stored = c.wait_for_episode(AGENT, ep["episode_id"])
        assert stored["status"] == "stored", stored["last_error"]
    general = c.add_memory(AGENT, "Support hours are 9 to 17 on weekdays.", kind="fact")
    return {"general": general}


def _texts(memories: list[dict[str, Any]]) -> dict[str, str | None]:
    return {m["text"]: m["subject"] for m in memories}


def test_opposite_statements_of_two_subjects_are_two_memories(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    a = c.list_memories(AGENT, subject="cust-a")["memories"]
    b = c.list_memories(AGENT, subject="cust-b")["memories"]
    assert {EMAIL_FIRST, PLAN_A} <= set(_texts(a)) and set(_texts(a).values()) == {"cust-a"}
    assert {PHONE_FIRST, PLAN_B} <= set(_texts(b)) and set(_texts(b).values()) == {"cust-b"}
    items = [m for m in a + b if m["kind"] != "turn"]  # turns (L0) are the messages as said
    assert len(items) == 4
    for m in items:  # neither confirmed the other: one source each, still L1
        assert len(m["provenance"]) == 1 and m["tier"] == "L1", m
    assert c.reviews(AGENT) == []  # the two plans are two customers' facts, not a contradiction


def test_recall_for_a_subject_returns_its_memories_and_general_ones_only(
    clients: dict[str, Client], fleet: Any
) -> None:
    c = clients["alice"]
    for subject, own, other in (("cust-a", EMAIL_FIRST, PHONE_FIRST), ("cust-b", PHONE_FIRST, EMAIL_FIRST)):
        hits = c.recall(AGENT, "how does the customer prefer to be contacted", k=20, subject=subject)["memories"]
        texts = _texts(hits)
        assert own in texts and other not in texts
        assert set(texts.values()) <= {subject, None}
        hours = c.recall(AGENT, "support hours weekdays", k=3, subject=subject)["memories"]
        assert hours[0]["id"] == fleet["general"]["id"] and hours[0]["subject"] is None
    general_only = c.recall(AGENT, "support hours: customer prefers email or phone, plan seats", k=20)["memories"]
    assert general_only and all(h["subject"] is None for h in general_only)


def test_context_for_a_subject_never_packs_another_subjects_memory(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    ctx = c.context(AGENT, "how should we contact the customer and what plan do they have", subject="cust-a")
    assert EMAIL_FIRST in ctx["context"] and PLAN_A in ctx["context"]
    assert PHONE_FIRST not in ctx["context"] and PLAN_B not in ctx["context"]
    session = c.create_session(AGENT, "chat-b", subject="cust-b")
    assert session["subject"] == "cust-b"
    ctx = c.context(AGENT, "how should we contact the customer and what plan do they have", session_id="chat-b")
    assert PHONE_FIRST in ctx["context"] and EMAIL_FIRST not in ctx["context"] and PLAN_A not in ctx["context"]


def test_subject_profile_lists_only_that_subjects_memories(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    prof = c.profile(AGENT, subject="cust-a")
    listed = [e["text"] for s in prof["sections"].values() for e in s]
    assert prof["subject"] == "cust-a" and EMAIL_FIRST in listed
    assert PHONE_FIRST not in listed and PLAN_B not in listed
    agent_profile = c.profile(AGENT)
    assert not [e for s in agent_profile["sections"].values() for e in s if e["text"] in (EMAIL_FIRST, PHONE_FIRST)]


def test_console_search_and_list_for_a_subject(api: str, tenants: dict[str, Any], fleet: Any) -> None:
    http = httpx.Client(base_url=api, timeout=30, follow_redirects=False)
    form = http.get("/console/login")
    token = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert token is not None
    assert http.post("/console/login", data={"login_token": token.group(1), "key": tenants["alice"]["key"]}).is_redirect
    path = f"/console/agents/{AGENT}/memories"
    searched = http.get(path, params={"q": "how does the customer prefer to be contacted", "subject": "cust-a"})
    listed = http.get(path, params={"subject": "cust-b"})
    assert searched.status_code == listed.status_code == 200
    assert html.escape(EMAIL_FIRST) in searched.text and html.escape(PHONE_FIRST) not in searched.text
    assert html.escape(PHONE_FIRST) in listed.text and html.escape(EMAIL_FIRST) not in listed.text
    assert http.get(path, params={"subject": "a/b"}).status_code == 422
    http.close()


def test_mcp_tools_bound_to_a_subject_read_and_write_only_for_it(api: str, tenants: Any, fleet: Any) -> None:
    with Client(api, tenants["alice"]["key"]) as client:
        tools = mcp_server.Tools(client, AGENT, "cust-a")
        hits = tools.recall(agent=AGENT, query="how does the customer prefer to be contacted", k=20)["memories"]
        assert EMAIL_FIRST in _texts(hits) and PHONE_FIRST not in _texts(hits)
        ctx = tools.context(agent=AGENT, query="how should we contact the customer")["context"]
        assert EMAIL_FIRST in ctx and PHONE_FIRST not in ctx
        with pytest.raises(ToolError, match="bound to subject"):
            tools.recall(agent=AGENT, query="contact", subject="cust-b")
        written = tools.remember(agent=AGENT, text="The customer's renewal date is June 30.")
        assert written["subject"] == "cust-a"
        other = client.list_memories(AGENT, subject="cust-b")["memories"][0]
        with pytest.raises(ToolError, match="not subject"):
            tools.forget(agent=AGENT, memory_ids=[other["id"]])
        assert client.get_memory(AGENT, other["id"])["id"] == other["id"]
        free = mcp_server.Tools(client, AGENT)  # unbound: each call may name its subject
        hits = free.recall(agent=AGENT, query="how does the customer prefer to be contacted", k=20, subject="cust-b")
        assert PHONE_FIRST in _texts(hits["memories"]) and EMAIL_FIRST not in _texts(hits["memories"])


def test_langgraph_store_with_a_subject_keeps_to_it(api: str, tenants: Any) -> None:
    ns = ("support-bot", "prefs")
    with (
        MemworkerStore(api, tenants["alice"]["key"], subject="u-1") as one,
        MemworkerStore(api, tenants["alice"]["key"], subject="u-2") as two,
    ):
        one.put(ns, "contact", {"text": "Prefers email over phone calls."})
        two.put(ns, "contact", {"text": "Prefers phone calls over email."})
        got_one, got_two = one.get(ns, "contact"), two.get(ns, "contact")
        assert got_one is not None and got_two is not None
        assert got_one.value["text"].startswith("Prefers email") and got_two.value["text"].startswith("Prefers phone")
        assert [h.value["text"] for h in one.search(ns, query="how to contact them", limit=5)] == [
            "Prefers email over phone calls."
        ]
    with pytest.raises(ValueError):
        MemworkerStore(api, tenants["alice"]["key"], subject="a/b")


def test_a_changed_preference_supersedes_within_its_subject_only(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    ep = c.add_episode(AGENT, PHONE_FIRST, subject="cust-a")
    stored = c.wait_for_episode(AGENT, ep["episode_id"])
    assert stored["status"] == "stored"
    a = c.list_memories(AGENT, subject="cust-a")["memories"]
    assert PHONE_FIRST in _texts(a) and EMAIL_FIRST not in _texts(a)  # the old one is superseded, not confirmed
    old = next(m for m in c.list_memories(AGENT, subject="cust-a", limit=500)["memories"] if m["text"] == PHONE_FIRST)
    assert len(old["provenance"]) == 1
    b = c.list_memories(AGENT, subject="cust-b")["memories"]
    assert PHONE_FIRST in _texts(b)  # customer B's own memory is untouched
    hits = c.recall(AGENT, "how does the customer prefer to be contacted", k=10, subject="cust-a")["memories"]
    assert EMAIL_FIRST not in _texts(hits)


def test_direct_writes_supersede_and_review_within_a_subject(clients: dict[str, Client]) -> None:
    c = clients["alice"]
    agent = "desk"
    berlin = c.add_memory(agent, "Dana's office is in Berlin.", subject="dana", confidence=0.95)
    lisbon = c.add_memory(agent, "Dana's office is in Lisbon.", subject="eve", confidence=0.95)
    porto = c.add_memory(agent, "Dana's office is in Porto.", subject="dana", confidence=0.95)
    assert c.get_memory(agent, berlin["id"])["superseded_by"] == porto["id"]
    assert c.get_memory(agent, lisbon["id"])["superseded_by"] is None
    unsure = c.add_memory(agent, "Dana's office is in Madrid.", subject="eve", confidence=0.5)
    reviews = c.reviews(agent)
    assert [(r["newer"]["id"], r["older"]["id"]) for r in reviews] == [(unsure["id"], lisbon["id"])]


def test_an_update_in_a_crowded_agent_is_paired_with_its_own_subjects_statement(
    clients: dict[str, Client],
) -> None:
    """Sixty subjects hold the same statement, more than the candidates one memory is judged
    against: an update for one subject still finds that subject's statement, and only it."""
    c = clients["alice"]
    agent = "crowd"
    olds = {
        f"s-{i:02d}": c.add_memory(agent, "Dana's office is in Berlin.", subject=f"s-{i:02d}", confidence=0.95)
        for i in range(60)
    }
    updated = ("s-05", "s-23", "s-37", "s-51")
    for subject in updated:
        porto = c.add_memory(agent, "Dana's office is in Porto.", subject=subject, confidence=0.95)
        assert c.get_memory(agent, olds[subject]["id"])["superseded_by"] == porto["id"]
    unsure = {
        s: c.add_memory(agent, "Dana's office is in Madrid.", subject=s, confidence=0.5) for s in ("s-11", "s-44")
    }
    reviews = {(r["newer"]["id"], r["older"]["id"]) for r in c.reviews(agent)}
    assert reviews == {(m["id"], olds[s]["id"]) for s, m in unsure.items()}
    untouched = [c.get_memory(agent, m["id"])["superseded_by"] for s, m in olds.items() if s not in updated]
    assert untouched == [None] * 56


def test_message_subjects_name_the_items_they_give(clients: dict[str, Client], worker: Any) -> None:
    c = clients["alice"]
    ep = c.add_episode(
        "group-bot",
        messages=[
            {
                "role": "user",
                "name": "kim",
                "subject": "kim",
                "content": "I live in Oslo and work on the billing team.",
            },
            {
                "role": "user",
                "name": "lee",
                "subject": "lee",
                "content": "I live in Turin and work on the search team.",
            },
        ],
    )
    assert c.wait_for_episode("group-bot", ep["episode_id"])["status"] == "stored"
    kim = " ".join(m["text"] for m in c.list_memories("group-bot", subject="kim")["memories"])
    lee = " ".join(m["text"] for m in c.list_memories("group-bot", subject="lee")["memories"])
    assert "Oslo" in kim and "Turin" not in kim and "Turin" in lee and "Oslo" not in lee


def test_episodes_in_a_session_inherit_its_subject(clients: dict[str, Client], worker: Any) -> None:
    c = clients["alice"]
    sid = c.create_session("desk-bot", subject="cust-s")["session_id"]
    c.create_session("desk-bot", "no-subject")
    sent = {
        "inherits": c.add_episode("desk-bot", "The customer's office is in Quito.", session_id=sid),
        "own": c.add_episode("desk-bot", "The customer's office is in Perth.", session_id=sid, subject="cust-t"),
        "general": c.add_episode("desk-bot", "The office closes at 18:00 on Fridays.", session_id="no-subject"),
        "no session": c.add_episode("desk-bot", "The lobby has 4 elevators.", session_id="never-opened"),
    }
    got = {}
    for name, ep in sent.items():
        stored = c.wait_for_episode("desk-bot", ep["episode_id"])
        assert stored["status"] == "stored" and stored["memory_ids"], stored
        got[name] = c.get_memory("desk-bot", stored["memory_ids"][0])["subject"]
    assert got == {"inherits": "cust-s", "own": "cust-t", "general": None, "no session": None}
    hits = c.recall("desk-bot", "where is the customer's office", k=10, subject="cust-s")["memories"]
    assert "Quito" in " ".join(h["text"] for h in hits) and "Perth" not in " ".join(h["text"] for h in hits)


def test_a_restated_fact_confirms_within_its_subject_and_a_near_miss_does_not(
    clients: dict[str, Client], worker: Any
) -> None:
    c = clients["alice"]

    def first_item(text: str, subject: str) -> str:
        ep = c.add_episode("restate-bot", text, subject=subject)
        stored = c.wait_for_episode("restate-bot", ep["episode_id"])
        assert stored["status"] == "stored" and stored["memory_ids"], stored
        return str(stored["memory_ids"][0])

    slack = first_item("The user does not use Slack.", "cust-r")
    assert first_item("The user never uses Slack.", "cust-r") == slack  # cosine under 0.95: restated
    assert len(c.get_memory("restate-bot", slack)["provenance"]) == 2
    assert first_item("The user never uses Slack.", "cust-q") != slack  # another subject's: its own
    was = first_item("The customer was on the Enterprise plan.", "cust-r")
    now = first_item("The customer is on the Enterprise plan.", "cust-r")
    assert now != was and c.get_memory("restate-bot", was)["superseded_by"] is None
    assert c.reviews("restate-bot") == []  # what was and what is: both true, nothing to decide


def test_bad_subjects_are_422_and_change_nothing(api: str, clients: dict[str, Client], tenants: Any) -> None:
    c = clients["alice"]
    headers = {"Authorization": f"Bearer {tenants['alice']['key']}"}
    before = len(c.list_memories(AGENT, limit=500)["memories"])
    for bad in ("", " x", "a/b", "x" * 129, "-lead"):
        for method, path, body in (
            ("POST", f"/v1/agents/{AGENT}/memories", {"text": "A fact.", "subject": bad}),
            ("POST", f"/v1/agents/{AGENT}/episodes", {"content": "A fact.", "subject": bad}),
            ("POST", f"/v1/agents/{AGENT}/recall", {"query": "fact", "subject": bad}),
            ("POST", f"/v1/agents/{AGENT}/context", {"query": "fact", "subject": bad}),
        ):
            r = httpx.request(method, api + path, json=body, headers=headers)
            assert r.status_code == 422, (path, bad, r.text)
        for path in (f"/v1/agents/{AGENT}/memories", f"/v1/agents/{AGENT}/profile"):
            r = httpx.get(api + path, params={"subject": bad}, headers=headers)
            assert r.status_code == 422, (path, bad, r.text)
    assert len(c.list_memories(AGENT, limit=500)["memories"]) == before


def test_subjects_never_cross_tenants(clients: dict[str, Client], fleet: Any) -> None:
    bob = clients["bob"]
    bob.add_memory(AGENT, "The customer prefers carrier pigeons.", subject="cust-a")
    hits = bob.recall(AGENT, "how does the customer prefer to be contacted", k=20, subject="cust-a")["memories"]
    assert _texts(hits) == {"The customer prefers carrier pigeons.": "cust-a"}
    assert [m["text"] for m in bob.list_memories(AGENT, subject="cust-a")["memories"]] == [
        "The customer prefers carrier pigeons."
    ]
    listed = [e["text"] for s in bob.profile(AGENT, subject="cust-a")["sections"].values() for e in s]
    assert EMAIL_FIRST not in listed and PHONE_FIRST not in listed
    with pytest.raises(ApiError) as err:
        clients["charlie"].profile(AGENT, subject="cust-a")
    assert err.value.status == 404


# --- recall across agents --------------------------------------------------------------------------


def _key(stack: dict[str, Any], tenant_id: Any, **kw: Any) -> str:
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, _ = keys.create(conn, tenant_id=tenant_id, **kw)
    return key


@pytest.fixture(scope="module")
def shifts(clients: dict[str, Client]) -> dict[str, str]:
    """Three agents of one tenant, each knowing something about the same incident."""
    c = clients["charlie"]
    ids = {
        "night-bot": c.add_memory("night-bot", "The checkout outage started at 02:10 after the cache flush.")["id"],
        "day-bot": c.add_memory("day-bot", "The checkout outage was fixed by rolling back the cache config.")["id"],
        "ops-bot": c.add_memory("ops-bot", "Checkout latency alerts page the payments on-call.")["id"],
    }
    c.add_memory("day-bot", "Customer Zed asked about the checkout outage refund.", subject="zed")
    c.add_memory("night-bot", "Customer Yan asked about the checkout outage refund.", subject="yan")
    return ids


def test_recall_across_agents_is_one_ranked_list_naming_each_agent(
    clients: dict[str, Client], shifts: dict[str, str]
) -> None:
    c = clients["charlie"]
    out = c.recall_agents(["night-bot", "day-bot", "ops-bot"], "checkout outage cache", k=10, explain=True)
    hits = out["memories"]
    assert {h["agent_id"] for h in hits} == {"night-bot", "day-bot", "ops-bot"}
    assert {h["id"]: h["agent_id"] for h in hits if h["id"] in shifts.values()} == {v: k for k, v in shifts.items()}
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(h["subject"] is None for h in hits)  # no subject asked: general memories only
    one = c.recall_agents(["day-bot"], "checkout outage cache", k=10)["memories"]
    assert [h["id"] for h in one] == [h["id"] for h in hits if h["agent_id"] == "day-bot"]
    zed = c.recall_agents(["night-bot", "day-bot"], "checkout outage refund", k=10, subject="zed")["memories"]
    texts = {h["text"] for h in zed}
    assert "Customer Zed asked about the checkout outage refund." in texts
    assert "Customer Yan asked about the checkout outage refund." not in texts


def test_recall_across_agents_respects_agent_limited_keys_and_tenants(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], shifts: dict[str, str]
) -> None:
    limited = Client(api, _key(stack, tenants["charlie"]["id"], agent_ids=["night-bot", "day-bot"]))
    hits = limited.recall_agents(["night-bot", "day-bot"], "checkout outage", k=10)["memories"]
    assert hits and {h["agent_id"] for h in hits} <= {"night-bot", "day-bot"}
    for agents in (["night-bot", "ops-bot"], ["ops-bot"]):
        with pytest.raises(ApiError) as err:
            limited.recall_agents(agents, "checkout outage", k=10)
        assert err.value.status == 404
    with pytest.raises(ApiError) as err:  # another tenant's agents do not exist here
        clients["alice"].recall_agents(["night-bot"], "checkout outage", k=10)
    assert err.value.status == 404
    with pytest.raises(ApiError) as err:
        clients["charlie"].recall_agents([], "checkout outage")
    assert err.value.status == 422
    with pytest.raises(ApiError) as err:
        clients["charlie"].recall_agents(["a/b"], "checkout outage")
    assert err.value.status == 422


EXPORT = "The billing export runs nightly at 03:00 UTC."


def _holders(hit: dict[str, Any]) -> list[tuple[str, str]]:
    return [(h.get("agent_id") or "pool~" + h["pool"], h["id"]) for h in hit["holders"]]


def test_recall_across_agents_names_every_holder_of_one_text_once(clients: dict[str, Client]) -> None:
    c, other = clients["charlie"], clients["alice"]
    held = {
        "east-bot": c.add_memory("east-bot", EXPORT)["id"],
        "west-bot": c.add_memory("west-bot", "the billing  export runs nightly at 03:00 utc")["id"],
        "pool~ledger": c.add_pool_memory("ledger", EXPORT)["id"],
    }
    c.add_memory("west-bot", "The billing export writes CSV files to the finance bucket.")
    c.add_memory("east-bot", EXPORT, subject="zed")  # about one customer: not the general statement
    foreign = other.add_memory("east-bot", EXPORT)["id"]  # the same words in another tenant

    hits = c.recall_agents(["east-bot", "west-bot"], "billing export nightly", k=2, pools=["ledger"])["memories"]
    assert len(hits) == 2 and any("CSV" in h["text"] for h in hits)  # k distinct texts
    (export,) = [h for h in hits if "nightly" in h["text"]]
    assert sorted(_holders(export)) == sorted(held.items())
    owner = export.get("agent_id") or "pool~" + export["pool"]
    assert _holders(export)[0] == (owner, export["id"])  # the hit is its best-ranked copy
    assert all(foreign not in str(h) for h in hits)

    zed = c.recall_agents(["east-bot", "west-bot"], "billing export nightly", k=5, subject="zed")["memories"]
    exports = [h for h in zed if "nightly" in h["text"]]
    assert sorted(h["subject"] or "" for h in exports) == ["", "zed"]
    assert [len(h["holders"]) for h in exports if h["subject"] == "zed"] == [1]

    c.set_policy({"pools_read": ["ledger"]}, agent_id="east-bot")
    own = c.recall("east-bot", "billing export nightly", k=5)["memories"]
    assert [sorted(_holders(h)) for h in own if "nightly" in h["text"]] == [
        sorted((k, v) for k, v in held.items() if k != "west-bot")
    ]

    mine = other.recall_agents(["east-bot"], "billing export nightly", k=5)["memories"]
    assert [_holders(h) for h in mine] == [[("east-bot", foreign)]]


# --- sleep ------------------------------------------------------------------------------------------


def test_consolidation_passes_never_mix_subjects(clients: dict[str, Client], worker: Any) -> None:
    c = clients["charlie"]
    agent = "sleeper"
    subject_of: dict[str, str | None] = {}
    for subject in ("ann", "ben", None):
        who = subject or "the team"
        texts = [
            f"The search service deploy for {who} failed after the schema migration.",  # recurs: an insight
            f"The billing service deploy for {who} failed after the schema migration.",
            f"The billing service rollback for {who} took forty minutes.",
            f"{who.capitalize()} prefers deploys of the billing service on Tuesdays.",
        ]
        extra = {"subject": subject} if subject else {}
        for m in c.add_memories(agent, [{"text": t, **extra} for t in texts]):
            subject_of[m["id"]] = subject
    run = c.wait_for_run(agent, c.consolidate(agent))  # every due subject and the general memories, apart
    assert run["status"] == "done", run
    derived = [
        m for kind in ("insight", "conclusion") for m in c.list_memories(agent, kind=kind, limit=100)["memories"]
    ]
    assert derived
    for m in derived:
        evidence = [e for e in m["metadata"].get("evidence", []) if e in subject_of]
        assert evidence and {subject_of[e] for e in evidence} == {m["subject"]}, m
    listed = [e["memory_id"] for s in c.profile(agent)["sections"].values() for e in s]
    assert listed and all(subject_of.get(i) is None for i in listed)
