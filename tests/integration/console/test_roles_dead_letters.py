"""Route x role for the dead letters area: anyone may list, group, export metadata and
read a row's fields; payloads and header values need an investigator; resolving one
row or many needs an operator. A refused resolve answers 403 and the row stays open."""

from __future__ import annotations

import pytest

from gateway.core.console_roles import CAPABILITIES, Role
from tests.support.console import Case, ConsoleHarness, check_case
from tests.support.dead_letters import park

#: The row every case is about: the first dead letter of a fresh database.
ROW = 1
_NOTE = {"note": "resolved in the role table"}

CASES: list[Case] = [
    ("GET", "/console/dlq", Role.VIEWER, None),
    ("GET", "/console/dlq?stage=settlement&type=payment_intent.*", Role.VIEWER, None),
    ("GET", "/console/dlq/groups", Role.VIEWER, None),
    ("GET", f"/console/dlq/{ROW}", Role.VIEWER, None),
    ("GET", f"/console/dlq/{ROW}/payload", Role.INVESTIGATOR, None),
    ("GET", "/console/dlq/export.ndjson", Role.VIEWER, None),
    ("GET", "/console/dlq/export.ndjson?payloads=1", Role.INVESTIGATOR, None),
    ("POST", f"/console/dlq/{ROW}/resolve", Role.OPERATOR, _NOTE),
    (
        "POST",
        "/console/dlq/resolve",
        Role.OPERATOR,
        {"scope": "ids", "id": str(ROW), "confirm": "1", **_NOTE},
    ),
    ("GET", "/console/api/v1/dlq", Role.VIEWER, None),
    ("GET", f"/console/api/v1/dlq/{ROW}", Role.VIEWER, None),
    ("GET", f"/console/api/v1/dlq/{ROW}/payload", Role.INVESTIGATOR, None),
    ("POST", f"/console/api/v1/dlq/{ROW}/resolve", Role.OPERATOR, _NOTE),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    async with console.pool.acquire() as conn:
        assert await park(conn, "evt_roles") == ROW
    r = await check_case(console, case, role)
    method, _, least, _ = case
    allowed = CAPABILITIES[least] <= CAPABILITIES[role]
    if allowed:
        assert r.status_code in (200, 303), r.text[:300]
    resolved = await console.fetchval("SELECT is_resolved FROM dlq_webhooks WHERE id = $1", ROW)
    assert resolved is (method == "POST" and allowed)
    if resolved:
        by = await console.fetchval("SELECT resolved_by FROM dlq_webhooks WHERE id = $1", ROW)
        assert by == f"console:{role}"
