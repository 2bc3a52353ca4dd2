"""Consolidation runs and an agent's consolidation status as JSON: one shape for the API
(api/routes/consolidation.py) and `memworker consolidation status --json`."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any, NotRequired, TypedDict, cast

from memworker.sleep import consolidation
from memworker.storage.rows import jsonable
from memworker.storage.sleep_db import AgentGates, Run


class RunJson(TypedDict):
    """A pass's report as JSON: the run's columns (dates ISO 8601), its steps, and the results
    its report names lifted to the top (only those it has)."""

    agent_id: str
    run_key: str
    trigger: str
    status: str
    created_at: str
    started_at: str
    finished_at: str | None
    items_reviewed: int
    connections_made: int
    insights_written: int
    conclusions_written: int
    salience_rerated: int
    skipped_reason: str | None
    error: str | None
    llm_calls: int
    tokens_in: int
    tokens_out: int
    duration_ms: int | None
    run_id: str
    steps: dict[str, Any]  # step -> llm | rules | off | skipped: why
    insight_id: NotRequired[str | None]
    conclusion_ids: NotRequired[list[str]]
    profile_version: NotRequired[int | None]
    rejected_connections: NotRequired[dict[str, int]]
    flagged: NotRequired[bool]
    summaries_written: NotRequired[int]
    turns_distilled: NotRequired[int]
    items_absorbed: NotRequired[int]


class StatusJson(TypedDict):
    """An agent's consolidation gates and failures as JSON (dates ISO 8601)."""

    agent_id: str
    created_at: str
    last_episode_at: str | None
    last_consolidated_at: str | None
    last_pass_at: str | None
    sessions_since_pass: int
    consolidation_requested: bool
    consolidation_failures: int
    consolidation_last_error: str | None
    next_consolidation_at: str | None
    enabled: bool
    flagged: bool


def run_json(run: Run) -> RunJson:
    """A consolidation_runs row with its report's steps and results lifted to the top (the
    report is stored JSON: what it holds is passed through as it is)."""
    row = asdict(run)
    out = jsonable({k: v for k, v in row.items() if k != "report"})
    out["run_id"] = out.pop("id")
    report = row.get("report") or {}
    out["steps"] = report.get("steps", {})
    for key in (
        "insight_id",
        "conclusion_ids",
        "profile_version",
        "rejected_connections",
        "flagged",
        "summaries_written",
        "turns_distilled",
        "items_absorbed",
    ):
        if key in report:
            out[key] = report[key]
    return cast(RunJson, out)


def status_json(gates: AgentGates, is_enabled: bool) -> StatusJson:
    """An agent's consolidation gates and failures; flagged after FLAG_AFTER in a row."""
    return StatusJson(
        agent_id=gates.agent_id,
        created_at=gates.created_at.isoformat(),
        last_episode_at=_iso(gates.last_episode_at),
        last_consolidated_at=_iso(gates.last_consolidated_at),
        last_pass_at=_iso(gates.last_pass_at),
        sessions_since_pass=gates.sessions_since_pass,
        consolidation_requested=gates.consolidation_requested,
        consolidation_failures=gates.consolidation_failures,
        consolidation_last_error=gates.consolidation_last_error,
        next_consolidation_at=_iso(gates.next_consolidation_at),
        enabled=is_enabled,
        flagged=gates.consolidation_failures >= consolidation.FLAG_AFTER,
    )


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None
