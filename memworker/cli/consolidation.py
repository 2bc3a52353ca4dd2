"""`memworker consolidation enable|disable|status|run`: the operator's switch on sleep, per
tenant or per agent, its status with the last reports, and one pass run right here."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memworker import errors
from memworker.cli import common
from memworker.settings import Settings
from memworker.sleep import service
from memworker.sleep.consolidation import BUSY, PassStatus
from memworker.storage import db
from memworker.tenancy import service as tenancy

DEFAULT_TENANT = "dev"  # the tenant `memworker up` creates


def register(sub: Any) -> None:
    c = sub.add_parser("consolidation", help="sleep: switch consolidation on or off, see its reports, run a pass")
    actions = c.add_subparsers(metavar="ACTION")
    for name, helptext, func in (
        ("enable", "switch consolidation on (for the tenant, or one --agent)", cmd_enable),
        ("disable", "switch consolidation off (for the tenant, or one --agent)", cmd_disable),
    ):
        a = actions.add_parser(name, help=helptext)
        a.add_argument("--tenant", default=DEFAULT_TENANT, help=f"tenant name (default {DEFAULT_TENANT})")
        a.add_argument("--agent", help="only this agent (default: the tenant's policy)")
        a.add_argument(
            "--reset",
            action="store_true",
            help="remove the override instead (back to the default: on offline, off with a paid LLM)",
        )
        a.set_defaults(func=func)
    s = actions.add_parser("status", help="per agent: on/off, gates, failures, flagged, the last reports")
    s.add_argument("--tenant", default=DEFAULT_TENANT)
    s.add_argument("--agent", help="one agent (default: every agent of the tenant, no reports)")
    s.add_argument("--runs", type=int, default=5, help="reports to show for --agent (default 5)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)
    r = actions.add_parser("run", help="run one pass for an agent now, in this process, and print its report")
    r.add_argument("--tenant", default=DEFAULT_TENANT)
    r.add_argument("--agent", required=True)
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_run)


def cmd_enable(settings: Settings, args: argparse.Namespace) -> int:
    return _switch(settings, args, None if args.reset else True)


def cmd_disable(settings: Settings, args: argparse.Namespace) -> int:
    return _switch(settings, args, None if args.reset else False)


def _switch(settings: Settings, args: argparse.Namespace, value: bool | None) -> int:
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        effective = service.set_enabled(conn, settings, tenant_id=tenant.id, agent_id=args.agent, value=value)
        conn.commit()
    common.invalidate_caches(settings)
    scope = f"agent {args.agent}" if args.agent else f"tenant {args.tenant}"
    print(f"consolidation {'on' if effective else 'off'} for {scope}" + (" (default)" if value is None else ""))
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        found = service.overview(conn, settings, tenant_id=tenant.id, agent_id=args.agent or None, runs=args.runs)
    if args.json:
        print(json.dumps(found.to_json(), indent=2, default=str))
        return 0
    rows, runs = found.statuses, found.runs
    print(f"{'agent':24} {'on':3} {'last pass':19} {'sessions':>8} {'req':3} {'failures':>8}  next attempt")
    for status in rows:
        r = status.gates
        flagged = "  FLAGGED" if status.flagged else ""
        print(
            f"{r.agent_id:24} {'yes' if status.enabled else 'no':3} {_when(r.last_pass_at):19} "
            f"{r.sessions_since_pass:8} {'yes' if r.consolidation_requested else 'no':3} "
            f"{r.consolidation_failures:8}  {_when(r.next_consolidation_at)}{flagged}"
        )
        if flagged and r.consolidation_last_error:
            print(f"  last error: {r.consolidation_last_error[:200]}")
    for run in runs:
        what = (
            run.skipped_reason
            or run.error
            or f"{run.items_reviewed} reviewed, {run.connections_made} connections, "
            f"{run.insights_written} insight, {run.conclusions_written} conclusions, "
            f"{run.salience_rerated} re-rated"
        )
        print(
            f"  {_when(run.created_at)}  {run.trigger:9} {run.status:8} "
            f"{run.duration_ms or 0:6} ms  llm {run.llm_calls}  {what}"
        )
    return 0


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    """The operator asked for it: the pass runs even where policy has consolidation off."""
    with common.owner_url(settings) as url:
        with db.connect(url) as conn:
            tenant = tenancy.named_tenant(conn, args.tenant)
        pool = db.open_pool(url, min_size=1, max_size=2, name="memworker-cli")
        try:
            report = service.run_now(pool, settings, tenant_id=tenant.id, agent_id=args.agent, trigger="cli")
        finally:
            pool.close()
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(
            f"run {report.run_id}: {report.status}"
            + (f" ({report.skipped_reason or report.error})" if report.skipped_reason or report.error else "")
        )
        print(
            f"  {report.items_reviewed} reviewed, {report.connections_made} connections, "
            f"{report.insights_written} insight, {report.conclusions_written} conclusions, "
            f"{report.salience_rerated} re-rated, {report.duration_ms} ms, llm calls {report.llm_calls}"
        )
        for step, how in report.steps.items():
            print(f"  {step:12} {how}")
    if report.status == BUSY:
        raise errors.MemworkerError("the agent is locked by another pass or a retention sweep; try again")
    return 1 if report.status == PassStatus.FAILED else 0


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"
