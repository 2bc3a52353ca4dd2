"""memworker: the operator's command line. Configuration comes from MEMWORKER_* variables
(see `memworker check` and the README's table); flags override them."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, TypedDict

from memworker import errors, keys
from memworker import settings as settings_mod
from memworker.cli import admin, common, consolidation, demo, lifecycle, mcp, portability, proposals, sessions
from memworker.domain import memories
from memworker.fleet import pools
from memworker.settings import Settings
from memworker.storage import db, migrate
from memworker.tenancy import service as tenancy

# Modules that add subcommands of their own (a `register(subparsers)` function each).
COMMAND_MODULES = [
    consolidation,  # sleep
    lifecycle,  # retention and policy
    sessions,  # sessions, context, archives, webhooks
    demo,  # the fleet simulator
    mcp,  # the Model Context Protocol server
    proposals,  # sleep's proposals to shared pools
    admin,  # agents, subject requests and memories through the API
    portability,  # export and import
]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = Settings.from_env(os.environ)
        if args.data_dir:
            settings = settings.replace(data_dir=Path(args.data_dir))
        return int(args.func(settings, args) or 0)
    except errors.MemworkerError as exc:
        if args.verbose:
            raise
        cause = f" (caused by: {exc.__cause__})" if exc.__cause__ and str(exc.__cause__) not in str(exc) else ""
        print(f"error: {exc}{cause}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    env_rows = "\n".join(f"  {name:<36} {default}" for name, default in settings_mod.describe())
    p = argparse.ArgumentParser(
        prog="memworker",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="memworker: a memory service for fleets of LLM agents.",
        epilog=f"environment (defaults):\n{env_rows}",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging and full tracebacks")
    p.add_argument("--data-dir", help="data folder of the embedded stack (MEMWORKER_DATA_DIR)")
    sub = p.add_subparsers(metavar="COMMAND")

    _add_stack_commands(sub)
    _add_access_commands(sub)
    _add_memory_commands(sub)
    for module in COMMAND_MODULES:  # each adds its own subcommands: register(sub)
        module.register(sub)
    return p


def _add_stack_commands(sub: Any) -> None:
    """The stack: run it, migrate it, check its configuration."""
    up = sub.add_parser("up", help="run the whole system: Postgres, Redis, API, workers, beat, Flower")
    up.add_argument("--workers", type=int, help="Celery worker processes (default 1)")
    up.add_argument("--api-workers", type=int, help="API processes (default: one per CPU core, at most 4)")
    up.add_argument("--port", type=int, help="API port (default 8420)")
    up.add_argument("--flower-port", type=int, help="Flower port (default 5555)")
    up.add_argument(
        "--replica",
        action="store_true",
        help="also a streaming replica of the embedded Postgres, serving recall, context and lists (docs/scaling.md)",
    )
    up.set_defaults(func=cmd_up)

    m = sub.add_parser("migrate", help="apply pending SQL migrations (as the owner role)")
    m.add_argument("--status", action="store_true", help="list migrations and whether each is applied")
    m.add_argument(
        "--json", action="store_true", help='{"applied": [names applied now]}; with --status: [{"name", "state"}]'
    )
    m.set_defaults(func=cmd_migrate)

    c = sub.add_parser("check", help="report configuration problems and how to fix them")
    c.set_defaults(func=cmd_check)


def _add_access_commands(sub: Any) -> None:
    """Tenants and their API keys."""
    t = sub.add_parser("tenant", help="create or list tenants").add_subparsers(metavar="ACTION")
    tc = t.add_parser("create", help="create a tenant and print its first API key (shown once)")
    tc.add_argument("name")
    tc.add_argument("--json", action="store_true", help='print exactly {"tenant_id", "api_key"}')
    tc.set_defaults(func=cmd_tenant_create)
    tl = t.add_parser("list", help="list tenants")
    tl.add_argument("--json", action="store_true", help='[{"tenant_id", "name", "created_at"}]')
    tl.set_defaults(func=cmd_tenant_list)

    k = sub.add_parser("key", help="create, list or revoke API keys").add_subparsers(metavar="ACTION")
    kc = k.add_parser("create", help="create an API key (shown once)")
    kc.add_argument("--tenant", required=True)
    kc.add_argument("--name", default="")
    kc.add_argument(
        "--scopes",
        default=",".join(keys.DEFAULT_SCOPES),
        help=f"comma list of {','.join(keys.SCOPES)} (default: all but keys, which is given only by name)",
    )
    kc.add_argument("--agents", help="comma list of agent ids this key may touch (default all)")
    kc.add_argument(
        "--pools", help="comma list of shared pools this key may read or write directly (with --agents: limited)"
    )
    kc.add_argument("--expires-days", type=float, help="expire after this many days (> 0; omit: never)")
    kc.add_argument("--json", action="store_true")
    kc.set_defaults(func=cmd_key_create)
    kl = k.add_parser("list", help="list a tenant's keys (prefixes only), with the agents and pools each may touch")
    kl.add_argument("--tenant", required=True)
    kl.add_argument("--json", action="store_true", help="one object per key; agents and pools null: all")
    kl.set_defaults(func=cmd_key_list)
    kr = k.add_parser("revoke", help="revoke a key by its prefix")
    kr.add_argument("--tenant", required=True)
    kr.add_argument("prefix")
    kr.set_defaults(func=cmd_key_revoke)


def _add_memory_commands(sub: Any) -> None:
    """An agent's memory: recall it, list or replay episodes, usage."""
    r = sub.add_parser("recall", help="ask an agent's memory (through the API)")
    r.add_argument(
        "--agent", required=True, action="append", help="the agent; repeat it for one ranked list over several agents"
    )
    r.add_argument(
        "--subject", help="whom the recall is for: that subject's memories and the general ones, never another's"
    )
    r.add_argument("-k", type=int, default=5)
    r.add_argument("--explain", action="store_true", help="show each signal behind the score")
    r.add_argument("--json", action="store_true")
    r.add_argument("query")
    r.set_defaults(func=cmd_recall)

    e = sub.add_parser("episodes", help="list episodes or replay dead ones").add_subparsers(metavar="ACTION")
    el = e.add_parser("list", help="list recent episodes")
    el.add_argument("--status", choices=list(memories.EPISODE_STATUSES))
    el.add_argument("--agent")
    el.add_argument("--limit", type=int, default=50)
    el.add_argument("--json", action="store_true", help="print the API's JSON answer")
    el.set_defaults(func=cmd_episodes_list)
    er = e.add_parser("replay", help="queue a dead or failed episode again")
    er.add_argument("--agent", required=True)
    er.add_argument("episode_id")
    er.set_defaults(func=cmd_episodes_replay)

    u = sub.add_parser("usage", help="episodes, LLM calls and tokens per agent")
    u.add_argument("--agent")
    u.add_argument("--json", action="store_true", help="print the API's JSON answer")
    u.set_defaults(func=cmd_usage)


# --- commands -------------------------------------------------------------------------------


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    from memworker.local.stack import Stack

    changes = {
        k: v
        for k, v in {
            "workers": args.workers,
            "api_workers": args.api_workers,
            "api_port": args.port,
            "flower_port": args.flower_port,
        }.items()
        if v is not None
    }
    settings = settings.replace(**changes)
    settings.validate()
    logging.getLogger().setLevel(settings.log_level)
    return Stack(settings, replica=args.replica).run()


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    with common.owner_url(settings) as url:
        if args.status:
            rows = migrate.status(url)
        else:
            applied = migrate.migrate(url)
    if args.status and args.json:
        print(json.dumps([{"name": name, "state": state} for name, state in rows], indent=2))
    elif args.status:
        for name, state in rows:
            print(f"{state:8} {name}")
    elif args.json:
        print(json.dumps({"applied": applied}))
    else:
        print("applied: " + ", ".join(applied) if applied else "up to date")
    return 0


def cmd_check(settings: Settings, args: argparse.Namespace) -> int:
    from memworker.models import embeddings

    problems = []
    try:
        emb = embeddings.for_settings(settings)
        print(f"ok    embedding model {settings.embedding_model} (dim {emb.dim}, backend {settings.embedding_backend})")
        embeddings.for_queries(settings, emb).embed(["ready"])  # the int8 copy too, made once if missing
        print(f"ok    query embeddings {settings.query_precision}")
    except errors.MemworkerError as exc:
        problems.append(str(exc))
    try:
        with common.owner_url(settings) as url:
            pending = [n for n, s in migrate.status(url) if s != "applied"]
            if pending:
                problems.append(f"migrations not applied: {pending}; run `memworker migrate`")
            else:
                print("ok    database schema up to date")
    except errors.MemworkerError as exc:
        problems.append(str(exc))
    if settings.llm_base_url:
        print(f"ok    LLM reflector {settings.llm_model} at {settings.llm_base_url}")
    else:
        print("ok    offline reflector (set MEMWORKER_LLM_BASE_URL for an LLM)")
    for p in problems:
        print(f"FAIL  {p}")
    return 1 if problems else 0


def cmd_tenant_create(settings: Settings, args: argparse.Namespace) -> int:
    with common.owner_url(settings) as url, db.connect(url) as conn:
        tenant, key = tenancy.create_tenant(conn, args.name)
    if args.json:
        print(json.dumps({"tenant_id": str(tenant.id), "api_key": key}))
    else:
        print(f"tenant  {args.name}  {tenant.id}\napi key {key}\n(shown once: store it now)")
    return 0


def cmd_tenant_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.owner_url(settings) as url, db.connect(url) as conn:
        found = tenancy.tenants(conn)
    if args.json:
        rows = [{"tenant_id": str(t.id), "name": t.name, "created_at": t.created_at.isoformat()} for t in found]
        print(json.dumps(rows, indent=2))
        return 0
    for t in found:
        print(f"{t.id}  {t.name}  {t.created_at:%Y-%m-%d}")
    return 0


def _key_scope(agents: str | None, pool_names: str | None) -> list[str] | None:
    """A key's agent list: the agents, and each pool as its owner id (memworker/fleet/pools.py);
    None (every agent and pool) when neither is given."""
    if not agents and not pool_names:
        return None
    named = [a for a in (agents or "").split(",") if a]
    return named + [pools.owner(n.strip()) for n in (pool_names or "").split(",") if n.strip()]


def cmd_key_create(settings: Settings, args: argparse.Namespace) -> int:
    # `is not None`: 0 is an error (keys.expiry_in), not "never expires"
    expires = keys.expiry_in(args.expires_days) if args.expires_days is not None else None
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        key, row = keys.create(
            conn,
            tenant_id=tenant.id,
            name=args.name,
            scopes=tuple(s.strip() for s in args.scopes.split(",") if s.strip()),
            agent_ids=_key_scope(args.agents, args.pools),
            expires_at=expires,
        )
    if args.json:
        print(json.dumps({"tenant_id": str(tenant.id), "api_key": key, "prefix": row.prefix}))
    else:
        print(f"api key {key}\nprefix  {row.prefix}  scopes {','.join(row.scopes)}\n(shown once)")
    return 0


class KeyJson(TypedDict):
    """A key as `key list --json` prints it (never its secret)."""

    prefix: str
    name: str
    state: str  # active | expires | revoked
    scopes: list[str]
    agents: list[str] | None
    pools: list[str] | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None


def _key_json(k: tenancy.ApiKey) -> KeyJson:
    """A key as `key list --json` prints it: agents and pools None when it may touch all."""
    agents = None if k.agent_ids is None else [a for a in k.agent_ids if pools.name_of(a) is None]
    named = None if k.agent_ids is None else [n for n in map(pools.name_of, k.agent_ids) if n is not None]
    state = "revoked" if k.revoked_at else ("expires" if k.expires_at else "active")
    return {
        "prefix": k.prefix,
        "name": k.name,
        "state": state,
        "scopes": k.scopes,
        "agents": agents,
        "pools": named,
        "created_at": k.created_at.isoformat(),
        "expires_at": k.expires_at.isoformat() if k.expires_at else None,
        "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
    }


def cmd_key_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        found = [_key_json(k) for k in tenancy.api_keys(conn, tenant.id)]
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    for k in found:
        expires = k["expires_at"]
        state = f"expires {expires[:10]}" if k["state"] == "expires" and expires else k["state"]
        if k["agents"] is None:
            reach = "all agents and pools"
        else:  # a key limited to some agents reaches only the pools it names
            reach = f"agents {','.join(k['agents']) or '-'} pools {','.join(k['pools'] or []) or '-'}"
        print(f"{k['prefix']}  {state:18} {','.join(k['scopes'])}  {reach}  {k['name']}")
    return 0


def cmd_key_revoke(settings: Settings, args: argparse.Namespace) -> int:
    with common.tenant_conn(settings, args.tenant) as (conn, tenant):
        tenancy.revoke_api_key(conn, tenant.id, args.prefix)
    common.invalidate_caches(settings)
    print(f"revoked {args.prefix}")
    return 0


def cmd_recall(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        options = {"explain": args.explain} | ({"subject": args.subject} if args.subject else {})
        if len(args.agent) == 1:
            out = client.recall(args.agent[0], args.query, k=args.k, **options)
        else:
            out = client.recall_agents(args.agent, args.query, k=args.k, **options)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for i, m in enumerate(out["memories"], 1):
        who = f"{m['agent_id']}: " if len(args.agent) > 1 else ""
        print(f"{i:2}. [{m['score']:.3f}] ({m['kind']}, {m['tier']}) {who}{m['text']}")
        if args.explain:
            print(
                "     "
                + "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in m["signals"].items())
            )
    print(f"({len(out['memories'])} memories in {out['took_ms']:.1f} ms)")
    return 0


def cmd_episodes_list(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        found = client.list_episodes(status=args.status, agent_id=args.agent, limit=args.limit)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    for ep in found:
        err = f"  {ep['last_error'][:80]}" if ep.get("last_error") else ""
        print(f"{ep['episode_id']}  {ep['agent_id']:20} {ep['status']:10} attempts={ep['attempts']}{err}")
    return 0


def cmd_episodes_replay(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        client.replay_episode(args.agent, args.episode_id)
    print(f"queued {args.episode_id} again")
    return 0


def cmd_usage(settings: Settings, args: argparse.Namespace) -> int:
    with common.client(settings) as client:
        out = client.usage(args.agent)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'agent':24} {'episodes':>8} {'stored':>7} {'dead':>5} {'llm':>6} {'tok in':>8} {'tok out':>8}")
    for a in out["agents"]:
        print(
            f"{a['agent_id']:24} {a['episodes']:8} {a['stored']:7} {a['dead']:5} {a['llm_calls']:6} "
            f"{a['tokens_in']:8} {a['tokens_out']:8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
