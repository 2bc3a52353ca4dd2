"""Consolidation runs and an agent's consolidation status as JSON: one shape for the API
(api/routes/consolidation.py) and `memworker consolidation status --json`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from memworker.sleep import consolidation
from memworker.storage.rows import jsonable
from memworker.storage.sleep_db import AgentGates, Run


def run_json(run: Run) -> dict[str, Any]:
    """A consolidation_runs row with its report's steps and results lifted to the top."""
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
    return out


def status_json(gates: AgentGates, is_enabled: bool) -> dict[str, Any]:
    """An agent's consolidation gates and failures; flagged after FLAG_AFTER in a row."""
    out = jsonable({k: v for k, v in asdict(gates).items() if k != "policy"})
    out["enabled"] = is_enabled
    out["flagged"] = gates.consolidation_failures >= consolidation.FLAG_AFTER
    return out
