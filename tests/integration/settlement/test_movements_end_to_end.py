"""Money movements end to end: signed webhooks in, the real worker, the ledger's balance,
and what an operator sees (dead letters, the unmapped counter), with the default
`[settlement] subjects` (everything)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.support import vectors
from tests.support.deliveries import deliver
from tests.support.gateway import BILLING_TOKEN, RunningServer, config, running_server
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    return config(database_url, nats_url, **settlement_sections(stub.url, redis_url))


async def post(server: RunningServer, scheme: str, event_id: str, body: dict[str, Any]) -> None:
    d = deliver(scheme, event_id, body=orjson.dumps(body))
    response = await server.client.post(d.path, content=d.body, headers=d.headers)
    assert response.status_code == 200, response.text


async def ended(dsn: str, n: int) -> bool:
    """At least `n` events were consumed to an end (settled, netted, parked)."""
    rows = await fetch(
        dsn,
        "SELECT (SELECT count(*) FROM settlements WHERE state = 'settled')"
        " + (SELECT count(*) FROM payment_claims WHERE ledger_due_minor = 0)"
        " + (SELECT count(*) FROM dlq_webhooks) AS n",
    )
    return int(rows[0]["n"]) >= n


def stripe(event_id: str, event_type: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "type": event_type, "data": {"object": obj}}


async def test_two_partial_refunds_on_todays_stripe_api_leave_the_right_balance(
    doc: dict[str, Any], database_url: str
) -> None:
    """The reproduction: capture 5000, refund 1000, refund 2000 more (`amount_refunded`
    3000, no refunds listed). It used to park the second as LEDGER_ID_COLLISION with the
    balance 2000 too high; now 2000 is left and nothing is parked."""
    charge = {"id": "ch_3", "payment_intent": "pi_3", "currency": "usd"}
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post(server, "stripe", "evt_c", stripe("evt_c", "payment_intent.succeeded", {
            "id": "pi_3", "amount_received": 5000, "currency": "usd",
            "metadata": {"merchant_id": "m_1"}}))  # fmt: skip
        await wait_until(lambda: ended(database_url, 1))
        await post(
            server,
            "stripe",
            "evt_r1",
            stripe("evt_r1", "charge.refunded", {**charge, "amount_refunded": 1000}),
        )
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, "m_1") == 4000
        await post(
            server,
            "stripe",
            "evt_r2",
            stripe("evt_r2", "charge.refunded", {**charge, "amount_refunded": 3000}),
        )
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, "m_1") == 2000
    assert await fetch(database_url, "SELECT 1 FROM dlq_webhooks") == []
    rows = await fetch(
        database_url,
        "SELECT kind, refund_id, amount_minor FROM settlements WHERE kind = 'refund' ORDER BY id",
    )
    assert [tuple(r.values()) for r in rows] == [
        ("refund", "refunded:1000", 1000),
        ("refund", "refunded:3000", 2000),
    ]


async def test_a_paddle_payment_and_its_refund_settle_and_other_types_are_counted(
    doc: dict[str, Any], database_url: str
) -> None:
    txn = {"id": "txn_01", "status": "completed", "currency_code": "EUR",
           "custom_data": {"merchant_id": "m_p"},
           "details": {"totals": {"grand_total": "65215", "currency_code": "EUR"}}}  # fmt: skip
    adjustment = {"id": "adj_01", "action": "refund", "currency_code": "EUR",
                  "transaction_id": "txn_01", "totals": {"total": "10887"}}  # fmt: skip
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_p")
        await post(server, "paddle", "evt_p1", {
            "event_id": "evt_p1", "event_type": "transaction.completed", "data": txn})  # fmt: skip
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, "m_p") == 70_432  # EUR 652.15 at 1.08
        # Created while pending approval (nothing moves, counted), approved later.
        await post(server, "paddle", "evt_p2", {
            "event_id": "evt_p2", "event_type": "adjustment.created",
            "data": {**adjustment, "status": "pending_approval"}})  # fmt: skip
        await post(server, "paddle", "evt_p3", {
            "event_id": "evt_p3", "event_type": "adjustment.updated",
            "data": {**adjustment, "status": "approved"}})  # fmt: skip
        await post(
            server,
            "paddle",
            "evt_p4",
            {"event_id": "evt_p4", "event_type": "customer.created", "data": {"id": "ctm_1"}},
        )
        await post(server, "github", "gh_1", {"zen": "push"})  # never money: not counted

        async def counted() -> bool:
            unmapped = parts.metrics.settlement_unmapped_total
            return unmapped.get(provider="paddle", type="customer.created") == 1

        await wait_until(lambda: ended(database_url, 2))
        await wait_until(counted)
        # The refund at the payment's own rate: EUR 108.87 at 1.08.
        assert await merchant_balance(parts, "m_p") == 70_432 - 11_758
        unmapped = parts.metrics.settlement_unmapped_total
        assert unmapped.get(provider="paddle", type="adjustment.created") == 1
        assert {labels for labels in unmapped.values} == {
            (("provider", "paddle"), ("type", "adjustment.created")),
            (("provider", "paddle"), ("type", "customer.created")),
        }
    assert await fetch(database_url, "SELECT 1 FROM dlq_webhooks") == []
    # Recorded for the console's overview too (at the latest when the worker stops).
    recorded = await fetch(
        database_url, "SELECT provider, event_type, events FROM settlement_unmapped ORDER BY 2"
    )
    assert [tuple(r.values()) for r in recorded] == [
        ("paddle", "adjustment.created", 1),
        ("paddle", "customer.created", 1),
    ]


async def test_a_provider_that_parks_what_moves_no_money_and_names_its_merchant_elsewhere(
    database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    """`[providers.stripe] unmapped = "park"`: a customer event is parked as
    EVENT_NOT_MAPPED; `merchant = ["/data/object/transfer_data/destination"]`: a payment
    settles for the connected account it names, not for its metadata."""
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    doc["providers"]["stripe"] |= {
        "unmapped": "park",
        "merchant": ["/data/object/transfer_data/destination"],
    }
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "acct_9")
        await post(server, "stripe", "evt_p", stripe("evt_p", "payment_intent.succeeded", {
            "id": "pi_9", "amount_received": 700, "currency": "usd",
            "metadata": {"merchant_id": "m_other"},
            "transfer_data": {"destination": "acct_9"}}))  # fmt: skip
        await post(server, "stripe", "evt_c", stripe("evt_c", "customer.created", {"id": "c"}))
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, "acct_9") == 700
    rows = await fetch(database_url, "SELECT error_class, error_message FROM dlq_webhooks")
    assert [r["error_class"] for r in rows] == ["EVENT_NOT_MAPPED"]
    assert "customer.created" in rows[0]["error_message"]


async def test_one_bad_internal_payment_holds_only_itself(
    doc: dict[str, Any], database_url: str
) -> None:
    """Without an `Ordering-Key`, internal events are keyed by their payment: a parked
    capture (an amount of 2^64) holds its own payment's refund, not the next payment."""
    auth = {"Authorization": f"Bearer {BILLING_TOKEN}"}

    async def publish(key: str, event_type: str, data: dict[str, Any]) -> None:
        # 2**64 is past what orjson writes: the amount goes in as text, as a sender's would.
        huge = data.get("amount_minor") == 2**64
        body = orjson.dumps({"type": event_type, "data": {**data, "amount_minor": 0}})
        content = body.replace(b'"amount_minor":0', b'"amount_minor":18446744073709551616')
        answer = await server.client.post(
            "/v1/events",
            content=content if huge else orjson.dumps({"type": event_type, "data": data}),
            headers={**auth, "Idempotency-Key": key},
        )
        assert answer.status_code == 200, answer.text

    money = {"merchant_id": "m_i", "currency": "USD"}
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_i")
        await publish("k1", "payment.captured", {**money, "settlement_id": "s_bad",
                                                 "amount_minor": 2**64})  # fmt: skip
        await publish("k2", "payment.refunded", {**money, "settlement_id": "s_bad",
                                                 "amount_minor": 5, "refund_id": "r"})  # fmt: skip
        await publish("k3", "payment.captured", {**money, "settlement_id": "s_good",
                                                 "amount_minor": 900})  # fmt: skip
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, "m_i") == 900
    rows = await fetch(database_url, "SELECT event_id, error_class FROM dlq_webhooks ORDER BY id")
    assert [(r["event_id"], r["error_class"]) for r in rows] == [
        ("k1", "FIELD_TYPE_INVALID"),  # read as a float: not an amount in minor units
        ("k2", "BLOCKED_BY_PREDECESSOR"),
    ]


async def test_a_razorpay_payment_is_verified_recorded_once_and_settled(
    doc: dict[str, Any], database_url: str
) -> None:
    """Signed as Razorpay signs (an independent signer): authorised, captured and
    refunded in part, settled; the capture posted again is a duplicate; a tampered body
    is refused with 401 and stored nowhere."""
    secret = "rzp_whsec_test"
    doc["providers"]["razorpay"] = {"scheme": "razorpay", "secrets": [secret]}
    paid = {"id": "pay_e2e", "amount": 25_000, "currency": "USD",
            "notes": {"merchant_id": "m_rzp"}}  # fmt: skip

    def body(event_type: str, **payload: Any) -> bytes:
        return orjson.dumps({"entity": "event", "event": event_type,
                             "payload": {"payment": {"entity": paid}, **payload}})  # fmt: skip

    async def send(event_id: str, raw: bytes, signed: bytes | None = None) -> Any:
        signature = vectors.razorpay_hex(secret, raw if signed is None else signed)
        headers = {"Content-Type": "application/json", "X-Razorpay-Signature": signature,
                   "X-Razorpay-Event-Id": event_id}  # fmt: skip
        return await server.client.post("/webhooks/razorpay", content=raw, headers=headers)

    refund = {"entity": {"id": "rfnd_e2e", "payment_id": "pay_e2e", "amount": 5_000,
                         "currency": "USD"}}  # fmt: skip
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_rzp")
        for event_id, raw in (("evt_a", body("payment.authorized")),
                              ("evt_c", body("payment.captured")),
                              ("evt_r", body("refund.processed", refund=refund))):  # fmt: skip
            answer = await send(event_id, raw)
            assert answer.status_code == 200, answer.text
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, "m_rzp") == 20_000
        again = await send("evt_c", body("payment.captured"))
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")
        captured = body("payment.captured")
        forged = await send("evt_x", captured.replace(b"25000", b"99999"), signed=captured)
        assert forged.status_code == 401
    stored = await fetch(
        database_url, "SELECT event_id FROM processed_webhooks WHERE provider = 'razorpay'"
    )
    assert sorted(r["event_id"] for r in stored) == ["evt_a", "evt_c", "evt_r"]
