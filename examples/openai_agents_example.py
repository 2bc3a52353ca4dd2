"""An OpenAI Agents SDK agent with memworker memory, run without any LLM or network: a tiny
scripted model plays the LLM and calls the memory tools (docs/openai_agents.md).

    memworker up        # in another shell: it prints the API's URL and the dev API key
    MEMWORKER_URL=http://127.0.0.1:8420 MEMWORKER_API_KEY=$(cat .memworker/dev-api-key) \
        python examples/openai_agents_example.py

MEMWORKER_AGENT (default openai-agents-demo) and MEMWORKER_SESSION (default a new id) choose
the agent and the session; run it twice with one MEMWORKER_SESSION to see the conversation
carry on. Needs pip install 'memworker[openai-agents]'.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

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
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from memworker.integrations.openai_agents import MemworkerSession, memory_tools
from memworker.sdk import Client


class ScriptedModel(Model):
    """Plays an LLM by rules: "Remember: X" calls remember(X), a question calls recall, and
    once the tool has answered it replies with what the tool said."""

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
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        users = [i for i, item in enumerate(items) if item.get("role") == "user"]
        asked = _text(items[users[-1]])
        earlier = len(users) - 1  # the session's history comes before this turn's message
        outputs = [item for item in items[users[-1] :] if item.get("type") == "function_call_output"]
        if not outputs:
            if asked.lower().startswith("remember:"):
                return _call("remember", {"text": asked.split(":", 1)[1].strip(), "kind": "preference"})
            return _call("recall", {"query": asked, "k": 3})
        said = str(outputs[-1]["output"])
        if said.startswith("Recalled memories"):
            # each line is [n] (kind) "text": the first that states something (earlier
            # questions and this agent's own replies are memories too) is the answer
            hits = [json.loads(line.split(") ", 1)[1]) for line in said.splitlines()[1:]]
            best = next((h for h in hits if not h.endswith("?") and not h.startswith("assistant")), None)
            if best is None:
                return _say("I don't know yet.")
            return _say(f"You told me: {best} (this conversation has {earlier} earlier message(s) of yours)")
        return _say(f"Noted. [{said}]")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


class ScriptedProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return ScriptedModel()


def _text(item: dict[str, Any]) -> str:
    content = item.get("content", "")
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def _call(name: str, arguments: dict[str, Any]) -> ModelResponse:
    call = ResponseFunctionToolCall(
        type="function_call", call_id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(arguments)
    )
    return ModelResponse(output=[call], usage=Usage(), response_id=None)


def _say(text: str) -> ModelResponse:
    message = ResponseOutputMessage(
        id=f"msg_{uuid.uuid4().hex[:12]}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


async def main() -> int:
    url, key = os.environ.get("MEMWORKER_URL", "http://127.0.0.1:8420"), os.environ.get("MEMWORKER_API_KEY")
    if not key:
        print("set MEMWORKER_API_KEY (memworker up prints its dev key)", file=sys.stderr)
        return 2
    agent_id = os.environ.get("MEMWORKER_AGENT", "openai-agents-demo")
    session_id = os.environ.get("MEMWORKER_SESSION") or f"demo-{uuid.uuid4().hex[:8]}"
    set_tracing_disabled(True)  # the SDK's tracing would send spans to OpenAI
    config = RunConfig(model_provider=ScriptedProvider(), tracing_disabled=True)
    with Client(url, key) as client:
        agent = Agent(
            name="assistant",
            instructions="Remember what the user asks you to; recall before answering questions.",
            tools=memory_tools(client, agent_id),
        )
        session = MemworkerSession(client, agent_id, session_id)
        for text in ("Remember: my favourite colour is teal.", "What is my favourite colour?"):
            result = await Runner.run(agent, text, session=session, run_config=config)
            print(f"user: {text}\nassistant: {result.final_output}")
        # a new Session object, as after a restart, reads the same conversation
        items = await MemworkerSession(client, agent_id, session_id).get_items()
        print(f"session {session_id}: {len(items)} items kept")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
