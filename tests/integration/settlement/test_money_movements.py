"""Every money movement on a real ledger: refunds (one by one, as a running total, both),
failed refunds, chargebacks and their reversals, a merchant taken below zero, a converted
payment refunded whole after the rate moved, Paddle and internal events, and the
confirmed events of Mollie, GoCardless and Stripe's thin events (read from their API's
answers by the real provider modules). Each scenario
runs in its natural order and in shuffled orders of arrival, on PostgreSQL and on
TigerBeetle (when `TIGERBEETLE_ADDRESS` names a server), and ends in the same balance.

Events are settled one at a time as the worker would meet them: an event whose payment
has not settled yet (`PaymentNotSettled`, retried by the worker) is tried again after
each later one, as its retries would.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.core.confirm.events import Shaping, confirmed_events
from gateway.core.events.model import Event
from gateway.core.ledger.ids import FX_OWNER, clearing_account_id
from gateway.core.ledger.port import verify_totals
from gateway.core.providers.gocardless import answer as gocardless_answer
from gateway.core.providers.gocardless.webhooks import GOCARDLESS
from gateway.core.providers.mollie import classic as mollie
from gateway.core.providers.mollie.answer import confirmed
from gateway.core.providers.stripe import thin as stripe_thin
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind, fx_transfer
from gateway.core.signatures.braintree import signed_form
from gateway.errors import ExceedsPayment, LedgerIdCollision, PaymentNotSettled
from gateway.settlement.batch import settle_batch
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.wiring.settlement import settlement_parts
from tests.support.gateway import config
from tests.support.mollie_api import MollieApi
from tests.support.settlement import (
    ledger_section,
    merchant_balance,
    open_merchant,
    settlement_sections,
)
from tests.support.stub import Stub

#: The Braintree key pair its notifications are signed with (the settler verifies nothing).
BRAINTREE_KEYS = "money_public:money_private"
#: The `mollie` provider's keys: its API is never called here (the answers are built
#: below), but the settings want one to parse.
MOLLIE_ENV = {"MOLLIE_KEY": "test_x"}
MOLLIE_PROVIDER = {"scheme": "mollie", "api_key_env": "MOLLIE_KEY", "api_url": "http://127.0.0.1:9",
                   "insecure_api_url": True, "api_hosts": ["127.0.0.1"]}  # fmt: skip
#: How the confirm stage shapes the `mollie` provider's events (its default order key).
MOLLIE_SHAPING = Shaping("mollie", order_rules=mollie.MOLLIE.order_keys, ordered=lambda _: True)
GOCARDLESS_SHAPING = Shaping("gocardless", order_rules=GOCARDLESS.order_keys,
                             ordered=lambda _: True)  # fmt: skip
THIN_SHAPING = Shaping("stripe_thin", order_rules=stripe_thin.STRIPE_THIN.order_keys,
                       ordered=lambda _: True)  # fmt: skip


@functools.cache
def mollie_payments() -> MollieApi:
    """Mollie's payments, answered in the stand-in's shapes (never served here: only its
    answer builder is used). One for the module: each `Payment` has ids of its own."""
    return MollieApi()


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def parts(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    sections = settlement_sections(stub.url, redis_url, ledger=ledger_section(request.param))
    doc = config(database_url, nats_url, **sections)
    doc["providers"]["razorpay"] = {"scheme": "razorpay", "secrets": ["rzp_test_secret"]}
    for scheme in ("adyen", "checkout", "paystack"):
        doc["providers"][scheme] = {"scheme": scheme, "secrets": ["00ff00ff00ff00ff"]}
    doc["providers"]["square"] = {"scheme": "square", "secrets": ["sq"],
                                  "notification_url": "https://gateway.example/sq"}  # fmt: skip
    doc["providers"]["braintree"] = {"scheme": "braintree", "secrets": [BRAINTREE_KEYS]}
    doc["providers"]["paypal"] = {"scheme": "paypal", "webhook_id": "WH-MONEY"}
    doc["providers"]["mollie"] = MOLLIE_PROVIDER
    doc["providers"]["gocardless"] = {"scheme": "gocardless", "secrets": ["gc_money"]}
    doc["providers"]["stripe_thin"] = {**MOLLIE_PROVIDER, "scheme": "stripe_thin",
                                       "secrets": ["whsec_money_thin"]}  # fmt: skip
    async with settlement_parts(settings_mod.parse(doc, env=MOLLIE_ENV)) as p:
        await p.settler.open_clearing_accounts()
        yield p


class Payment:
    """One payment's events, under ids of its own (TigerBeetle keeps every run's)."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:10]
        self.merchant = f"m_{self.tag}"
        self.pi = f"pi_{self.tag}"
        self.tr = f"tr_{self.tag}"  # Mollie's: tr_ and letters or digits only
        self._n = 0
        self._mollie_told: set[str] = set()

    def _event(self, provider: str, event_type: str, doc: dict[str, Any]) -> Event:
        self._n += 1
        event_id = f"evt_{self.tag}_{self._n}"
        body = orjson.dumps({"id": event_id, "event_id": event_id, **doc})
        subject = f"webhooks.{provider}.{event_type}"
        return Event(provider, event_id, event_type, subject, {}, body, datetime.now(UTC))

    def stripe(self, event_type: str, obj: dict[str, Any]) -> Event:
        return self._event("stripe", event_type, {"type": event_type, "data": {"object": obj}})

    def capture(self, amount: int, currency: str = "usd") -> Event:
        return self.stripe("payment_intent.succeeded", {
            "id": self.pi, "amount_received": amount, "currency": currency,
            "metadata": {"merchant_id": self.merchant}})  # fmt: skip

    def charge_refunded(self, total: int, currency: str = "usd", listed: bool = False) -> Event:
        """`charge.refunded` as today's API sends it (no list), or as before 2022-11-15."""
        charge: dict[str, Any] = {"id": f"ch_{self.tag}", "payment_intent": self.pi,
                                  "amount_refunded": total, "currency": currency}  # fmt: skip
        if listed:  # the old shape lists the refunds: the newest is not the whole story
            charge["refunds"] = {"data": [{"id": f"re_{self.tag}_x", "amount": 1, "created": 1}]}
        return self.stripe("charge.refunded", charge)

    def refund(self, rid: str, amount: int, status: str = "succeeded", kind: str = "created",
               currency: str = "usd") -> Event:  # fmt: skip
        return self.stripe(f"refund.{kind}", {
            "id": f"re_{self.tag}_{rid}", "object": "refund", "amount": amount,
            "currency": currency, "payment_intent": self.pi, "status": status})  # fmt: skip

    def dispute(self, event: str, amount: int, fee: int = 0, returned: bool = False,
                status: str = "under_review") -> Event:  # fmt: skip
        """A dispute event; `fee`: the fee its withdrawal charged (listed, as Stripe lists
        it, in its balance transactions), `returned` when the reinstatement returns it."""
        bts = [{"id": f"txn_{self.tag}_w", "amount": -amount, "fee": fee, "currency": "usd"}]
        if event == "funds_reinstated" or status == "won":
            bts.append({"id": f"txn_{self.tag}_r", "amount": amount,
                        "fee": -fee if returned else 0, "currency": "usd"})  # fmt: skip
        return self.stripe(f"charge.dispute.{event}", {
            "id": f"dp_{self.tag}", "amount": amount, "currency": "usd",
            "payment_intent": self.pi, "balance_transactions": bts,
            "status": status})  # fmt: skip

    def payout(self, amount: int) -> Event:
        """Stripe Connect's `payout.paid` of the connected account (the merchant)."""
        event = self.stripe("payout.paid", {"id": f"po_{self.tag}", "object": "payout",
                                            "amount": amount, "currency": "usd"})  # fmt: skip
        doc = orjson.loads(event.body)
        return dataclasses.replace(event, body=orjson.dumps({**doc, "account": self.merchant}))

    def razorpay(self, event_type: str, amount: int, own_id: str | None = None) -> Event:
        """A Razorpay event of this payment: its payment, or a refund (`rfnd_…`) or
        dispute (`disp_…`) of it, as `own_id` says."""
        paid = {"id": self.pi, "amount": 50_000, "currency": "USD",
                "notes": {"merchant_id": self.merchant}}  # fmt: skip
        payload: dict[str, Any] = {"payment": {"entity": {**paid, "amount": amount}}}
        if own_id is not None:
            entity = "refund" if own_id.startswith("rfnd") else "dispute"
            payload = {entity: {"entity": {"id": f"{own_id}_{self.tag}", "amount": amount,
                                           "payment_id": self.pi, "currency": "USD"}},
                       "payment": {"entity": paid}}  # fmt: skip
        return self._event("razorpay", event_type, {"event": event_type, "payload": payload})

    def adyen(self, code: str, amount: int, own: str = "", success: str = "true") -> Event:
        """An Adyen notification of this payment: the payment's own (AUTHORISATION) or a
        modification or dispute under its own reference `own`."""
        psp = f"{own}{self.tag}".upper() if own else self.pi.upper()
        item = {"pspReference": psp, "merchantAccountCode": self.merchant,
                "amount": {"value": amount, "currency": "USD"}, "eventCode": code,
                "success": success}  # fmt: skip
        if own:
            item["originalReference"] = self.pi.upper()
        event = self._event(
            "adyen", code, {"notificationItems": [{"NotificationRequestItem": item}]}
        )
        return dataclasses.replace(event, event_id=f"{psp}:{code}:{success}")

    def checkout(self, event_type: str, amount: int, own: str = "") -> Event:
        """A Checkout.com event: of the payment, or a refund action or dispute `own`."""
        data: dict[str, Any] = {"id": self.pi, "amount": amount, "currency": "USD",
                                "action_id": f"act_{own or 'cap'}_{self.tag}",
                                "metadata": {"merchant_id": self.merchant}}  # fmt: skip
        if event_type.startswith("dispute_"):
            data = {"id": f"dsp_{own}_{self.tag}", "payment_id": self.pi, "amount": amount,
                    "currency": "USD"}  # fmt: skip
        return self._event("checkout", event_type, {"type": event_type, "data": data})

    def square(self, event_type: str, amount: int, status: str, own: str = "") -> Event:
        """A Square event: its payment, a refund or a dispute (`own`) in `status`."""
        money = {"amount": amount, "currency": "USD"}
        obj: dict[str, Any] = {"payment": {"id": self.pi, "status": status,
                                           "amount_money": money, "total_money": money,
                                           "approved_money": money}}  # fmt: skip
        if event_type.startswith("refund."):
            obj = {"refund": {"id": f"{own}_{self.tag}", "payment_id": self.pi,
                              "status": status, "amount_money": money}}  # fmt: skip
        elif event_type.startswith("dispute."):
            obj = {"dispute": {"id": f"{own}_{self.tag}", "state": status,
                               "amount_money": money,
                               "disputed_payment": {"payment_id": self.pi}}}  # fmt: skip
        return self._event("square", event_type, {"type": event_type,
                           "merchant_id": self.merchant, "data": {"object": obj}})  # fmt: skip

    def paystack(self, event_type: str, amount: int, own: str = "") -> Event:
        """A Paystack event: the charge, or a refund or dispute (`own`) of it."""
        data: dict[str, Any] = {"id": 7, "reference": self.pi, "amount": amount,
                                "currency": "USD", "status": "success",
                                "metadata": {"merchant_id": self.merchant}}  # fmt: skip
        if event_type.startswith("refund."):
            data = {"refund_reference": f"{own}_{self.tag}", "transaction_reference": self.pi,
                    "amount": amount, "currency": "USD"}  # fmt: skip
        elif event_type.startswith("charge.dispute"):
            data = {"id": f"{own}_{self.tag}", "resolution": "merchant-accepted",
                    "refund_amount": amount, "currency": "USD",
                    "transaction": {"reference": self.pi}}  # fmt: skip
        return self._event("paystack", event_type, {"event": event_type, "data": data})

    def braintree(self, kind: str, subject: str) -> Event:
        """A Braintree notification (the signed form it posts) about `subject`'s XML."""
        self._n += 1
        xml = (
            f'<notification><timestamp type="datetime">2026-12-06T00:00:{self._n:02d}Z'
            f"</timestamp><kind>{kind}</kind><subject>{subject}</subject></notification>"
        )
        body = signed_form(xml.encode(), BRAINTREE_KEYS)
        subject_name = f"webhooks.braintree.{kind}"
        return Event("braintree", f"{kind}:{self.tag}:{self._n}", kind, subject_name, {}, body,
                     datetime.now(UTC))  # fmt: skip

    def braintree_txn(self, amount: str, own: str = "") -> Event:
        """`transaction_settled`: the sale itself, or a credit `own` refunding it."""
        txn_id, kind = (f"{own}_{self.tag}", "credit") if own else (self.pi, "sale")
        refunded = f"<refunded-transaction-id>{self.pi}</refunded-transaction-id>" if own else ""
        return self.braintree("transaction_settled", (
            f"<transaction><id>{txn_id}</id><type>{kind}</type><amount>{amount}</amount>"
            f"<currency-iso-code>USD</currency-iso-code><merchant-account-id>{self.merchant}"
            f"</merchant-account-id>{refunded}</transaction>"))  # fmt: skip

    def braintree_dispute(self, kind: str, amount: str, own: str) -> Event:
        """`dispute_opened` / `dispute_won` of a chargeback `own` of this payment."""
        return self.braintree(kind, (
            f"<dispute><id>{own}_{self.tag}</id><kind>chargeback</kind>"
            f"<amount-disputed>{amount}</amount-disputed><currency-iso-code>USD"
            f"</currency-iso-code><merchant-account-id>{self.merchant}</merchant-account-id>"
            f"<transaction><id>{self.pi}</id></transaction></dispute>"))  # fmt: skip

    def paypal(self, event_type: str, amount: str, own: str = "") -> Event:
        """A PayPal event: the capture, or a refund `own` of it, or its reversal."""
        resource: dict[str, Any] = {
            "id": self.pi,
            "amount": {"currency_code": "USD", "value": amount},
            "payee": {"merchant_id": self.merchant},
        }
        if own:
            up = f"https://api.paypal.com/v2/payments/captures/{self.pi}"
            resource = {
                **resource,
                "id": f"{own}_{self.tag}",
                "links": [{"rel": "up", "href": up, "method": "GET"}],
            }
        return self._event("paypal", event_type, {"event_type": event_type,
                           "resource_type": "capture", "resource": resource})  # fmt: skip

    def mollie_pay(self, status: str = "paid", value: str = "100.00") -> list[Event]:
        """Mollie's payment created, or moved to `status`, and the events it adds."""
        metadata = {"merchant_id": self.merchant}
        mollie_payments().pay(self.tr, value, "USD", status, metadata=metadata)
        return self.mollie_confirmed()

    def mollie_refund(self, own: str, value: str, status: str = "refunded") -> list[Event]:
        """A refund `own` of the Mollie payment, or its move to `status`, and the events
        it adds."""
        mollie_payments().refund(self.tr, f"re_{own}{self.tag}", value, status)
        return self.mollie_confirmed()

    def mollie_chargeback(self, own: str, value: str, reversal: bool = False) -> list[Event]:
        """A chargeback `own` of the Mollie payment, or its reversal, and the events it
        adds."""
        mollie_payments().chargeback(self.tr, f"chb_{own}{self.tag}", value, reversal)
        return self.mollie_confirmed()

    def mollie_confirmed(self, again: bool = False) -> list[Event]:
        """What the confirm stage records when Mollie's webhook names the payment: the
        events of the changes its answer holds now that no earlier answer held (an answer
        names every earlier change again, and the gate takes each id once), or, `again`,
        every one of them, as a repeat."""
        webhook = mollie.document(f"id={self.tr}".encode())
        answer = orjson.loads(orjson.dumps(mollie_payments().payment_doc(self.tr)))  # as sent
        items = confirmed(webhook, answer)
        events = confirmed_events(MOLLIE_SHAPING, items, datetime.now(UTC))
        if not again:
            events = [e for e in events if e.event_id not in self._mollie_told]
            self._mollie_told.update(e.event_id for e in events)
        return events

    def gocardless(self, resource: str, action: str, obj: dict[str, Any]) -> list[Event]:
        """A GoCardless event naming `obj`, confirmed by the answer `{resource: obj}`."""
        self._n += 1
        singular = resource.removesuffix("s")
        webhook = {"events": [{"id": f"EV{self.tag.upper()}{self._n}", "resource_type": resource,
                               "action": action, "links": {singular: obj["id"]}}]}  # fmt: skip
        items = gocardless_answer.confirmed(webhook, {resource: obj})
        return confirmed_events(GOCARDLESS_SHAPING, items, datetime.now(UTC))

    def gc_payment(self, action: str, amount: int = 10_000) -> list[Event]:
        return self.gocardless("payments", action, {
            "id": f"PM{self.tag.upper()}", "amount": amount, "currency": "USD",
            "metadata": {"merchant_id": self.merchant}})  # fmt: skip

    def gc_refund(self, own: str, action: str, amount: int) -> list[Event]:
        return self.gocardless("refunds", action, {
            "id": f"RF{self.tag.upper()}{own}", "amount": amount, "currency": "USD",
            "links": {"payment": f"PM{self.tag.upper()}"}})  # fmt: skip

    def thin(self, event_type: str, resource: str, obj: dict[str, Any]) -> list[Event]:
        """A thin notification naming `obj`, confirmed by fetching it."""
        self._n += 1
        notification = {"id": f"evt_{self.tag}_{self._n}", "type": f"v1.{event_type}",
                        "related_object": {"id": obj["id"], "type": obj["object"],
                                           "url": f"/v1/{resource}/{obj['id']}"}}  # fmt: skip
        items = stripe_thin.confirmed(notification, obj)
        return confirmed_events(THIN_SHAPING, items, datetime.now(UTC))

    def paddle(self, event_type: str, data: dict[str, Any]) -> Event:
        return self._event("paddle", event_type, {"event_type": event_type, "data": data})

    def internal(self, event_type: str, amount: int, **ids: str | int) -> Event:
        data = {"settlement_id": self.pi, "amount_minor": amount, "currency": "USD", **ids}
        if event_type in ("payment.captured", "payout.paid"):
            data["merchant_id"] = self.merchant
        body = orjson.dumps({"type": event_type, "data": data})
        event_id, subject = f"e_{self.tag}_{self._next()}", f"events.billing.{event_type}"
        return Event("service:billing", event_id, event_type, subject, {}, body, datetime.now(UTC))

    def _next(self) -> int:
        self._n += 1
        return self._n


async def settle_in_order(parts: SettlementParts, events: list[Event]) -> list[object]:
    """Settle one at a time; an event waiting for its payment is tried after each next
    one. What each ended as (an outcome, or the type of its permanent error)."""
    ended: dict[int, object] = {}
    waiting: list[int] = []
    for i in range(len(events)):
        for j in [i, *waiting]:
            (result,) = await settle_batch(parts.settler, [(events[j], 1)])
            if isinstance(result, PaymentNotSettled):
                if j not in waiting:
                    waiting.append(j)
                continue
            if j in waiting:
                waiting.remove(j)
            ended[j] = result if isinstance(result, SettleOutcome) else type(result)
    assert waiting == [], "a payment never settled"
    return [ended[i] for i in range(len(events))]


Scenario = Callable[[Payment], list[Event]]
S = SettleOutcome

SCENARIOS: dict[str, tuple[Scenario, int]] = {
    # The reproduction: capture 5000, refund 1000, refund 2000 more (`amount_refunded`
    # 3000) on today's Stripe API: 2000 left, no dead letter.
    "two partial refunds, today's shape": (
        lambda p: [p.capture(5000), p.charge_refunded(1000), p.charge_refunded(3000)], 2000),
    "three partial refunds, today's shape": (
        lambda p: [p.capture(5000), p.charge_refunded(1000), p.charge_refunded(3000),
                   p.charge_refunded(4500)], 500),
    "three partial refunds, the old shape": (
        lambda p: [p.capture(5000), p.charge_refunded(1000, listed=True),
                   p.charge_refunded(3000, listed=True), p.charge_refunded(4500, listed=True)],
        500),
    "the same refunds as refund.* and as charge.refunded": (
        lambda p: [p.capture(5000), p.refund("1", 1000), p.charge_refunded(1000),
                   p.refund("2", 2000), p.refund("2", 2000, kind="updated"),
                   p.charge_refunded(3000), p.refund("3", 1500)], 500),
    "a refund that failed": (
        lambda p: [p.capture(5000), p.refund("1", 1000), p.charge_refunded(1000),
                   p.refund("1", 1000, status="failed", kind="updated"),
                   p.refund("1", 1000, status="failed", kind="failed")], 5000),
    "a chargeback and its reversal": (
        lambda p: [p.capture(5000), p.dispute("funds_withdrawn", 5000),
                   p.dispute("funds_reinstated", 5000)], 5000),
    "a chargeback with its fee, then its reversal; the fee kept": (
        lambda p: [p.capture(5000), p.dispute("funds_withdrawn", 5000, fee=1500),
                   p.dispute("funds_reinstated", 5000, fee=1500)], 3500),
    "a chargeback with its fee, then its reversal; the fee returned": (
        lambda p: [p.capture(5000), p.dispute("funds_withdrawn", 5000, fee=1500),
                   p.dispute("funds_reinstated", 5000, fee=1500, returned=True)], 5000),
    "a lost dispute told twice, by its funds and by its close": (
        lambda p: [p.capture(5000), p.dispute("funds_withdrawn", 5000, fee=1500),
                   p.dispute("closed", 5000, fee=1500, status="lost")], -1500),
    "a won dispute told twice, by its funds and by its close": (
        lambda p: [p.capture(5000), p.dispute("funds_withdrawn", 5000, fee=1500),
                   p.dispute("funds_reinstated", 5000, fee=1500),
                   p.dispute("closed", 5000, fee=1500, status="won")], 3500),
    "a chargeback with its fee takes the merchant below zero": (
        lambda p: [p.capture(5000), p.charge_refunded(1000),
                   p.dispute("funds_withdrawn", 5000, fee=1500)], -2500),
    "Paddle: a payment and its chargeback with Paddle's fee": (
        lambda p: [p.paddle("transaction.completed", {
                       "id": p.pi, "currency_code": "USD",
                       "custom_data": {"merchant_id": p.merchant},
                       "details": {"totals": {"grand_total": "65215"}}}),
                   p.paddle("adjustment.created", {
                       "id": f"adj_{p.tag}", "action": "chargeback", "status": "approved",
                       "currency_code": "USD", "transaction_id": p.pi,
                       "totals": {"total": "65215"},
                       "payout_totals": {"currency_code": "USD",
                                         "chargeback_fee": {"amount": "1500"}}})], -1500),
    "Razorpay: authorised, captured, refunded twice, one refund failed": (
        lambda p: [p.razorpay("payment.authorized", 50_000), p.razorpay("payment.captured", 50_000),
                   p.razorpay("refund.processed", 10_000, "rfnd_1"),
                   p.razorpay("refund.processed", 5_000, "rfnd_2"),
                   p.razorpay("refund.failed", 5_000, "rfnd_2")], 40_000),
    "Razorpay: a dispute lost, another payment's won": (
        lambda p: [p.razorpay("payment.captured", 50_000),
                   p.razorpay("payment.dispute.lost", 20_000, "disp_1"),
                   p.razorpay("payment.dispute.won", 30_000, "disp_2")], 30_000),
    "internal: a chargeback with its fee": (
        lambda p: [p.internal("payment.captured", 5000),
                   p.internal("payment.chargeback", 4000, dispute_id="d1", fee_minor=1500)],
        -500),
    "a refund and a chargeback take the merchant below zero after a payout-like debit": (
        lambda p: [p.capture(5000), p.charge_refunded(3000), p.dispute("funds_withdrawn", 2000),
                   p.dispute("funds_withdrawn", 2000)], 0),
    "internal events": (
        lambda p: [p.internal("payment.captured", 5000),
                   p.internal("payment.refunded", 1000, refund_id="r1"),
                   p.internal("payment.refund_failed", 1000, refund_id="r1"),
                   p.internal("payment.chargeback", 4000, dispute_id="d1"),
                   p.internal("payment.chargeback_reversed", 4000, dispute_id="d1"),
                   p.internal("payment.refunded", 2500, refund_id="r2")], 2500),
    "payouts, of a Stripe connected account and of an internal service": (
        lambda p: [p.capture(5000), p.payout(3000),
                   p.internal("payout.paid", 1500, payout_id=f"po_int_{p.tag}")], 500),
    "Adyen: authorised, captured, two refunds, a chargeback and its reversal": (
        lambda p: [p.adyen("AUTHORISATION", 50_000), p.adyen("CAPTURE", 50_000, "cap"),
                   p.adyen("REFUND", 10_000, "ref1"), p.adyen("REFUND", 5_000, "ref2"),
                   p.adyen("CHARGEBACK", 20_000, "cb"),
                   p.adyen("CHARGEBACK_REVERSED", 20_000, "cb")], 35_000),
    "Checkout.com: approved, captured, two refunds, a dispute lost then won": (
        lambda p: [p.checkout("payment_approved", 50_000),
                   p.checkout("payment_captured", 50_000),
                   p.checkout("payment_refunded", 10_000, "r1"),
                   p.checkout("payment_refunded", 5_000, "r2"),
                   p.checkout("dispute_evidence_required", 20_000, "d1"),
                   p.checkout("dispute_won", 20_000, "d1")], 35_000),
    "Square: approved, completed, two refunds, a dispute lost": (
        lambda p: [p.square("payment.created", 50_000, "APPROVED"),
                   p.square("payment.updated", 50_000, "COMPLETED"),
                   p.square("refund.updated", 10_000, "COMPLETED", "r1"),
                   p.square("refund.updated", 5_000, "COMPLETED", "r2"),
                   p.square("dispute.state.updated", 20_000, "LOST", "d1")], 15_000),
    "Paystack: a charge, two refunds (one failed), an accepted dispute": (
        lambda p: [p.paystack("charge.success", 50_000),
                   p.paystack("refund.processed", 10_000, "RF1"),
                   p.paystack("refund.processed", 5_000, "RF2"),
                   p.paystack("refund.failed", 5_000, "RF2"),
                   p.paystack("charge.dispute.resolve", 20_000, "9")], 20_000),
    "Braintree: settled, two credits, a chargeback opened then won": (
        lambda p: [p.braintree_txn("500.00"), p.braintree_txn("100.00", "r1"),
                   p.braintree_txn("50.00", "r2"),
                   p.braintree_dispute("dispute_opened", "200.00", "d1"),
                   p.braintree_dispute("dispute_won", "200.00", "d1")], 35_000),
    "PayPal: captured, two refunds, reversed": (
        lambda p: [p.paypal("PAYMENT.CAPTURE.COMPLETED", "500.00"),
                   p.paypal("PAYMENT.CAPTURE.REFUNDED", "100.00", "r1"),
                   p.paypal("PAYMENT.CAPTURE.REFUNDED", "50.00", "r2"),
                   p.paypal("PAYMENT.CAPTURE.REVERSED", "200.00", "rv")], 15_000),
    "Paddle: a payment and its approved refund": (
        lambda p: [p.paddle("transaction.completed", {
                       "id": p.pi, "currency_code": "USD",
                       "custom_data": {"merchant_id": p.merchant},
                       "details": {"totals": {"grand_total": "65215"}}}),
                   p.paddle("adjustment.created", {
                       "id": f"adj_{p.tag}", "action": "refund", "status": "pending_approval",
                       "currency_code": "USD", "transaction_id": p.pi,
                       "totals": {"total": "10887"}}),
                   p.paddle("adjustment.updated", {
                       "id": f"adj_{p.tag}", "action": "refund", "status": "approved",
                       "currency_code": "USD", "transaction_id": p.pi,
                       "totals": {"total": "10887"}})], 65215 - 10887),
    # Mollie: each change is a webhook naming the payment, the payment fetched, and the
    # events of the changes its answer adds; here they arrive in any order.
    "Mollie: paid, two refunds, a chargeback of the rest": (
        lambda p: [*p.mollie_pay(), *p.mollie_refund("1", "20.00"),
                   *p.mollie_refund("2", "30.00"), *p.mollie_chargeback("1", "50.00")], 0),
    "Mollie: paid, a chargeback and its reversal": (
        lambda p: [*p.mollie_pay(), *p.mollie_chargeback("1", "100.00"),
                   *p.mollie_chargeback("1", "100.00", reversal=True)], 10_000),
    "Mollie: authorised, then paid (the reservation posted)": (
        lambda p: [*p.mollie_pay("authorized"), *p.mollie_pay("paid")], 10_000),
    "Mollie: authorised, then canceled (the reservation voided)": (
        lambda p: [*p.mollie_pay("authorized"), *p.mollie_pay("canceled")], 0),
    "Mollie: a refund processing, then failed": (
        lambda p: [*p.mollie_pay(), *p.mollie_refund("1", "20.00", "processing"),
                   *p.mollie_refund("1", "20.00", "failed")], 10_000),
    "Mollie: a refund first seen failed (the refund and its reversal, both)": (
        lambda p: [*p.mollie_pay(), *p.mollie_refund("1", "20.00", "failed")], 10_000),
    # GoCardless: each event confirmed with the object its API answers.
    "GoCardless: confirmed, two refunds, one failed and its funds returned": (
        lambda p: [*p.gc_payment("confirmed"), *p.gc_refund("1", "created", 2_000),
                   *p.gc_refund("2", "created", 3_000), *p.gc_refund("2", "failed", 3_000),
                   *p.gc_refund("2", "funds_returned", 3_000)], 8_000),
    "GoCardless: confirmed, charged back, the chargeback cancelled": (
        lambda p: [*p.gc_payment("confirmed"), *p.gc_payment("charged_back"),
                   *p.gc_payment("chargeback_cancelled")], 10_000),
    # Stripe's thin events: each related object fetched and settled as a snapshot.
    "Stripe thin: captured, refunded, disputed": (
        lambda p: [*p.thin("payment_intent.succeeded", "payment_intents", {
                       "id": p.pi, "object": "payment_intent", "amount_received": 10_000,
                       "currency": "usd", "metadata": {"merchant_id": p.merchant}}),
                   *p.thin("refund.created", "refunds", {
                       "id": f"re_{p.tag}", "object": "refund", "amount": 2_500,
                       "currency": "usd", "payment_intent": p.pi, "status": "succeeded"}),
                   *p.thin("charge.dispute.funds_withdrawn", "disputes", {
                       "id": f"du_{p.tag}", "object": "dispute", "amount": 7_500,
                       "currency": "usd", "payment_intent": p.pi,
                       "balance_transactions": []})], 0),
}  # fmt: skip


def orders(n: int, seed: int) -> list[list[int]]:
    """The natural order, the reverse, and shuffled ones (fixed seed)."""
    rng = random.Random(seed)
    out = [list(range(n)), list(reversed(range(n)))]
    for _ in range(3):
        order = list(range(n))
        rng.shuffle(order)
        out.append(order)
    return out


@pytest.mark.parametrize(("scenario", "balance"), SCENARIOS.values(), ids=SCENARIOS)
async def test_every_arrival_order_ends_in_the_same_balance(
    parts: SettlementParts, scenario: Scenario, balance: int
) -> None:
    for order in orders(len(scenario(Payment())), seed=len(scenario(Payment()))):
        payment = Payment()
        await open_merchant(parts, payment.merchant)
        events = scenario(payment)
        ended = await settle_in_order(parts, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        assert await merchant_balance(parts, payment.merchant) == balance, order
    verify_totals(await parts.ledger.check())


async def test_the_merchant_goes_below_zero_through_money_already_taken_back(
    parts: SettlementParts,
) -> None:
    """Paid 5000, of which 4000 was paid out (an adjustment-like debit the ledger does not
    model yet, played by a refund of another payment): a chargeback of 5000 still posts."""
    p, other = Payment(), Payment()
    other.merchant = p.merchant
    await open_merchant(parts, p.merchant)
    ended = await settle_in_order(parts, [
        p.capture(5000), other.capture(4000), other.charge_refunded(4000),
        p.dispute("funds_withdrawn", 5000)])  # fmt: skip
    assert ended == [S.SETTLED] * 4
    assert await merchant_balance(parts, p.merchant) == 0
    ended = await settle_in_order(parts, [p.charge_refunded(5001)])
    assert ended == [ExceedsPayment]  # more than was captured: parked, never guessed
    assert await merchant_balance(parts, p.merchant) == 0


async def test_a_converted_payment_refunded_whole_after_the_rate_moved_comes_back_exactly(
    parts: SettlementParts, stub: Stub
) -> None:
    """EUR 100.00 at 1.08 credited USD 108.00; the rate moves to 1.20; three partial
    refunds at the payment's own rate bring the merchant back to zero exactly, and the
    platform's FX account takes the difference from today's rate."""
    p = Payment()
    await open_merchant(parts, p.merchant)
    fx_before = await fx_account(parts)
    assert await settle_in_order(parts, [p.capture(10_000, "eur")]) == [S.SETTLED]
    assert await merchant_balance(parts, p.merchant) == 10_800
    await stub.control(rates={"EUR/USD": "1.20"})
    refunds = [p.charge_refunded(3333, "eur"), p.charge_refunded(6666, "eur"),
               p.refund("x", 3334, currency="eur"), p.charge_refunded(10_000, "eur")]  # fmt: skip
    # The refund told one by one (3334) is within the total told before it (6666): it
    # moves nothing until the running total passes both. (A worker started now: one
    # running remembers a rate for a few seconds.)
    async with settlement_parts(parts.settings) as later:
        ended = await settle_in_order(later, refunds)
    assert ended == [S.SETTLED, S.SETTLED, S.DUPLICATE, S.SETTLED]
    assert await merchant_balance(parts, p.merchant) == 0
    # EUR 100.00 went back at 1.20 (USD 120.00) and the merchant gave back USD 108.00:
    # the FX account paid the USD 12.00, exactly, over three partial refunds.
    assert await fx_account(parts) - fx_before == -1_200
    fx_rates = await fx_transfer_rates(parts, p.pi)
    assert fx_rates == {Decimal("1.2")}, fx_rates  # today's rate, recorded


async def fx_account(parts: SettlementParts) -> int:
    balance = await parts.ledger.balance(clearing_account_id(FX_OWNER, "USD"))
    assert balance is not None
    return balance.credit_balance_minor


async def fx_transfer_rates(parts: SettlementParts, payment: str) -> set[Decimal]:
    """The rates recorded on the payment's FX transfers, read back from the ledger."""
    ids = [
        fx_transfer(SettlementInstruction(payment, SettlementKind.REFUND, None, 1, "EUR", key,
                                          None), provider="stripe", ledger_currency="USD",
                    fx_minor=1, current_rate=Decimal(1)).id
        for key in (f"refunded:{total}" for total in (3333, 6666, 10_000))
    ]  # fmt: skip
    found = await parts.ledger.lookup_transfers(ids)
    return {t.rate_at_payment for t in found if t is not None}


async def test_a_batch_with_a_payment_and_its_refunds_nets_them_in_order(
    parts: SettlementParts,
) -> None:
    """The capture and its refunds in one fetched batch: the refunds wait for the
    capture (settled alone after it), then each moves its own share once."""
    p = Payment()
    await open_merchant(parts, p.merchant)
    batch = [p.charge_refunded(1000), p.capture(5000), p.refund("a", 1000),
             p.charge_refunded(3000), p.refund("b", 2000)]  # fmt: skip
    results = await settle_batch(parts.settler, [(e, 1) for e in batch])
    assert all(isinstance(r, SettleOutcome) for r in results), results
    assert await merchant_balance(parts, p.merchant) == 2000
    again = await settle_batch(parts.settler, [(e, 2) for e in batch])
    assert again == [S.DUPLICATE] * 5
    assert await merchant_balance(parts, p.merchant) == 2000


async def test_a_mollie_answer_confirmed_again_moves_nothing_more(
    parts: SettlementParts,
) -> None:
    """Every change of a Mollie payment's final answer confirmed and settled a second
    time (a replay, or a confirmation recorded twice): each a duplicate, nothing moved."""
    p = Payment()
    await open_merchant(parts, p.merchant)
    told = [*p.mollie_pay("authorized"), *p.mollie_pay("paid"),
            *p.mollie_refund("1", "20.00", "processing"), *p.mollie_refund("1", "20.00"),
            *p.mollie_refund("2", "30.00", "failed"), *p.mollie_chargeback("1", "50.00"),
            *p.mollie_chargeback("1", "50.00", reversal=True)]  # fmt: skip
    assert [e.event_type for e in told] == [
        "payment.authorized", "payment.paid", "refund.refunded", "refund.refunded",
        "refund.failed", "chargeback.received", "chargeback.reversed"]  # fmt: skip
    assert all(isinstance(e, SettleOutcome) for e in await settle_in_order(parts, told))
    assert await merchant_balance(parts, p.merchant) == 8_000  # 100.00 - 20.00
    again = p.mollie_confirmed(again=True)
    assert [e.event_id for e in again] == [e.event_id for e in told]
    assert await settle_in_order(parts, again) == [S.DUPLICATE] * len(told)
    assert await merchant_balance(parts, p.merchant) == 8_000
    verify_totals(await parts.ledger.check())


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def per_currency(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    """Parts with `[settlement] balances = "per_currency"` (the currency-service stopped:
    nothing may ask it)."""
    sections = settlement_sections(
        stub.url,
        redis_url,
        ledger=ledger_section(request.param),
        settlement={"balances": "per_currency"},
    )
    doc = config(database_url, nats_url, **sections)
    await stub.control(mode="fail")
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        yield p


async def test_per_currency_balances_keep_each_currency_and_convert_nothing(
    per_currency: SettlementParts,
) -> None:
    """EUR and JPY payments of one merchant land in its EUR and JPY accounts as they
    are; a refund comes out of its payment's currency; in any order."""
    parts = per_currency
    for order in orders(5, seed=5):
        p, q = Payment(), Payment()
        q.merchant = p.merchant
        for currency in ("EUR", "JPY"):
            await open_merchant(parts, p.merchant, currency)
        events = [p.capture(10_000, "eur"), p.charge_refunded(2_500, "eur"),
                  q.capture(1_500, "jpy"), q.refund("1", 500, currency="jpy"),
                  p.dispute("funds_withdrawn", 1_000)]  # fmt: skip
        events[4] = _in(events[4], "eur")
        ended = await settle_in_order(parts, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        assert await merchant_balance(parts, p.merchant, "EUR") == 10_000 - 2_500 - 1_000
        assert await merchant_balance(parts, p.merchant, "JPY") == 1_000
        assert await merchant_balance(parts, p.merchant, "USD") is None
    verify_totals(await parts.ledger.check())


def _in(event: Event, currency: str) -> Event:
    doc = orjson.loads(event.body)
    doc["data"]["object"]["currency"] = currency
    return dataclasses.replace(event, body=orjson.dumps(doc))


async def test_a_refund_told_again_with_another_amount_is_a_collision(
    parts: SettlementParts,
) -> None:
    """The same refund id with another amount is a real conflict, whether the first told
    moved money (its transfer is there) or netted to nothing (only its claim is)."""
    p = Payment()
    await open_merchant(parts, p.merchant)
    told = [p.capture(5000), p.refund("1", 1000), p.charge_refunded(3000), p.refund("2", 2000)]
    ended = await settle_in_order(parts, told)
    assert ended == [S.SETTLED, S.SETTLED, S.SETTLED, S.DUPLICATE]
    again = [p.refund("1", 1200, kind="updated"), p.refund("2", 2500, kind="updated")]
    assert await settle_in_order(parts, again) == [LedgerIdCollision, LedgerIdCollision]
    assert await merchant_balance(parts, p.merchant) == 2000
