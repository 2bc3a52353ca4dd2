"""`memworker proposals list|approve|reject --pool P`: what sleep proposed to a shared pool
(policy pools_propose 'review'), decided by a person, through the API (MEMWORKER_API_KEY, or
the dev key of a running `memworker up`). See memworker/fleet/proposals.py."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memworker.cli import common
from memworker.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser("proposals", help="what sleep proposed to a shared pool: list, approve, reject")
    a = p.add_subparsers(metavar="ACTION")
    ls = a.add_parser("list", help="a pool's proposals, oldest first")
    ls.add_argument("--pool", required=True)
    ls.add_argument("--status", choices=("open", "approved", "rejected", "all"), default="open")
    ls.add_argument("--limit", type=int, default=100)
    ls.add_argument("--json", action="store_true", help="print the API's JSON answer")
    ls.set_defaults(func=cmd_list)
    for name, helptext, func in (
        ("approve", "share a proposal into its pool, naming every source", cmd_approve),
        ("reject", "reject a proposal: it is not proposed again", cmd_reject),
    ):
        d = a.add_parser(name, help=helptext)
        d.add_argument("--pool", required=True)
        d.add_argument("--reason", default="")
        d.add_argument("--json", action="store_true", help="print the API's JSON answer")
        d.add_argument("proposal_id")
        d.set_defaults(func=func)


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        found = client.pool_proposals(args.pool, status=args.status, limit=args.limit)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    for p in found:
        text = p["text"] if p["text"] is not None else "(the proposing memory is gone)"
        print(f"{p['id']}  {p['status']}  {p['agent_id']} (+{len(p['sources']) - 1} more)  {text}")
    print(f"({len(found)} {args.status} proposal(s) in pool {args.pool})")
    return 0


def cmd_approve(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        out = client.approve_pool_proposal(args.pool, args.proposal_id, reason=args.reason)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        memory = out["memory"]["id"] if out["memory"] else "(since deleted)"
        print(f"approved: {out['outcome']}, pool memory {memory}")
    return 0


def cmd_reject(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        out = client.reject_pool_proposal(args.pool, args.proposal_id, reason=args.reason)
    print(json.dumps(out, indent=2) if args.json else f"rejected: {out['proposal']['id']}")
    return 0
