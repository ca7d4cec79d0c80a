"""Route x role for the overview: every role may see it (VIEW), and it changes nothing,
whoever asks; without a token the page asks for a login and the API answers 401."""

from __future__ import annotations

import pytest

from gateway.core.console.roles import Role
from tests.support.console import Case, ConsoleHarness, check_case, state_digest

CASES: list[Case] = [
    ("GET", "/console/", Role.VIEWER, None),
    ("GET", "/console/overview/partial", Role.VIEWER, None),
    ("GET", "/console/api/v1/stats/overview", Role.VIEWER, None),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    before = await state_digest(console.pool)
    r = await check_case(console, case, role)
    assert r.status_code == 200
    # Counts only: a look at the overview writes nothing, not even an audit row.
    assert await state_digest(console.pool) == before


@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_no_token_no_figures(console: ConsoleHarness, case: Case) -> None:
    method, path, _, _ = case
    r = await console.anonymous().request(method, path)
    if path.startswith("/console/api/"):
        assert r.status_code == 401
        assert r.headers["content-type"].startswith("application/problem+json")
    else:
        assert r.status_code == 303
        assert r.headers["location"].startswith("/console/login?next=")
    assert "open-total" not in r.text
