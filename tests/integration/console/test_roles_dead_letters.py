"""Route x role for the dead letters area: anyone may list, group, export metadata and
read a row's fields; payloads, header values and the stack (which may quote the
payload) need an investigator; resolving one row or many needs an operator. A refused
resolve answers 403 and the row stays open; what a viewer is answered holds no stack,
payload or header value."""

from __future__ import annotations

import pytest

from gateway.core.console.roles import CAPABILITIES, Role
from tests.support.console import Case, ConsoleHarness, check_case
from tests.support.dead_letters import STRIPE_HEADERS, park

#: The row every case is about: the first dead letter of a fresh database.
ROW = 1
_NOTE = {"note": "resolved in the role table"}
#: A value of the event, in its payload and quoted by its stack, as a library's
#: exception text quotes the document it failed on.
SECRET = "card_fingerprint_Zq81xT"
PAYLOAD = b'{"id": "evt_roles", "type": "payment_intent.succeeded", "fp": "%s"}' % SECRET.encode()
STACK = (
    "Traceback (most recent call last):\n"
    '  File "gateway/settlement/steps.py", line 88, in settle\n'
    f"ValueError: unexpected field in {{'fp': '{SECRET}'}}"
)
#: The answers that show an investigator the stack (beside those needing one).
SHOW_STACK = {f"/console/dlq/{ROW}", f"/console/api/v1/dlq/{ROW}"}
#: What no viewer may be answered: the stack, the payload, header values.
HIDDEN = ("Traceback", SECRET, STRIPE_HEADERS["User-Agent"], STRIPE_HEADERS["Stripe-Signature"])

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
        assert await park(conn, "evt_roles", payload=PAYLOAD) == ROW
        await conn.execute("UPDATE dlq_webhooks SET error_detail = $1 WHERE id = $2", STACK, ROW)
    r = await check_case(console, case, role)
    method, path, least, _ = case
    allowed = CAPABILITIES[least] <= CAPABILITIES[role]
    if allowed:
        assert r.status_code in (200, 303), r.text[:300]
    if role is Role.VIEWER:
        shown = [h for h in HIDDEN if h in r.text]
        assert not shown, f"a viewer was answered {shown}"
    reads = CAPABILITIES[Role.INVESTIGATOR] <= CAPABILITIES[role]
    if method == "GET" and reads and (least is Role.INVESTIGATOR or path in SHOW_STACK):
        assert SECRET in r.text, "an investigator sees the stack and the payload"
    resolved = await console.fetchval("SELECT is_resolved FROM dlq_webhooks WHERE id = $1", ROW)
    assert resolved is (method == "POST" and allowed)
    if resolved:
        by = await console.fetchval("SELECT resolved_by FROM dlq_webhooks WHERE id = $1", ROW)
        assert by == f"console:{role}"
