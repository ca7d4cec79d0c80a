"""Razorpay's events as money movements (razorpay.com/docs/webhooks/payloads).

An event names its objects under `payload` (`payload.payment.entity`,
`payload.refund.entity`, `payload.dispute.entity`); amounts are integers in the
currency's subunits (paise for INR), as ISO 4217 has them.

- `payment.authorized`: an authorisation of the payment's `amount`, reserved; the
  payment is `pay_…`. `payment.captured`: its capture, which posts the reservation.
- `refund.processed`: a refund of the refund's `amount`, keyed by `rfnd_…`, of its
  `payment_id`; `refund.failed`: its reversal.
- `payment.dispute.lost`: a chargeback of the dispute's `amount`, keyed by `disp_…`;
  `payment.dispute.won`: its reversal. Razorpay holds the disputed amount while a
  dispute is open; the ledger moves it once the dispute is decided, so a won dispute
  moves nothing and a lost one takes the amount, whatever the order they arrive in.

The merchant is `notes.merchant_id` of the payment (the scheme's default `merchant`
pointer), or what `[providers.NAME] merchant` points at; a refund or dispute takes its
payment's.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.core.bodies.fields import get_amount, get_currency, get_object, get_str, optional_str
from gateway.core.money import ProviderUnits, from_provider_minor
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.base import Encoding
from gateway.core.signatures.body_hmac import BodyHmacScheme

_K = SettlementKind
_PAYMENT = {"payment.authorized": _K.AUTHORISATION, "payment.captured": _K.CAPTURE}
_REFUND = {"refund.processed": _K.REFUND, "refund.failed": _K.REFUND_REVERSAL}
_DISPUTE = {"payment.dispute.lost": _K.CHARGEBACK, "payment.dispute.won": _K.CHARGEBACK_REVERSAL}

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    t: (k,) for t, k in (*_PAYMENT.items(), *_REFUND.items(), *_DISPUTE.items())
}


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Razorpay event's instruction, or None when its type moves no money."""
    if event_type in _PAYMENT:
        payment = get_object(doc, "payload.payment.entity")
        payment_id = get_str(payment, "id", _P)
        kind = _PAYMENT[event_type]
        return SettlementInstruction(
            settlement_id=payment_id,
            kind=kind,
            merchant_id=_notes_merchant(payment),
            amount_minor=_amount(payment, _P),
            currency=get_currency(payment, "currency", _P),
            # An authorisation is keyed by its payment; a capture has no id of its own.
            refund_id=payment_id if kind is _K.AUTHORISATION else None,
            source_event_id=optional_str(doc, "id"),
        )
    if event_type in _REFUND or event_type in _DISPUTE:
        entity = "refund" if event_type in _REFUND else "dispute"
        prefix = f"payload.{entity}.entity."
        obj = get_object(doc, prefix[:-1])
        return SettlementInstruction(
            settlement_id=get_str(obj, "payment_id", prefix),
            kind=(_REFUND | _DISPUTE)[event_type],
            merchant_id=_notes_merchant(obj),
            amount_minor=_amount(obj, prefix),
            currency=get_currency(obj, "currency", prefix),
            refund_id=get_str(obj, "id", prefix),
            source_event_id=optional_str(doc, "id"),
        )
    return None


_P = "payload.payment.entity."


def _amount(obj: Mapping[str, Any], prefix: str) -> int:
    return from_provider_minor(
        UNITS, "razorpay", get_amount(obj, "amount", prefix), get_currency(obj, "currency", prefix),
        prefix + "amount",
    )  # fmt: skip


def _notes_merchant(obj: Mapping[str, Any]) -> str | None:
    """`notes.merchant_id` when it is a non-empty string, else None."""
    notes = obj.get("notes")
    merchant = notes.get("merchant_id") if isinstance(notes, Mapping) else None
    return merchant if isinstance(merchant, str) and merchant else None


#: Razorpay writes every currency's subunits as ISO 4217 has them (paise for INR).
UNITS: Mapping[str, ProviderUnits] = MappingProxyType({})

RAZORPAY = Provider(
    name="razorpay",
    title="Razorpay",
    scheme=BodyHmacScheme(
        "razorpay",
        "X-Razorpay-Signature",
        Encoding.HEX,
        "",
        "X-Razorpay-Event-Id",
        "",
        type_field="event",
    ),
    movements=Movements(
        instruction,
        MOVEMENT_TYPES,
        parse_rules(("/payload/payment/entity/notes/merchant_id",)),
    ),
    units=UNITS,
    # A refund's or dispute's event carries its payment too; the payment orders them all.
    order_keys=parse_rules(
        (
            "/payload/payment/entity/id",
            "/payload/refund/entity/payment_id",
            "/payload/dispute/entity/payment_id",
        )
    ),
    cross_check="`razorpay.Utility.verify_webhook_signature` (razorpay-python)",
)
