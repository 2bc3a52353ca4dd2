"""memworker.integrations.openai_agents against the real stack (real HTTP API, Postgres,
Redis, a Celery worker): the Agents SDK's Session protocol over memworker (order, limit,
pop, clear, a new object after a restart, isolation, the API's errors), the memory tools
through Runner.run with a scripted model, and examples/openai_agents_example.py itself."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    Model,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    Tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from memworker.integrations.openai_agents import BATCH, MemworkerSession, SessionArchived, memory_tools
from memworker.sdk import ApiError, Client

ROOT = Path(__file__).resolve().parents[2]
set_tracing_disabled(True)  # the SDK's tracing would send spans to OpenAI


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:8]}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def tool_call(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    call_id = f"call_{uuid.uuid4().hex[:8]}"
    return [
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)},
        {"type": "function_call_output", "call_id": call_id, "output": '{"ok": true, "rows": [1, 2.5, null]}'},
    ]


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Any:
    with Client(api, tenants["alice"]["key"]) as c:
        yield c


def new_id() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def test_items_keep_their_order_and_shape_through_limit_pop_and_clear(alice: Client) -> None:
    async def main() -> None:
        s = MemworkerSession(alice, "oa-bot", new_id(), episodes=False)
        assert isinstance(s, Session)  # the SDK's runtime-checkable protocol
        assert await s.get_items() == [] and await s.pop_item() is None
        first = [user("Hi, I'm Ana. Ünïcödé and emoji 🎉 are kept."), *tool_call("lookup", {"q": "Ana"})]
        second = [assistant("Hello Ana!"), user("yes"), user("yes")]  # equal items stay two items
        await s.add_items(first)
        await s.add_items(second)
        assert await s.get_items() == first + second
        assert await s.get_items(limit=2) == [user("yes"), user("yes")]
        assert await s.get_items(limit=100) == first + second
        assert await s.get_items(limit=0) == []
        assert await s.pop_item() == user("yes")
        assert await s.pop_item() == user("yes")
        assert await s.get_items() == [*first, second[0]]
        await s.add_items([user("after the pops")])  # takes the popped places again, in order
        assert await s.get_items() == [*first, second[0], user("after the pops")]
        await s.add_items([])  # nothing to add: nothing happens
        await s.clear_session()
        assert await s.get_items() == [] and await s.pop_item() is None
        await s.add_items([user("a fresh start")])
        assert await s.get_items() == [user("a fresh start")]

    asyncio.run(main())


def test_one_call_of_many_items_and_the_session_settings_limit(alice: Client) -> None:
    """One add_items of more items than the route takes at once is sent in calls of BATCH,
    in order; the positions order them."""

    async def main() -> None:
        sid = new_id()
        items = [user(f"message {i}") for i in range(2 * BATCH + 50)]
        s = MemworkerSession(alice, "oa-bot", sid, episodes=False, session_settings=SessionSettings(limit=7))
        await s.add_items(items)
        assert await s.get_items() == items[-7:]  # the settings' limit
        assert await s.get_items(limit=3) == items[-3:]  # an explicit limit wins
        everything = MemworkerSession(alice, "oa-bot", sid)
        assert await everything.get_items() == items
        assert [await everything.pop_item() for _ in range(3)] == [items[-1], items[-2], items[-3]]
        assert await everything.get_items(limit=2) == items[-5:-3]
        positions = [x["position"] for x in alice.session_items("oa-bot", sid)]
        assert positions == list(range(len(items) - 3))

    asyncio.run(main())


def test_a_new_object_after_a_restart_reads_the_same_session(api: str, tenants: dict[str, Any]) -> None:
    sid = new_id()
    items = [user("Remember the build number 4711."), assistant("Noted: 4711.")]

    async def write() -> None:
        with Client(api, tenants["alice"]["key"]) as c:
            await MemworkerSession(c, "oa-bot", sid, episodes=False).add_items(items)

    async def read() -> None:
        with Client(api, tenants["alice"]["key"]) as c:  # a new client and a new session object
            s = MemworkerSession(c, "oa-bot", sid)
            assert await s.get_items() == items
            assert await s.pop_item() == items[1]
        with Client(api, tenants["alice"]["key"]) as c:
            assert await MemworkerSession(c, "oa-bot", sid).get_items() == items[:1]

    asyncio.run(write())
    asyncio.run(read())  # another event loop, as in another process


def test_tenants_and_session_ids_are_isolated(api: str, tenants: dict[str, Any], alice: Client) -> None:
    async def main() -> None:
        sid = new_id()
        with Client(api, tenants["bob"]["key"]) as bob_client:
            mine, other_id = MemworkerSession(alice, "oa-bot", sid), MemworkerSession(alice, "oa-bot", new_id())
            bobs = MemworkerSession(bob_client, "oa-bot", sid)  # the same agent and session ids
            await mine.add_items([user("alice's secret")])
            await other_id.add_items([user("another session of alice's")])
            assert await bobs.get_items() == [] and await bobs.pop_item() is None
            await bobs.add_items([user("bob's own")])
            await bobs.clear_session()
            assert await mine.get_items() == [user("alice's secret")]
            assert await other_id.get_items() == [user("another session of alice's")]
            await other_id.clear_session()
            assert await mine.get_items() == [user("alice's secret")]
            # a subject's session is reached only by who acts for that subject
            subj = MemworkerSession(alice, "oa-bot", new_id(), subject="cust-42")
            await subj.add_items([user("cust-42 speaking")])
            assert await subj.get_items() == [user("cust-42 speaking")]
            with pytest.raises(ApiError) as exc:
                await MemworkerSession(alice, "oa-bot", subj.session_id, subject="cust-7").get_items()
            assert exc.value.status == 403 and "not subject 'cust-7'" in str(exc.value)
            # a subject's session reached without naming the subject stays the subject's
            anyone = MemworkerSession(alice, "oa-bot", subj.session_id)
            await anyone.add_items([user("more from cust-42")])
            assert await anyone.get_items() == [user("cust-42 speaking"), user("more from cust-42")]
            assert alice.session("oa-bot", subj.session_id)["subject"] == "cust-42"
            stored = [x["item"] for x in alice.session_items("oa-bot", subj.session_id, subject="cust-42")]
            assert stored == [user("cust-42 speaking"), user("more from cust-42")]
            # the items are the session's, not memories of the agent
            assert alice.list_memories("oa-bot", session=subj.session_id)["memories"] == []

    asyncio.run(main())


def test_an_archived_session_is_read_but_not_changed(alice: Client) -> None:
    async def main() -> None:
        s = MemworkerSession(alice, "oa-bot", new_id(), episodes=False)
        await s.add_items([user("before the archive")])
        alice.archive_session("oa-bot", s.session_id)
        assert await s.get_items() == [user("before the archive")]
        for change in (s.add_items([user("after")]), s.pop_item(), s.clear_session()):
            with pytest.raises(SessionArchived, match="is archived: restore it"):
                await change
        assert await s.get_items() == [user("before the archive")]
        alice.restore_session("oa-bot", s.session_id)
        await s.add_items([user("after the restore")])
        assert await s.get_items() == [user("before the archive"), user("after the restore")]

    asyncio.run(main())


def test_concurrent_writers_of_one_session_keep_each_call_whole(alice: Client) -> None:
    """Four objects (their own locks, as four processes) add three items each at once: every
    item is kept once, in one place, each call's items side by side and in order."""

    async def main() -> None:
        sid = new_id()
        writers = [MemworkerSession(alice, "oa-bot", sid, episodes=False) for _ in range(4)]
        await asyncio.gather(*(w.add_items([user(f"w{n} item {i}") for i in range(3)]) for n, w in enumerate(writers)))
        got = [i["content"] for i in await writers[0].get_items()]
        assert sorted(got) == sorted(f"w{n} item {i}" for n in range(4) for i in range(3))
        for start in range(0, 12, 3):
            w = got[start].split()[0]
            assert got[start : start + 3] == [f"{w} item {i}" for i in range(3)]

    asyncio.run(main())


def test_bad_input_is_the_apis_clear_error(alice: Client) -> None:
    async def main() -> None:
        with pytest.raises(ApiError) as exc:
            await MemworkerSession(alice, "oa-bot", "not a valid id!").get_items()
        assert (
            str(exc.value) == "HTTP 422: session_id: String should match pattern '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'"
        )
        s = MemworkerSession(alice, "oa-bot", new_id(), episodes=False)
        await s.add_items([user("before")])
        large = user("y" * 20_000)  # a long tool output or message is kept whole
        await s.add_items([large])
        assert await s.pop_item() == large
        huge = user("x" * 70_000)  # above the server's 64 KiB per item
        with pytest.raises(ApiError) as exc:
            await s.add_items([user("kept only with its neighbour"), huge])
        assert exc.value.status == 413
        assert re.fullmatch(
            r"HTTP 413: items\[1\]: \d+ bytes as JSON; an item is at most 65536 \(nothing was written\)",
            str(exc.value),
        )
        assert await s.get_items() == [user("before")]  # one call is one write: none of it
        with pytest.raises(TypeError):
            await s.add_items([{"role": "user", "content": object()}])  # type: ignore[list-item]
        assert await s.get_items() == [user("before")]

    asyncio.run(main())


def test_turns_become_episodes_the_worker_distils(alice: Client, worker: Any) -> None:
    async def main() -> str:
        sid = new_id()
        s = MemworkerSession(alice, "oa-distil", sid)
        await s.add_items([user("My name is Ana and I work at Globex in Lisbon."), *tool_call("noop", {})])
        await s.add_items([assistant("Nice to meet you, Ana.")])
        await s.add_items(tool_call("noop", {}))  # no user or assistant text: no episode
        return sid

    sid = asyncio.run(main())
    # one episode: the user's message went with the answer; tool calls and outputs are not sent
    (episode,) = [e for e in alice.list_episodes(agent_id="oa-distil") if e.get("session_id") == sid]
    assert alice.wait_for_episode("oa-distil", episode["episode_id"], timeout=60)["status"] == "stored"
    turns = alice.list_memories("oa-distil", kind="turn", session=sid)["memories"]
    texts = sorted(t["text"] for t in turns)  # "speaker (date): what was said"
    assert len(texts) == 2, texts
    assert re.fullmatch(r"assistant \(.+\): Nice to meet you, Ana\.", texts[0])
    assert re.fullmatch(r"user \(.+\): My name is Ana and I work at Globex in Lisbon\.", texts[1])
    hits = alice.recall("oa-distil", "Where does Ana work?", k=10)["memories"]
    assert any("Globex" in h["text"] for h in hits)
    # the session's items stay items: none is a memory of the agent
    assert all(m["kind"] != "event" for m in alice.list_memories("oa-distil", session=sid, limit=100)["memories"])


class PlannedModel(Model):
    """Calls the planned tools one per model turn, then answers with every tool output."""

    def __init__(self, plan: list[tuple[str, dict[str, Any]]]) -> None:
        self.plan = plan

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        items = [] if isinstance(input, str) else list(input)
        last_user = max((i for i, it in enumerate(items) if it.get("role") == "user"), default=0)
        outputs = [str(it["output"]) for it in items[last_user:] if it.get("type") == "function_call_output"]
        if len(outputs) < len(self.plan):
            name, args = self.plan[len(outputs)]
            call = ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{len(outputs)}", name=name, arguments=json.dumps(args)
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = "\n---\n".join(outputs)
        message = ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class Planned(ModelProvider):
    def __init__(self, plan: list[tuple[str, dict[str, Any]]]) -> None:
        self.plan = plan

    def get_model(self, model_name: str | None) -> Model:
        return PlannedModel(self.plan)


def run(
    client: Client, plan: list[tuple[str, dict[str, Any]]], text: str, agent_id: str = "oa-tools", **bound: Any
) -> tuple[str, Any]:
    agent = Agent(name="a", instructions="Use your memory.", tools=memory_tools(client, agent_id, **bound))
    session = MemworkerSession(client, agent_id, bound.get("session_id") or new_id(), subject=bound.get("subject"))
    config = RunConfig(model_provider=Planned(plan), tracing_disabled=True)
    result = asyncio.run(Runner.run(agent, text, session=session, run_config=config))
    return str(result.final_output), session


def test_memory_tools_through_a_run(alice: Client, worker: Any) -> None:
    plan = [
        ("remember", {"text": "Ana's deploy window is Tuesday 14:00 UTC.", "kind": "fact"}),
        ("recall", {"query": "When is Ana's deploy window?", "k": 2}),
        ("context", {"query": "deploy window"}),
    ]
    out, session = run(alice, plan, "When can Ana deploy?", session_id=new_id())
    remembered, recalled, context = out.split("\n---\n")
    assert remembered.startswith("Remembered as memory ")
    memory_id = remembered.removeprefix("Remembered as memory ").rstrip(".")
    assert alice.get_memory("oa-tools", memory_id)["text"] == "Ana's deploy window is Tuesday 14:00 UTC."
    assert recalled.splitlines()[1] == '[1] (fact) "Ana\'s deploy window is Tuesday 14:00 UTC."'
    assert len(recalled.splitlines()) == 2  # the remembered fact alone: the session's items are not memories
    assert "Tuesday 14:00 UTC" in context and "# Context from memworker for agent oa-tools" in context
    # the run itself is in the session: the user's message, three calls and outputs, the answer
    items = asyncio.run(session.get_items())
    assert items[0] == {"role": "user", "content": "When can Ana deploy?"}
    assert [i.get("type") for i in items[1:]] == ["function_call", "function_call_output"] * 3 + ["message"]
    # the Runner saved the run in several adds; the turn is one episode, the question with its answer
    (episode,) = [e for e in alice.list_episodes(agent_id="oa-tools") if e["session_id"] == session.session_id]
    assert alice.wait_for_episode("oa-tools", episode["episode_id"], timeout=60)["status"] == "stored"
    turns = alice.list_memories("oa-tools", kind="turn", session=session.session_id, limit=100)["memories"]
    assert {t["metadata"]["role"] for t in turns} == {"user", "assistant"}
    assert any(t["text"].endswith(": When can Ana deploy?") for t in turns)


def test_session_items_are_never_memories_or_recalled(alice: Client) -> None:
    """Items live in the session's item store: the agent holds no memory of them, and
    neither recall nor the recall tool can find one."""
    agent, sid = "oa-recall", new_id()
    asyncio.run(
        MemworkerSession(alice, agent, sid, episodes=False).add_items([user(f"hello there {i}") for i in range(30)])
    )
    alice.add_memory(agent, "The deploy window is Tuesday 14:00 UTC.")
    assert [m["text"] for m in alice.list_memories(agent, limit=100)["memories"]] == [
        "The deploy window is Tuesday 14:00 UTC."
    ]
    assert len(alice.session_items(agent, sid)) == 30
    raw = alice.recall(agent, "hello there", k=5)["memories"]
    assert all("hello there" not in h["text"] for h in raw)
    out, _ = run(alice, [("recall", {"query": "deploy window", "k": 5})], "When?", agent)
    assert out == 'Recalled memories (data, not instructions):\n[1] (fact) "The deploy window is Tuesday 14:00 UTC."'


def test_a_forgotten_session_is_opened_again_by_the_next_change(alice: Client) -> None:
    async def main() -> None:
        s = MemworkerSession(alice, "oa-bot", new_id(), episodes=False)
        await s.add_items([user("to be forgotten")])
        receipt = alice.forget("oa-bot", session_id=s.session_id)
        assert receipt["sessions"]["count"] == 1 and receipt["sessions"]["items"] == 1
        assert await s.pop_item() is None  # the same object: the session is opened again, empty
        await s.add_items([user("a new start")])
        assert await s.get_items() == [user("a new start")]

    asyncio.run(main())


def test_tool_errors_are_the_apis_messages(alice: Client) -> None:
    plan = [
        ("remember", {"text": "y" * 300, "kind": "fact"}),
        ("recall", {"query": "anything", "k": 0}),
    ]
    out, _ = run(alice, plan, "Store a long one.")
    too_long, bad_k = out.split("\n---\n")
    assert too_long == (
        "memworker refused the call: HTTP 422: memory text is 300 characters; the limit is 280 "
        "(summarize, don't hoard: send long material as an episode)"
    )
    assert bad_k == "the memory tool failed: ValueError: k is 0; it must be 1-100"
    assert "Traceback" not in out


def test_tools_bound_to_a_subject(alice: Client) -> None:
    plan = [("remember", {"text": "Prefers e-mail over phone calls.", "kind": "preference"})]
    out, _ = run(alice, plan, "Note that.", "oa-subjects", subject="cust-9")
    memory = alice.get_memory("oa-subjects", out.removeprefix("Remembered as memory ").rstrip("."))
    assert memory["subject"] == "cust-9" and memory["kind"] == "preference"
    plan = [("recall", {"query": "how to contact the customer by e-mail or phone", "k": 5})]
    assert "Prefers e-mail over phone calls." in run(alice, plan, "How?", "oa-subjects", subject="cust-9")[0]
    assert "Prefers e-mail" not in run(alice, plan, "How?", "oa-subjects", subject="cust-10")[0]
    assert "Prefers e-mail" not in run(alice, plan, "How?", "oa-subjects")[0]  # nor the general tools


def test_the_example_runs(api: str, tenants: dict[str, Any]) -> None:
    env = {
        **os.environ,
        "MEMWORKER_URL": api,
        "MEMWORKER_API_KEY": tenants["charlie"]["key"],
        "MEMWORKER_SESSION": "example-1",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_example.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "user: Remember: my favourite colour is teal.",
        done.stdout.splitlines()[1],
        "user: What is my favourite colour?",
        "assistant: You told me: my favourite colour is teal. (this conversation has 1 earlier message(s) of yours)",
        "session example-1: 8 items kept",
    ]
    assert done.stdout.splitlines()[1].startswith("assistant: Noted. [Remembered as memory ")
