"""What the load generator sends: a planned mix of provider events, and their signatures.

The plan is deterministic for a seed: Stripe payments (`payment_intent.succeeded`, some
for a merchant with no ledger account, which must be parked, not lost), Stripe refunds
of planned payments (`charge.refunded`), Stripe and Standard Webhooks events that do not
settle, and a few forged deliveries that must be refused and leave no trace. Each event
is delivered 1 to `max_deliveries` times.

The signers are written here from each provider's documentation and share no code with
`gateway`, so a misread spec shows up as refused deliveries rather than as agreement.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

STRIPE_SECRET = "whsec_chaos_stripe_secret"
STANDARD_SECRET = "whsec_" + base64.b64encode(b"chaos-standard-webhooks-key-0001").decode()
FORGED_SECRET = "whsec_not_the_configured_secret"
MERCHANTS = ("m_chaos_0", "m_chaos_1", "m_chaos_2")
UNKNOWN_MERCHANT = "m_chaos_unknown"
CURRENCIES = ("usd", "eur", "gbp")
OTHER_STRIPE_TYPES = ("customer.created", "invoice.paid", "charge.succeeded")
STANDARD_TYPES = ("invoice.paid", "subscription.renewed", "payment_intent.succeeded")


def providers_config() -> dict[str, dict[str, Any]]:
    """The `[providers]` tables a gateway under this load needs."""
    return {
        "stripe": {"scheme": "stripe", "secrets": [STRIPE_SECRET]},
        "standard": {"scheme": "standard", "secrets": [STANDARD_SECRET]},
    }


@dataclass(frozen=True)
class LoadSpec:
    """How much to send and in what mix."""

    events: int = 300
    payments: float = 0.5  # shares of the events; the rest do not settle
    refunds: float = 0.15
    standard: float = 0.5  # share of the non-settling events sent as Standard Webhooks
    unknown_merchant: float = 0.03  # share of payments for a merchant with no account
    forged: float = 0.01  # extra deliveries signed with the wrong secret (must get 401)
    max_deliveries: int = 5
    concurrency: int = 32
    rate_per_s: float = 0.0  # delivery attempts started per second (0: as fast as possible)
    retry_for_s: float = 120.0  # a provider keeps retrying a non-2xx this long
    request_timeout_s: float = 15.0
    seed: int = 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PlannedEvent:
    """One event and what the audit should expect of it."""

    index: int
    provider: str  # "stripe" | "standard"
    event_id: str
    event_type: str
    kind: str  # "payment" | "refund" | "other" | "forged"
    deliveries: int
    settlement_id: str | None = None  # the payment intent (refunds: the one refunded)
    refund_id: str | None = None
    merchant_id: str | None = None
    amount_minor: int = 0
    currency: str = ""
    body: bytes = field(default=b"", repr=False)

    @property
    def settles(self) -> bool:
        return self.kind in ("payment", "refund")

    @property
    def expect_parked(self) -> bool:
        """A payment for a merchant with no account must end in the DLQ, not the ledger."""
        return self.settles and self.merchant_id == UNKNOWN_MERCHANT

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["body"] = self.body.decode()
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PlannedEvent:
        return cls(**{**doc, "body": str(doc.get("body", "")).encode()})


def _stripe_body(event_id: str, event_type: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {"id": event_id, "object": "event", "type": event_type, "data": {"object": obj}}
    )


def plan(spec: LoadSpec, run: str) -> list[PlannedEvent]:
    """The events of one run; ids carry `run` so runs never collide in one database."""
    rng = random.Random(spec.seed)
    n_pay = int(spec.events * spec.payments)
    n_refund = min(int(spec.events * spec.refunds), n_pay)
    events: list[PlannedEvent] = []

    def add(**kw: Any) -> PlannedEvent:
        event = PlannedEvent(
            index=len(events), deliveries=rng.randint(1, spec.max_deliveries), **kw
        )
        events.append(event)
        return event

    payments = []
    for i in range(n_pay):
        merchant = (
            UNKNOWN_MERCHANT if rng.random() < spec.unknown_merchant else rng.choice(MERCHANTS)
        )
        pi, currency, amount = f"pi_{run}_{i}", rng.choice(CURRENCIES), rng.randint(100, 50_000)
        obj = {
            "id": pi,
            "object": "payment_intent",
            "amount_received": amount,
            "currency": currency,
            "metadata": {"merchant_id": merchant},
        }
        event_id = f"evt_{run}_p{i}"
        payments.append(
            add(
                provider="stripe",
                event_id=event_id,
                event_type="payment_intent.succeeded",
                kind="payment",
                settlement_id=pi,
                merchant_id=merchant,
                amount_minor=amount,
                currency=currency,
                body=_stripe_body(event_id, "payment_intent.succeeded", obj),
            )
        )
    refundable = [p for p in payments if p.merchant_id != UNKNOWN_MERCHANT]
    for i, paid in enumerate(rng.sample(refundable, min(n_refund, len(refundable)))):
        charge, amount = f"ch_{run}_{i}", rng.randint(1, paid.amount_minor)
        obj = {
            "id": charge,
            "object": "charge",
            "payment_intent": paid.settlement_id,
            "amount_refunded": amount,
            "currency": paid.currency,
            "metadata": {"merchant_id": paid.merchant_id},
        }
        event_id = f"evt_{run}_r{i}"
        add(
            provider="stripe",
            event_id=event_id,
            event_type="charge.refunded",
            kind="refund",
            settlement_id=paid.settlement_id,
            refund_id=charge,
            merchant_id=paid.merchant_id,
            amount_minor=amount,
            currency=paid.currency,
            body=_stripe_body(event_id, "charge.refunded", obj),
        )
    for i in range(spec.events - len(events)):
        if rng.random() < spec.standard:
            event_type, event_id = rng.choice(STANDARD_TYPES), f"msg_{run}_o{i}"
            body = orjson.dumps(
                {
                    "type": event_type,
                    "timestamp": "2025-01-01T00:00:00Z",
                    "data": {"id": f"obj_{run}_{i}"},
                }
            )
            add(
                provider="standard",
                event_id=event_id,
                event_type=event_type,
                kind="other",
                body=body,
            )
        else:
            event_type, event_id = rng.choice(OTHER_STRIPE_TYPES), f"evt_{run}_o{i}"
            body = _stripe_body(event_id, event_type, {"id": f"obj_{run}_{i}"})
            add(
                provider="stripe", event_id=event_id, event_type=event_type, kind="other", body=body
            )
    for i in range(max(1, round(spec.events * spec.forged)) if spec.forged else 0):
        event_id = f"evt_{run}_f{i}"
        obj = {
            "id": f"pi_{run}_f{i}",
            "amount_received": 999_999,
            "currency": "usd",
            "metadata": {"merchant_id": MERCHANTS[0]},
        }
        add(
            provider="stripe",
            event_id=event_id,
            event_type="payment_intent.succeeded",
            kind="forged",
            body=_stripe_body(event_id, "payment_intent.succeeded", obj),
        )
    return events


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def sign(event: PlannedEvent, now_s: int | None = None) -> dict[str, str]:
    """The headers the provider would send with this event's body, signed now."""
    ts = int(time.time()) if now_s is None else now_s
    headers = {"Content-Type": "application/json"}
    if event.provider == "stripe":
        secret = FORGED_SECRET if event.kind == "forged" else STRIPE_SECRET
        signature = _hmac(secret.encode(), f"{ts}.".encode() + event.body).hex()
        headers["Stripe-Signature"] = f"t={ts},v1={signature}"
    else:
        key = base64.b64decode(STANDARD_SECRET.removeprefix("whsec_"))
        content = f"{event.event_id}.{ts}.".encode() + event.body
        headers |= {
            "webhook-id": event.event_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": "v1," + base64.b64encode(_hmac(key, content)).decode(),
        }
    return headers
