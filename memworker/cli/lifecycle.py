"""`memworker retention run|status --agent A` and `memworker policy apply FILE | show`:
the operator's handle on forgetting and on the policy that governs it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

from memworker import errors
from memworker.cli import common
from memworker.lifecycle import retention, service
from memworker.settings import Settings
from memworker.storage import db
from memworker.tenancy import service as tenancy

DEFAULT_TENANT = "dev"  # the tenant `memworker up` creates
# what a sweep did, per action (scanned is shown apart; batches is bookkeeping)
_REPORT = tuple(k for k in retention.COUNTS if k not in ("scanned", "batches"))


def register(sub: Any) -> None:
    r = sub.add_parser("retention", help="forgetting: sweep an agent now, or show its last reports")
    actions = r.add_subparsers(metavar="ACTION")
    run = actions.add_parser("run", help="run one retention sweep of an agent now and print its report")
    run.add_argument("--tenant", default=DEFAULT_TENANT, help=f"tenant name (default {DEFAULT_TENANT})")
    run.add_argument("--agent", required=True)
    run.add_argument("--json", action="store_true")
    run.set_defaults(func=cmd_retention_run)
    st = actions.add_parser("status", help="an agent's last retention reports, newest first")
    st.add_argument("--tenant", default=DEFAULT_TENANT)
    st.add_argument("--agent", required=True)
    st.add_argument("--limit", type=int, default=10)
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_retention_status)

    p = sub.add_parser("policy", help="apply a JSON policy file, or show an effective policy")
    pa = p.add_subparsers(metavar="ACTION")
    ap = pa.add_parser("apply", help='load {"tenant": NAME, "defaults": {...}, "agents": {AGENT: {...}}}')
    ap.add_argument("file", type=Path)
    ap.add_argument("--tenant", help=f'tenant name (default: the file\'s "tenant", else {DEFAULT_TENANT})')
    ap.set_defaults(func=cmd_policy_apply)
    sh = pa.add_parser("show", help="the overrides and effective policy of the tenant or one --agent, as JSON")
    sh.add_argument("--tenant", default=DEFAULT_TENANT)
    sh.add_argument("--agent")
    # accepted like every command's --json, so a script may pass it; the output is JSON either way
    sh.add_argument("--json", action="store_true", help="no change: the output is JSON either way")
    sh.set_defaults(func=cmd_policy_show)


def cmd_retention_run(settings: Settings, args: argparse.Namespace) -> int:
    with common.owner_url(settings) as url:
        with db.connect(url) as conn:
            tenant = tenancy.named_tenant(conn, args.tenant)
        pool = db.open_pool(url, min_size=1, max_size=2, name="memworker-cli")
        try:
            report = service.sweep(pool, tenant_id=tenant.id, agent_id=args.agent, trigger="cli")
        finally:
            pool.close()
    if args.json:
        print(json.dumps(report.to_json(), default=str, indent=2))
        return 0 if report.status in (retention.SweepStatus.DONE, retention.SweepStatus.SKIPPED) else 1
    print(f"retention {args.agent}: {report.status} in {report.duration_ms} ms, {report.scanned} live memories")
    for k in _REPORT:
        print(f"  {k:17} {getattr(report, k)}")
    if report.skipped_reason:
        print(f"  ({report.skipped_reason})")
    return 0 if report.status in (retention.SweepStatus.DONE, retention.SweepStatus.SKIPPED) else 1


def cmd_retention_status(settings: Settings, args: argparse.Namespace) -> int:
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        rows = service.retention_runs(conn, tenant_id=tenant.id, agent_id=args.agent, limit=args.limit)
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    if not rows:
        print(f"no retention runs for {args.agent} yet")
    for r in rows:
        row: Mapping[str, object] = r
        counts = " ".join(f"{k}={row[k]}" for k in _REPORT if row[k])
        print(
            f"{r['started_at']:%Y-%m-%d %H:%M:%S}  {r['trigger']:5} {r['status']:8} {r['duration_ms'] or 0:6} ms  "
            f"live={r['scanned']} {counts or '(nothing to do)'}"
        )
    return 0


def cmd_policy_apply(settings: Settings, args: argparse.Namespace) -> int:
    doc = load_policy_file(args.file)
    name = args.tenant or doc.get("tenant") or DEFAULT_TENANT
    with common.tenant_conn(settings, name) as (conn, tenant):
        service.apply_policies(conn, tenant_id=tenant.id, defaults=doc.get("defaults"), agents=doc.get("agents", {}))
        conn.commit()  # all of the file or none of it
    common.invalidate_caches(settings)
    agents = doc.get("agents", {})
    print(
        f"applied {args.file} to tenant {name}: "
        f"{'defaults and ' if 'defaults' in doc else ''}{len(agents)} agent override(s)"
    )
    return 0


class PolicyFile(TypedDict, total=False):
    """A policy file: the tenant it is for, its defaults, and overrides per agent id."""

    tenant: str
    defaults: dict[str, Any]
    agents: dict[str, dict[str, Any]]
    version: Any


def load_policy_file(path: Path) -> PolicyFile:
    """The policy file's JSON. Raises InvalidInput naming what is wrong with its shape (the
    field values are checked when applied, by name)."""
    try:
        text = path.read_text()
    except (OSError, ValueError) as exc:
        raise errors.InvalidInput(f"{path}: not a readable JSON file ({exc})") from None
    doc = common.parse_json(str(path), text)
    if not isinstance(doc, dict):
        raise errors.InvalidInput(f"{path}: the top level must be an object")
    unknown = set(doc) - {"tenant", "defaults", "agents", "version"}
    if unknown:
        raise errors.InvalidInput(f"{path}: unknown keys {sorted(unknown)}; use tenant, defaults, agents")
    if not isinstance(doc.get("defaults", {}), dict):
        raise errors.InvalidInput(f"{path}: defaults must be an object of policy fields")
    agents = doc.get("agents", {})
    if not isinstance(agents, dict) or not all(isinstance(v, dict) for v in agents.values()):
        raise errors.InvalidInput(f"{path}: agents must map agent ids to objects of policy fields")
    return cast(PolicyFile, doc)


def cmd_policy_show(settings: Settings, args: argparse.Namespace) -> int:
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        out = service.policy(conn, tenant_id=tenant.id, agent_id=args.agent)
    print(json.dumps(out, indent=2, default=str))
    return 0
