"""Route x role for held keys: anyone may list them, only an operator (or admin) may
release one; a refused release answers 403 and the key stays held."""

from __future__ import annotations

import pytest

from gateway.core.console.roles import CAPABILITIES, Role
from tests.integration.console.test_keys_page import held, seed
from tests.support.console import Case, ConsoleHarness, check_case

_RELEASE = {"provider": "stripe", "key": "pi_A", "note": "skipped in the role table"}

CASES: list[Case] = [
    ("GET", "/console/keys", Role.VIEWER, None),
    ("GET", "/console/keys?provider=stripe", Role.VIEWER, None),
    ("GET", "/console/api/v1/keys", Role.VIEWER, None),
    ("POST", "/console/keys/release", Role.OPERATOR, _RELEASE),
    (
        "POST",
        "/console/api/v1/keys/release",
        Role.OPERATOR,
        {"provider": "stripe", "order_key": "pi_A", "note": "skipped in the role table"},
    ),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    await seed(console)
    r = await check_case(console, case, role)
    method, _, least, _ = case
    if method != "POST":
        return
    if CAPABILITIES[least] <= CAPABILITIES[role]:
        assert r.status_code in (200, 303)
        assert ("stripe", "pi_A") not in await held(console)
    else:
        assert ("stripe", "pi_A") in await held(console)
