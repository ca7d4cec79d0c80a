"""Route x role for the event log: every role may list events and open one; only an
investigator or above searches payloads (`contains`), sees an event's payload and what
settlement read from it, each audited. A viewer's answers hold nothing of a body."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.console.roles import CAPABILITIES, Capability, Role
from gateway.core.events.model import Event
from gateway.core.providers.internal import instruction as from_internal
from gateway.core.settlement.instructions import transfer_id
from tests.integration.console.test_events_page import seed
from tests.support.console import Case, ConsoleHarness, check_case

# Row 1 is the first event `seed` records (evt_a, with a hostile body).
CASES: list[Case] = [
    ("GET", "/console/events", Role.VIEWER, None),
    ("GET", "/console/events?provider=stripe&since=2h", Role.VIEWER, None),
    ("GET", "/console/events?contains=", Role.VIEWER, None),  # the blank field: any
    ("GET", "/console/events?contains=%7B%22type%22%3A%22invoice.paid%22%7D", Role.INVESTIGATOR,
     None),
    ("GET", "/console/events/1", Role.VIEWER, None),
    ("GET", "/console/api/v1/events", Role.VIEWER, None),
    ("GET", "/console/api/v1/events?contains=%7B%7D", Role.INVESTIGATOR, None),
    ("GET", "/console/api/v1/events/1", Role.VIEWER, None),
]  # fmt: skip


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("case", CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES])
async def test_route_role(console: ConsoleHarness, case: Case, role: Role) -> None:
    ids = await seed(console)
    assert ids["evt_a"] == 1
    r = await check_case(console, case, role)
    if r.status_code == 403:  # check_case found the refusal right (nothing changed)
        assert await console.audit("events.search_payloads") == []
        return
    assert r.status_code == 200
    assert "evt_a" in r.text
    searched = "contains=%7B" in case[1]
    assert len(await console.audit("events.search_payloads")) == (1 if searched else 0)
    if "/events/1" not in case[1]:
        return
    reads = Capability.READ_PAYLOADS in CAPABILITIES[role]
    assert ("alert(1)" in r.text) is reads
    assert (r.headers.get("cache-control") == "no-store") is reads
    assert len(await console.audit("payload.view")) == (1 if reads else 0)


# Distinctive values a body carries: none may reach a viewer, in any answer.
IBAN = "GB82WEST12345698765432"
AMOUNT = 987654
MERCHANT = "m_quokka_42"
CURRENCY = "CHF"
SETTLED: dict[str, Any] = {
    "id": "pay-iban",
    "type": "payment.captured",
    "data": {"settlement_id": IBAN, "merchant_id": MERCHANT, "amount_minor": AMOUNT,
             "currency": CURRENCY},
}  # fmt: skip
#: A body settlement refuses: the extractor's message quotes the amount.
REFUSED: dict[str, Any] = {
    "id": "pay-refused",
    "type": "payment.captured",
    "data": {"settlement_id": IBAN, "merchant_id": MERCHANT, "amount_minor": -AMOUNT,
             "currency": CURRENCY},
}  # fmt: skip


async def seed_secrets(console: ConsoleHarness) -> dict[str, int]:
    """Two service:billing captures with the values above: one settled, one refused."""
    now = datetime.now(UTC)
    events = [
        Event("service:billing", body["id"], "payment.captured",
              "webhooks.service:billing.payment.captured", {"content-type": "application/json"},
              orjson.dumps(body), now - timedelta(minutes=3))
        for body in (SETTLED, REFUSED)
    ]  # fmt: skip
    instruction = from_internal("payment.captured", SETTLED)
    assert instruction is not None
    async with console.pool.acquire() as conn:
        ids = {e: i for (_, e), i in (await insert_events(conn, events)).items()}
        await conn.execute(
            "INSERT INTO settlements (transfer_id, kind, settlement_id, provider, merchant_id,"
            " source_event_id, state, amount_minor, currency, attempts)"
            " VALUES ($1, 'capture', $2, 'service:billing', $3, 'pay-iban', 'settled', $4, $5, 1)",
            transfer_id(instruction),
            IBAN,
            MERCHANT,
            AMOUNT,
            CURRENCY,
        )
    ids["transfer_id"] = transfer_id(instruction)
    return ids


@pytest.mark.parametrize("role", list(Role))
async def test_a_viewer_learns_nothing_of_a_body(console: ConsoleHarness, role: Role) -> None:
    """Every answer a viewer gets (the list and each event's page, HTML and API) holds
    none of the body's values; an investigator's detail answers show them."""
    ids = await seed_secrets(console)
    client = console.client(role)
    reads = Capability.READ_PAYLOADS in CAPABILITIES[role]
    secrets = [
        IBAN,
        str(AMOUNT),
        MERCHANT,
        CURRENCY,
        f"{ids['transfer_id']:#034x}",  # as the CLI prints ledger ids
    ]
    lists = [await client.get(path) for path in ("/console/events", "/console/api/v1/events")]
    details = {
        (name, path): await client.get(path.format(ids[name]))
        for name in ("pay-iban", "pay-refused")
        for path in ("/console/events/{}", "/console/api/v1/events/{}")
    }
    for r in lists:  # the list never carries a body
        assert r.status_code == 200
        assert "pay-iban" in r.text and "pay-refused" in r.text
        assert [s for s in secrets if s in r.text] == []
    for (name, path), r in details.items():
        assert r.status_code == 200
        found = [s for s in secrets if s in r.text]
        if not reads:
            assert found == [], (name, path, found)
        elif name == "pay-iban":
            assert found == secrets, (name, path)
        else:  # the payload itself, and the extractor's message quoting it
            assert f"is -{AMOUNT}; amounts must be positive" in r.text, path
    settlement = details[("pay-iban", "/console/api/v1/events/{}")].json()["settlement"]
    if reads:
        assert settlement["amount_minor"] == AMOUNT
        assert settlement["settlement_id"] == IBAN
    else:
        assert settlement == {"state": "settled", "reason": "", "attempts": 1}
        refused = details[("pay-refused", "/console/api/v1/events/{}")].json()["settlement"]
        assert refused == {"state": None, "reason": "its body cannot be settled"}
        page = details[("pay-iban", "/console/events/{}")].text
        assert "<strong>settled</strong>, 1 attempt(s)" in page
