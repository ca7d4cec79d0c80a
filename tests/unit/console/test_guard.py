"""Every route the console serves declares who may call it (`console.guard`): a
capability, or `@public` for the few a stranger may call. The static files are the one
mount; `/livez` and `/readyz` are answered in front of the app (`console.probes`), so
they are no route here."""

from __future__ import annotations

from typing import Any, cast

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from gateway.console.app import build_app
from gateway.console.guard import by_method, declared, needs, public, undeclared
from gateway.console.web import ConsoleDeps, Principal
from gateway.core.console.roles import Capability
from tests.support.console import console_settings

#: The only mount: the console's own CSS and JavaScript, served to anyone.
MOUNTS = frozenset({"/console/static"})
#: The routes anyone may call, written down here so a new one is a decision.
PUBLIC = {("GET", "/console/login"), ("POST", "/console/login"), ("POST", "/console/logout")}


def served_routes() -> list[BaseRoute]:
    deps = ConsoleDeps(
        pool=cast(Any, None), settings=console_settings("postgresql://127.0.0.1:1/x")
    )
    return list(build_app(deps).routes)


def test_every_served_route_declares_a_capability() -> None:
    missing = undeclared(served_routes(), MOUNTS)
    assert not missing, "routes with no @needs or @public:\n" + "\n".join(missing)


def test_the_public_routes_are_the_documented_ones() -> None:
    found = {
        (method, r.path)
        for r in served_routes()
        if isinstance(r, Route) and declared(r.endpoint) == {}
        for method in (r.methods or set()) - {"HEAD"}
    }
    assert found == PUBLIC


async def _plain(request: Request) -> Response:
    return PlainTextResponse("")


@public
async def _open(request: Request) -> Response:
    return PlainTextResponse("")


@needs(Capability.VIEW)
async def _viewed(request: Request, principal: Principal) -> Response:
    return PlainTextResponse("")


@needs(Capability.OPERATE)
async def _operated(request: Request, principal: Principal) -> Response:
    return PlainTextResponse("")


def test_a_route_without_a_declaration_is_named() -> None:
    """The negative case: the check finds a forgotten handler and an unknown mount."""
    routes: list[BaseRoute] = [
        Route("/console/declared", _viewed, methods=["GET"]),
        Route("/console/open", _open, methods=["GET"]),
        Route("/console/forgotten", _plain, methods=["GET", "POST"]),
        Mount("/console/static", app=StaticFiles(directory=".")),
        Mount("/console/elsewhere", app=StaticFiles(directory=".")),
    ]
    assert undeclared(routes, MOUNTS) == ["GET,POST /console/forgotten", "MOUNT /console/elsewhere"]


def test_by_method_declares_each_part() -> None:
    both = by_method(get=_viewed, post=_operated)
    assert declared(both) == {"GET": Capability.VIEW, "POST": Capability.OPERATE}
    assert declared(_viewed) == {"*": Capability.VIEW}
    assert declared(_open) == {}
    assert declared(_plain) is None


def test_by_method_refuses_an_undeclared_part() -> None:
    with pytest.raises(ValueError, match="_plain needs a capability"):
        by_method(get=_viewed, post=_plain)
