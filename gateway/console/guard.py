"""How a console route declares who may call it, once, where it is defined:
`@needs(Capability.X)` runs `web.require` before the handler and hands it the principal;
`@public` marks the few routes a stranger may call (logging in and out). `by_method`
joins a GET and a POST handler on one route, so a 405 names both in `Allow`.

`undeclared(routes)` lists the routes that declare neither; a test runs it on the app's
routes, so a new route cannot forget its capability. The static files are a `Mount`
(no handler), and `/livez` and `/readyz` are answered in front of the app
(`console.probes`): neither is a route here.

A request that may need more than its route's capability (a search by body, an export
with payloads) asks for the rest with `web.require` in the handler.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from gateway.console.web import Principal, require
from gateway.core.console.roles import Capability

__all__ = ["Endpoint", "Handler", "by_method", "declared", "needs", "public", "undeclared"]

#: What a route calls.
Endpoint = Callable[[Request], Awaitable[Response]]
#: What `needs` wraps: a handler given the principal that holds its capability.
Handler = Callable[[Request, Principal], Awaitable[Response]]

#: The attribute naming an endpoint's capability per method (empty: public).
_DECLARED = "console_capabilities"
_ANY = "*"


def needs(cap: Capability) -> Callable[[Handler], Endpoint]:
    """The route needs `cap`: 401 or 403 (`Refused`, audited as `require` says) before the
    handler runs, which is then called with the principal."""

    def declare(handler: Handler) -> Endpoint:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            return await handler(request, await require(request, cap))

        setattr(endpoint, _DECLARED, MappingProxyType({_ANY: cap}))
        return endpoint

    return declare


def public(endpoint: Endpoint) -> Endpoint:
    """The route is for anyone, logged in or not (the login form, logging in and out)."""
    setattr(endpoint, _DECLARED, MappingProxyType({}))
    return endpoint


def declared(endpoint: object) -> Mapping[str, Capability] | None:
    """The capability an endpoint declared, per method ("*": every method); empty if it
    is public; None if it declared nothing."""
    found: Mapping[str, Capability] | None = getattr(endpoint, _DECLARED, None)
    return found


def by_method(*, get: Endpoint, post: Endpoint) -> Endpoint:
    """One endpoint for GET (and HEAD) and POST, each part with its own declaration."""
    parts = {"GET": get, "POST": post}
    caps: dict[str, Capability] = {}
    for method, part in parts.items():
        found = declared(part)
        if not found:
            raise ValueError(f"by_method: the {method} handler {part.__name__} needs a capability")
        caps[method] = found[_ANY]

    async def endpoint(request: Request) -> Response:
        return await (post if request.method == "POST" else get)(request)

    endpoint.__name__ = endpoint.__qualname__ = f"{get.__name__}_or_{post.__name__}"
    setattr(endpoint, _DECLARED, MappingProxyType(caps))
    return endpoint


def undeclared(routes: list[BaseRoute], allowed_mounts: frozenset[str]) -> list[str]:
    """`METHOD path` of every route whose handler declares no capability (nor `public`),
    and every mount not in `allowed_mounts` (a mount's routes are not looked into)."""
    missing: list[str] = []
    for route in routes:
        if isinstance(route, Mount):
            if route.path not in allowed_mounts:
                missing.append(f"MOUNT {route.path}")
        elif not isinstance(route, Route):
            missing.append(f"{type(route).__name__} {route!r}")
        elif declared(route.endpoint) is None:
            methods = sorted((route.methods or {"GET"}) - {"HEAD"})
            missing.append(f"{','.join(methods)} {route.path}")
    return missing
