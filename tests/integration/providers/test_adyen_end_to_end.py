"""Adyen end to end: notifications signed by Adyen's own library
(`Adyen.util.generate_notification_sig`), posted to a real gateway, settled by the real
worker on PostgreSQL, with several items in one request."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from Adyen.util import generate_notification_sig  # type: ignore[import-untyped]

from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
ROTATED = "74F490DD33F7327BAECC88B2947C011FC02D014A473AAA33A8EC93E4DC069174"
MERCHANT = "PlatformMerchantECOM"


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["adyen"] = {"scheme": "adyen", "secrets": [KEY, ROTATED]}
    return found


def item(code: str, psp: str, value: int, original: str = "", key: str = KEY) -> dict[str, Any]:
    """One notification item, signed by Adyen's library with `key`."""
    found: dict[str, Any] = {
        "pspReference": psp,
        "merchantAccountCode": MERCHANT,
        "merchantReference": f"order-{psp}",
        "amount": {"value": value, "currency": "USD"},
        "eventCode": code,
        "success": "true",
        "eventDate": "2026-12-06T10:00:00+01:00",
        "additionalData": {},
    }
    if original:
        found["originalReference"] = original
    found["additionalData"]["hmacSignature"] = generate_notification_sig(found, key).decode()
    return {"NotificationRequestItem": found}


def notification(*items: dict[str, Any]) -> bytes:
    return orjson.dumps({"live": "false", "notificationItems": list(items)})


async def post(server: RunningServer, body: bytes) -> Any:
    return await server.client.post(
        "/webhooks/adyen", content=body, headers={"Content-Type": "application/json"}
    )


async def ended(dsn: str, n: int) -> bool:
    rows = await fetch(
        dsn,
        "SELECT (SELECT count(*) FROM settlements WHERE state = 'settled')"
        " + (SELECT count(*) FROM payment_claims WHERE ledger_due_minor = 0)"
        " + (SELECT count(*) FROM dlq_webhooks) AS n",
    )
    return int(rows[0]["n"]) >= n


async def test_a_batch_with_a_tampered_item_records_and_settles_the_good_ones(
    doc: dict[str, Any], database_url: str
) -> None:
    """Three items, the second tampered after signing: the other two are recorded under
    their own ids and settled, the tampered one is stored nowhere, and Adyen is answered
    `[accepted]`. The same request again is all duplicates, still `[accepted]`."""
    authorised = item("AUTHORISATION", "PSP0001", 10_000)
    tampered = item("REFUND", "PSP0002", 1_000, original="PSP0001")
    tampered["NotificationRequestItem"]["amount"]["value"] = 9_000
    captured = item("CAPTURE", "PSP0003", 10_000, original="PSP0001")
    body = notification(authorised, tampered, captured)
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, MERCHANT)
        answer = await post(server, body)
        assert (answer.status_code, answer.text) == (200, "[accepted]")
        assert answer.headers["content-type"].startswith("text/plain")
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT) == 10_000
        again = await post(server, body)
        assert (again.status_code, again.text) == (200, "[accepted]")
    stored = await fetch(
        database_url,
        "SELECT event_id, event_type FROM processed_webhooks WHERE provider = 'adyen'"
        " ORDER BY event_id",
    )
    assert [(r["event_id"], r["event_type"]) for r in stored] == [
        ("PSP0001:AUTHORISATION:true", "AUTHORISATION"),
        ("PSP0003:CAPTURE:true", "CAPTURE"),
    ]
    assert await fetch(database_url, "SELECT 1 FROM dlq_webhooks") == []


async def test_refunds_a_chargeback_and_its_reversal_settle_with_a_rotated_key(
    doc: dict[str, Any], database_url: str
) -> None:
    """Capture 10000 (signed with the older key of a rotation), refund 1000 and 2000,
    a chargeback of 3000 and its reversal: 7000 left. A request whose every item is
    tampered is refused 401 and stores nothing; an over-long batch is 413."""
    events = [
        item("AUTHORISATION", "PSP1000", 10_000, key=ROTATED),
        item("CAPTURE", "PSP1001", 10_000, original="PSP1000"),
        item("REFUND", "PSP1002", 1_000, original="PSP1000"),
        item("REFUND", "PSP1003", 2_000, original="PSP1000"),
        item("CHARGEBACK", "DSP1004", 3_000, original="PSP1000"),
    ]
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, MERCHANT)
        for one in events:
            answer = await post(server, notification(one))
            assert (answer.status_code, answer.text) == (200, "[accepted]")
        await wait_until(lambda: ended(database_url, 5))
        assert await merchant_balance(parts, MERCHANT) == 4_000
        reversal = item("CHARGEBACK_REVERSED", "DSP1004", 3_000, original="PSP1000")
        assert (await post(server, notification(reversal))).status_code == 200
        await wait_until(lambda: ended(database_url, 6))
        assert await merchant_balance(parts, MERCHANT) == 7_000

        forged = item("REFUND", "PSP1005", 500, original="PSP1000")
        forged["NotificationRequestItem"]["amount"]["value"] = 50
        refused = await post(server, notification(forged))
        assert refused.status_code == 401
        assert refused.json()["error"] == "signature_mismatch"
        too_many = notification(*[item("REFUND", f"PSPX{i}", 1, "PSP1000") for i in range(51)])
        assert (await post(server, too_many)).status_code == 413
    stored = await fetch(
        database_url, "SELECT event_id FROM processed_webhooks WHERE provider = 'adyen'"
    )
    assert len(stored) == 6
    assert not any(r["event_id"].startswith(("PSP1005", "PSPX")) for r in stored)


async def test_a_second_partial_capture_is_parked_not_taken_for_a_repeat(
    doc: dict[str, Any], database_url: str
) -> None:
    """Two partial captures of one payment, equal amounts: the ledger keys a capture by
    its payment, so the second cannot move as its own; it is parked as a collision for
    an operator (`gateway ledger adjust`), never acknowledged as the first's repeat."""
    first = item("CAPTURE", "PSP2001", 500, original="PSP2000")
    second = item("CAPTURE", "PSP2002", 500, original="PSP2000")
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, MERCHANT)
        for one in (first, second):
            assert (await post(server, notification(one))).status_code == 200
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT) == 500
    parked = await fetch(database_url, "SELECT event_id, error_class FROM dlq_webhooks")
    assert [(r["event_id"], r["error_class"]) for r in parked] == [
        ("PSP2002:CAPTURE:true", "LEDGER_ID_COLLISION")
    ]
