"""Administration within a tenant through the API (memworker.sdk), acting with
MEMWORKER_API_KEY or the dev key (common.client): `agents list|subjects|erase`,
`subject forget`, and an agent's memories `memories add|list|get|forget`. Tenants and the
first keys stay operator commands on the database (`memworker tenant`, `memworker key`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memworker.cli import common
from memworker.settings import Settings


def register(sub: Any) -> None:
    a = sub.add_parser("agents", help="the tenant's agents through the API: list, subjects, erase")
    actions = a.add_subparsers(metavar="ACTION")
    ls = actions.add_parser("list", help="agents with their memories, turns, episodes, sessions, last activity")
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--cursor", help="the next_cursor of the page before")
    ls.add_argument("--json", action="store_true", help="print the API's JSON answer")
    ls.set_defaults(func=cmd_agents_list)
    su = actions.add_parser("subjects", help="the subjects an agent holds, with counts")
    su.add_argument("agent")
    su.add_argument("--limit", type=int, default=50)
    su.add_argument("--cursor")
    su.add_argument("--json", action="store_true", help="print the API's JSON answer")
    su.set_defaults(func=cmd_agents_subjects)
    er = actions.add_parser("erase", help="erase an agent and everything of it (scope erase); prints the receipt")
    er.add_argument("agent")
    er.add_argument("--yes", action="store_true", required=True, help="confirm: this cannot be undone")
    er.set_defaults(func=cmd_agents_erase)

    s = sub.add_parser("subject", help="subject requests through the API")
    sa = s.add_subparsers(metavar="ACTION")
    sf = sa.add_parser("forget", help="erase a subject from every agent and pool (scope erase); prints the receipt")
    sf.add_argument("subject")
    sf.add_argument("--keep-turns", action="store_true", help="keep the turns of the episodes it erases")
    sf.add_argument("--yes", action="store_true", required=True, help="confirm: this cannot be undone")
    sf.set_defaults(func=cmd_subject_forget)
    _register_memories(sub)


def _register_memories(sub: Any) -> None:
    m = sub.add_parser("memories", help="an agent's memories through the API: add, list, get, forget")
    actions = m.add_subparsers(metavar="ACTION")
    add = actions.add_parser("add", help="write a memory (recallable when the command returns)")
    add.add_argument("--agent", required=True)
    add.add_argument("--kind", default="fact")
    add.add_argument("--subject")
    add.add_argument("text")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=cmd_memories_add)
    ls = actions.add_parser("list", help="list an agent's memories, newest first")
    ls.add_argument("--agent", required=True)
    ls.add_argument("--subject")
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--json", action="store_true", help="print the API's JSON answer")
    ls.set_defaults(func=cmd_memories_list)
    get = actions.add_parser("get", help="one memory, as JSON")
    get.add_argument("--agent", required=True)
    get.add_argument("memory_id")
    get.set_defaults(func=cmd_memories_get)
    fg = actions.add_parser("forget", help="erase memories by id with everything forget reaches; prints the receipt")
    fg.add_argument("--agent", required=True)
    fg.add_argument("memory_id", nargs="+")
    fg.set_defaults(func=cmd_memories_forget)


def _print(out: Any) -> int:
    print(json.dumps(out, indent=2))
    return 0


def cmd_agents_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        out = client.agents(limit=args.limit, cursor=args.cursor)
    if args.json:
        return _print(out)
    print(f"{'agent':28} {'memories':>8} {'turns':>6} {'episodes':>8} {'sessions':>8}  last activity")
    for a in out["agents"]:
        print(
            f"{a['agent_id']:28} {a['memories']:8} {a['turns']:6} {a['episodes']:8} {a['sessions']:8}"
            f"  {a['last_activity_at'][:19]}"
        )
    if out["next_cursor"]:
        print(f"(more: --cursor {out['next_cursor']})")
    return 0


def cmd_agents_subjects(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        out = client.agent_subjects(args.agent, limit=args.limit, cursor=args.cursor)
    if args.json:
        return _print(out)
    for s in out["subjects"]:
        print(
            f"{s['subject']:32} memories={s['memories']} turns={s['turns']} episodes={s['episodes']} "
            f"sessions={s['sessions']}"
        )
    if out["next_cursor"]:
        print(f"(more: --cursor {out['next_cursor']})")
    return 0


def cmd_agents_erase(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        return _print(client.erase_agent(args.agent))


def cmd_subject_forget(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        return _print(client.forget_subject(args.subject, keep_turns=args.keep_turns))


def cmd_memories_add(settings: Settings, args: argparse.Namespace) -> int:
    fields = {"kind": args.kind} | ({"subject": args.subject} if args.subject else {})
    with common.client(settings) as client:
        out = client.add_memory(args.agent, args.text, **fields)
    if args.json:
        return _print(out)
    print(out["id"])
    return 0


def cmd_memories_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        out = client.list_memories(args.agent, subject=args.subject, limit=args.limit)
    if args.json:
        return _print(out)
    for m in out["memories"]:
        who = f" [{m['subject']}]" if m.get("subject") else ""
        print(f"{m['id']}  ({m['kind']}, {m['tier']}){who} {m['text']}")
    return 0


def cmd_memories_get(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        return _print(client.get_memory(args.agent, args.memory_id))


def cmd_memories_forget(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        return _print(client.forget(args.agent, memory_ids=args.memory_id))
