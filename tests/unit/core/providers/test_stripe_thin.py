"""Stripe's thin events: held to stripe-python (`StripeClient.parse_event_notification`
verifies what the gateway signs and reads the same id, type and related object; the
gateway verifies what `stripe.WebhookSignature` signs), then what is fetched, what the
answer becomes, and what it settles. Table-driven, pure."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import stripe

from gateway.core.providers import get_provider
from gateway.core.providers.stripe.thin import (
    STRIPE_THIN,
    awaits,
    confirmed,
    headers,
    locate,
)
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures import SchemeParams
from gateway.errors import ConfirmationMismatch, PayloadInvalid, SignatureMismatch

SECRET = "whsec_thin_4eC39HqLyjWDarjtT1zdp7dc"
SNAPSHOT_SECRET = "whsec_snapshot_Zx8vB2nM4qW6eR7tY9uI"
PARAMS = SchemeParams(secrets=(SECRET,))


def thin(event_type: str = "v1.payment_intent.succeeded", context: object = None,
         url: str = "/v1/payment_intents/pi_3Thin", object_id: str = "pi_3Thin",
         kind: str = "payment_intent") -> dict[str, Any]:  # fmt: skip
    return {"id": "evt_test_65Thin", "object": "v2.core.event", "type": event_type,
            "created": "2026-12-06T10:00:00.000Z", "livemode": False, "context": context,
            "related_object": {"id": object_id, "type": kind, "url": url},
            "reason": None}  # fmt: skip


def test_stripe_python_parses_and_verifies_what_the_gateway_signs() -> None:
    body = orjson.dumps(thin(context="acct_1Conn"))
    signed = STRIPE_THIN.scheme.sign(PARAMS, body, int(time.time()))
    client = stripe.StripeClient("sk_test_unused")
    notification = client.parse_event_notification(body, signed["Stripe-Signature"], SECRET)
    assert isinstance(notification, stripe.events.V1PaymentIntentSucceededEventNotification)
    assert (notification.id, notification.type) == ("evt_test_65Thin",
                                                     "v1.payment_intent.succeeded")  # fmt: skip
    assert str(notification.context) == "acct_1Conn"
    assert notification.related_object.url == locate(orjson.loads(body))
    # The snapshot endpoint's secret does not verify a thin event (stripe-node #2337).
    with pytest.raises(stripe.SignatureVerificationError):
        client.parse_event_notification(body, signed["Stripe-Signature"], SNAPSHOT_SECRET)


def test_the_gateway_verifies_what_stripe_python_signs_and_nothing_else() -> None:
    body = orjson.dumps(thin())
    now = int(time.time())
    mac = stripe.WebhookSignature._compute_signature(f"{now}.{body.decode()}", SECRET)
    header = {"stripe-signature": f"t={now},v1={mac}"}
    STRIPE_THIN.scheme.verify(PARAMS, header, body, now)
    with pytest.raises(SignatureMismatch):
        STRIPE_THIN.scheme.verify(SchemeParams(secrets=(SNAPSHOT_SECRET,)), header, body, now)
    with pytest.raises(SignatureMismatch):
        STRIPE_THIN.scheme.verify(PARAMS, header, body.replace(b"pi_3", b"pi_4"), now)


@pytest.mark.parametrize(
    ("event_type", "owed"),
    [("v1.payment_intent.succeeded", True), ("v1.charge.refunded", True),
     ("v1.refund.created", True), ("v1.charge.dispute.funds_withdrawn", True),
     ("v1.payout.paid", True), ("v1.payment_intent.created", False),
     ("v1.customer.created", False), ("v2.core.event_destination.ping", False),
     ("payment_intent.succeeded", False), ("v1.", False)],
)  # fmt: skip
def test_only_v1_types_that_move_money_wait_for_a_fetch(event_type: str, owed: bool) -> None:
    assert awaits(event_type) is owed
    assert STRIPE_THIN.confirmation is not None
    assert STRIPE_THIN.confirmation.owed(event_type) is owed


@pytest.mark.parametrize(
    ("doc", "problem"),
    [(thin(url="/v1/payment_intents/pi_3Thin?expand=x"), "url"),
     (thin(url="/v1/payment_intents/../accounts/pi_3Thin"), "url"),
     (thin(url="https://evil.example/v1/payment_intents/pi_3Thin"), "url"),
     (thin(url="/v2/core/events/pi_3Thin"), "url"),
     (thin(url="/v1/payment_intents/pi_3Other"), "does not end"),
     (thin(kind=""), "type"),
     (thin(event_type="v1.customer.created"), "not fetched"),
     ({**thin(), "related_object": None}, "no related_object"),
     ({**thin(), "id": "pi_1"}, "event id"), ([], "not a Stripe thin event"),
     (thin(context="acct_1; rm -rf"), "context"), (thin(context="acct_1/"), "context"),
     (thin(context=7), "context")],
)  # fmt: skip
def test_locate_refuses_what_is_not_a_v1_resource_of_the_event(doc: Any, problem: str) -> None:
    with pytest.raises(PayloadInvalid, match=problem):
        locate(doc)
        headers(doc)


def test_a_connected_accounts_event_is_fetched_in_its_context() -> None:
    assert headers(thin(context="acct_1Conn")) == {"Stripe-Context": "acct_1Conn"}
    assert headers(thin(context="acct_1/acct_2")) == {"Stripe-Context": "acct_1/acct_2"}
    assert headers(thin()) == {}
    (item,) = confirmed(thin(context="acct_1/acct_2"), INTENT)
    assert orjson.loads(item.body)["account"] == "acct_2"


INTENT = {"id": "pi_3Thin", "object": "payment_intent", "amount": 5_000,
          "amount_received": 5_000, "currency": "usd",
          "metadata": {"merchant_id": "m_thin"}}  # fmt: skip


def test_the_answer_becomes_a_snapshot_event_the_stripe_movements_settle() -> None:
    (item,) = confirmed(thin(), INTENT)
    assert (item.event_id, item.event_type) == ("evt_test_65Thin:confirmed",
                                                "payment_intent.succeeded")  # fmt: skip
    doc = orjson.loads(item.body)
    assert doc["data"]["object"] == INTENT and doc["account"] is None
    movements = get_provider("stripe_thin").movements
    assert movements is not None
    found = movements.instruction(item.event_type, doc)
    assert found is not None
    assert (found.kind, found.settlement_id, found.amount_minor, found.currency,
            found.merchant_id) == (SettlementKind.CAPTURE, "pi_3Thin", 5_000, "USD",
                                   "m_thin")  # fmt: skip


def test_a_connected_accounts_payout_is_that_merchants() -> None:
    payout = {"id": "po_1Thin", "object": "payout", "amount": 2_000, "currency": "usd"}
    doc_in = thin("v1.payout.paid", "acct_1Conn", "/v1/payouts/po_1Thin", "po_1Thin", "payout")
    (item,) = confirmed(doc_in, payout)
    movements = STRIPE_THIN.movements
    assert movements is not None
    found = movements.instruction(item.event_type, orjson.loads(item.body))
    assert found is not None
    assert (found.kind, found.merchant_id, found.amount_minor) == (
        SettlementKind.PAYOUT, "acct_1Conn", 2_000)  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "error"),
    [({**INTENT, "id": "pi_3Other"}, ConfirmationMismatch),
     ({**INTENT, "object": "charge"}, ConfirmationMismatch),
     ({**INTENT, "id": 7}, ConfirmationMismatch), ([INTENT], PayloadInvalid)],
)  # fmt: skip
def test_an_answer_about_another_object_is_refused(answer: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        confirmed(thin(), answer)
