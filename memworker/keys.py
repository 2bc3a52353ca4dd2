"""API keys: 'mwk_<prefix>_<secret>' with 256 random bits, stored as a sha256 hash only,
looked up by prefix and compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from memworker import errors
from memworker.storage import core_db, db
from memworker.storage.db import Conn

SCOPES = ("episodes:write", "memories:read", "memories:write", "admin", "erase", "keys")
# What a key gets when its scopes are not named (`memworker tenant create`, `memworker up`'s dev
# key, `memworker key create` without --scopes): every scope but `keys`, the power to mint and
# revoke keys over HTTP, which a key has only when the operator names it (docs/security.md).
DEFAULT_SCOPES = tuple(s for s in SCOPES if s != "keys")


@dataclass(frozen=True)
class Principal:
    """Who is calling: one tenant, its scopes, and optionally the agents it may touch."""

    tenant_id: UUID
    key_id: UUID
    scopes: frozenset[str]
    agent_ids: frozenset[str] | None
    expires_at: datetime | None = None

    def require(self, scope: str, agent_id: str | None = None) -> None:
        if scope not in self.scopes:
            raise errors.Forbidden(f"this key lacks the {scope!r} scope")
        if agent_id is not None and self.agent_ids is not None and agent_id not in self.agent_ids:
            raise errors.NotFound("agent not found")  # do not confirm it exists


def bearer_token(authorization: str) -> str | None:
    """The token of an Authorization header `Bearer <token>` (the scheme in any case, the
    token without surrounding spaces), or None for no header, another scheme or no token.
    Every reader of a bearer token (API keys, the metrics token) parses it here, alike."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def generate() -> tuple[str, str, bytes]:
    """(full key, prefix, hash). The full key is shown once and never stored."""
    prefix = secrets.token_hex(6)
    key = f"mwk_{prefix}_{secrets.token_urlsafe(32)}"
    return key, prefix, hash_key(key)


def prefix_of(key: str) -> str | None:
    """The lookup prefix of a well-formed key, else None (the secret may itself hold '_')."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != "mwk" or not parts[1] or not parts[2]:
        return None
    return parts[1]


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


MAX_EXPIRY_DAYS = 36_500  # a hundred years: beyond that, ask for a key that never expires


def expiry_in(days: float, *, now: datetime | None = None) -> datetime:
    """The expiry `days` from now. Raises InvalidInput for zero, negative, not-a-number or
    absurd values: `--expires-days 0` must not quietly make a key that never expires."""
    if not math.isfinite(days) or days <= 0:
        raise errors.InvalidInput(f"expires in {days} days: give a positive number of days (omit it for no expiry)")
    if days > MAX_EXPIRY_DAYS:
        raise errors.InvalidInput(f"expires in {days} days: at most {MAX_EXPIRY_DAYS} (omit it for no expiry)")
    return (now or datetime.now(UTC)) + timedelta(days=days)


def check_expiry(expires_at: datetime, *, now: datetime | None = None) -> None:
    """Raises InvalidInput unless expires_at is a time with a zone, in the future."""
    if expires_at.tzinfo is None:
        raise errors.InvalidInput("expires_at needs a time zone")
    if expires_at <= (now or datetime.now(UTC)):
        raise errors.InvalidInput(f"expires_at {expires_at.isoformat()} is not in the future")


def create(
    conn: Conn,
    *,
    tenant_id: UUID,
    name: str = "",
    scopes: tuple[str, ...] = DEFAULT_SCOPES,
    agent_ids: list[str] | None = None,
    expires_at: datetime | None = None,
) -> tuple[str, core_db.ApiKey]:
    """Create a key for the tenant (the connection must be bound to it); returns (key, row).
    Raises InvalidInput for an unknown scope, or an expiry that is not in the future."""
    bad = [s for s in scopes if s not in SCOPES]
    if bad:
        raise errors.InvalidInput(f"unknown scopes {bad}; choose from {list(SCOPES)}")
    if expires_at is not None:
        check_expiry(expires_at)
    key, prefix, digest = generate()
    row = core_db.insert_api_key(
        conn,
        tenant_id=tenant_id,
        prefix=prefix,
        key_hash=digest,
        name=name,
        scopes=list(scopes),
        agent_ids=agent_ids,
        expires_at=expires_at,
    )
    return key, row


def authenticate(pool: Any, key: str) -> Principal:
    """Raises Unauthorized for a missing, malformed, unknown, expired or revoked key."""
    prefix = prefix_of(key)
    if prefix is None:
        raise errors.Unauthorized("invalid api key")
    with db.system_tx(pool) as conn:
        row = core_db.authenticate(conn, prefix=prefix)
    if row is None or not hmac.compare_digest(bytes(row.key_hash), hash_key(key)):
        raise errors.Unauthorized("invalid api key")
    if row.revoked_at is not None:
        raise errors.Unauthorized("api key revoked")
    if row.expires_at is not None and row.expires_at <= datetime.now(UTC):
        raise errors.Unauthorized("api key expired")
    return Principal(
        row.tenant_id,
        row.key_id,
        frozenset(row.scopes),
        frozenset(row.agent_ids) if row.agent_ids is not None else None,
        row.expires_at,
    )


class KeyCache:
    """Recently verified keys, so a hot caller does not cost a lookup per request. A revoked
    or expired key stops working within ttl_s; failures are never cached."""

    def __init__(self, ttl_s: float = 10.0, size: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._entries: dict[bytes, tuple[float, Principal, datetime | None]] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def get(self, key: str, verify: Callable[[str], Principal]) -> Principal:
        digest = hash_key(key)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(digest)
        if entry and entry[0] > now and (entry[2] is None or entry[2] > datetime.now(UTC)):
            return entry[1]
        principal = verify(key)
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[digest] = (now + self.ttl_s, principal, principal.expires_at)
        return principal


# --- keys minted, listed and revoked by a key (POST/GET/DELETE /v1/keys) -------------------------


def check_mintable(
    p: Principal, *, scopes: tuple[str, ...], agent_ids: list[str] | None, expires_at: datetime | None
) -> None:
    """Raises Forbidden unless a key with these powers is within p's own: its scopes among p's,
    its agents and pools (agent_ids, pools as 'pool~<name>') among those p reaches, and it
    expires no later than p. A key that could mint a wider one would be as wide itself."""
    beyond = sorted(set(scopes) - p.scopes)
    if beyond:
        raise errors.Forbidden(f"this key cannot grant scopes it lacks: {beyond}")
    if p.agent_ids is not None:
        if agent_ids is None:
            raise errors.Forbidden("this key reaches only some agents and pools: name the new key's, among its own")
        outside = sorted(set(agent_ids) - p.agent_ids)
        if outside:
            raise errors.Forbidden(f"this key does not reach {outside}, so it cannot grant them")
    if p.expires_at is not None and (expires_at is None or expires_at > p.expires_at):
        raise errors.Forbidden(f"this key expires at {p.expires_at.isoformat()}: a key it mints must expire by then")


def covers(p: Principal, row: core_db.ApiKey) -> bool:
    """Whether p's powers include every power of the key in `row`: only such keys does p list
    and revoke, so a narrower key neither sees nor switches off a wider one."""
    try:
        check_mintable(p, scopes=tuple(row.scopes), agent_ids=row.agent_ids, expires_at=row.expires_at)
    except errors.Forbidden:
        return False
    return True
