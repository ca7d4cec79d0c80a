"""Route x role for the audit trail: every role may read it; only an admin may export
it (a refused export answers 403 and records no export)."""

from __future__ import annotations

import pytest

from gateway.core.console.roles import CAPABILITIES, Role
from tests.integration.console.test_audit_page import seed
from tests.support.console import Case, ConsoleHarness, check_case

CASES: list[Case] = [
    ("GET", "/console/audit", Role.VIEWER, None),
    ("GET", "/console/audit?outcome=refused&since=30d", Role.VIEWER, None),
    ("GET", "/console/api/v1/audit", Role.VIEWER, None),
    ("GET", "/console/audit/export.ndjson", Role.ADMIN, None),
    ("GET", "/console/audit/export.ndjson?since=3d&action=dlq.*", Role.ADMIN, None),
]


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    await seed(console)
    r = await check_case(console, case, role)
    if "export" not in case[1]:
        return
    exported = len(await console.audit("audit.export"))
    if CAPABILITIES[case[2]] <= CAPABILITIES[role]:
        assert r.status_code == 200 and exported == 1
        assert r.text.count("\n") >= 1
    else:
        assert exported == 0
