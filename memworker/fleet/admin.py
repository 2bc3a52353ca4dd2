"""Administration within a tenant, over HTTP (memworker/api/routes/admin.py): the tenant's
agents with what each holds, the subjects of one agent, and API keys minted, listed and
revoked by a key with the `keys` scope. Tenants stay with the operator (the CLI).

A key limited to some agents sees only those agents. A key mints only keys within its own
powers (keys.check_mintable: scopes, agents and pools, expiry), and lists and revokes only
such keys (keys.covers): a narrower key never sees or switches off a wider one."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime

from memworker import errors, keys
from memworker.fleet import pools
from memworker.fleet import queries as admin_db
from memworker.schemas import AgentList, AgentOut, KeyCreated, KeyList, KeyOut, SubjectList, SubjectOut
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

MAX_PAGE = 200


def encode_cursor(after: str) -> str:
    return base64.urlsafe_b64encode(after.encode()).decode()


def decode_cursor(cursor: str | None) -> str | None:
    """The name a page starts after; InvalidInput for a cursor this module did not make."""
    if cursor is None:
        return None
    try:
        return base64.urlsafe_b64decode(cursor.encode()).decode()
    except (binascii.Error, ValueError) as exc:
        raise errors.InvalidInput("invalid cursor") from exc


def agents_page(conn: Conn, p: keys.Principal, *, limit: int, cursor: str | None) -> AgentList:
    """A page of the tenant's agents the key reaches (pools aside), in id order, each with its
    counts and last activity; the next page's cursor (None on the last)."""
    reach = sorted(p.agent_ids) if p.agent_ids is not None else None
    rows = admin_db.agent_page(
        conn, tenant_id=p.tenant_id, reach=reach, after=decode_cursor(cursor), limit=min(limit, MAX_PAGE) + 1
    )
    page = rows[:limit]
    return AgentList(
        agents=[
            AgentOut(
                agent_id=r.agent_id,
                created_at=r.created_at.isoformat(),
                memories=r.memories,
                turns=r.turns,
                episodes=r.episodes,
                sessions=r.sessions,
                last_activity_at=r.last_activity_at.isoformat(),
            )
            for r in page
        ],
        next_cursor=encode_cursor(page[-1].agent_id) if len(rows) > limit else None,
    )


def subjects_page(conn: Conn, p: keys.Principal, agent_id: str, *, limit: int, cursor: str | None) -> SubjectList:
    """A page of the subjects the agent holds anything of, with counts per place."""
    tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
    rows = admin_db.agent_subjects(
        conn, tenant_id=p.tenant_id, agent_id=agent_id, after=decode_cursor(cursor), limit=min(limit, MAX_PAGE) + 1
    )
    page = rows[:limit]
    return SubjectList(
        subjects=[
            SubjectOut(
                subject=r.subject,
                memories=r.memories,
                turns=r.turns,
                episodes=r.episodes,
                sessions=r.sessions,
                last_activity_at=r.last_activity_at.isoformat(),
            )
            for r in page
        ],
        next_cursor=encode_cursor(page[-1].subject) if len(rows) > limit else None,
    )


# --- keys -------------------------------------------------------------------------------------


def key_reach(agents: list[str] | None, pool_names: list[str] | None) -> list[str] | None:
    """A key's agent list: the agents, and each pool as its owner id; None (every agent and
    pool) when neither is given."""
    if agents is None and pool_names is None:
        return None
    return sorted(set(agents or []) | {pools.owner(n) for n in pool_names or []})


def key_json(k: tenancy.ApiKey, *, now: datetime | None = None) -> KeyOut:
    """A key as the API lists it (never its secret): agents and pools None when it may touch all."""
    agents = None if k.agent_ids is None else sorted(a for a in k.agent_ids if pools.name_of(a) is None)
    named = None if k.agent_ids is None else sorted(n for n in map(pools.name_of, k.agent_ids) if n is not None)
    if k.revoked_at is not None:
        state = "revoked"
    elif k.expires_at is not None and k.expires_at <= (now or datetime.now(k.expires_at.tzinfo)):
        state = "expired"
    else:
        state = "active"
    return KeyOut(
        id=str(k.id),
        prefix=k.prefix,
        name=k.name,
        state=state,
        scopes=list(k.scopes),
        agents=agents,
        pools=named,
        created_at=k.created_at.isoformat(),
        expires_at=k.expires_at.isoformat() if k.expires_at else None,
        revoked_at=k.revoked_at.isoformat() if k.revoked_at else None,
    )


def mint_key(
    conn: Conn,
    p: keys.Principal,
    *,
    name: str,
    scopes: list[str],
    agents: list[str] | None,
    pool_names: list[str] | None,
    expires_at: datetime | None,
) -> KeyCreated:
    """A new key of p's tenant within p's own powers; its JSON with the secret (`api_key`,
    shown once). InvalidInput for an unknown scope or a past expiry, Forbidden beyond p."""
    unique = tuple(dict.fromkeys(scopes))
    unknown = [s for s in unique if s not in keys.SCOPES]
    if unknown:
        raise errors.InvalidInput(f"unknown scopes {unknown}; choose from {list(keys.SCOPES)}")
    if expires_at is not None:
        keys.check_expiry(expires_at)  # a zone and the future, before it is compared with p's
    reach = key_reach(agents, pool_names)
    keys.check_mintable(p, scopes=unique, agent_ids=reach, expires_at=expires_at)
    secret, row = keys.create(
        conn, tenant_id=p.tenant_id, name=name, scopes=unique, agent_ids=reach, expires_at=expires_at
    )
    return KeyCreated(api_key=secret, **key_json(row))


def list_keys(conn: Conn, p: keys.Principal) -> KeyList:
    """The tenant's keys within p's powers (p itself included), oldest first."""
    return KeyList(keys=[key_json(k) for k in tenancy.api_keys(conn, p.tenant_id) if keys.covers(p, k)])


def revoke_key(conn: Conn, p: keys.Principal, prefix: str) -> KeyOut:
    """Revoke the key with this prefix; its JSON. NotFound for no such active key, or one
    beyond p's powers (whose existence it does not confirm). The caller drops the API's key
    caches so the revocation holds at once."""
    found = [k for k in tenancy.api_keys(conn, p.tenant_id) if k.prefix == prefix]
    if not found or found[0].revoked_at is not None or not keys.covers(p, found[0]):
        raise errors.NotFound(f"no active key with prefix {prefix!r}")
    tenancy.revoke_api_key(conn, p.tenant_id, prefix)
    row = next(k for k in tenancy.api_keys(conn, p.tenant_id) if k.prefix == prefix)
    return key_json(row)
