"""`memworker mcp`: serve an agent's memory to any Model Context Protocol client (Claude
Desktop, IDE agents, agent frameworks) over stdio or streamable HTTP (docs/mcp.md)."""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
from pathlib import Path
from typing import Any

from memworker import errors
from memworker.cli import common
from memworker.domain import memories
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
to stderr. --transport http serves streamable HTTP at http://HOST:PORT/mcp, and every
request must carry `Authorization: Bearer <token>` (else 401): the token is read from
--token-file or MEMWORKER_MCP_TOKEN, or generated at start and printed on stderr. The
server acts with the API key, so reaching its port must not be enough; --no-auth turns the
check off (for when something in front authenticates callers). It listens on loopback (the
default); another address needs --allow-remote."""

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
    p.add_argument(
        "--subject",
        help="bind to this subject (an end user, a customer): writes are about it, reads return its memories and "
        "the agent's general ones, never another subject's, and only its own sessions are reached",
    )
    p.add_argument("--api-url", help="the memworker API (default: the running stack's, else MEMWORKER_API_HOST:PORT)")
    p.add_argument("--api-key", help="a tenant API key (default: MEMWORKER_API_KEY, else `memworker up`'s dev key)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    p.add_argument("--host", default="127.0.0.1", help="address for --transport http (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8421, help="port for --transport http (default: 8421)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --transport http listen beyond loopback",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        help="--transport http: the bearer token clients must send (default: MEMWORKER_MCP_TOKEN, else generated)",
    )
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="--transport http without a bearer token: whoever reaches the port acts with the API key",
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
    if args.agent is not None and not memories.AGENT_ID.fullmatch(args.agent):
        raise errors.InvalidInput(f"--agent {args.agent!r}: letters, digits and ._:@- (at most 128)")
    if args.subject is not None and not memories.SUBJECT.fullmatch(args.subject):
        raise errors.InvalidInput(f"--subject {args.subject!r}: letters, digits and ._:@- (at most 128)")
    if args.transport == "http" and not 0 < args.port < 65536:
        raise errors.InvalidInput(f"--port {args.port}: give 1..65535")
    if args.transport == "http" and args.host not in LOOPBACK and not args.allow_remote:
        raise errors.InvalidInput(
            f"--host {args.host}: MCP over HTTP acts with the API key for whoever holds its token; stay on "
            "127.0.0.1, or add --allow-remote (and put TLS in front: the token travels in a header)"
        )
    if args.no_auth and args.token_file is not None:
        raise errors.InvalidInput("give --token-file or --no-auth, not both")


def http_token(settings: Settings, args: argparse.Namespace) -> tuple[str | None, bool]:
    """(the bearer token HTTP clients must send, whether it was generated here); (None, False)
    with --no-auth. Read from --token-file, else MEMWORKER_MCP_TOKEN, else made at random."""
    if args.no_auth:
        return None, False
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise errors.ConfigError(f"--token-file {args.token_file}: {exc.strerror}") from None
        if len(token) < 16:
            raise errors.ConfigError(f"--token-file {args.token_file}: the token must be at least 16 characters")
        return token, False
    if settings.mcp_token:
        if len(settings.mcp_token) < 16:
            raise errors.ConfigError("MEMWORKER_MCP_TOKEN must be at least 16 characters")
        return settings.mcp_token, False
    return secrets.token_urlsafe(32), True


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    from memworker.integrations import mcp_server

    _check(args)
    client = api_client(settings, args)
    server = mcp_server.build(client, agent=args.agent, subject=args.subject)
    with client:
        if args.transport == "stdio":
            server.run("stdio")
            return 0
        import uvicorn

        token, generated = http_token(settings, args)
        if token is None:
            logger.warning("MCP over HTTP without a token (--no-auth): whoever reaches the port acts with the key")
        print(f"memworker MCP server at http://{args.host}:{args.port}/mcp", file=sys.stderr)
        if generated:
            print(f"bearer token (send 'Authorization: Bearer <token>'): {token}", file=sys.stderr, flush=True)
        app = mcp_server.http_app(server, host=args.host, token=token)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
