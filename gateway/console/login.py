"""Logging in and out: a token exchanged for a server-side session (the cookie carries
a random id, the table its SHA-256), and the session ended on logout.

Failed logins are counted per address and offered token in this process's memory
(`LoginThrottle`, `throttle_key`): past `console.login_failures_per_min` in a minute the
answer is 429 until the oldest is a minute old, for that token from that address only,
so wrong tokens from behind one proxy never lock out someone else's valid one. A restart
forgets the count; a 256-bit token cannot be guessed anyway. Failures are audited one
row per address and minute (with the count left out).
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import transaction
from gateway.adapters.postgres.console.access import create_session, end_session, find_token
from gateway.console.auth import COOKIE_NAME, clear_session_cookie, set_session_cookie
from gateway.console.guard import public
from gateway.console.web import (
    Principal,
    audit,
    audit_anonymous,
    client_address,
    deps,
    form_value,
    principal_of,
    read_form,
    render,
)
from gateway.core.console.access import (
    TOKEN_BYTES,
    safe_next,
    session_id_from_bytes,
    sha256,
    throttle_key,
)
from gateway.core.console.roles import Role


@public
async def login_page(request: Request) -> Response:
    """The login form (already logged in: straight on)."""
    target = safe_next(request.query_params.get("next"))
    principal = principal_of(request)
    if principal is not None and principal.via == "cookie":
        return RedirectResponse(target, status_code=303)
    return render(request, "login.html", {"next": target, "error": None})


@public
async def login(request: Request) -> Response:
    """Exchange a token for a session; 429 after too many failures from one address."""
    console = deps(request)
    address = client_address(request)
    now = console.now()
    throttle = console.throttle
    assert throttle is not None
    form = await read_form(request)
    target = safe_next(form_value(form, "next"))
    token = form_value(form, "token").strip()
    key = throttle_key(address, token)
    if throttle.blocked(key, now):
        wait_s = throttle.retry_after_s(key, now)
        return render(
            request,
            "login.html",
            {"next": target, "error": f"Too many failed logins. Try again in {wait_s} s."},
            status=429,
            headers={"Retry-After": str(wait_s)},
        )
    c = console.settings.console
    session_id = session_id_from_bytes(secrets.token_bytes(TOKEN_BYTES))
    async with transaction(console.pool) as conn:
        row = await find_token(conn, sha256(token), now) if token else None
        if row is not None:
            await create_session(
                conn,
                id_sha256=sha256(session_id),
                token_id=row.id,
                principal=row.name,
                role=row.role,
                address=address,
                now=now,
                max_s=c.session_max_s,
            )
            principal = Principal(row.name, Role(row.role), "cookie", row.id)
            await audit(request, principal, "login", f"token:{row.name}", conn=conn)
    if row is None:
        throttle.failed(key, now)
        # Sampled: one row per address and minute, with how many were left out.
        await audit_anonymous(request, "login.failed", "refused")
        return render(
            request,
            "login.html",
            {"next": target, "error": "That token is not valid (unknown, revoked or expired)."},
            status=401,
        )
    throttle.succeeded(key)
    response = RedirectResponse(target, status_code=303)
    set_session_cookie(response, console, session_id)
    return response


@public
async def logout(request: Request) -> Response:
    """End the session (if any) and forget the cookie."""
    console = deps(request)
    session_id = request.cookies.get(COOKIE_NAME)
    principal = principal_of(request)
    if session_id:
        async with transaction(console.pool) as conn:
            ended = await end_session(conn, sha256(session_id), console.now())
            if ended and principal is not None:
                await audit(request, principal, "logout", None, conn=conn)
    response = RedirectResponse("/console/login", status_code=303)
    clear_session_cookie(response, console)
    return response


ROUTES: list[BaseRoute] = [
    Route("/console/login", login_page, methods=["GET"]),
    Route("/console/login", login, methods=["POST"]),
    Route("/console/logout", logout, methods=["POST"]),
]
