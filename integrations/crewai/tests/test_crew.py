"""A real crewai Crew whose memory is memworker: one crew run saves what its agent concluded,
a later crew (a new process's objects, the same memworker agent) recalls it into its agent's
prompt. The LLM is a scripted BaseLLM (crewai's interface for custom LLMs): no network, and
every prompt it was given is kept for the assertions."""

from __future__ import annotations

from typing import Any

import httpx
from crewai import Agent, Crew, Process, Task
from crewai.llms.base_llm import BaseLLM
from crewai.memory.analyze import (
    ConsolidationPlan,
    ExtractedMemories,
    MemoryAnalysis,
    QueryAnalysis,
    _get_prompt,
)
from pydantic import BaseModel

from memworker_crewai import MemworkerStorage, memworker_memory

LAUNCH = "The product launch is set for March 3 in Lisbon."


class ScriptedLLM(BaseLLM):
    """Answers a task with a fixed final answer (also the one memory extracted from it), and crewai's memory analysis calls (told apart
    by their system prompts, answered as JSON, as an LLM without function calling is asked)
    with fixed analyses; keeps every prompt."""

    answer: str = "Done."
    prompts: list[str] = []

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: type[BaseModel] | None = None,
    ) -> Any:
        self.prompts.append(messages if isinstance(messages, str) else "\n".join(str(m["content"]) for m in messages))
        prompt = self.prompts[-1]
        canned: dict[str, BaseModel] = {
            "extract_memories_system": ExtractedMemories(memories=[self.answer]),
            "save_system": MemoryAnalysis(suggested_scope="/launch", categories=["plans"], importance=0.9),
            "query_system": QueryAnalysis(recall_queries=["when and where is the product launch?"]),
            "consolidation_system": ConsolidationPlan(actions=[], insert_new=True),
        }
        for name, analysis in canned.items():
            if _get_prompt(name) in prompt:
                return analysis if response_model is not None else analysis.model_dump_json()
        return f"Thought: I now know the final answer\nFinal Answer: {self.answer}"

    def supports_function_calling(self) -> bool:
        return False


def _crew(llm: ScriptedLLM, memory: Any, task: str) -> Crew:
    agent = Agent(role="Planner", goal="Plan the launch", backstory="Plans launches.", llm=llm, verbose=False)
    return Crew(
        agents=[agent],
        tasks=[Task(description=task, expected_output="One sentence.", agent=agent)],
        process=Process.sequential,
        memory=memory,
        verbose=False,
    )


def test_a_crew_run_saves_to_memworker_and_the_next_run_recalls_it(api: str, keys: list[str], agent_id: str) -> None:
    first_llm = ScriptedLLM(model="scripted", answer=LAUNCH, prompts=[])
    memory = memworker_memory(api, keys[0], agent_id=agent_id, llm=first_llm, exploration_budget=0)
    crew = _crew(first_llm, memory, "Decide when and where the product launches.")
    assert crew._memory is memory  # the crew uses this Memory, not a LanceDB one of its own
    assert str(crew.kickoff()) == LAUNCH
    memory.drain_writes()

    # what the crew saved is a memworker memory of the agent, with crewai's analysis as metadata
    resp = httpx.get(f"{api}/v1/agents/{agent_id}/memories", headers={"Authorization": f"Bearer {keys[0]}"})
    resp.raise_for_status()
    saved = resp.json()["memories"]
    assert [m["text"] for m in saved] == [LAUNCH]
    assert saved[0]["metadata"]["crewai_scope"].endswith("/launch")
    assert saved[0]["metadata"]["crewai_categories"] == ["plans"]

    # a new crew, new objects, the same memworker agent: the agent's prompt carries the memory
    second_llm = ScriptedLLM(model="scripted", answer="Lisbon, March 3.", prompts=[])
    later = memworker_memory(api, keys[0], agent_id=agent_id, llm=second_llm, exploration_budget=0)
    assert str(_crew(second_llm, later, "Where is the product launch and when is it?").kickoff()) == "Lisbon, March 3."
    assert any(LAUNCH in p for p in second_llm.prompts)
    matches = later.recall("when is the launch?", depth="shallow")
    assert matches and matches[0].record.content == LAUNCH

    # and another tenant's crew with the same agent id has no such memory
    other = ScriptedLLM(model="scripted", answer="Unknown.", prompts=[])
    stranger = memworker_memory(api, keys[1], agent_id=agent_id, llm=other, exploration_budget=0)
    _crew(other, stranger, "Where is the product launch and when is it?").kickoff()
    assert not any(LAUNCH in p for p in other.prompts)

    later.reset()
    with MemworkerStorage(api, keys[0], agent_id=agent_id) as storage:
        assert storage.count() == 0
