"""The console's session: the API key in an HttpOnly, SameSite=Strict cookie, checked on every
request by the API's own authentication (deps.principal: the key cache, revocation and expiry,
the rate limits), and a CSRF token on every form that changes something. docs/security.md."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import Response

from memworker import errors, keys
from memworker.api import deps

COOKIE = "mw_console"
LOGIN_COOKIE = "mw_console_login"  # the sign-in form's own token: no login CSRF
PATH = "/console"
MAX_AGE_S = 8 * 3600  # a working day; the key itself may expire or be revoked sooner


class SignInNeeded(Exception):
    """No session, or its key no longer authenticates: the page sends the browser to sign in."""


def principal(request: Request) -> keys.Principal:
    """The signed-in key's principal, through the same code path as a bearer call, so the
    console can never see more than the key can through /v1. Raises SignInNeeded, or
    RateLimited once the address has used up its failed authentications."""
    key = request.cookies.get(COOKIE)
    if not key:
        raise SignInNeeded()
    try:
        return deps.principal(with_bearer(request, key))
    except errors.Unauthorized as exc:
        raise SignInNeeded() from exc


def with_bearer(request: Request, key: str) -> Request:
    """A view of the request that carries `key` as its bearer key (and nothing of the body)."""
    try:
        value = f"Bearer {key}".encode("latin-1")
    except UnicodeEncodeError as exc:  # a cookie no key could have made
        raise errors.Unauthorized("invalid api key") from exc
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"authorization"]
    return Request({**request.scope, "headers": [*headers, (b"authorization", value)]})


def csrf_token(key: str) -> str:
    """The session's CSRF token: an HMAC of a constant under the key's hash. Only someone who
    holds the key (and could call the API directly anyway) can make it; it needs no server
    state and changes with the key."""
    return hmac.new(keys.hash_key(key), b"memworker-console-csrf", hashlib.sha256).hexdigest()


def check_csrf(request: Request, token: str) -> None:
    """Forbidden unless the form's token is this session's and the request comes from this
    origin (the Origin header, when the browser sends one)."""
    check_origin(request)
    key = request.cookies.get(COOKIE, "")
    if not key or not hmac.compare_digest(token.encode(), csrf_token(key).encode()):
        raise errors.Forbidden("the form's CSRF token does not match this session; reload the page")


def check_origin(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return  # no Origin (older browsers, same-origin GETs): the token decides
    if urlsplit(origin).netloc != request.headers.get("host", ""):
        raise errors.Forbidden("cross-origin form post refused")


def new_login_token() -> str:
    return secrets.token_urlsafe(24)


def check_login_token(request: Request, token: str) -> None:
    """The sign-in form's double-submit token: a page on another site cannot read or set the
    SameSite=Strict cookie, so it cannot sign the browser in with its own key."""
    check_origin(request)
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), token.encode()):
        raise errors.Forbidden("the sign-in form expired; reload the page and sign in again")


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int | None) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",  # plain HTTP only on loopback/dev: a Secure cookie would not stick
    )


def clear_cookie(response: Response, name: str) -> None:
    response.delete_cookie(name, path=PATH, httponly=True, samesite="strict")
