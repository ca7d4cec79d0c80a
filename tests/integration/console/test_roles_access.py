"""Route x role for logging in and out, the tokens page and API, and the API document:
below a route's least role the answer is 403 and nothing changes."""

from __future__ import annotations

import pytest

from gateway.core.console.roles import Role
from tests.support.console import Case, ConsoleHarness, check_case

CASES: list[Case] = [
    # Open to anyone (the least role is the lowest: every role passes).
    ("GET", "/console/login", Role.VIEWER, None),
    ("POST", "/console/login", Role.VIEWER, {"token": "not-a-token"}),
    ("POST", "/console/logout", Role.VIEWER, None),
    ("GET", "/console/api/v1/openapi.json", Role.VIEWER, None),
    # Tokens: admin only.
    ("GET", "/console/tokens", Role.ADMIN, None),
    ("POST", "/console/tokens", Role.ADMIN, {"name": "made-here", "role": "viewer"}),
    ("POST", "/console/tokens/investigator/revoke", Role.ADMIN, None),
    ("GET", "/console/api/v1/tokens", Role.ADMIN, None),
    ("POST", "/console/api/v1/tokens", Role.ADMIN, {"name": "made-here", "role": "admin"}),
    ("POST", "/console/api/v1/tokens/investigator/revoke", Role.ADMIN, None),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    await check_case(console, case, role)
