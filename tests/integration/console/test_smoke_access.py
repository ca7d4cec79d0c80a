"""The harness works: bearer tokens per role, a cookie session, the login redirect."""

from __future__ import annotations

from gateway.core.console_roles import Role
from tests.support.console import ConsoleHarness


async def test_bearer_admin_lists_tokens_and_viewer_is_forbidden(console: ConsoleHarness) -> None:
    r = await console.client(Role.ADMIN).get("/console/api/v1/tokens")
    assert r.status_code == 200
    assert sorted(t["name"] for t in r.json()["items"]) == sorted(str(x) for x in Role)
    r = await console.client(Role.VIEWER).get("/console/api/v1/tokens")
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("application/problem+json")
    assert len(await console.audit("forbidden")) == 1


async def test_session_client_sees_the_tokens_page(console: ConsoleHarness) -> None:
    browser = await console.session_client(Role.ADMIN)
    r = await browser.get("/console/tokens")
    assert r.status_code == 200
    assert "Issue a token" in r.text
    r = await console.anonymous().get("/console/tokens")
    assert r.status_code == 303
    assert r.headers["location"].startswith("/console/login?next=")
