"""Tokens (admin only): the list, issuing a token (shown once), revoking one. Every
change is audited in its own transaction. HTML at /console/tokens, JSON at
/console/api/v1/tokens."""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres.console.access import list_tokens
from gateway.console.guard import by_method, needs
from gateway.console.token_admin import BadTokenRequest, NameTaken, issue, revoke
from gateway.console.web import (
    Principal,
    audit,
    deps,
    form_value,
    problem,
    read_body,
    read_form,
    render,
)
from gateway.core.console.access import parse_expires
from gateway.core.console.roles import Capability, Role

#: A lifetime as the API takes it, the document's pattern: no blank for "never" (that is
#: null), no spaces, no zero.
API_EXPIRES = re.compile(r"[1-9][0-9]{0,4}[smhdw]")


async def _tokens_json(request: Request) -> list[dict[str, object]]:
    async with connection(deps(request).pool) as conn:
        rows = await list_tokens(conn)
    return [row.to_json() for row in rows]


async def _issue(
    request: Request, principal: Principal, name: str, role: str, expires: str
) -> tuple[str | None, str | None]:
    """(the new token, None) or (None, what was wrong)."""
    console = deps(request)
    try:
        lifetime = parse_expires(expires) if expires else None
    except ValueError as exc:
        return None, str(exc)
    try:
        async with transaction(console.pool) as conn:
            token = await issue(
                conn,
                name=name,
                role=role,
                created_by=principal.actor,
                now=console.now(),
                expires_in=lifetime,
            )
            detail = {"role": role, "expires": expires or None}
            await audit(
                request, principal, "token.create", f"token:{name}", detail=detail, conn=conn
            )
    except BadTokenRequest as exc:
        return None, str(exc)
    except NameTaken:
        return None, f"a live token is already called {name!r}: revoke it first"
    return token, None


async def _revoke(request: Request, principal: Principal, name: str) -> bool:
    console = deps(request)
    async with transaction(console.pool) as conn:
        revoked = await revoke(conn, name=name, revoked_by=principal.actor, now=console.now())
        if revoked:
            await audit(request, principal, "token.revoke", f"token:{name}", conn=conn)
    return revoked


async def _page(request: Request, **extra: Any) -> Response:
    context = {
        "tokens": await _tokens_json(request),
        "roles": [str(r) for r in Role],
        "new_token": None,
        "new_name": None,
        "error": None,
        "form": {"name": "", "role": "viewer", "expires": "30d"},
    }
    context.update(extra)
    status = 400 if context["error"] else 200
    # The page may show a newly issued token: never cached.
    return render(request, "tokens/list.html", context, status=status, no_store=True)


@needs(Capability.ADMINISTER)
async def tokens_page(request: Request, principal: Principal) -> Response:
    return await _page(request)


@needs(Capability.ADMINISTER)
async def create_from_form(request: Request, principal: Principal) -> Response:
    form = await read_form(request)
    name = form_value(form, "name").strip()
    role = form_value(form, "role").strip()
    expires = form_value(form, "expires").strip()
    token, error = await _issue(request, principal, name, role, expires)
    filled = {"name": name, "role": role, "expires": expires}
    if error:
        return await _page(request, error=error, form=filled)
    # Answered directly, not redirected: the token is shown this once and never again.
    return await _page(request, new_token=token, new_name=name)


@needs(Capability.ADMINISTER)
async def revoke_from_form(request: Request, principal: Principal) -> Response:
    await _revoke(request, principal, request.path_params["name"])
    return RedirectResponse("/console/tokens", status_code=303)


@needs(Capability.ADMINISTER)
async def api_list(request: Request, principal: Principal) -> Response:
    return JSONResponse({"items": await _tokens_json(request), "next_cursor": None})


@needs(Capability.ADMINISTER)
async def api_create(request: Request, principal: Principal) -> Response:
    try:
        body = json.loads(await read_body(request) or b"null")
    except ValueError:
        return problem(400, "Bad Request", "the body is not JSON")
    if not isinstance(body, dict):
        return problem(400, "Bad Request", "the body must be a JSON object")
    name, role, expires = body.get("name"), body.get("role"), body.get("expires")
    if not isinstance(name, str) or not isinstance(role, str):
        return problem(400, "Bad Request", "name and role are required strings")
    if expires is not None and not (isinstance(expires, str) and API_EXPIRES.fullmatch(expires)):
        return problem(400, "Bad Request", "expires is a lifetime like 30d, 12h or 90m, or null")
    token, error = await _issue(request, principal, name, role, expires or "")
    if error:
        status = 409 if "already called" in error else 400
        return problem(status, "Conflict" if status == 409 else "Bad Request", error)
    return JSONResponse(
        {"name": name, "role": role, "token": token},
        status_code=201,
        headers={"Cache-Control": "no-store"},
    )


@needs(Capability.ADMINISTER)
async def api_revoke(request: Request, principal: Principal) -> Response:
    name = request.path_params["name"]
    if not await _revoke(request, principal, name):
        return problem(404, "Not Found", f"no live token is called {name!r}")
    return JSONResponse({"name": name, "revoked": True})


ROUTES: list[BaseRoute] = [
    Route("/console/tokens", tokens_page, methods=["GET"]),
    Route("/console/tokens", create_from_form, methods=["POST"]),
    Route("/console/tokens/{name}/revoke", revoke_from_form, methods=["POST"]),
    # One route for both methods, so a 405 names both in `Allow`.
    Route(
        "/console/api/v1/tokens", by_method(get=api_list, post=api_create), methods=["GET", "POST"]
    ),
    Route("/console/api/v1/tokens/{name}/revoke", api_revoke, methods=["POST"]),
]
