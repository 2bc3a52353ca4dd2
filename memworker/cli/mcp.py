"""`memworker mcp`: serve an agent's memory to any Model Context Protocol client (Claude
Desktop, IDE agents, agent frameworks) over stdio or streamable HTTP (docs/mcp.md)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from memworker import errors, memories
from memworker.cli import common
from memworker.settings import Settings

logger = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")

DESCRIPTION = """\
Run a Model Context Protocol server whose tools (remember, recall, context, forget,
open_session, working_memory, plan, update_step) call memworker's HTTP API with one
tenant's API key: the MCP client can do exactly what that key may do.

The API URL and key are found as for the other API commands: MEMWORKER_API_KEY (or the
dev key of a running `memworker up`) and the running stack's URL; --api-url and --api-key
override them. With --api-url the key must come from --api-key or MEMWORKER_API_KEY.

stdio (the default) is what desktop clients launch: stdout carries the protocol, logs go
to stderr. --transport http serves streamable HTTP at http://HOST:PORT/mcp without any
authentication of its own: whoever reaches the port acts with the key, so keep it on
loopback (the default); another address needs --allow-remote, for when something in front
of it authenticates callers."""

EXAMPLE = """\
client configuration (Claude Desktop's claude_desktop_config.json, or any MCP client):
  {"mcpServers": {"memory": {"command": "memworker", "args": ["mcp", "--agent", "support-bot"],
                             "env": {"MEMWORKER_API_KEY": "mwk_..."}}}}"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve an agent's memory as a Model Context Protocol server (stdio or HTTP)",
        description=DESCRIPTION,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--agent", help="bind to this agent: tools act for it alone (default: each call names its agent)")
    p.add_argument("--api-url", help="the memworker API (default: the running stack's, else MEMWORKER_API_HOST:PORT)")
    p.add_argument("--api-key", help="a tenant API key (default: MEMWORKER_API_KEY, else `memworker up`'s dev key)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    p.add_argument("--host", default="127.0.0.1", help="address for --transport http (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8421, help="port for --transport http (default: 8421)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --transport http listen beyond loopback (it has no authentication of its own)",
    )
    p.set_defaults(func=cmd_mcp)


def api_client(settings: Settings, args: argparse.Namespace) -> Any:
    """A memworker.sdk.Client, from the flags or as the other API commands find it."""
    from memworker.sdk import Client

    if args.api_key:
        settings = settings.replace(api_key=args.api_key)
    if not args.api_url:
        return common.client(settings)
    if not settings.api_key:
        # a local dev key means nothing to another server: ask rather than guess
        raise errors.ConfigError("with --api-url give --api-key or set MEMWORKER_API_KEY")
    return Client(args.api_url, settings.api_key)


def _check(args: argparse.Namespace) -> None:
    if args.agent is not None and not memories.AGENT_ID.match(args.agent):
        raise errors.InvalidInput(f"--agent {args.agent!r}: letters, digits and ._:@- (at most 128)")
    if args.transport == "http" and not 0 < args.port < 65536:
        raise errors.InvalidInput(f"--port {args.port}: give 1..65535")
    if args.transport == "http" and args.host not in LOOPBACK and not args.allow_remote:
        raise errors.InvalidInput(
            f"--host {args.host}: MCP over HTTP has no authentication of its own (whoever reaches it acts "
            "with the key); stay on 127.0.0.1, or add --allow-remote when something in front authenticates"
        )


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    from memworker.integrations import mcp_server

    _check(args)
    client = api_client(settings, args)
    server = mcp_server.build(client, agent=args.agent)
    with client:
        if args.transport == "stdio":
            server.run("stdio")
            return 0
        if args.host not in LOOPBACK:
            logger.warning("MCP over HTTP on %s has no authentication: whoever reaches it acts with the key", args.host)
        print(f"memworker MCP server at http://{args.host}:{args.port}/mcp", file=sys.stderr)
        server.run("streamable-http", host=args.host, port=args.port)
    return 0
