"""Checkout.com, Square and Paystack end to end: events signed in the test with the
standard library, exactly as each provider's page says (and, for Square, checked with
its official `square.utils.webhooks_helper.verify_signature`), posted to a real gateway
and settled by the real worker on PostgreSQL, NATS JetStream, Redis and the currency
stub. Every amount is in USD, the ledger's currency, so nothing is converted.

Each provider's test runs one payment's life: captured (authorised first where the
mapping reserves), two partial refunds, a chargeback and (where the mapping has one) its
reversal, with the merchant's balance asserted once each stage has settled; the capture
posted again is a duplicate, a body changed after signing is refused and stored nowhere,
and one delivery signed with the older secret of a rotation is accepted."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import orjson
import pytest
from square.utils.webhooks_helper import verify_signature

from gateway.core.ledger.ids import merchant_account_id
from gateway.settlement.parts import SettlementParts
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

#: Each provider's current secret, then the older one of a rotation (the new one first).
CHECKOUT_KEY = "3a0d2f5c-6b7e-4e1a-9c2d-cko-current-signature-key"
CHECKOUT_OLDER = "8f1e4b2a-0c9d-4a7f-b3e6-cko-older-signature-key"
PAYSTACK_KEY = "sk_test_e2e_current_4b1f9a7c2d5e8f0a3b6c9d2e5f8a1b4c"
PAYSTACK_OLDER = "sk_test_e2e_older_7c2d5e8f0a3b6c9d2e5f8a1b4c4b1f9a"
SQUARE_KEY = "Ibxx_5AKakO-3qeNVR61Dw"
SQUARE_OLDER = "oLd-kEy_9QzT2vW4xY6zA8bC"
SQUARE_URL = "https://gateway.example/webhooks/square"


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["checkout"] = {
        "scheme": "checkout",
        "secrets": [CHECKOUT_KEY, CHECKOUT_OLDER],
    }
    found["providers"]["paystack"] = {
        "scheme": "paystack",
        "secrets": [PAYSTACK_KEY, PAYSTACK_OLDER],
    }
    found["providers"]["square"] = {
        "scheme": "square",
        "secrets": [SQUARE_KEY, SQUARE_OLDER],
        "notification_url": SQUARE_URL,
    }
    return found


# Signatures, written from each provider's page with the standard library only.


def checkout_signature(key: str, body: bytes) -> str:
    """`Cko-Signature`: hex HMAC-SHA256 of the raw body, keyed with the signature key."""
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def paystack_signature(key: str, body: bytes) -> str:
    """`x-paystack-signature`: hex HMAC-SHA512 of the raw body, keyed with the secret key."""
    return hmac.new(key.encode(), body, hashlib.sha512).hexdigest()


def square_signature(key: str, body: bytes, url: str = SQUARE_URL) -> str:
    """`x-square-hmacsha256-signature`: base64 HMAC-SHA256 of the notification URL
    followed by the raw body, keyed with the signature key."""
    digest = hmac.new(key.encode(), url.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


async def post(server: RunningServer, provider: str, body: bytes, header: str, sig: str) -> Any:
    headers = {"Content-Type": "application/json", header: sig}
    return await server.client.post(f"/webhooks/{provider}", content=body, headers=headers)


async def ended(dsn: str, n: int) -> bool:
    """At least `n` events were consumed to an end (settled, netted, parked)."""
    rows = await fetch(
        dsn,
        "SELECT (SELECT count(*) FROM settlements WHERE state = 'settled')"
        " + (SELECT count(*) FROM payment_claims WHERE ledger_due_minor = 0)"
        " + (SELECT count(*) FROM dlq_webhooks) AS n",
    )
    return int(rows[0]["n"]) >= n


async def held(parts: SettlementParts, merchant: str) -> tuple[int, int]:
    """The merchant's (balance, reserved): what was credited, and what is pending (an
    authorisation's reservation, not in the balance)."""
    balance = await parts.ledger.balance(merchant_account_id(merchant, "USD"))
    assert balance is not None
    return balance.credit_balance_minor, balance.credits_pending


async def stored_ids(dsn: str, provider: str) -> list[str]:
    rows = await fetch(
        dsn,
        "SELECT event_id FROM processed_webhooks WHERE provider = $1 ORDER BY id",
        provider,
    )
    return [r["event_id"] for r in rows]


async def settled(dsn: str, provider: str) -> list[tuple[str, str | None, int, str]]:
    """The provider's settlements as (kind, movement id, amount, merchant), in order."""
    rows = await fetch(
        dsn,
        "SELECT kind, refund_id, amount_minor, merchant_id, state FROM settlements"
        " WHERE provider = $1 ORDER BY id",
        provider,
    )
    assert {r["state"] for r in rows} <= {"settled"}, rows
    return [(r["kind"], r["refund_id"], r["amount_minor"], r["merchant_id"]) for r in rows]


async def nothing_parked(dsn: str) -> None:
    assert await fetch(dsn, "SELECT event_id, error_class FROM dlq_webhooks") == []


# Checkout.com


CKO_MERCHANT = "m_cko_e2e"
CKO_PAYMENT = "pay_e2eckoa5b7c9d1f3h5j7k9m1n3"
CKO_DISPUTE = "dsp_e2eckoq4s6u8w0y2a4c6"


def cko_payment(event_id: str, event_type: str, amount: int, action: str, **balances: int) -> bytes:
    """A `payment_*` event shaped like Checkout.com's deliveries (payment_captured.json)."""
    return orjson.dumps(
        {
            "id": event_id,
            "type": event_type,
            "version": "1.0.26",
            "created_on": "2026-03-03T08:18:57.8376703Z",
            "data": {
                "id": CKO_PAYMENT,
                "action_id": action,
                "reference": "ORD-e2e-1",
                "amount": amount,
                "currency": "USD",
                "processed_on": "2026-03-03T08:18:52.1378682Z",
                "response_code": "10000",
                "response_summary": "Approved",
                "balances": {
                    "total_authorized": 10_000,
                    "total_voided": 0,
                    "total_captured": 0,
                    "total_refunded": 0,
                    **balances,
                },
                "metadata": {"merchant_id": CKO_MERCHANT},
            },
        }
    )


def cko_dispute(event_id: str, event_type: str) -> bytes:
    """A dispute event shaped like dispute_lost.json: no metadata, names its payment."""
    return orjson.dumps(
        {
            "id": event_id,
            "source": "dispute",
            "type": event_type,
            "timestamp": "2026-03-10T15:20:32.582+00:00",
            "version": "1.0.6",
            "data": {
                "id": CKO_DISPUTE,
                "category": "fraudulent",
                "amount": 3_000,
                "currency": "USD",
                "reason_code": "10.4",
                "payment_id": CKO_PAYMENT,
                "payment_action_id": "act_e2ecko_capture",
                "payment_method": "VISA",
            },
        }
    )


async def test_a_checkout_payment_is_verified_settled_refunded_and_disputed(
    doc: dict[str, Any], database_url: str
) -> None:
    """Checkout.com (`Cko-Signature`, hex HMAC-SHA256 of the body): `payment_approved`
    reserves 10000 without crediting it, `payment_captured` credits it; two
    `payment_refunded` (1000, then 2000 signed with the older key of the rotation)
    leave 7000; `dispute_evidence_required` debits 3000 (4000) and `dispute_won`
    credits it back (7000). The capture again is a duplicate; a refund changed after
    signing is refused 401 and stored nowhere; every event is recorded by its `id`."""
    header = "Cko-Signature"

    async def send(body: bytes, key: str = CHECKOUT_KEY, signed: bytes | None = None) -> Any:
        sig = checkout_signature(key, body if signed is None else signed)
        return await post(server, "checkout", body, header, sig)

    approved = cko_payment("evt_cko_approved", "payment_approved", 10_000, "act_e2ecko_auth")
    captured = cko_payment("evt_cko_captured", "payment_captured", 10_000, "act_e2ecko_capture",
                           total_captured=10_000)  # fmt: skip
    refund_1 = cko_payment("evt_cko_refund_1", "payment_refunded", 1_000, "act_e2ecko_refund_1",
                           total_captured=10_000, total_refunded=1_000)  # fmt: skip
    refund_2 = cko_payment("evt_cko_refund_2", "payment_refunded", 2_000, "act_e2ecko_refund_2",
                           total_captured=10_000, total_refunded=3_000)  # fmt: skip
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, CKO_MERCHANT)

        assert (await send(approved)).status_code == 200
        await wait_until(lambda: ended(database_url, 1))
        assert await held(parts, CKO_MERCHANT) == (0, 10_000)  # reserved, not yet credited

        answer = await send(captured)
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted"), answer.text
        await wait_until(lambda: ended(database_url, 2))
        assert await held(parts, CKO_MERCHANT) == (10_000, 0)  # the reservation posted

        assert (await send(refund_1)).status_code == 200
        rotated = await send(refund_2, key=CHECKOUT_OLDER)  # the older secret still verifies
        assert (rotated.status_code, rotated.json()["status"]) == (200, "accepted")
        await wait_until(lambda: ended(database_url, 4))
        assert await merchant_balance(parts, CKO_MERCHANT) == 7_000  # 10000 - 1000 - 2000

        evidence = cko_dispute("evt_cko_dispute_evidence", "dispute_evidence_required")
        assert (await send(evidence)).status_code == 200
        await wait_until(lambda: ended(database_url, 5))
        assert await merchant_balance(parts, CKO_MERCHANT) == 4_000  # 7000 - 3000 chargeback

        assert (await send(cko_dispute("evt_cko_dispute_won", "dispute_won"))).status_code == 200
        await wait_until(lambda: ended(database_url, 6))
        assert await merchant_balance(parts, CKO_MERCHANT) == 7_000  # 4000 + 3000 reversed

        again = await send(captured)
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")

        signed = cko_payment("evt_cko_forged", "payment_refunded", 500, "act_e2ecko_forged",
                             total_captured=10_000, total_refunded=3_500)  # fmt: skip
        tampered = signed.replace(b'"amount":500', b'"amount":50')
        assert tampered != signed
        forged = await send(tampered, signed=signed)
        assert forged.status_code == 401
        assert forged.json()["error"] == "signature_mismatch"
        assert await merchant_balance(parts, CKO_MERCHANT) == 7_000

    assert await stored_ids(database_url, "checkout") == [
        "evt_cko_approved",
        "evt_cko_captured",
        "evt_cko_refund_1",
        "evt_cko_refund_2",
        "evt_cko_dispute_evidence",
        "evt_cko_dispute_won",
    ]
    assert await settled(database_url, "checkout") == [
        ("authorisation", CKO_PAYMENT, 10_000, CKO_MERCHANT),
        ("capture", "act_e2ecko_capture", 10_000, CKO_MERCHANT),
        ("refund", "act_e2ecko_refund_1", 1_000, CKO_MERCHANT),
        ("refund", "act_e2ecko_refund_2", 2_000, CKO_MERCHANT),
        ("chargeback", CKO_DISPUTE, 3_000, CKO_MERCHANT),
        ("chargeback_reversal", CKO_DISPUTE, 3_000, CKO_MERCHANT),
    ]
    await nothing_parked(database_url)


# Square


SQ_MERCHANT = "6SSW7HV8K2ST5"
SQ_PAYMENT = "hYy9pRFVxpDsO1FB05SunFWUe9JZY"
SQ_DISPUTE = "ORSEVtZAJxb37RA1EiGw"


def sq_event(event_id: str, event_type: str, kind: str, obj: dict[str, Any]) -> bytes:
    """Square's envelope (payment_created.json and its siblings): the seller is the
    envelope's `merchant_id`, the object under `data.object.<kind>`."""
    return orjson.dumps(
        {
            "merchant_id": SQ_MERCHANT,
            "type": event_type,
            "event_id": event_id,
            "created_at": "2026-02-06T21:27:30.792Z",
            "data": {"type": kind, "id": obj["id"], "object": {kind: obj}},
        }
    )


def usd(amount: int) -> dict[str, Any]:
    return {"amount": amount, "currency": "USD"}


def sq_payment(event_id: str, event_type: str, status: str) -> bytes:
    return sq_event(event_id, event_type, "payment", {
        "id": SQ_PAYMENT, "status": status, "source_type": "CARD",
        "amount_money": usd(10_000), "approved_money": usd(10_000), "total_money": usd(10_000),
        "location_id": "S8GWD5R9QB376", "order_id": "03O3USaPaAaFnI6kkwB1JxGgBsUZY",
        "created_at": "2026-02-06T21:16:51.086Z",
    })  # fmt: skip


def sq_refund(event_id: str, refund_id: str, amount: int) -> bytes:
    return sq_event(event_id, "refund.updated", "refund", {
        "id": refund_id, "payment_id": SQ_PAYMENT, "status": "COMPLETED",
        "amount_money": usd(amount), "location_id": "S8GWD5R9QB376", "version": 10,
    })  # fmt: skip


def sq_dispute(event_id: str, state: str) -> bytes:
    return sq_event(event_id, "dispute.state.updated", "dispute", {
        "id": SQ_DISPUTE, "state": state, "amount_money": usd(3_000),
        "disputed_payment": {"payment_id": SQ_PAYMENT}, "reason": "AMOUNT_DIFFERS",
        "card_brand": "VISA", "location_id": "VJDQQP3CG14EY",
    })  # fmt: skip


async def test_a_square_payment_is_verified_settled_refunded_and_disputed(
    doc: dict[str, Any], database_url: str
) -> None:
    """Square (`x-square-hmacsha256-signature`, base64 HMAC-SHA256 of the notification
    URL and the body; every signature sent is also accepted by Square's own
    `verify_signature`): `payment.created` APPROVED reserves 10000, `payment.updated`
    COMPLETED credits it; two `refund.updated` COMPLETED (1000, then 2000 signed with
    the older key) leave 7000; `dispute.state.updated` LOST takes 3000 (4000) and WON
    gives it back (7000). Refunds and disputes carry the same seller in the envelope.
    The capture again is a duplicate; a body changed after signing is refused 401 and
    stored nowhere; every event is recorded by its `event_id`."""
    header = "x-square-hmacsha256-signature"

    async def send(body: bytes, key: str = SQUARE_KEY, signed: bytes | None = None) -> Any:
        sig = square_signature(key, body if signed is None else signed)
        assert verify_signature(
            request_body=(body if signed is None else signed).decode(),
            signature_header=sig,
            signature_key=key,
            notification_url=SQUARE_URL,
        )
        return await post(server, "square", body, header, sig)

    created = sq_payment("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a01", "payment.created", "APPROVED")
    completed = sq_payment("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a02", "payment.updated", "COMPLETED")
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, SQ_MERCHANT)

        assert (await send(created)).status_code == 200
        await wait_until(lambda: ended(database_url, 1))
        assert await held(parts, SQ_MERCHANT) == (0, 10_000)  # reserved, not yet credited

        answer = await send(completed)
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted"), answer.text
        await wait_until(lambda: ended(database_url, 2))
        assert await held(parts, SQ_MERCHANT) == (10_000, 0)  # the reservation posted

        refund_1 = sq_refund("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a03", "rf_e2e_sq_1", 1_000)
        refund_2 = sq_refund("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a04", "rf_e2e_sq_2", 2_000)
        assert (await send(refund_1)).status_code == 200
        rotated = await send(refund_2, key=SQUARE_OLDER)  # the older secret still verifies
        assert (rotated.status_code, rotated.json()["status"]) == (200, "accepted")
        await wait_until(lambda: ended(database_url, 4))
        assert await merchant_balance(parts, SQ_MERCHANT) == 7_000  # 10000 - 1000 - 2000

        lost = sq_dispute("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a05", "LOST")
        assert (await send(lost)).status_code == 200
        await wait_until(lambda: ended(database_url, 5))
        assert await merchant_balance(parts, SQ_MERCHANT) == 4_000  # 7000 - 3000 chargeback

        won = sq_dispute("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a06", "WON")
        assert (await send(won)).status_code == 200
        await wait_until(lambda: ended(database_url, 6))
        assert await merchant_balance(parts, SQ_MERCHANT) == 7_000  # 4000 + 3000 reversed

        again = await send(completed)
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")

        signed = sq_refund("5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4aff", "rf_e2e_sq_forged", 500)
        tampered = signed.replace(b'"amount":500', b'"amount":50')
        assert tampered != signed
        assert not verify_signature(
            request_body=tampered.decode(),
            signature_header=square_signature(SQUARE_KEY, signed),
            signature_key=SQUARE_KEY,
            notification_url=SQUARE_URL,
        )
        forged = await send(tampered, signed=signed)
        assert forged.status_code == 401
        assert forged.json()["error"] == "signature_mismatch"
        assert await merchant_balance(parts, SQ_MERCHANT) == 7_000

    assert await stored_ids(database_url, "square") == [
        "5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a01",
        "5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a02",
        "5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a03",
        "5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a04",
        "5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a05",
        "5b3a6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a06",
    ]
    assert await settled(database_url, "square") == [
        ("authorisation", SQ_PAYMENT, 10_000, SQ_MERCHANT),
        ("capture", None, 10_000, SQ_MERCHANT),
        ("refund", "rf_e2e_sq_1", 1_000, SQ_MERCHANT),
        ("refund", "rf_e2e_sq_2", 2_000, SQ_MERCHANT),
        ("chargeback", SQ_DISPUTE, 3_000, SQ_MERCHANT),
        ("chargeback_reversal", SQ_DISPUTE, 3_000, SQ_MERCHANT),
    ]
    await nothing_parked(database_url)


# Paystack


PS_MERCHANT = "m_paystack_e2e"
PS_REFERENCE = "T_e2e_ps_qTPrJoy9Bx"
PS_TRANSACTION = 4099260516
PS_DISPUTE = 358950


def ps_charge() -> bytes:
    """`charge.success`, shaped like charge_success.json, the merchant in `metadata`."""
    return orjson.dumps(
        {
            "event": "charge.success",
            "data": {
                "id": PS_TRANSACTION,
                "domain": "test",
                "status": "success",
                "reference": PS_REFERENCE,
                "amount": 10_000,
                "gateway_response": "Successful",
                "paid_at": "2026-02-11T10:42:20.000Z",
                "channel": "card",
                "currency": "USD",
                "metadata": {"merchant_id": PS_MERCHANT},
                "fees": 290,
                "customer": {"id": 68324, "email": "customer@example.com"},
                "plan": {},
            },
        }
    )


def ps_refund(refund_reference: str, amount: int | str) -> bytes:
    """`refund.processed`, shaped like refund_processed.json: no `data.id`, the refund
    named by `refund_reference`, its payment by `transaction_reference`."""
    return orjson.dumps(
        {
            "event": "refund.processed",
            "data": {
                "status": "processed",
                "transaction_reference": PS_REFERENCE,
                "refund_reference": refund_reference,
                "amount": amount,
                "currency": "USD",
                "processor": "mpgs_zen",
                "customer": {"email": "customer@example.com"},
                "integration": 412829,
                "domain": "test",
            },
        }
    )


def ps_dispute_resolved() -> bytes:
    """`charge.dispute.resolve`, shaped like charge_dispute_resolve.json, accepted by
    the merchant for 3000."""
    return orjson.dumps(
        {
            "event": "charge.dispute.resolve",
            "data": {
                "id": PS_DISPUTE,
                "refund_amount": 3_000,
                "currency": "USD",
                "status": "resolved",
                "resolution": "merchant-accepted",
                "domain": "test",
                "transaction": {
                    "id": PS_TRANSACTION,
                    "status": "success",
                    "reference": PS_REFERENCE,
                    "amount": 10_000,
                    "currency": "USD",
                    "metadata": {"merchant_id": PS_MERCHANT},
                },
                "transaction_reference": None,
                "category": "chargeback",
                "resolvedAt": "2026-02-20T14:00:02.000Z",
            },
        }
    )


async def test_a_paystack_charge_is_verified_settled_refunded_and_charged_back(
    doc: dict[str, Any], database_url: str
) -> None:
    """Paystack (`x-paystack-signature`, hex HMAC-SHA512 of the body with the secret
    key): `charge.success` credits 10000 (Paystack captures at once: no authorisation);
    two `refund.processed` (1000 as the string Paystack's example writes, then 2000
    signed with the older key) leave 7000; `charge.dispute.resolve` merchant-accepted
    takes 3000 (4000). No reversal step: Paystack's mapping has no chargeback reversal
    (a `declined` resolution moves nothing). Events are recorded as `EVENT:data.id`, a
    refund (no `data.id`) as `EVENT:data.refund_reference`. The charge again is a
    duplicate; a refund changed after signing is refused 401 and stored nowhere."""
    header = "x-paystack-signature"

    async def send(body: bytes, key: str = PAYSTACK_KEY, signed: bytes | None = None) -> Any:
        sig = paystack_signature(key, body if signed is None else signed)
        return await post(server, "paystack", body, header, sig)

    charge = ps_charge()
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, PS_MERCHANT)

        answer = await send(charge)
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted"), answer.text
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, PS_MERCHANT) == 10_000

        assert (await send(ps_refund("RF_e2e_ps_1", "1000"))).status_code == 200
        rotated = await send(ps_refund("RF_e2e_ps_2", 2_000), key=PAYSTACK_OLDER)
        assert (rotated.status_code, rotated.json()["status"]) == (200, "accepted")
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, PS_MERCHANT) == 7_000  # 10000 - 1000 - 2000

        assert (await send(ps_dispute_resolved())).status_code == 200
        await wait_until(lambda: ended(database_url, 4))
        assert await merchant_balance(parts, PS_MERCHANT) == 4_000  # 7000 - 3000 chargeback

        again = await send(charge)
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")

        signed = ps_refund("RF_e2e_ps_forged", 500)
        tampered = signed.replace(b'"amount":500', b'"amount":50')
        assert tampered != signed
        forged = await send(tampered, signed=signed)
        assert forged.status_code == 401
        assert forged.json()["error"] == "signature_mismatch"
        assert await merchant_balance(parts, PS_MERCHANT) == 4_000

    assert await stored_ids(database_url, "paystack") == [
        f"charge.success:{PS_TRANSACTION}",
        "refund.processed:RF_e2e_ps_1",
        "refund.processed:RF_e2e_ps_2",
        f"charge.dispute.resolve:{PS_DISPUTE}",
    ]
    assert await settled(database_url, "paystack") == [
        ("capture", None, 10_000, PS_MERCHANT),
        ("refund", "RF_e2e_ps_1", 1_000, PS_MERCHANT),
        ("refund", "RF_e2e_ps_2", 2_000, PS_MERCHANT),
        ("chargeback", str(PS_DISPUTE), 3_000, PS_MERCHANT),
    ]
    await nothing_parked(database_url)
