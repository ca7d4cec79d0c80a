"""Checkout.com's events as money movements
(checkout.com/docs/developer-resources/event-notifications/event-types).

An event is `{"id": "evt_…", "type": …, "data": {…}}`. Payment events name the payment
in `data.id` (`pay_…`) and the action in `data.action_id` (`act_…`); dispute events name
the dispute in `data.id` (`dsp_…`) and its payment in `data.payment_id`. `data.amount` is
an integer in Checkout.com's minor units of `data.currency` (`UNITS`).

- `payment_approved`: an authorisation of `data.amount`, reserved, keyed by the payment
  (an amount of 0 reserves nothing and moves nothing).
- `payment_captured`: a capture of `data.amount`. A payment may be captured in several
  parts, each with its own `action_id`, while the ledger keys a capture by its payment
  and posts a reservation once. As docs/concepts.md has it for Stripe's multicapture,
  the first capture posts the reservation (a partial one releases the rest) and the
  later ones move at once: a capture whose `data.balances.total_captured` (the
  payment's captured total with it) is more than its own amount is a later one, keyed
  `pay_…:act_…`, a settlement of its own with no reservation to post; any other (no
  `balances` either) is the payment's own capture. Refunds and disputes name the
  payment and are netted against that first capture only, so one larger than it is
  `EXCEEDS_PAYMENT`, for an operator.
- `payment_voided`: the void of the payment's reservation.
- `payment_refunded`: a refund of `data.amount`, keyed by its `action_id`.
- `payment_capture_declined`, `payment_refund_declined`, `payment_void_declined`: the
  action was declined; nothing moved, so they are not listed.
- Disputes follow the money as Checkout.com documents it, keyed by the dispute:
  `dispute_evidence_required` debits the disputed `data.amount` ("your account has been
  debited the disputed amount", reporting-and-insights/events-api/event-types; "the
  disputed amount, and a separate dispute fee, will be immediately deducted",
  business-operations/manage-disputes/how-disputes-work), a chargeback;
  `dispute_lost`, `dispute_expired` and `dispute_accepted` leave it debited, the same
  chargeback told again; `dispute_won` and `dispute_canceled` credit it back ("your
  account has been credited back the disputed amount"), its reversal.
  `core.settlement.follow_ups` nets the two under the dispute's id, so any arrival order ends in
  the same balance (a reversal before its chargeback is recorded and the chargeback
  then moves nothing). `dispute_resolved` ("already refunded … no further financial
  implications", previous/risk-management/disputes/disputes-api) moves nothing.

Sources: the `payment_*` bodies are deliveries in hookdeck/webhook-samples
(`providers/checkout/1.0.25/`) and checkout.com/docs/workflows/webhook-event-types/
payment_refunded; the dispute bodies are checkout.com/docs/developer-resources/
webhooks/webhook-event-types/dispute_lost, …/dispute_evidence_required and
…/dispute_resolved; the event names are those of checkout/checkout-sdk-python's
workflow tests (`tests/workflows/workflow_integration_test.py`).

Not confirmed from a source: that `balances` in `payment_captured` is the payment's
state with that capture (one delivery shows `total_captured` equal to `amount` for a
single full capture); `dispute_accepted` (no page found; in 2020 no webhook was sent on
acceptance, checkout/checkout-sdk-java#15: listed so that it would move the same
chargeback); that every dispute event carries the same `amount`. Not modelled: the
dispute fee (no field carries it), `dispute_arbitration_*` (a dispute debited again
after a win is the same chargeback told again here, and moves nothing), and
`payment_authorization_incremented` (a capture above the reservation releases it and
moves at once, `core.settlement.two_phase`).

The merchant is `data.metadata.merchant_id` of a payment event, else None (disputes
carry no metadata; they take their payment's).
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
from gateway.core.signatures.base import Encoding, FieldRef, SchemeParams, SignedContent
from gateway.core.signatures.hmac_generic import PresetHmacScheme
from gateway.errors import FieldTypeInvalid

_K = SettlementKind
_PAYMENT = {
    "payment_approved": _K.AUTHORISATION,
    "payment_captured": _K.CAPTURE,
    "payment_voided": _K.VOID,
}
_DISPUTE = {
    "dispute_evidence_required": _K.CHARGEBACK,
    "dispute_lost": _K.CHARGEBACK,
    "dispute_expired": _K.CHARGEBACK,
    "dispute_accepted": _K.CHARGEBACK,
    "dispute_won": _K.CHARGEBACK_REVERSAL,
    "dispute_canceled": _K.CHARGEBACK_REVERSAL,
}

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    **{t: (k,) for t, k in _PAYMENT.items()},
    "payment_refunded": (_K.REFUND,),
    **{t: (k,) for t, k in _DISPUTE.items()},
}

_D = "data."


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Checkout.com event's instruction, or None when its type moves no money."""
    kind = _PAYMENT.get(event_type)
    if kind is not None:
        data = get_object(doc, "data")
        if kind is _K.AUTHORISATION and data.get("amount") == 0:
            return None  # nothing reserved
        payment_id = get_str(data, "id", _D)
        amount = _amount(data)
        settlement_id = payment_id
        if kind is _K.CAPTURE and _later_capture(data):
            settlement_id = f"{payment_id}:{get_str(data, 'action_id', _D)}"
        return SettlementInstruction(
            settlement_id=settlement_id,
            kind=kind,
            merchant_id=_metadata_merchant(data),
            amount_minor=amount,
            currency=get_currency(data, "currency", _D),
            # An authorisation and a void are keyed by their payment; a capture carries
            # its own action id, so that a later capture that reads as the first (no
            # `balances`) is parked as a collision, never taken for the first's repeat.
            refund_id=optional_str(data, "action_id") if kind is _K.CAPTURE else payment_id,
            source_event_id=optional_str(doc, "id"),
        )
    if event_type == "payment_refunded":
        data = get_object(doc, "data")
        return SettlementInstruction(
            settlement_id=get_str(data, "id", _D),
            kind=_K.REFUND,
            merchant_id=_metadata_merchant(data),
            amount_minor=_amount(data),
            currency=get_currency(data, "currency", _D),
            refund_id=get_str(data, "action_id", _D),
            source_event_id=optional_str(doc, "id"),
        )
    kind = _DISPUTE.get(event_type)
    if kind is not None:
        data = get_object(doc, "data")
        return SettlementInstruction(
            settlement_id=get_str(data, "payment_id", _D),
            kind=kind,
            merchant_id=None,  # a dispute names no merchant: its payment's
            amount_minor=_amount(data),
            currency=get_currency(data, "currency", _D),
            refund_id=get_str(data, "id", _D),
            source_event_id=optional_str(doc, "id"),
        )
    return None


def _later_capture(data: Mapping[str, Any]) -> bool:
    """Whether the capture follows an earlier one of its payment: the payment's captured
    total with it is more than its own amount. Without `balances`, the first."""
    balances = data.get("balances")
    if balances is None:
        return False
    if not isinstance(balances, Mapping):
        raise FieldTypeInvalid(_D + "balances", "an object")
    total = balances.get("total_captured")
    if total is None:
        return False
    if isinstance(total, bool) or not isinstance(total, int):
        raise FieldTypeInvalid(_D + "balances.total_captured", "an integer amount")
    return total > get_amount(data, "amount", _D)  # both in Checkout.com's units


def _amount(data: Mapping[str, Any]) -> int:
    return from_provider_minor(
        UNITS, "checkout", get_amount(data, "amount", _D), get_currency(data, "currency", _D),
        _D + "amount",
    )  # fmt: skip


def _metadata_merchant(data: Mapping[str, Any]) -> str | None:
    """`metadata.merchant_id` when it is a non-empty string, else None."""
    metadata = data.get("metadata")
    merchant = metadata.get("merchant_id") if isinstance(metadata, Mapping) else None
    return merchant if isinstance(merchant, str) and merchant else None


#: Checkout.com's amounts, where they differ from ISO 4217 ("Format the amount value",
#: checkout.com/docs/payments/accept-payments/format-the-amount-value, 2025): every
#: currency is divided by 100 except a "full amount" list (BIF DJF GNF ISK JPY KMF KRW
#: PYG RWF UGX VUV VND XAF XOF XPF, all 0 in ISO too) and a divided-by-1000 list (BHD
#: IQD JOD KWD LYD OMR TND, 3 in ISO too). Two fall under "all other currencies" while
#: ISO differs; reading them as ISO would settle 100x wrong:
UNITS: Mapping[str, ProviderUnits] = MappingProxyType(
    {
        # ISO: 0 decimals. Checkout.com divides by 100 (the page then adds a note on CLP
        # whose text was not read), so an amount that is not whole pesos is refused.
        "CLP": ProviderUnits(exponent=2),
        # ISO: 4 decimals. The current page divides it by 100; its 2022 version
        # ("Calculating the value") listed it as a full amount. The current page wins.
        "CLF": ProviderUnits(exponent=2),
    }
)

CHECKOUT = Provider(
    name="checkout",
    title="Checkout.com",
    # `Cko-Signature`: hex HMAC-SHA256 of the raw body with the webhook's signature key
    # (checkout.com/docs/workflows/set-up-your-webhook-receiver).
    scheme=PresetHmacScheme(
        "checkout",
        SchemeParams(
            secrets=(),
            header="Cko-Signature",
            encoding=Encoding.HEX,
            signed=SignedContent.BODY,
            event_id_from=FieldRef("json", "id"),
            event_type_from=FieldRef("json", "type"),
        ),
    ),
    movements=Movements(instruction, MOVEMENT_TYPES, parse_rules(("/data/metadata/merchant_id",))),
    units=UNITS,
    # A dispute's `data.id` is the dispute; its payment is `data.payment_id`.
    order_keys=parse_rules(("/data/payment_id", "/data/id")),
    cross_check="no official library verifies `Cko-Signature`: the signature is "
    'recomputed from the rule on Checkout.com\'s "Set up your webhook receiver" page',
)
