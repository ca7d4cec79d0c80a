"""Braintree end to end: notifications signed with Braintree's own library code
(`braintree.util.crypto.Crypto`, the HMAC its `sample_notification` uses) and read by
its `WebhookNotification.parse`, posted as the form Braintree sends to a real gateway,
and settled by the real worker on PostgreSQL, NATS JetStream, Redis and the currency
stub, in USD (the ledger's currency).

One ACH transaction's life: settled (captured), refunded by a settled credit, charged
back and the chargeback won, then a disbursement; the capture posted again is a
duplicate, a payload changed after signing is refused and stored nowhere, a delivery
signed with the older key pair of a rotation is accepted, and signed payloads the
gateway cannot read or whose amount is finer than a cent are recorded and parked."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode

import braintree  # type: ignore[import-untyped]  # dev lock only: Braintree's own library
import pytest
from braintree.util.crypto import Crypto  # type: ignore[import-untyped]

from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled, stored_ids
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

PUBLIC, PRIVATE = "bt_e2e_public", "bt_e2e_private_0f1e2d3c"
OLDER_PUBLIC, OLDER_PRIVATE = "bt_e2e_public_old", "bt_e2e_private_old_9a8b"
MERCHANT = "m_bt_e2e"
TXN = "txn_bt_e2e_1"


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["braintree"] = {
        "scheme": "braintree",
        "secrets": [f"{PUBLIC}:{PRIVATE}", f"{OLDER_PUBLIC}:{OLDER_PRIVATE}"],
    }
    return found


def notification(kind: str, subject: str, timestamp: str = "2026-12-01T10:00:00Z") -> bytes:
    return (
        f'<notification><timestamp type="datetime">{timestamp}</timestamp>'
        f"<kind>{kind}</kind><subject>{subject}</subject></notification>"
    ).encode()


def transaction(txn_id: str, amount: str, kind: str = "sale", refunded: str = "") -> str:
    refund = f"<refunded-transaction-id>{refunded}</refunded-transaction-id>" if refunded else ""
    return (
        f"<transaction><id>{txn_id}</id><status>settled</status><type>{kind}</type>"
        f"<currency-iso-code>USD</currency-iso-code><amount>{amount}</amount>"
        f"<merchant-account-id>{MERCHANT}</merchant-account-id>{refund}"
        "<payment-instrument-type>us_bank_account</payment-instrument-type></transaction>"
    )


def dispute(status: str) -> str:
    return (
        f"<dispute><id>dsp_bt_e2e</id><amount>100.00</amount><amount-disputed>30.00"
        f"</amount-disputed><currency-iso-code>USD</currency-iso-code><kind>chargeback</kind>"
        f"<status>{status}</status><merchant-account-id>{MERCHANT}</merchant-account-id>"
        f"<transaction><id>{TXN}</id><amount>100.00</amount></transaction></dispute>"
    )


def form(
    xml: bytes, public: str = PUBLIC, private: str = PRIVATE, *, readable: bool = True
) -> dict[str, str]:
    """What Braintree posts: the payload as `encodebytes` writes it, signed by the
    library's own HMAC, and parsed back by the library before it is sent (unless the
    test means the payload to be unreadable)."""
    payload = base64.encodebytes(xml).decode()
    signature = f"{public}|{Crypto.sha1_hmac_hash(private, payload)}"
    library = braintree.BraintreeGateway(
        braintree.Configuration(
            braintree.Environment.Sandbox, merchant_id="m", public_key=public, private_key=private
        )
    )
    if readable:
        library.webhook_notification.parse(signature, payload)  # raises unless genuine
    return {"bt_signature": signature, "bt_payload": payload}


async def post(server: RunningServer, fields: dict[str, str]) -> Any:
    return await server.client.post(
        "/webhooks/braintree",
        content=urlencode(fields).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


async def test_an_ach_transaction_is_settled_refunded_charged_back_and_paid_out(
    doc: dict[str, Any], database_url: str
) -> None:
    settled_xml = notification("transaction_settled", transaction(TXN, "100.00"))
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, MERCHANT)

        answer = await post(server, form(settled_xml))
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted"), answer.text
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, MERCHANT) == 10_000

        credit = transaction("txn_bt_e2e_r1", "25.00", kind="credit", refunded=TXN)
        refunded = form(notification("transaction_settled", credit), OLDER_PUBLIC, OLDER_PRIVATE)
        assert (await post(server, refunded)).status_code == 200  # the older pair verifies
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT) == 7_500

        opened = notification("dispute_opened", dispute("open"), "2026-12-02T10:00:00Z")
        assert (await post(server, form(opened))).status_code == 200
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, MERCHANT) == 4_500  # 30.00 debited at once

        won = notification("dispute_won", dispute("won"), "2026-12-09T10:00:00Z")
        assert (await post(server, form(won))).status_code == 200
        await wait_until(lambda: ended(database_url, 4))
        assert await merchant_balance(parts, MERCHANT) == 7_500  # returned

        disbursement = (
            '<disbursement><id>dsb_bt_e2e</id><amount>50.00</amount><success type="boolean">'
            f"true</success><merchant-account><id>{MERCHANT}</id><currency-iso-code>USD"
            "</currency-iso-code></merchant-account></disbursement>"
        )
        paid = notification("disbursement", disbursement, "2026-12-10T10:00:00Z")
        assert (await post(server, form(paid))).status_code == 200
        await wait_until(lambda: ended(database_url, 5))
        assert await merchant_balance(parts, MERCHANT) == 2_500

        again = await post(server, form(settled_xml))
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")

        genuine = form(notification("transaction_settled", transaction("txn_bt_x", "5.00")))
        payload = base64.b64decode(genuine["bt_payload"]).replace(b"5.00", b"9.00")
        forged = await post(server, {**genuine, "bt_payload": base64.encodebytes(payload).decode()})
        assert (forged.status_code, forged.json()["error"]) == (401, "signature_mismatch")
        assert await merchant_balance(parts, MERCHANT) == 2_500

    assert await settled(database_url, "braintree") == [
        ("capture", None, 10_000, MERCHANT),
        ("refund", "txn_bt_e2e_r1", 2_500, MERCHANT),
        ("chargeback", "dsp_bt_e2e", 3_000, MERCHANT),
        ("chargeback_reversal", "dsp_bt_e2e", 3_000, MERCHANT),
        ("payout", "dsb_bt_e2e", 5_000, MERCHANT),
    ]
    ids = await stored_ids(database_url, "braintree")
    assert ids[0] == f"transaction_settled:{TXN}:2026-12-01T10:00:00Z"
    assert ids[2] == "dispute_opened:dsp_bt_e2e:2026-12-02T10:00:00Z"
    assert len(ids) == 5  # the duplicate and the forgery added nothing
    assert await fetch(database_url, "SELECT event_id FROM dlq_webhooks") == []


async def test_signed_payloads_it_cannot_read_are_recorded_and_parked(
    doc: dict[str, Any], database_url: str
) -> None:
    """A correctly signed request is never refused for its content: a payload that is
    not XML is recorded (under its body's digest) and parked `PAYLOAD_INVALID`; an
    amount finer than the currency's cent is parked `FIELD_TYPE_INVALID`, not rounded."""
    finer = notification("transaction_settled", transaction("txn_bt_finer", "10.005"))
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, MERCHANT)
        not_xml = await post(server, form(b"this is not xml", readable=False))
        assert not_xml.status_code == 200, not_xml.text  # recorded: Braintree stops retrying
        assert (await post(server, form(finer))).status_code == 200
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT) == 0
    rows = await fetch(database_url, "SELECT event_id, error_class FROM dlq_webhooks ORDER BY id")
    found = [(r["event_id"], r["error_class"]) for r in rows]
    assert found[0][0].startswith("sha256:") and found[0][1] == "PAYLOAD_INVALID"
    assert found[1] == (
        "transaction_settled:txn_bt_finer:2026-12-01T10:00:00Z",
        "FIELD_TYPE_INVALID",
    )
