"""Stripe's events as money movements (docs.stripe.com/api/events/types).

- `payment_intent.amount_capturable_updated`: an authorisation of `amount_capturable`
  (an intent with `capture_method: manual`), the amount reserved; the payment is the
  intent. `payment_intent.canceled`: its void.
- `payment_intent.succeeded`: a capture of `amount_received`; the payment is the intent.
  It posts the reservation when there is one (a partial capture releases the rest).
- `charge.captured`: the same capture, told by the charge (`amount_captured`, its
  `payment_intent`; a charge made without an intent is its own payment). Whichever of
  the two comes first moves the money; the other is its duplicate.
- `charge.refunded`: a refund up to `amount_refunded`, a running total, keyed
  `refunded:TOTAL`.
- `refund.created`, `refund.updated`, `charge.refund.updated`: a refund while its status
  is pending, requires_action or succeeded; a refund reversal once failed or canceled;
  keyed by the refund.
- `refund.failed`: a refund reversal, keyed by the refund.
- `charge.dispute.funds_withdrawn`: a chargeback of the dispute's `amount`, keyed by the
  dispute, with the dispute fee its balance transactions charged (`fee`, in their own
  currency); `charge.dispute.funds_reinstated`: its reversal, with the fee returned
  where Stripe returns it. `charge.dispute.closed`: lost, the chargeback; won, its
  reversal (the same movements under the same dispute id: whichever comes first moves
  the money).
- `payout.paid` of a connected account (Stripe Connect: the event's top-level
  `account`, which is the merchant): a payout of the merchant's money, keyed by the
  payout. The platform's own payouts name no account and move no merchant's money.

Every movement but the capture and the payout names its payment by `payment_intent`.

`charge.refunded` is read as a total in both of its API shapes: since 2022-11-15 the
charge no longer lists its refunds, and even before, the list was cut at ten. Because the
same refund may also arrive as a `refund.*` event, both are claims on one pool per
payment, and what moves is what the pool is owed beyond what it holds
(`core.settlement.follow_ups`): whichever arrives first moves the money, once.

Amounts are read with Stripe's minor units (MGA 0 decimals, ISK and UGX 2; ISO says 2,
0, 0), which read as ISO would settle 100x wrong (`core.money`). A follow-up movement
that does not repeat the merchant in `metadata.merchant_id` takes the payment's.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.core.bodies.fields import get_amount, get_currency, get_object, get_str, optional_str
from gateway.core.money import ProviderUnits, from_provider_minor
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind, with_fee
from gateway.core.signatures.timestamped import TimestampedPairsScheme
from gateway.errors import FieldTypeInvalid, MissingField

_K = SettlementKind
_REFUND_EVENTS = ("refund.created", "refund.updated", "charge.refund.updated")
#: A refund's status and what it means for the money (docs.stripe.com/api/refunds/object).
_REFUND_STATUS = {
    "pending": _K.REFUND,
    "requires_action": _K.REFUND,
    "succeeded": _K.REFUND,
    "failed": _K.REFUND_REVERSAL,
    "canceled": _K.REFUND_REVERSAL,
}
_DISPUTE_EVENTS = {
    "charge.dispute.funds_withdrawn": _K.CHARGEBACK,
    "charge.dispute.funds_reinstated": _K.CHARGEBACK_REVERSAL,
}

#: A closed dispute's outcome: lost, its funds stay withdrawn; won, they come back. The
#: same movements as the funds events, under the same dispute id: whichever comes first
#: moves the money, the other is its duplicate.
_CLOSED = {"lost": _K.CHARGEBACK, "won": _K.CHARGEBACK_REVERSAL}

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    "payment_intent.amount_capturable_updated": (_K.AUTHORISATION,),
    "payment_intent.canceled": (_K.VOID,),
    "payment_intent.succeeded": (_K.CAPTURE,),
    "charge.captured": (_K.CAPTURE,),
    "charge.refunded": (_K.REFUND,),
    **{t: (_K.REFUND, _K.REFUND_REVERSAL) for t in _REFUND_EVENTS},
    "refund.failed": (_K.REFUND_REVERSAL,),
    "charge.dispute.funds_withdrawn": (_K.CHARGEBACK, _K.DISPUTE_FEE),
    "charge.dispute.funds_reinstated": (_K.CHARGEBACK_REVERSAL, _K.DISPUTE_FEE_REVERSAL),
    "charge.dispute.closed": (
        _K.CHARGEBACK,
        _K.CHARGEBACK_REVERSAL,
        _K.DISPUTE_FEE,
        _K.DISPUTE_FEE_REVERSAL,
    ),
    "payout.paid": (_K.PAYOUT,),
}

_OBJ = "data.object."


# Past the complexity bar on purpose: one branch per Stripe event type that moves money.
def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:  # noqa: C901
    """A Stripe event's instruction, or None when its type moves no money."""
    if event_type == "payment_intent.succeeded":
        obj = get_object(doc, "data.object")
        return SettlementInstruction(
            settlement_id=get_str(obj, "id", _OBJ),
            kind=_K.CAPTURE,
            merchant_id=_metadata_merchant(obj),  # `[providers.NAME] merchant` may say
            amount_minor=_amount(obj, "amount_received"),
            currency=get_currency(obj, "currency", _OBJ),
            refund_id=None,
            source_event_id=optional_str(doc, "id"),
        )
    if event_type == "payment_intent.amount_capturable_updated":
        obj = get_object(doc, "data.object")
        if obj.get("amount_capturable") == 0:  # the reservation ended: no authorisation
            return None
        return _payment(doc, obj, _K.AUTHORISATION, "amount_capturable")
    if event_type == "payment_intent.canceled":
        return _payment(doc, get_object(doc, "data.object"), _K.VOID, "amount")
    if event_type == "charge.captured":
        obj = get_object(doc, "data.object")
        payment = obj.get("payment_intent")
        if isinstance(payment, Mapping):  # expanded by the integration
            payment = payment.get("id")
        if not isinstance(payment, str) or not payment:
            payment = get_str(obj, "id", _OBJ)  # a charge without an intent
        return SettlementInstruction(
            settlement_id=payment,
            kind=_K.CAPTURE,
            merchant_id=_metadata_merchant(obj),
            amount_minor=_amount(obj, "amount_captured"),
            currency=get_currency(obj, "currency", _OBJ),
            refund_id=None,
            source_event_id=optional_str(doc, "id"),
        )
    if event_type == "charge.refunded":
        obj = get_object(doc, "data.object")
        total = _amount(obj, "amount_refunded")
        return _follow_up(doc, obj, _K.REFUND, f"refunded:{total}", total, cumulative=True)
    if event_type in _REFUND_EVENTS or event_type == "refund.failed":
        obj = get_object(doc, "data.object")
        kind = _K.REFUND_REVERSAL if event_type == "refund.failed" else _refund_kind(obj)
        if kind is None:
            return None
        refund_id = get_str(obj, "id", _OBJ)
        return _follow_up(doc, obj, kind, refund_id, _amount(obj, "amount"))
    if event_type == "payout.paid":
        account = doc.get("account") if isinstance(doc, Mapping) else None
        if not isinstance(account, str) or not account:
            return None  # the platform's own balance paid out: no merchant's money
        obj = get_object(doc, "data.object")
        payout_id = get_str(obj, "id", _OBJ)
        return SettlementInstruction(
            settlement_id=payout_id,
            kind=_K.PAYOUT,
            merchant_id=account,
            amount_minor=_amount(obj, "amount"),
            currency=get_currency(obj, "currency", _OBJ),
            refund_id=payout_id,
            source_event_id=optional_str(doc, "id"),
        )
    dispute_kind = _DISPUTE_EVENTS.get(event_type)
    if event_type == "charge.dispute.closed":
        status = get_object(doc, "data.object").get("status")
        dispute_kind = _CLOSED.get(status) if isinstance(status, str) else None
        if dispute_kind is None:  # an inquiry closed, or still open: no money moved
            return None
    if dispute_kind is not None:
        obj = get_object(doc, "data.object")
        dispute_id = get_str(obj, "id", _OBJ)
        found = _follow_up(doc, obj, dispute_kind, dispute_id, _amount(obj, "amount"))
        return with_fee(found, *_dispute_fee(obj, withdrawn=dispute_kind is _K.CHARGEBACK))
    return None


def _dispute_fee(dispute: Mapping[str, Any], *, withdrawn: bool) -> tuple[int, str]:
    """The dispute fee in the dispute's balance transactions, and its currency: what the
    withdrawals charged (`fee` of those with a negative amount), or, for a
    reinstatement, what it returned (the negative `fee` of those with a positive
    amount). (0, "") when there is none."""
    transactions = dispute.get("balance_transactions")
    if not isinstance(transactions, list):
        return 0, ""
    where = _OBJ + "balance_transactions"
    total, currency = 0, ""
    for bt in transactions:
        if not isinstance(bt, Mapping):
            raise FieldTypeInvalid(where, "a list of balance transactions")
        amount, fee = bt.get("amount"), bt.get("fee")
        if not isinstance(amount, int) or not isinstance(fee, int) or isinstance(fee, bool):
            raise FieldTypeInvalid(where + ".fee", "integers amount and fee")
        charged = fee if withdrawn and amount < 0 else -fee if not withdrawn and amount > 0 else 0
        if charged <= 0:
            continue
        bt_currency = get_currency(bt, "currency", where + ".")
        if currency and bt_currency != currency:
            raise FieldTypeInvalid(where, "dispute fees in one currency")
        currency = bt_currency
        total += from_provider_minor(UNITS, "stripe", charged, bt_currency, where + ".fee")
    return total, currency


def _payment(
    doc: Any, obj: Mapping[str, Any], kind: SettlementKind, amount_key: str
) -> SettlementInstruction:
    """An authorisation or void of the payment intent `obj`, keyed by the intent."""
    intent = get_str(obj, "id", _OBJ)
    return SettlementInstruction(
        settlement_id=intent,
        kind=kind,
        merchant_id=_metadata_merchant(obj),
        amount_minor=_amount(obj, amount_key),
        currency=get_currency(obj, "currency", _OBJ),
        refund_id=intent,
        source_event_id=optional_str(doc, "id"),
    )


def _metadata_merchant(obj: Mapping[str, Any]) -> str | None:
    """`metadata.merchant_id` when it is a non-empty string, else None."""
    metadata = obj.get("metadata")
    merchant = metadata.get("merchant_id") if isinstance(metadata, Mapping) else None
    return merchant if isinstance(merchant, str) and merchant else None


def _refund_kind(refund: Mapping[str, Any]) -> SettlementKind | None:
    status = refund.get("status")
    return _REFUND_STATUS.get(status) if isinstance(status, str) else None


def _amount(obj: Mapping[str, Any], key: str) -> int:
    return from_provider_minor(
        UNITS, "stripe", get_amount(obj, key, _OBJ), get_currency(obj, "currency", _OBJ), _OBJ + key
    )


def _follow_up(
    doc: Any,
    obj: Mapping[str, Any],
    kind: SettlementKind,
    own_id: str,
    amount_minor: int,
    *,
    cumulative: bool = False,
) -> SettlementInstruction:
    """A movement of the payment intent `obj` belongs to."""
    payment = obj.get("payment_intent")
    if isinstance(payment, Mapping):  # expanded by the integration
        payment = payment.get("id")
    if not isinstance(payment, str) or not payment:
        # Charges made without a payment intent settle no capture here to follow.
        raise MissingField(_OBJ + "payment_intent")
    return SettlementInstruction(
        settlement_id=payment,
        kind=kind,
        merchant_id=_metadata_merchant(obj),
        amount_minor=amount_minor,
        currency=get_currency(obj, "currency", _OBJ),
        refund_id=own_id,
        source_event_id=optional_str(doc, "id"),
        cumulative=cumulative,
    )


# Stripe (docs.stripe.com/currencies, "Specify amounts in API requests"): amounts are
# integers in the currency's minor unit, two decimals unless the page says otherwise.
# Only the rows below differ from ISO 4217 for charges, refunds and PaymentIntents:
UNITS: Mapping[str, ProviderUnits] = MappingProxyType(
    {
        # In Stripe's zero-decimal list, while ISO 4217 gives the ariary 2 decimals: Stripe's
        # 1000 is 1000 MGA, ISO's 1000 would be 10.00 MGA.
        "MGA": ProviderUnits(exponent=0),
        # "Special cases": ISK became zero-decimal (ISO: 0) but Stripe keeps writing it with
        # two decimals that are always 00 (5 ISK is 500); it can't charge fractions of ISK
        # (enforced since 2023-04-14, charges and refunds alike). An amount not divisible
        # by 100 is not one Stripe sends, so it is parked rather than guessed at.
        "ISK": ProviderUnits(exponent=2, multiple_of=100),
        # The same special case, word for word, for UGX (ISO: 0). Stripe's page contradicts
        # itself here: UGX is also in its zero-decimal list. The special case is the more
        # specific, newer rule about charges, so it wins; a 100x misreading either way is
        # what this table exists to prevent, so the choice is written down, not implied.
        "UGX": ProviderUnits(exponent=2, multiple_of=100),
    }
)
# Looked at and deliberately absent from `UNITS`:
# - HUF and TWD: Stripe treats them as zero-decimal for *payouts* only ("even though you
#   can charge two-decimal amounts"); charges and refunds use 2 decimals, as ISO does.
# - BHD, JOD, KWD, OMR, TND: three decimals, as in ISO. Stripe's page (2022 snapshots)
#   asked for a last digit of 0; the current text read for this table no longer says so,
#   and the scale is unambiguous either way, so an amount ending in 5 fils settles as
#   written rather than being parked on a rule Stripe may have dropped.
# - Every other code in the zero-decimal list (BIF, CLP, DJF, GNF, JPY, KMF, KRW, PYG,
#   RWF, VND, VUV, XAF, XOF, XPF) has 0 decimals in ISO 4217 too.

STRIPE = Provider(
    name="stripe",
    title="Stripe",
    scheme=TimestampedPairsScheme("stripe", "Stripe-Signature", ",", "t", "v1", b".", "id", "type"),
    movements=Movements(
        instruction,
        MOVEMENT_TYPES,
        parse_rules(("/data/object/metadata/merchant_id",)),
    ),
    units=UNITS,
    # The payment intent ties a charge, its refunds and the intent itself together; an
    # event about something else (a customer, a payout) is ordered per that object.
    order_keys=parse_rules(("/data/object/payment_intent", "/data/object/id")),
    backfill="Events API (`GET /v1/events`), the last 30 days",
    cross_check="`stripe.Webhook.construct_event` (stripe-python)",
    resign=True,
)
