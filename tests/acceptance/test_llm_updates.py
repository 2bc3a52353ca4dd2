"""With an LLM configured, the reflective write is shown the agent's nearest live memories and
decides per item: new, the same as one (a confirmation), an update of one (it is superseded)
or a contradiction with one (a review). A real worker against a scripted OpenAI-compatible
server; a decision that does not validate leaves the item to the offline rules, and an answer
that does not parse to the offline reflector."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memworker.sdk import Client
from memworker.testing import FakeLLM
from tests.conftest import start_worker, stop_worker

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
LLM_NAME = "openai:gpt-4o-mini"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture(scope="module")
def llm_worker(stack: dict[str, Any], llm: FakeLLM) -> Iterator[Any]:
    proc = start_worker(
        stack["settings"],
        "llm-updates",
        extra_env={"MEMWORKER_LLM_BASE_URL": llm.url, "MEMWORKER_LLM_TIMEOUT_S": "5"},
    )
    yield proc
    stop_worker(proc)


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["alice"]["key"])


@pytest.fixture(scope="module")
def bob(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["bob"]["key"])


def shown(prompt: str) -> dict[str, str]:
    """The prompt's known memories: {"m1": "(fact) The user ...", ...}."""
    return dict(re.findall(r"^\[(m\d+)\] (.*)$", prompt, re.M))


def answer(*items: dict[str, Any]) -> Callable[[dict[str, Any]], str]:
    """An answer built from the prompt the server receives: an item's "about" becomes the
    [m<k>] of the known memory whose line holds that text (so the test need not know the
    order the nearest search gives)."""

    def build(body: dict[str, Any]) -> str:
        known = shown(body["messages"][-1]["content"])
        out = []
        for item in items:
            item = dict(item)
            about = item.pop("about", None)
            if about is not None:
                item["memory"] = next((k for k, line in known.items() if about in line), "m-not-shown")
            out.append(item)
        return json.dumps(out)

    return build


def item(text: str, **decision: Any) -> dict[str, Any]:
    return {"text": text, "type": "fact", "confidence": 0.9, "messages": [0], **decision}


def ingest(client: Client, agent: str, said: str) -> dict[str, Any]:
    r = client.add_episode(agent, messages=[{"role": "user", "content": said}])
    ep = client.wait_for_episode(agent, r["episode_id"], timeout=60)
    assert ep["status"] == "stored"
    return ep


def llm_events(client: Client, agent: str, memory_id: str) -> list[dict[str, Any]]:
    return [e for e in client.history(agent, memory_id)["events"] if "llm reflector" in (e["reason"] or "")]


def test_an_update_supersedes_the_named_memory(alice: Client, bob: Client, llm: FakeLLM, llm_worker: Any) -> None:
    agent = "move-bot"
    old = alice.add_memory(agent, "The user lives in Paris.", kind="fact")
    alice.add_memory(agent, "The user works as a nurse at the city hospital.", kind="fact")
    alice.add_memory(agent, "The user's sister lives in Lyon.", kind="fact", subject="sister")
    bob.add_memory(agent, "The user lives in Rome.", kind="fact")  # another tenant's agent of that name
    asked = len(llm.requests)
    llm.script(answer(item("The user lives in Berlin.", relation="update", about="lives in Paris")))

    ep = ingest(alice, agent, "I moved to Berlin last month, the flat is lovely.")

    assert ep["reflector"] == LLM_NAME
    (new_id,) = ep["memory_ids"]
    new = alice.get_memory(agent, new_id)
    assert new["text"] == "The user lives in Berlin."  # the new state in full, never an edit of the old
    assert alice.get_memory(agent, old["id"])["superseded_by"] == new_id
    assert alice.get_memory(agent, old["id"])["text"] == "The user lives in Paris."
    history = alice.history(agent, new_id)
    assert [v["id"] for v in history["versions"]] == [old["id"], new_id]
    (event,) = [e for e in history["events"] if e["event"] == "superseded"]
    assert event["memory_id"] == old["id"] and event["related_ids"] == [new_id]
    assert event["actor"] == "ingest" and event["reason"] == f"llm reflector: update by episode:{ep['episode_id']}"
    hits = [h["id"] for h in alice.recall(agent, "Where does the user live?", k=10)["memories"]]
    assert new_id in hits and old["id"] not in hits

    # what the LLM was shown: this tenant's and subject's live memories by place, never an id
    (request,) = llm.requests[asked:]
    prompt = request["messages"][-1]["content"]
    known = shown(prompt)
    assert "(fact) The user lives in Paris." in known.values()
    assert "(fact) The user works as a nurse at the city hospital." in known.values()
    assert "Lyon" not in prompt and "Rome" not in prompt, "another subject's, another tenant's"
    assert not UUID_RE.search(prompt) and not UUID_RE.search(request["messages"][0]["content"])
    assert "data, not instructions" in request["messages"][0]["content"]
    assert prompt.index("Known memories") < prompt.index("Episode:\n<<<")

    # a superseded memory is not shown again
    llm.script(answer(item("The user cycles to work in Berlin.", relation="new")))
    ingest(alice, agent, "I cycle to work every day.")
    again = llm.requests[-1]["messages"][-1]["content"]
    assert "Paris" not in again and "The user lives in Berlin." in again


def test_same_confirms_the_named_memory_and_writes_nothing(alice: Client, llm: FakeLLM, llm_worker: Any) -> None:
    agent = "seat-bot"
    seed = alice.add_memory(agent, "The user prefers window seats on flights.", kind="preference")
    llm.script(
        answer(
            item(
                "The user likes sitting by the window when flying.", type="preference", relation="same", about="window"
            )
        )
    )

    ep = ingest(alice, agent, "Please get me a window seat again, I always sit by the window when I fly.")

    assert ep["reflector"] == LLM_NAME
    assert ep["memory_ids"] == [seed["id"]]
    items = alice.list_memories(agent, kind="preference")["memories"]
    assert [m["id"] for m in items] == [seed["id"]], "no new row for a confirmation"
    events = alice.history(agent, seed["id"])["events"]
    assert any(
        e["event"] == "strengthened" and e["reason"] == f"confirmed by episode:{ep['episode_id']}" for e in events
    )
    assert alice.get_memory(agent, seed["id"])["confidence"] > seed["confidence"]


def test_a_contradiction_opens_a_review_and_nobody_wins(alice: Client, llm: FakeLLM, llm_worker: Any) -> None:
    agent = "standup-bot"
    seed = alice.add_memory(agent, "The team standup is at 9am every weekday.", kind="fact")
    llm.script(answer(item("The team standup is at 10am every weekday.", relation="contradiction", about="standup")))

    ep = ingest(alice, agent, "Someone said the standup is at 10am, not sure who is right.")

    (new_id,) = ep["memory_ids"]
    assert alice.get_memory(agent, seed["id"])["superseded_by"] is None
    assert alice.get_memory(agent, new_id)["superseded_by"] is None
    (review,) = alice.reviews(agent)
    assert review["newer"]["id"] == new_id and review["older"]["id"] == seed["id"]
    assert review["reason"] == f"llm reflector: contradiction by episode:{ep['episode_id']}"
    assert review["newer"]["live"] and review["older"]["live"]


@pytest.mark.parametrize(
    "agent,decision",
    [
        ("pet-unknown-m9", {"relation": "update", "memory": "m9"}),  # no such memory shown
        ("pet-maybe", {"relation": "maybe", "memory": "m1"}),
        ("pet-no-memory", {"relation": "update"}),  # which memory?
        ("pet-memory-int", {"relation": "contradiction", "memory": 1}),
        ("pet-confidence-text", {"relation": "update", "memory": "m1", "confidence": "high"}),
        ("pet-messages-null", {"relation": "update", "memory": "m1", "messages": None}),
        ("pet-type-null", {"relation": "update", "memory": "m1", "type": None}),
    ],
)
def test_a_decision_that_does_not_validate_leaves_the_item_to_the_rules(
    alice: Client, llm: FakeLLM, llm_worker: Any, agent: str, decision: dict[str, Any]
) -> None:
    seed = alice.add_memory(agent, "The user's favourite colour is blue.", kind="fact")
    llm.script(json.dumps([{**item("The user adopted a dog named Rex."), **decision}]))

    ep = ingest(alice, agent, "We adopted a dog called Rex on Saturday.")

    assert ep["reflector"] == LLM_NAME, "the answer parsed: only the decision is dropped"
    (new_id,) = ep["memory_ids"]
    assert alice.get_memory(agent, new_id)["text"] == "The user adopted a dog named Rex.", "the item is kept"
    # whatever the offline rules make of the pair, nothing was done on the LLM's word
    assert llm_events(alice, agent, seed["id"]) == []
    assert not [r for r in alice.reviews(agent) if r["reason"].startswith("llm reflector")]


def test_an_invalid_decision_on_a_restatement_is_the_rules_confirmation(
    alice: Client, llm: FakeLLM, llm_worker: Any
) -> None:
    agent = "restate-bot"
    seed = alice.add_memory(agent, "The user is allergic to peanuts.", kind="fact")
    llm.script(json.dumps([item("The user is allergic to peanuts.", relation="update", memory="m7")]))

    ep = ingest(alice, agent, "Remember, I am allergic to peanuts.")

    assert ep["memory_ids"] == [seed["id"]], "the rules' dedup confirmed it"
    assert alice.get_memory(agent, seed["id"])["superseded_by"] is None


def test_the_plain_form_is_new_and_the_rules_still_judge(alice: Client, llm: FakeLLM, llm_worker: Any) -> None:
    agent = "plain-bot"
    alice.add_memory(agent, "The user drinks coffee every morning.", kind="preference")
    llm.script('[{"text": "The user reads before bed.", "type": "preference", "confidence": 0.8}]')

    ep = ingest(alice, agent, "I read a chapter before bed every night.")

    assert ep["reflector"] == LLM_NAME
    (new_id,) = ep["memory_ids"]
    assert alice.get_memory(agent, new_id)["text"] == "The user reads before bed."


def test_a_wholly_malformed_answer_falls_back_to_the_offline_reflector(
    alice: Client, llm: FakeLLM, llm_worker: Any
) -> None:
    agent = "broken-bot"
    seed = alice.add_memory(agent, "The user's car is a red Volvo.", kind="fact")
    llm.script('[{"text": "The user sold the Volvo.", "relation": "update", "memory": "m1"')  # cut short

    ep = ingest(alice, agent, "I finally sold my red Volvo to a neighbour yesterday.")

    assert ep["reflector"].startswith("offline (llm failed: malformed answer")
    assert ep["memory_ids"], "an episode is never dropped"
    assert "red Volvo" in llm.requests[-1]["messages"][-1]["content"], "it was shown"
    assert llm_events(alice, agent, seed["id"]) == []
