"""Execution plans (the execution context): milestones of steps, each step with a
status, a progress percentage and an optional output. Pure functions over the plan's JSON
document; memworker/sessions/session.py stores it in the session row, so it survives any crash or
restart of the processes that change it.

Where to resume: the last milestone completed (with every milestone before it), and the
first step, in plan order, that is neither done nor skipped."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NotRequired, TypedDict, cast

from memworker import errors
from memworker.schemas import PlanResume
from memworker.sessions.statuses import FINISHED, StepStatus

STATUSES = tuple(StepStatus)
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
MAX_MILESTONES = 50
MAX_STEPS = 500
MAX_OUTPUT = 4000  # an intermediate result worth keeping with the step, not a report store
FORGOTTEN = "[forgotten]"  # a title forget erased (a title is required, so it is replaced)


class Step(TypedDict):
    id: str
    title: str
    status: str  # a StepStatus
    progress: int
    output: str | None
    note: str | None
    updated_at: str


class Milestone(TypedDict):
    id: str
    title: str
    steps: list[Step]


class Plan(TypedDict):
    """The plan's document as the session row stores it."""

    title: str | None
    milestones: list[Milestone]
    updated_at: str
    revision: NotRequired[int]  # the session revision that last changed it


class MilestoneView(Milestone):
    status: str  # its steps' overall StepStatus
    progress: int


class PlanView(TypedDict):
    """The plan with each milestone's derived status and progress, and where to resume."""

    title: str | None
    milestones: list[MilestoneView]
    updated_at: str
    revision: NotRequired[int]
    resume: PlanResume


@dataclass(frozen=True)
class StepPatch:
    status: str | None = None
    progress: int | None = None
    output: str | None = None
    note: str | None = None


def build(spec: Mapping[str, Any], *, old: Mapping[str, Any] | None, now: datetime) -> Plan:
    """A plan from a PUT body {"title", "milestones": [{"id"?, "title", "steps": [{"id"?,
    "title", "status"?, "progress"?, "output"?}]}]}. Ids default to m1, m1.s1, ...; a step
    that keeps its id from the old plan and gives no status keeps its status, progress and
    output (re-planning does not lose work). Raises InvalidInput."""
    milestones = spec.get("milestones") or []
    if not milestones or len(milestones) > MAX_MILESTONES:
        raise errors.InvalidInput(f"a plan has 1 to {MAX_MILESTONES} milestones")
    previous = {s["id"]: s for m in (old or {}).get("milestones", []) for s in m["steps"]}
    seen: set[str] = set()
    out_ms: list[Milestone] = []
    n_steps = 0
    for mi, m in enumerate(milestones, 1):
        mid = _id(m.get("id") or f"m{mi}", seen)
        steps: list[Step] = []
        for si, s in enumerate(m.get("steps") or [], 1):
            sid = _id(s.get("id") or f"{mid}.s{si}", seen)
            step: Step = {
                "id": sid,
                "title": _title(s.get("title")),
                "status": StepStatus.PENDING,
                "progress": 0,
                "output": None,
                "note": None,
                "updated_at": now.isoformat(),
            }
            if s.get("status") is None and s.get("progress") is None and sid in previous:
                kept = previous[sid]
                step["status"] = kept.get("status")
                step["progress"] = kept.get("progress")
                step["output"] = kept.get("output")
                step["note"] = kept.get("note")
                step["updated_at"] = kept.get("updated_at")
            else:
                step = _patched(
                    step, StepPatch(s.get("status"), s.get("progress"), s.get("output"), s.get("note")), now
                )
            steps.append(step)
        if not steps:
            raise errors.InvalidInput(f"milestone {mid!r} has no steps")
        n_steps += len(steps)
        out_ms.append({"id": mid, "title": _title(m.get("title")), "steps": steps})
    if n_steps > MAX_STEPS:
        raise errors.InvalidInput(f"a plan has at most {MAX_STEPS} steps")
    title = spec.get("title")
    return {"title": _title(title) if title else None, "milestones": out_ms, "updated_at": now.isoformat()}


def patch_step(plan: Mapping[str, Any], step_id: str, patch: StepPatch, *, now: datetime) -> Plan:
    """A copy of the plan with one step changed; an equal copy when the patch changes nothing
    (the caller then saves nothing and bumps no revision). Raises NotFound, InvalidInput (also
    for an empty patch: a 422, like an empty working-memory change)."""
    if patch == StepPatch():
        raise errors.InvalidInput("nothing to change: give status, progress, output or note")
    out = cast(Plan, copy.deepcopy(dict(plan)))
    for m in out["milestones"]:
        for i, s in enumerate(m["steps"]):
            if s["id"] == step_id:
                new = _patched(s, patch, now)
                if {**new, "updated_at": None} != {**s, "updated_at": None}:
                    m["steps"][i] = new
                    out["updated_at"] = now.isoformat()
                return out
    raise errors.NotFound(f"no step {step_id!r} in this plan")


def _patched(step: Step, patch: StepPatch, now: datetime) -> Step:
    s = step.copy()
    if patch.status is not None and patch.status not in STATUSES:
        raise errors.InvalidInput(f"step status must be one of {list(STATUSES)}")
    if patch.progress is not None and (
        isinstance(patch.progress, bool) or not isinstance(patch.progress, int) or not 0 <= patch.progress <= 100
    ):
        raise errors.InvalidInput("step progress is an integer percentage, 0 to 100")
    for name, value in (("output", patch.output), ("note", patch.note)):
        if value is not None and len(value) > MAX_OUTPUT:
            raise errors.InvalidInput(f"step {name} is at most {MAX_OUTPUT} characters")
    if patch.status == StepStatus.DONE and patch.progress is not None and patch.progress != 100:
        raise errors.InvalidInput("a done step has progress 100")
    if patch.progress is not None:
        s["progress"] = patch.progress
    if patch.status is not None:
        s["status"] = patch.status
    elif patch.progress is not None:  # progress alone moves the status along
        if patch.progress == 100:
            s["status"] = StepStatus.DONE
        elif patch.progress > 0 and s["status"] == StepStatus.PENDING:
            s["status"] = StepStatus.IN_PROGRESS
    if s["status"] == StepStatus.DONE:
        s["progress"] = 100
    if patch.output is not None:
        s["output"] = patch.output
    if patch.note is not None:
        s["note"] = patch.note
    s["updated_at"] = now.isoformat()
    return s


def milestone_status(m: Mapping[str, Any]) -> StepStatus:
    statuses = [s["status"] for s in m["steps"]]
    if all(st in FINISHED for st in statuses):
        return StepStatus.DONE
    if any(st == StepStatus.BLOCKED for st in statuses):
        return StepStatus.BLOCKED
    if any(st != StepStatus.PENDING for st in statuses):
        return StepStatus.IN_PROGRESS
    return StepStatus.PENDING


def progress(plan: Mapping[str, Any]) -> int:
    """Overall percentage: the mean progress of the steps that are not skipped."""
    steps = [s for m in plan["milestones"] for s in m["steps"] if s["status"] != StepStatus.SKIPPED]
    if not steps:
        return 100
    return round(sum(int(s["progress"]) for s in steps) / len(steps))


def resume(plan: Mapping[str, Any]) -> PlanResume:
    """Where to pick the plan up again."""
    last_done = None
    for m in plan["milestones"]:
        if milestone_status(m) != StepStatus.DONE:
            break
        last_done = {"id": m["id"], "title": m["title"]}
    nxt = None
    for m in plan["milestones"]:
        s = next((s for s in m["steps"] if s["status"] not in FINISHED), None)
        if s is not None:
            nxt = {
                "id": s["id"],
                "title": s["title"],
                "status": s["status"],
                "progress": s["progress"],
                "milestone_id": m["id"],
                "milestone_title": m["title"],
            }
            break
    steps = [s for m in plan["milestones"] for s in m["steps"]]
    return {
        "last_completed_milestone": last_done,
        "next_step": nxt,
        "done": nxt is None,
        "progress": progress(plan),
        "steps_done": sum(s["status"] in FINISHED for s in steps),
        "steps_total": len(steps),
        "blocked": [s["id"] for s in steps if s["status"] == StepStatus.BLOCKED],
    }


def view(plan: Mapping[str, Any]) -> PlanView:
    """The plan with each milestone's derived status and progress, and where to resume."""
    out = cast(PlanView, copy.deepcopy(dict(plan)))
    for m in out["milestones"]:
        m["status"] = milestone_status(m)
        live = [s for s in m["steps"] if s["status"] != StepStatus.SKIPPED]
        m["progress"] = round(sum(s["progress"] for s in live) / len(live)) if live else 100
    out["resume"] = resume(plan)
    return out


def render_lines(plan: Mapping[str, Any] | None) -> list[str]:
    """Plain sentences on the plan's state, for distillation (archive, flush): how far it
    got and what comes next, and what is blocked. Step outputs stay in the plan and the
    archive: they are artefacts, not memories."""
    if not plan:
        return []
    r = resume(plan)
    title = plan.get("title") or "the plan"
    nxt = f"; next step: {r['next_step']['title']}" if r["next_step"] else "; finished"
    lines = [f"Progress on {title}: {r['progress']}% ({r['steps_done']} of {r['steps_total']} steps){nxt}."]
    for m in plan["milestones"]:
        for s in m["steps"]:
            if s["status"] == StepStatus.BLOCKED:
                lines.append(f"Step {s['title']} is blocked" + (f": {s['note']}." if s.get("note") else "."))
    return lines


def scrub(plan: dict[str, Any] | None, found: Callable[[str | None], bool]) -> tuple[dict[str, Any] | None, int]:
    """A copy without what forget erases: a title for which found() is true becomes
    FORGOTTEN (the structure, statuses and progress stay: they say nothing), such an output
    or note goes. Returns (plan, how many texts went)."""
    if plan is None:
        return None, 0
    out = copy.deepcopy(plan)
    gone = 0
    if found(out.get("title")):
        out["title"] = None
        gone += 1
    for m in out.get("milestones", []):
        for part in (m, *m.get("steps", [])):
            if found(part.get("title")):
                part["title"] = FORGOTTEN
                gone += 1
        for s in m.get("steps", []):
            for name in ("output", "note"):
                if found(s.get(name)):
                    s[name] = None
                    gone += 1
    return out, gone


def _id(value: Any, seen: set[str]) -> str:
    if not isinstance(value, str) or not ID.match(value):
        raise errors.InvalidInput("plan ids are 1-64 letters, digits and . _ : -, starting with a letter or digit")
    if value in seen:
        raise errors.InvalidInput(f"plan id {value!r} is used twice")
    seen.add(value)
    return value


def _title(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 500:
        raise errors.InvalidInput("plan titles are 1-500 characters")
    return " ".join(value.split())
