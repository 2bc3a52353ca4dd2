"""`python -m memworker.api.serve`: the API as N uvicorn processes on one port (what
`memworker up --api-workers N` and compose run).

Why not `uvicorn --workers N`: its supervisor binds the port itself with a socket whose
accepted connections report protocol 0, so asyncio never sets TCP_NODELAY on them, and every
keep-alive response after the first waits ~40 ms for the client's delayed ACK (Nagle;
https://github.com/encode/uvicorn/issues/3149): 50 ms per recall at one client where one process answers in 6 ms. Here
the listening socket gets TCP_NODELAY, which Linux hands on to every connection it accepts.

Forwarded headers (X-Forwarded-For, -Proto) count only from MEMWORKER_TRUSTED_PROXIES: uvicorn
by itself believes them from 127.0.0.1, so any local caller could pick its address (dodging
the failed-authentication bucket, or spending another address's)."""

from __future__ import annotations

import argparse
import os
import socket
from typing import TypedDict

import uvicorn
from uvicorn.supervisors import Multiprocess

from memworker.settings import Settings

APP = "memworker.api.app:create_app"


class ProxyOptions(TypedDict):
    """uvicorn.Config's forwarded-header keywords."""

    proxy_headers: bool
    forwarded_allow_ips: list[str]


def proxy_options(settings: Settings) -> ProxyOptions:
    """uvicorn's forwarded-header options: on only for the configured proxies, off otherwise."""
    proxies = settings.trusted_proxy_list()
    return ProxyOptions(proxy_headers=bool(proxies), forwarded_allow_ips=proxies or ["127.0.0.1"])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m memworker.api.serve", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8420)
    p.add_argument("--workers", type=int, default=1, help="API processes sharing the port")
    p.add_argument("--log-level", default="warning")
    args = p.parse_args(argv)
    config = uvicorn.Config(
        APP,
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        # named, not "auto": a missing uvloop or httptools fails at start instead of falling
        # back to asyncio and h11, which cost more CPU per request
        loop="uvloop",
        http="httptools",
        # a line per request is formatted even when the level drops it: only at info and below
        access_log=args.log_level.lower() in ("info", "debug", "trace"),
        **proxy_options(Settings.from_env(os.environ)),
    )
    if args.workers <= 1:  # asyncio builds this listener itself, and sets TCP_NODELAY per connection
        uvicorn.Server(config).run()
        return
    sock = config.bind_socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections
    Multiprocess(config, sockets=[sock]).run()


if __name__ == "__main__":
    main()
