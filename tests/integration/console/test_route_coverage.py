"""Every route the console serves is in the CASES of some test_roles_*.py module, so the
route x role table cannot silently skip one. A failure lists the routes missing."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, cast

from starlette.routing import BaseRoute, Match, Mount, Route

import tests.integration.console as console_tests
from gateway.console.app import build_app
from gateway.console.web import ConsoleDeps
from tests.support.console import Case, console_settings


def served_routes() -> list[Route]:
    deps = ConsoleDeps(
        pool=cast(Any, None), settings=console_settings("postgresql://127.0.0.1:1/x")
    )
    routes: list[BaseRoute] = build_app(deps).routes
    found = [r for r in routes if isinstance(r, Route)]
    others = [r for r in routes if not isinstance(r, Route | Mount)]
    assert not others, f"routes of an unexpected kind: {others}"
    return found


def role_cases() -> dict[str, list[Case]]:
    found: dict[str, list[Case]] = {}
    for info in pkgutil.iter_modules(console_tests.__path__):
        if info.name.startswith("test_roles_"):
            module = importlib.import_module(f"{console_tests.__name__}.{info.name}")
            found[info.name] = list(module.CASES)
    return found


def route_of(routes: list[Route], method: str, path: str) -> Route | None:
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def operations(route: Route) -> set[tuple[str, str]]:
    return {(m, route.path) for m in (route.methods or {"GET"}) if m != "HEAD"}


def test_every_route_is_in_a_role_table() -> None:
    routes = served_routes()
    served = set().union(*(operations(r) for r in routes))
    covered: set[tuple[str, str]] = set()
    unmatched: list[str] = []
    for module, cases in role_cases().items():
        for method, path, _, _ in cases:
            route = route_of(routes, method, path.split("?")[0])
            if route is None:
                unmatched.append(f"{module}: {method} {path}")
            else:
                covered.add((method, route.path))
    missing = sorted(served - covered)
    assert not missing, "routes in no test_roles_*.py CASES (MISSING):\n" + "\n".join(
        f"  {m} {p}" for m, p in missing
    )
    assert not unmatched, "CASES naming no route:\n" + "\n".join(unmatched)


def test_the_access_table_is_found() -> None:
    assert "test_roles_access" in role_cases()
    assert ("GET", "/console/tokens") in {
        (m, p) for m, p, _, _ in role_cases()["test_roles_access"]
    }
