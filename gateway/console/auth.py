"""Who is asking, whether an unsafe request may go on, and the headers every answer
carries: the console's one middleware.

- `Authorization: Bearer <token>` (the API's way), looked up by SHA-256;
- the `gateway_console` cookie, a server-side session made by logging in;
- an SSO proxy's user and role headers, honoured only from `console.trusted_proxies`.

An unsafe request authenticated by cookie (or proxy) is refused (403, audited
"csrf.refused") unless `Sec-Fetch-Site: same-origin` or, without that header, `Origin`
equals the console's origin. Bearer requests are exempt: no browser sends them unasked.
"""

from __future__ import annotations

import logging

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from gateway.adapters.postgres import transaction
from gateway.adapters.postgres.console.access import find_session, find_token
from gateway.console.web import (
    ConsoleDeps,
    Principal,
    audit,
    audit_anonymous,
    client_address,
    deps,
    is_api,
    problem,
    requested,
)
from gateway.core.console.access import (
    AuthKind,
    CsrfVerdict,
    cookie_secure,
    csrf_verdict,
    sha256,
    throttle_key,
)
from gateway.core.console.roles import Role
from gateway.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

COOKIE_NAME = "gateway_console"
COOKIE_PATH = "/console"
STATIC_PREFIX = "/console/static/"

#: On every answer, static files and errors included. `connect-src 'self'`: htmx's partial
#: updates and polling are requests of the page's own (default-src 'none' refuses them).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def set_session_cookie(response: Response, console: ConsoleDeps, session_id: str) -> None:
    """The session cookie: HttpOnly, SameSite=Strict, Path=/console, Secure except on
    loopback plain http. No Max-Age: the server ends the session, the browser forgets
    the cookie when it closes."""
    response.set_cookie(
        COOKIE_NAME,
        session_id,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=cookie_secure(console.origin),
    )


def clear_session_cookie(response: Response, console: ConsoleDeps) -> None:
    response.delete_cookie(
        COOKIE_NAME,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=cookie_secure(console.origin),
    )


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


async def authenticate(request: Request) -> tuple[Principal | None, AuthKind, bool]:
    """(principal or None, how it came, whether credentials were offered and refused)."""
    console = deps(request)
    now = console.now()
    token = bearer_token(request)
    if token is not None:
        async with transaction(console.pool) as conn:
            row = await find_token(conn, sha256(token), now)
        if row is None:
            return None, AuthKind.BEARER, True
        return Principal(row.name, Role(row.role), "bearer", row.id), AuthKind.BEARER, False
    session_id = request.cookies.get(COOKIE_NAME)
    if session_id:
        c = console.settings.console
        async with transaction(console.pool) as conn:
            session = await find_session(
                conn, sha256(session_id), now, max_s=c.session_max_s, idle_s=c.session_idle_s
            )
        if session is not None:
            principal = Principal(session.principal, Role(session.role), "cookie", session.token_id)
            return principal, AuthKind.COOKIE, False
        # An ended session is no evidence against the request: it is anonymous.
    proxy = proxy_principal(request, console)
    if proxy is not None:
        return proxy, AuthKind.PROXY, False
    return None, AuthKind.ANONYMOUS, False


def proxy_principal(request: Request, console: ConsoleDeps) -> Principal | None:
    """The user a trusted SSO proxy names; None from any other address, or without
    both headers, or with a role that is not one of the four."""
    c = console.settings.console
    if not c.trusted_proxies or client_address(request) not in c.trusted_proxies:
        return None
    user = request.headers.get(c.proxy_user_header, "").strip()
    role = request.headers.get(c.proxy_role_header, "").strip().lower()
    if not user or role not in {str(r) for r in Role}:
        return None
    return Principal(user, Role(role), "proxy", None)


def _failure(request: Request, status: int, title: str, detail: str) -> Response:
    if is_api(request):
        return problem(status, title, detail)
    return PlainTextResponse(f"{status} {title}: {detail}\n", status_code=status)


class ConsoleAuth(BaseHTTPMiddleware):
    """Authentication, the cross-site check and the security headers."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        try:
            response = await self._answer(request, call_next)
        except DatabaseUnavailable:
            # Said plainly, with the headers: the console cannot answer without its
            # database, and a stack trace would tell an attacker more than an operator.
            log.warning("console request failed: database unavailable")
            response = _failure(request, 503, "Service Unavailable", "the database is unavailable")
        except Exception:
            log.exception("console request failed", extra={"path": request.url.path})
            response = _failure(request, 500, "Internal Server Error", "see the console's log")
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def _answer(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        request.state.principal = None
        if request.url.path.startswith(STATIC_PREFIX):
            return await call_next(request)
        console = deps(request)
        token = bearer_token(request)
        key = throttle_key(client_address(request), token) if token is not None else None
        throttle = console.bearer_throttle
        if key is not None and throttle is not None and throttle.blocked(key, console.now()):
            wait_s = throttle.retry_after_s(key, console.now())
            return problem(429, "Too Many Requests",
                           "too many requests with this bearer token failed; try again later",
                           headers={"Retry-After": str(wait_s)})  # fmt: skip
        principal, kind, refused = await authenticate(request)
        if refused:
            # A wrong bearer token is an API client's mistake, not a browser's: 401 at
            # once, with no hint whether the token ever existed; counted per address
            # and token (never locking out another token), audited one row a minute.
            if key is not None and throttle is not None:
                throttle.failed(key, console.now())
            await audit_anonymous(request, "bearer.refused", "refused")
            return problem(
                401,
                "Unauthorized",
                "the bearer token is not valid (unknown, revoked or expired)",
                headers={"WWW-Authenticate": 'Bearer realm="gateway-console"'},
            )
        request.state.principal = principal
        verdict = csrf_verdict(
            method=request.method,
            sec_fetch_site=request.headers.get("sec-fetch-site"),
            origin=request.headers.get("origin"),
            console_origin=console.origin,
            auth=kind,
        )
        if verdict is CsrfVerdict.REFUSE:
            return await self._refuse_cross_site(request, principal)
        return await call_next(request)

    async def _refuse_cross_site(self, request: Request, principal: Principal | None) -> Response:
        detail = {
            "sec_fetch_site": request.headers.get("sec-fetch-site"),
            "origin": request.headers.get("origin"),
        }
        if principal is None:
            await audit_anonymous(request, "csrf.refused", "refused", detail)
        else:
            await audit(request, principal, "csrf.refused", requested(request), "refused", detail)
        log.warning("cross-site request refused", extra={"path": request.url.path})
        text = "a cross-site request cannot change anything here"
        if is_api(request):
            return problem(403, "Forbidden", text)
        return PlainTextResponse(f"403 Forbidden: {text}\n", status_code=403)
