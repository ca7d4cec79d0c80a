"""Route x role for the event log: every role may list events and open one; only an
investigator or above sees (and is audited viewing) its payload."""

from __future__ import annotations

import pytest

from gateway.core.console_roles import CAPABILITIES, Capability, Role
from tests.integration.console.test_events_page import seed
from tests.support.console import Case, ConsoleHarness, check_case

# Row 1 is the first event `seed` records (evt_a, with a hostile body).
CASES: list[Case] = [
    ("GET", "/console/events", Role.VIEWER, None),
    ("GET", "/console/events?provider=stripe&since=2h", Role.VIEWER, None),
    ("GET", "/console/events/1", Role.VIEWER, None),
    ("GET", "/console/api/v1/events", Role.VIEWER, None),
    ("GET", "/console/api/v1/events/1", Role.VIEWER, None),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    ids = await seed(console)
    assert ids["evt_a"] == 1
    r = await check_case(console, case, role)
    assert r.status_code == 200
    if "/events/1" not in case[1]:
        return
    reads = Capability.READ_PAYLOADS in CAPABILITIES[role]
    assert ("alert(1)" in r.text) is reads
    assert (r.headers.get("cache-control") == "no-store") is reads
    assert len(await console.audit("payload.view")) == (1 if reads else 0)
