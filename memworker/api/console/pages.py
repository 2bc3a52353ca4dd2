"""The operator's console at /console: server-rendered pages (Jinja2, autoescaped) over the
same authentication, scopes and domain functions as the JSON routes. A key limited to some
agents sees only those agents here too: every per-agent page passes through Principal.require
and every tenant-wide listing is filtered by the key's agents. docs/console.md."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, cast
from urllib.parse import parse_qs
from uuid import UUID

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from memworker import errors, keys, schemas
from memworker.api import deps
from memworker.api.console import auth, charts, samples
from memworker.domain.memories import AGENT_ID, EPISODE_STATUSES, KINDS, SUBJECT, TIERS, EpisodeStatus
from memworker.ingest import overview
from memworker.ingest import service as episodes
from memworker.lifecycle import service as lifecycle
from memworker.memories import service as memories
from memworker.recall import hybrid as recall
from memworker.recall import service as recall_service
from memworker.sleep import service as sleep
from memworker.tenancy import service as tenancy

HERE = Path(__file__).parent
STATUSES = EPISODE_STATUSES
FLAGS = ("instruction",)
PAGE_SIZE = 100
MAX_FORM_BYTES = 8192
_EPISODE_REF = re.compile(r"^episode:([0-9a-f-]{36})(?:#m([0-9,]+))?$")
# What a redirect after a change may announce: a fixed text per code, never the caller's words.
NOTICES = {
    "replayed": "The episode is queued again.",
    "resolved": "The review is resolved.",
    "signed-out": "Signed out.",
}
_HTTP = {  # most specific first: PayloadTooLarge is an InvalidInput
    errors.PayloadTooLarge: 413,
    errors.NotFound: 404,
    errors.InvalidInput: 422,
    errors.Forbidden: 403,
    errors.Unauthorized: 401,
    errors.Unavailable: 503,
    errors.Conflict: 409,
    errors.RateLimited: 429,
}
# The console loads its own stylesheet and script only: no inline code, no other origin.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,  # every page, every value: agent ids and memory text are the caller's
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
router = APIRouter(prefix="/console", include_in_schema=False)
P = ParamSpec("P")


def mount(app: FastAPI) -> None:
    """Add the console to the API app: its pages, its static files, and the recall sampler
    behind the latency chart."""
    recorder = samples.Recorder(lambda: app.state.redis)
    app.state.console_recorder = recorder
    app.include_router(router)
    app.mount("/console/static", StaticFiles(directory=HERE / "static"), name="console-static")
    app.add_middleware(samples.RecallSampler, recorder=recorder, key_cache=lambda: app.state.key_cache)


# --- plumbing ------------------------------------------------------------------------------------


def render(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
    key = request.cookies.get(auth.COOKIE)
    notice = NOTICES.get(request.query_params.get("notice", ""))
    html = templates.get_template(name).render(
        request=request, csrf=auth.csrf_token(key) if key else "", notice=notice, **context
    )
    return HTMLResponse(html, code, headers=HEADERS)


def page(fn: Callable[Concatenate[Request, P], Response]) -> Callable[Concatenate[Request, P], Response]:
    """A console page: no session sends the browser to sign in; a domain error (404 for
    another agent, 403 for a missing scope, ...) becomes an HTML page with the API's status."""

    @functools.wraps(fn)
    def wrapper(request: Request, *args: P.args, **kwargs: P.kwargs) -> Response:
        try:
            return fn(request, *args, **kwargs)
        except auth.SignInNeeded:
            response = RedirectResponse("/console/login", 303, headers=HEADERS)
            auth.clear_cookie(response, auth.COOKIE)
            return response
        except errors.MemworkerError as exc:
            status = next((code for t, code in _HTTP.items() if isinstance(exc, t)), 500)
            return render(request, "error.html", status, status=status, message=str(exc), p=None)

    return cast("Callable[Concatenate[Request, P], Response]", wrapper)


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (the first value of each); a sync page reads it through
    Depends, so no multipart parser is needed for these few small forms."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise errors.PayloadTooLarge("form too large")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as exc:
        raise errors.InvalidInput("unreadable form") from exc
    values = {k: v[0] for k, v in fields.items()}
    problem = schemas.json_problem(values, 2)  # what Postgres cannot store (a NUL) is bad input, not a 500
    if problem:
        raise errors.InvalidInput(f"form: {problem}")
    return values


def limited_to(p: keys.Principal) -> list[str] | None:
    return sorted(p.agent_ids) if p.agent_ids is not None else None


def check_agent(agent_id: str) -> str:
    if not AGENT_ID.fullmatch(agent_id):  # the API's own rule for {agent_id}
        raise errors.NotFound("agent not found")
    return agent_id


def choice(value: str | None, allowed: tuple[str, ...]) -> str | None:
    """A filter's value when it is one of the allowed; None ('any') otherwise."""
    return value if value in allowed else None


@dataclass(frozen=True)
class ProvenanceLink:
    """A provenance entry as the memory page shows it: its text, and for an episode reference
    the episode's page and the messages it names."""

    text: str
    url: str | None
    messages: str | None


def provenance_links(agent_id: str, entries: list[str]) -> list[ProvenanceLink]:
    out = []
    for entry in entries:
        m = _EPISODE_REF.match(entry)
        url = f"/console/agents/{agent_id}/episodes/{m.group(1)}" if m else None
        out.append(ProvenanceLink(entry, url, m.group(2) if m and m.group(2) else None))
    return out


# --- sign in and out -----------------------------------------------------------------------------


@router.get("/login")
def login_form(request: Request) -> Response:
    token = auth.new_login_token()
    response = render(request, "login.html", login_token=token, error=None, p=None)
    auth.set_cookie(request, response, auth.LOGIN_COOKIE, token, max_age=3600)
    return response


@router.post("/login")
@page
def login(request: Request, f: dict[str, str] = Depends(form)) -> Response:
    auth.check_login_token(request, f.get("login_token", ""))
    key = f.get("key", "").strip()
    try:
        deps.principal(auth.with_bearer(request, key))  # counts a failure against the address, like the API
    except errors.Unauthorized as exc:
        token = auth.new_login_token()
        refused = render(request, "login.html", 401, login_token=token, error=str(exc), p=None)
        auth.set_cookie(request, refused, auth.LOGIN_COOKIE, token, max_age=3600)
        return refused
    response = RedirectResponse("/console", 303, headers=HEADERS)
    auth.set_cookie(request, response, auth.COOKIE, key, max_age=auth.MAX_AGE_S)
    auth.clear_cookie(response, auth.LOGIN_COOKIE)
    return response


@router.post("/logout")
@page
def logout(request: Request, f: dict[str, str] = Depends(form)) -> Response:
    auth.check_csrf(request, f.get("csrf", ""))
    response = RedirectResponse("/console/login?notice=signed-out", 303, headers=HEADERS)
    auth.clear_cookie(response, auth.COOKIE)
    return response


# --- 1. agents -----------------------------------------------------------------------------------


@router.get("")
@page
def agents(request: Request) -> Response:
    p = auth.principal(request)
    p.require("memories:read")
    with deps.read_tx(request, p, None) as conn:  # reads: a replica's, when there are some
        rows = sleep.gates(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p))
        counts = overview.memory_counts(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p))
    by_tier: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in counts:
        by_tier[c.agent_id][c.tier] += c.n
        by_kind[c.agent_id][c.kind] += c.n
    kinds = [k for k in KINDS if any(k in v for v in by_kind.values())]
    table = [
        {
            "agent": a,
            "tiers": [by_tier[a.agent_id].get(t, 0) for t in TIERS],
            "kinds": [by_kind[a.agent_id].get(k, 0) for k in kinds],
            "total": sum(by_tier[a.agent_id].values()),
        }
        for a in rows
    ]
    return render(request, "agents.html", p=p, rows=table, tiers=TIERS, kinds=kinds)


# --- 2. memories ---------------------------------------------------------------------------------


@router.get("/agents/{agent_id}/memories")
@page
def memories_page(request: Request, agent_id: str) -> Response:
    p = auth.principal(request)
    p.require("memories:read", check_agent(agent_id))
    qp = request.query_params
    q = qp.get("q", "").strip()[:1000]
    tier, kind, flag = choice(qp.get("tier"), TIERS), choice(qp.get("kind"), KINDS), choice(qp.get("flag"), FLAGS)
    inactive = qp.get("inactive") == "1"
    subject = qp.get("subject", "").strip() or None
    if subject is not None and not SUBJECT.fullmatch(subject):
        raise errors.InvalidInput("subject must be 1-128 characters of letters, digits and . _ : @ -")
    hits: list[recall.Hit] | None = None
    items = []
    if q:  # with a subject: its memories and the general ones, as recall serves it
        query = recall.Query(q, 50, (tier,) if tier else None, (kind,) if kind else None, subject=subject)
        query.validate()
        res = deps.resources(request)
        qvec = res.query_embedder.embed_one(q)  # before a connection is taken, as the recall route does
        with deps.read_tx(request, p, agent_id) as conn:
            found = recall_service.look(
                conn, qvec, tenant_id=p.tenant_id, agent_id=agent_id, query=query, stats=res.recall_stats
            )
        hits = [h for h in found if flag is None or flag in h.get("flags", [])]
    else:
        with deps.read_tx(request, p, agent_id) as conn:
            tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
            items = overview.agent_memories(
                conn,
                tenant_id=p.tenant_id,
                agent_id=agent_id,
                tier=tier,
                kind=kind,
                flag=flag,
                include_inactive=inactive,
                limit=PAGE_SIZE,
                subject=subject,
            )
    return render(
        request,
        "memories.html",
        p=p,
        agent_id=agent_id,
        q=q,
        tier=tier,
        kind=kind,
        flag=flag,
        inactive=inactive,
        subject=subject,
        hits=hits,
        items=items,
        tiers=TIERS,
        kinds=KINDS,
        flags=FLAGS,
        page_size=PAGE_SIZE,
    )


@router.get("/agents/{agent_id}/memories/{memory_id}")
@page
def memory_page(request: Request, agent_id: str, memory_id: str) -> Response:
    p = auth.principal(request)
    p.require("memories:read", check_agent(agent_id))
    mid = parse_id(memory_id, "memory")
    with deps.read_tx(request, p, agent_id) as conn:
        h = lifecycle.history(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=mid)
        memory = memories.get(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=UUID(h["memory_id"]))
    return render(
        request,
        "memory.html",
        p=p,
        agent_id=agent_id,
        m=memory,
        asked=h["asked"],
        versions=h["versions"],
        events=h["events"],
        provenance=provenance_links(agent_id, memory.provenance),
    )


def parse_id(value: str, what: str) -> UUID:
    try:
        return UUID(value)
    except ValueError as exc:
        raise errors.NotFound(f"{what} not found") from exc


# --- 3. episodes ---------------------------------------------------------------------------------


@router.get("/episodes")
@page
def episodes_page(request: Request) -> Response:
    p = auth.principal(request)
    qp = request.query_params
    status = choice(qp.get("status"), STATUSES)
    agent_id = qp.get("agent") or None
    p.require("memories:read", check_agent(agent_id) if agent_id else None)
    with deps.tx(request, p) as conn:
        counts = overview.episode_counts(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p))
        rows = episodes.listing(conn, p.tenant_id, agent_id, status, PAGE_SIZE, limited_to(p))
        dead = episodes.listing(conn, p.tenant_id, agent_id, EpisodeStatus.DEAD, PAGE_SIZE, limited_to(p))
    table: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    for c in counts:
        table[c.agent_id][c.status] = c.n
    totals = {s: sum(t[s] for t in table.values()) for s in STATUSES}
    return render(
        request,
        "episodes.html",
        p=p,
        counts=sorted(table.items()),
        totals=totals,
        statuses=STATUSES,
        status=status,
        agent_id=agent_id,
        rows=rows,
        dead=dead,
        may_replay="episodes:write" in p.scopes,
    )


@router.get("/agents/{agent_id}/episodes/{episode_id}")
@page
def episode_page(request: Request, agent_id: str, episode_id: str) -> Response:
    p = auth.principal(request)
    p.require("memories:read", check_agent(agent_id))
    eid = parse_id(episode_id, "episode")
    with deps.tx(request, p) as conn:
        ep = episodes.row(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=eid)
        source = episodes.source(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=eid)
    if ep is None or source is None:
        raise errors.NotFound("episode not found")
    messages = source.messages if isinstance(source.messages, list) else []
    # /v1 returns an episode's own text to no key (its memories carry what was kept): the
    # console shows it to admin keys only, so it shows a reader no more than /v1 does
    show_source = "admin" in p.scopes
    return render(
        request,
        "episode.html",
        p=p,
        agent_id=agent_id,
        ep=ep,
        show_source=show_source,
        content=source.content if show_source else None,
        messages=[m for m in messages if isinstance(m, dict)] if show_source else [],
        may_replay="episodes:write" in p.scopes,
    )


@router.post("/agents/{agent_id}/episodes/{episode_id}/replay")
@page
def replay(request: Request, agent_id: str, episode_id: str, f: dict[str, str] = Depends(form)) -> Response:
    """As POST /v1/agents/{a}/episodes/{e}/replay: back to queued, and sent to the workers."""
    auth.check_csrf(request, f.get("csrf", ""))
    p = auth.principal(request)
    p.require("episodes:write", check_agent(agent_id))
    eid = parse_id(episode_id, "episode")
    with deps.tx(request, p) as conn:
        episodes.replay(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=eid)
    deps.publisher(request).ingest(p.tenant_id, [eid])
    back = f.get("back", "")
    target = back if back.startswith("/console/") and "//" not in back else "/console/episodes"
    sep = "&" if "?" in target else "?"
    return RedirectResponse(f"{target}{sep}notice=replayed", 303, headers=HEADERS)


# --- 4. consolidation and profile ----------------------------------------------------------------


@router.get("/agents/{agent_id}/consolidation")
@page
def consolidation_page(request: Request, agent_id: str) -> Response:
    p = auth.principal(request)
    p.require("memories:read", check_agent(agent_id))
    with deps.tx(request, p) as conn:
        status = sleep.status(conn, deps.resources(request).settings, tenant_id=p.tenant_id, agent_id=agent_id)
        runs = sleep.run_reports(conn, tenant_id=p.tenant_id, agent_id=agent_id, limit=20)
        doc = sleep.agent_profile(conn, tenant_id=p.tenant_id, agent_id=agent_id).document
    return render(
        request,
        "consolidation.html",
        p=p,
        agent_id=agent_id,
        status=status.to_json(),
        runs=runs,
        profile=doc,
    )


# --- 5. review -----------------------------------------------------------------------------------


@router.get("/agents/{agent_id}/review")
@page
def review_page(request: Request, agent_id: str) -> Response:
    p = auth.principal(request)
    p.require("memories:read", check_agent(agent_id))
    with deps.tx(request, p) as conn:
        open_items = lifecycle.reviews(conn, tenant_id=p.tenant_id, agent_id=agent_id, status="open", limit=100)
        done = lifecycle.reviews(conn, tenant_id=p.tenant_id, agent_id=agent_id, status="resolved", limit=20)
    return render(
        request,
        "review.html",
        p=p,
        agent_id=agent_id,
        items=open_items["reviews"],
        done=done["reviews"],
        may_resolve="memories:write" in p.scopes,
    )


@router.post("/agents/{agent_id}/review/{review_id}/resolve")
@page
def resolve(request: Request, agent_id: str, review_id: str, f: dict[str, str] = Depends(form)) -> Response:
    """As POST /v1/agents/{a}/review/{r}/resolve, audited as the signed-in key."""
    auth.check_csrf(request, f.get("csrf", ""))
    p = auth.principal(request)
    p.require("memories:write", check_agent(agent_id))
    rid = parse_id(review_id, "review")
    with deps.tx(request, p) as conn:
        lifecycle.resolve_review(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            review_id=rid,
            keep=f.get("keep", "")[:64],
            reason=f.get("reason", "")[:500],
            actor=f"key:{p.key_id}",
            may_change_l3="admin" in p.scopes,
        )
    return RedirectResponse(f"/console/agents/{agent_id}/review?notice=resolved", 303, headers=HEADERS)


# --- 6. usage ------------------------------------------------------------------------------------


@router.get("/usage")
@page
def usage_page(request: Request) -> Response:
    p = auth.principal(request)
    p.require("memories:read")
    price_in, price_out = price(request, "price_in"), price(request, "price_out")
    with deps.tx(request, p) as conn:
        ingest = overview.ingest_usage(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p))
        passes = overview.sleep_usage(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p))
    by_agent: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for u in ingest:
        row = by_agent[u.agent_id]
        row["episodes"], row["stored"], row["dead"] = u.episodes, u.stored, u.dead
        row["llm_calls"] += u.llm_calls or 0
        row["tokens_in"] += u.tokens_in or 0
        row["tokens_out"] += u.tokens_out or 0
        row["llm_ms"] = u.llm_ms or 0
    for s in passes:
        row = by_agent[s.agent_id]
        row["runs"] = s.runs
        row["llm_calls"] += s.llm_calls
        row["tokens_in"] += s.tokens_in
        row["tokens_out"] += s.tokens_out
    for row in by_agent.values():
        row["cost"] = (row["tokens_in"] * price_in + row["tokens_out"] * price_out) / 1e6
    fields = ("episodes", "stored", "dead", "runs", "llm_calls", "tokens_in", "tokens_out", "llm_ms", "cost")
    total = {f: sum(r.get(f, 0) for r in by_agent.values()) for f in fields}
    return render(
        request,
        "usage.html",
        p=p,
        rows=sorted(by_agent.items()),
        total=total,
        price_in=price_in,
        price_out=price_out,
        priced=price_in > 0 or price_out > 0,
    )


def price(request: Request, name: str) -> float:
    """A price in USD per million tokens from the page's form (not stored: the model and its
    price are the operator's to know); 0 when absent or not a sane number."""
    try:
        value = float(request.query_params.get(name, "0") or 0)
    except ValueError:
        return 0.0
    return value if 0 <= value <= 10_000 else 0.0


# --- 7. metrics ----------------------------------------------------------------------------------


@router.get("/metrics")
@page
def metrics_page(request: Request) -> Response:
    p = auth.principal(request)
    p.require("memories:read")
    minutes = charts.last_hour(datetime.now(UTC))
    with deps.tx(request, p) as conn:
        per_minute = overview.episode_minutes(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p), since=minutes[0])
        open_now = overview.open_episodes(conn, tenant_id=p.tenant_id, agent_ids=limited_to(p))
    accepted = {r.minute.astimezone(UTC): r.accepted for r in per_minute}
    kept = {r.minute.astimezone(UTC): r.accepted_kept for r in per_minute}
    stored = {r.minute.astimezone(UTC): r.stored for r in per_minute}
    recorder: samples.Recorder = request.app.state.console_recorder
    try:
        recalls = recorder.recall_minutes(p.tenant_id, p.agent_ids, [int(m.timestamp()) for m in minutes])
        latency_note = None
    except Exception as exc:  # Redis down: the Postgres charts still draw
        recalls = [(0, None)] * len(minutes)
        latency_note = f"recall samples unavailable ({type(exc).__name__})"
    ingest = charts.line_chart(
        "Ingest rate",
        "episodes / minute",
        minutes,
        [
            charts.Series("accepted", "s1", [float(accepted.get(m, 0)) for m in minutes]),
            charts.Series("stored", "s2", [float(stored.get(m, 0)) for m in minutes]),
        ],
        rate=True,
    )
    depth = charts.line_chart(
        "Queue depth",
        "episodes waiting",
        minutes,
        [charts.Series("waiting", "s3", [float(v) for v in charts.backlog(minutes, kept, stored, open_now)])],
    )
    latency = charts.line_chart(
        "Recall latency",
        "ms (mean per minute)",
        minutes,
        [charts.Series("mean", "s4", [ms for _, ms in recalls])],
    )
    volume = charts.line_chart(
        "Recalls",
        "calls / minute",
        minutes,
        [charts.Series("recalls", "s1", [float(n) for n, _ in recalls])],
        rate=True,
    )
    return render(
        request,
        "metrics.html",
        p=p,
        chart_list=[ingest, depth, latency, volume],
        open_now=open_now,
        latency_note=latency_note,
    )


templates.globals["fmt"] = charts.fmt
