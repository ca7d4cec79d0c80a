"""The console's Starlette app: every area's routes, the static files, the OpenAPI
document, the body limit and authentication middlewares, and the answers to `Refused`."""

from __future__ import annotations

from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from gateway.console import (
    adjustments,
    api_doc,
    audit_log,
    dead_letters,
    events,
    keys,
    ledger,
    login,
    overview,
    replays,
    tokens,
)
from gateway.console.auth import ConsoleAuth
from gateway.console.body_limit import CountedBody, DeclaredBody
from gateway.console.web import ConsoleDeps, Refused, is_api, problem, render

#: The route modules, in this order; each exposes `ROUTES` (imported by name, not found
#: by a scan: the architecture check sees every module the console loads).
ROUTE_MODULES = (
    login, tokens, overview, dead_letters, replays, events, keys, ledger, adjustments, audit_log,
    api_doc,
)  # fmt: skip


def all_routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for module in ROUTE_MODULES:
        routes.extend(module.ROUTES)
    routes.append(
        Mount(
            "/console/static",
            app=StaticFiles(packages=[("gateway.console", "static")]),
            name="static",
        )
    )
    return routes


async def on_refused(request: Request, exc: Exception) -> Response:
    """401: to the login page (HTML) or problem+json (API); 403: a page or problem+json."""
    assert isinstance(exc, Refused)
    if exc.status == 401:
        if is_api(request):
            return problem(
                401,
                "Unauthorized",
                exc.detail,
                headers={"WWW-Authenticate": 'Bearer realm="gateway-console"'},
            )
        # Back to the page after logging in; a form posted after the session ended is
        # not posted again (the operator sees the page and decides), so it goes home.
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method not in ("GET", "HEAD"):
            target = "/console/"
        return RedirectResponse(f"/console/login?next={quote(target, safe='')}", status_code=303)
    if exc.status != 403:
        title = "Payload Too Large" if exc.status == 413 else "Refused"
        return problem(exc.status, title, exc.detail)
    if is_api(request):
        return problem(exc.status, "Forbidden", exc.detail)
    return render(
        request,
        "forbidden.html",
        {"detail": exc.detail, "needed": exc.needed},
        status=exc.status,
    )


_NO_ROUTE = {
    404: "no such path in the console API: see /console/api/v1/openapi.json",
    405: "this path does not take this method: Allow names those it takes",
}


async def on_no_route(request: Request, exc: Exception) -> Response:
    """A path no route has (404) or a method its route lacks (405, with `Allow`): under
    the API problem+json, as every other API answer; elsewhere Starlette's plain text."""
    assert isinstance(exc, HTTPException)
    if is_api(request):
        detail = _NO_ROUTE.get(exc.status_code, "")
        return problem(exc.status_code, exc.detail, detail, headers=exc.headers)
    return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)


def build_app(console: ConsoleDeps) -> Starlette:
    """The console for `console`'s pool and settings."""
    app = Starlette(
        routes=all_routes(),
        # A body declared too large is refused before authentication; one that turns
        # out too large, as it is read (`body_limit` says why there).
        middleware=[Middleware(DeclaredBody), Middleware(ConsoleAuth), Middleware(CountedBody)],
        exception_handlers={Refused: on_refused, HTTPException: on_no_route},
    )
    app.state.deps = console
    return app
