"""`memworker session ...`, `memworker context` and `memworker webhook ...`: sessions, their
working memory and plans, the runtime context, archives and webhooks, through the API
(MEMWORKER_API_KEY, or the dev key of a running `memworker up`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memworker import errors
from memworker.cli import common
from memworker.sessions.statuses import SessionStatus, StepStatus
from memworker.settings import Settings


def register(sub: Any) -> None:
    _add_session_commands(sub)
    _add_context_command(sub)
    _add_webhook_commands(sub)


def _add_session_commands(sub: Any) -> None:
    """`memworker session ACTION`: working memory, plans, context use and archives."""
    s = sub.add_parser("session", help="sessions: working memory, plans, context use, archives")
    a = s.add_subparsers(metavar="ACTION")

    def action(name: str, helptext: str, func: Any, *, sid: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = a.add_parser(name, help=helptext)
        p.add_argument("--agent", required=True)
        if sid:
            p.add_argument("session_id")
        p.add_argument("--json", action="store_true", help="print the API's JSON answer")
        p.set_defaults(func=func)
        return p

    c = action("create", "open a session (prints its id)", cmd_create, sid=False)
    c.add_argument("--id", dest="session_id", help="your own session id (default: generated)")
    c.add_argument("--goal")
    c.add_argument("--window", type=int, help="the client model's context window in tokens")
    ls = action("list", "an agent's sessions, most recent first", cmd_list, sid=False)
    ls.add_argument("--status", choices=[s.value for s in SessionStatus])
    action("show", "a session: status, goal, plan progress, context use", cmd_show)
    w = action("working", "show or change working memory", cmd_working)
    w.add_argument("--goal")
    w.add_argument("--intent")
    w.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="KIND:TEXT",
        help="constraint:, decision:, question: or candidate: followed by the text (repeatable)",
    )
    w.add_argument("--remove", action="append", type=int, default=[], metavar="ID")
    w.add_argument("--touch", action="append", type=int, default=[], metavar="ID")
    pl = action("plan", "show the plan and where to resume, or replace it", cmd_plan)
    pl.add_argument("--set", metavar="FILE", help='a JSON file {"title", "milestones": [...]}; "-" reads stdin')
    st = action("step", "change one step of the plan", cmd_step)
    st.add_argument("step_id")
    st.add_argument("--status", choices=[s.value for s in StepStatus])
    st.add_argument("--progress", type=int)
    st.add_argument("--output")
    st.add_argument("--note")
    u = action("usage", "report context use (flushes at the policy's threshold); none: the estimate", cmd_usage)
    u.add_argument("--used", type=float, help="share of the window in use, 0..1")
    u.add_argument("--used-tokens", type=int)
    u.add_argument("--window", type=int)
    action("archive", "archive and close a session (distils it into long-term memory)", cmd_archive)
    r = action("restore", "reopen an archived session", cmd_restore)
    r.add_argument("--version", type=int, help="archive version (default: the latest)")
    action("archives", "list a session's archives", cmd_archives)
    d = action("download", "write an archive (gzip JSONL) to a file", cmd_download)
    d.add_argument("version", type=int)
    d.add_argument("-o", "--output", help="file name (default: AGENT-SESSION-vN.jsonl.gz; '-' for stdout)")


def _add_context_command(sub: Any) -> None:
    x = sub.add_parser("context", help="build an agent's runtime context for a query (through the API)")
    x.add_argument("--agent", required=True)
    x.add_argument("--session")
    x.add_argument("--max-tokens", type=int)
    x.add_argument("--json", action="store_true")
    x.add_argument("query")
    x.set_defaults(func=cmd_context)


def _add_webhook_commands(sub: Any) -> None:
    h = sub.add_parser("webhook", help="tenant webhooks for pre_turn, post_turn and archive events")
    ha = h.add_subparsers(metavar="ACTION")
    add = ha.add_parser("add", help="register a webhook (prints its signing secret once)")
    add.add_argument("url")
    add.add_argument("--events", default="pre_turn,post_turn,archive")
    add.add_argument("--agents", help="comma list of agent ids (default: all)")
    add.add_argument("--description", default="")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=cmd_webhook_add)
    wl = ha.add_parser("list", help="list webhooks")
    wl.add_argument("--json", action="store_true", help="print the API's JSON answer")
    wl.set_defaults(func=cmd_webhook_list)
    rm = ha.add_parser("delete", help="delete a webhook and its deliveries")
    rm.add_argument("webhook_id")
    rm.set_defaults(func=cmd_webhook_delete)
    dl = ha.add_parser("deliveries", help="a webhook's recent deliveries")
    dl.add_argument("webhook_id")
    dl.add_argument("--limit", type=int, default=20)
    dl.add_argument("--json", action="store_true", help="print the API's JSON answer")
    dl.set_defaults(func=cmd_webhook_deliveries)


def _print(args: argparse.Namespace, out: Any, text: str) -> int:
    print(json.dumps(out, indent=2) if getattr(args, "json", False) else text)
    return 0


def cmd_create(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.create_session(args.agent, args.session_id, goal=args.goal, context_window_tokens=args.window)
    return _print(args, out, out["session_id"])


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.sessions(args.agent, status=args.status)
    lines = [f"{s['session_id']:36} {s['status']:8} {s['updated_at'][:19]}  {s['goal'] or ''}" for s in out]
    return _print(args, out, "\n".join(lines) or "(no sessions)")


def cmd_show(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        s = c.session(args.agent, args.session_id)
    u = s["usage"]
    text = [
        f"session {s['session_id']}  {s['status']}  revision {s['revision']}  archives {s['archives']}",
        f"goal    {s['goal'] or '-'}",
        f"intent  {s['intent'] or '-'}",
        f"working {s['working_items']} items",
        f"context use {u['estimated_use']:.0%} estimated of {u['window_tokens']} tokens "
        f"(flush at {u['flush_at']:.0%}, {u['flush_count']} flushes)",
    ]
    if s["plan"]:
        text.append(_resume_text(s["plan"]))
    return _print(args, s, "\n".join(text))


def cmd_working(settings: Settings, args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    for name in ("goal", "intent"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name) or None
    adds = []
    for spec in args.add:
        kind, sep, text = spec.partition(":")
        if not sep or not text.strip():
            raise errors.InvalidInput(f"--add {spec!r}: use KIND:TEXT, e.g. decision:use Postgres")
        adds.append({"kind": kind.strip(), "text": text.strip()})
    if adds:
        changes["add"] = adds
    if args.remove:
        changes["remove"] = args.remove
    if args.touch:
        changes["touch"] = args.touch
    with common.client(settings) as c:
        w = (
            c.update_working(args.agent, args.session_id, **changes)
            if changes
            else c.working(args.agent, args.session_id)
        )
    text = [f"goal    {w['goal'] or '-'}", f"intent  {w['intent'] or '-'}"]
    for section in ("constraints", "decisions", "open_questions", "candidates"):
        for i in w[section]:
            label = i["text"] if i["text"] else f"memory {i['memory_id']}"
            text.append(f"{i['id']:4}  {section[:-1]:14} refs={i['refs']:<3} {label}")
    for st in w["steps"]:
        text.append(f"step  {st['id']:12} {st['status']:11} {st['progress']:3}%  {st['title']}")
    return _print(args, w, "\n".join(text))


def cmd_plan(settings: Settings, args: argparse.Namespace) -> int:
    spec = _plan_file(args.set) if args.set else None
    with common.client(settings) as c:
        if spec is not None:
            plan = c.set_plan(args.agent, args.session_id, spec.milestones, title=spec.title)
        else:
            plan = c.plan(args.agent, args.session_id)
    text = [f"{plan.get('title') or 'plan'}  (revision {plan['revision']})"]
    for m in plan["milestones"]:
        text.append(f"{m['id']:10} {m['status']:11} {m['progress']:3}%  {m['title']}")
        for st in m["steps"]:
            text.append(f"  {st['id']:10} {st['status']:11} {st['progress']:3}%  {st['title']}")
    text.append(_resume_text(plan["resume"]))
    return _print(args, plan, "\n".join(text))


@dataclass(frozen=True)
class PlanFile:
    """A plan as `--set FILE` gives it: its milestones and title as written (the API checks them)."""

    milestones: Any
    title: Any


def _plan_file(name: str) -> PlanFile:
    """The plan of `--set FILE` ('-': stdin), read and checked before anything is sent."""
    try:
        raw = sys.stdin.read() if name == "-" else Path(name).read_text()
    except (OSError, ValueError) as exc:
        raise errors.InvalidInput(f"--set {name}: cannot read it ({exc})") from None
    spec = common.parse_json(f"--set {name}", raw)
    if not isinstance(spec, dict):
        raise errors.InvalidInput(f'--set {name}: the top level must be an object {{"title", "milestones": [...]}}')
    return PlanFile(spec.get("milestones", []), spec.get("title"))


def _resume_text(r: dict[str, Any]) -> str:
    last = r["last_completed_milestone"]
    nxt = r["next_step"]
    return (
        f"progress {r['progress']}% ({r['steps_done']}/{r['steps_total']} steps); last completed milestone: "
        f"{last['id'] + ' ' + last['title'] if last else '-'}; resume at: "
        f"{nxt['id'] + ' ' + nxt['title'] + ' (' + nxt['status'] + ')' if nxt else 'nothing left'}"
    )


def cmd_step(settings: Settings, args: argparse.Namespace) -> int:
    changes = {k: getattr(args, k) for k in ("status", "progress", "output", "note") if getattr(args, k) is not None}
    if not changes:
        raise errors.InvalidInput("give --status, --progress, --output or --note")
    with common.client(settings) as c:
        plan = c.update_step(args.agent, args.session_id, args.step_id, **changes)
    return _print(args, plan, _resume_text(plan["resume"]))


def cmd_usage(settings: Settings, args: argparse.Namespace) -> int:
    body = {
        k: v
        for k, v in {"context_used": args.used, "used_tokens": args.used_tokens, "window_tokens": args.window}.items()
        if v is not None
    }
    with common.client(settings) as c:
        out = c.report_usage(args.agent, args.session_id, **body)
    text = f"use {out['use']:.0%} ({out['source']}); flush at {out['threshold']:.0%}: {out['reason']}"
    if out["episode_id"]:
        text += f" (episode {out['episode_id']})"
    return _print(args, out, text)


def cmd_archive(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.archive_session(args.agent, args.session_id)
    state = "already archived" if out["already_archived"] else "archived"
    return _print(args, out, f"{state}: version {out['version']}, {out['bytes']} bytes gzip, {out['counts']}")


def cmd_restore(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.restore_session(args.agent, args.session_id, args.version)
    return _print(args, out, f"restored from version {out['from_version']}: {out['restored']}")


def cmd_archives(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.archives(args.agent, args.session_id)
    lines = [f"v{a['version']}  {a['created_at'][:19]}  {a['bytes']:8} bytes  {a['counts']}" for a in out]
    return _print(args, out, "\n".join(lines) or "(no archives)")


def cmd_download(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        data = c.download_archive(args.agent, args.session_id, args.version)
    if args.output == "-":
        sys.stdout.buffer.write(data)
        return 0
    path = Path(args.output or f"{args.agent}-{args.session_id}-v{args.version}.jsonl.gz")
    path.write_bytes(data)
    print(f"wrote {path} ({len(data)} bytes)")
    return 0


def cmd_context(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.context(args.agent, args.query, session_id=args.session, max_tokens=args.max_tokens)
    if args.json:
        return _print(args, out, "")
    print(out["context"])
    print(f"({out['tokens']} of {out['max_tokens']} tokens; dropped {out['dropped']})", file=sys.stderr)
    return 0


def cmd_webhook_add(settings: Settings, args: argparse.Namespace) -> int:
    events = [e.strip() for e in args.events.split(",") if e.strip()]
    agents = [a.strip() for a in args.agents.split(",")] if args.agents else None
    with common.client(settings) as c:
        out = c.add_webhook(args.url, events, agent_ids=agents, description=args.description)
    return _print(args, out, f"webhook {out['webhook_id']}\nsecret  {out['secret']}\n(shown once: store it now)")


def cmd_webhook_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.webhooks()
    lines = [f"{w['webhook_id']}  {','.join(w['events']):28} {w['url']}" for w in out]
    return _print(args, out, "\n".join(lines) or "(no webhooks)")


def cmd_webhook_delete(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        c.delete_webhook(args.webhook_id)
    print(f"deleted {args.webhook_id}")
    return 0


def cmd_webhook_deliveries(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as c:
        out = c.webhook_deliveries(args.webhook_id, limit=args.limit)
    lines = [
        f"{d['id']}  {d['event']:9} {d['status']:9} attempts={d['attempts']}"
        + (f"  {d['last_error']}" if d.get("last_error") else "")
        for d in out
    ]
    return _print(args, out, "\n".join(lines) or "(no deliveries)")
