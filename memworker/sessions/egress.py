"""Outbound HTTP to tenant-supplied URLs (webhooks), safe by construction.

A tenant names the URL; the request leaves from inside the deployment, next to Postgres,
Redis, Flower and whatever else listens on loopback or a private network. So a URL is
checked twice: at registration (422) and at every delivery, because DNS can change after
it. A delivery resolves the host once, checks every address, and connects to the checked
address (the URL's host becomes the Host header and the TLS server name), so nothing can
rebind the name between the check and the connect.

Refused: loopback, private, shared (CGNAT), link-local, site-local, multicast, unspecified,
reserved and documentation addresses, IPv4 and IPv6 (any IPv6 address outside 2000::/3),
IPv6 forms that embed a non-public IPv4 address (mapped, 6to4, NAT64), every numeric IPv4
spelling (2130706433, 127.1, 0x7f000001, 0177.0.0.1), the names localhost and *.localhost,
and URLs with credentials. An operator allows internal
receivers by host name or address/CIDR (Settings.webhook_allow_hosts)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from memworker import errors

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[IPAddress]]

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# IPv6 unicast on the public internet is 2000::/3 alone (IANA); everything outside it is
# special, whatever Python's tables say (they count site-local fec0::/10 as global).
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
# Inside the public ranges but never a public receiver, and missed by Python's tables.
_NOT_GLOBAL: tuple[IPNetwork, ...] = (
    ipaddress.IPv6Network("3fff::/20"),  # documentation (RFC 9637)
    ipaddress.IPv4Network("192.88.99.0/24"),  # deprecated 6to4 relay anycast (RFC 7526)
)
NOT_PUBLIC = "a loopback, private, link-local, multicast, unspecified or reserved address"


class Refused(errors.InvalidInput):
    """The URL is not one memworker sends to (credentials, or a non-public address)."""


class Unresolved(errors.InvalidInput):
    """The host name does not resolve (now: it may later)."""


@dataclass(frozen=True)
class Allow:
    """The operator's exceptions: host names (exact, case-insensitive) and networks."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Allow:
        """'hooks.internal, 10.0.0.0/8, 127.0.0.1' -> Allow. Raises ValueError on a bad entry."""
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in spec.split(","):
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                if "/" in entry or any(c in entry for c in ":@ "):
                    raise ValueError(f"not a host name, address or CIDR: {raw.strip()!r}") from None
                hosts.add(entry)
        return cls(frozenset(hosts), tuple(networks))

    def host(self, name: str) -> bool:
        return name.lower().rstrip(".") in self.hosts

    def address(self, ip: IPAddress) -> bool:
        return any(ip.version == n.version and ip in n for n in self.networks)


def is_public(ip: IPAddress) -> bool:
    """Is this an address on the public internet (and only that)?"""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public(embedded)
        if ip.teredo is not None or ip not in _IPV6_GLOBAL_UNICAST:
            return False
    if any(ip.version == n.version and ip in n for n in _NOT_GLOBAL):
        return False
    return ip.is_global and not (
        ip.is_multicast or ip.is_reserved or ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_unspecified
    )


def literal(host: str) -> IPAddress | None:
    """The address a host that is a number stands for, in any spelling a resolver accepts
    (inet_aton: 2130706433, 127.1, 0x7f000001, 0177.0.0.1), else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not host or ":" in host or not all(c in "0123456789abcdefx." for c in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def system_resolve(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives for the host."""
    out: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in out:
            out.append(ip)
    return out


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (address) and what to call it (the URL's host)."""

    url: str
    address: IPAddress


def check(url: str, allow: Allow, resolve: Resolver = system_resolve) -> Target:
    """Resolve the URL's host and check every address; raises Refused or Unresolved."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise Refused(f"webhook url is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused("webhook url must start with http:// or https://")
    if "@" in parts.netloc:
        raise Refused("webhook url must not carry credentials (user:password@); sign with the webhook secret")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise Refused("webhook url has no host")
    ip = literal(host)
    if ip is not None:
        addresses = [ip]
    elif (host == "localhost" or host.endswith(".localhost")) and not allow.host(host):
        raise Refused(f"webhook url must point at a public address: {host!r} is loopback")
    else:
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError):
            addresses = []
        if not addresses:
            raise Unresolved(f"webhook host {host!r} does not resolve")
    if not allow.host(host):
        for a in addresses:
            if not is_public(a) and not allow.address(a):
                raise Refused(f"webhook url must point at a public address: {host!r} is {NOT_PUBLIC}")
    return Target(url, addresses[0])


def post(target: Target, body: bytes, headers: Mapping[str, str], timeout_s: float) -> int:
    """POST to the checked address (never a second lookup), the URL's host in the Host header
    and as the TLS server name; returns the status. Redirects are not followed, proxies
    from the environment not used (they would connect elsewhere), the body not read."""
    url = httpx.URL(target.url)
    pinned = url.copy_with(host=str(target.address))
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    with httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False) as client:
        request = client.build_request(
            "POST",
            pinned,
            content=body,
            headers={**headers, "Host": url.netloc.decode("ascii")},
            extensions=extensions,
        )
        response = client.send(request, stream=True)
        response.close()
        return response.status_code
