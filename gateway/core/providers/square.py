"""Square's events as money movements (developer.squareup.com/reference/square/webhooks).

An event is `{"merchant_id", "type", "event_id", "created_at", "data": {"type", "id",
"object": {…}}}`; the object is `data.object.payment`, `.refund`, `.dispute` or
`.payout`. Amounts are `Money`, `{"amount": integer, "currency"}`, in "the smallest
denomination of the currency" (`UNITS`). One type covers several states, so the state in
the object decides:

- `payment.created` (`payment.status`): `APPROVED`, an authorisation of
  `approved_money` ("the amount of money approved", else `total_money`), keyed by the
  payment; `COMPLETED` (a payment completed at once), its capture. `payment.updated`:
  `COMPLETED`, the capture of `total_money`, which is `amount_money` plus `tip_money`
  (the tip is the seller's too); `CANCELED` and `FAILED`, a void (it releases a
  reservation if there is one, else moves nothing). The reservation is read from the
  payment's creation only: `approved_money` "may change" on an update (a tip adjusted,
  a reauthorisation), and a second reservation of another amount under the payment's
  key would be refused as an id collision; a capture above what was reserved releases
  it and moves at once (`core.settlement.two_phase`). A payment created `FAILED` (declined) or
  `PENDING` moved nothing; so does one updated to `APPROVED` or `PENDING`. A payment
  is updated many times once completed (its refunds, its fees): each is the same
  capture told again.
- `refund.created` and `refund.updated` (`refund.status`): `COMPLETED`, a refund of its
  `amount_money` keyed by the refund's `id`, of its `payment_id`. `refund.updated`
  `FAILED` or `REJECTED`: its reversal (recorded and moving nothing when the refund
  never completed: `core.settlement.follow_ups` nets both under the refund's id, whatever the
  order). `PENDING`, and a refund created failed, moved nothing.
- `dispute.created`, `dispute.state.updated` and the deprecated `dispute.state.changed`
  (`dispute.state`): the ledger moves the disputed `amount_money` on the decision only,
  as for Razorpay. `LOST` and `ACCEPTED` (the seller accepted), a chargeback keyed by
  the dispute, of `disputed_payment.payment_id`; `WON`, its reversal, which moves
  nothing unless a chargeback of that dispute was recorded; the open states
  (`INQUIRY_*`, `EVIDENCE_REQUIRED`, `PROCESSING`) move nothing. Accepting "returns the
  disputed amount to the cardholder" (developer.squareup.com/docs/disputes-api/
  process-disputes). [Unverified: whether Square holds or takes the amount while a
  dispute is open; the ledger moves it on the decision.]
- `payout.paid`: a payout of the seller's balance, `amount_money`, keyed by the payout
  (`po_…`). A negative amount "indicates a withdrawal" (`Payout.amount_money`), not a
  payout: it moves nothing here (an operator's `gateway ledger adjust`). `payout.sent`
  and `payout.failed` move nothing: the payout is posted once it is paid.

Sources: every field and state above is in square/connect-api-specification
`api.json` (`components.schemas`: the `*Event` examples, `Payment`, `PaymentRefund`,
`Dispute`, `DisputeState`, `Payout`, `PayoutStatus`), the repository's "canonical
specification" of the API, whose field names the `squareup` package's models share;
Money's units: developer.squareup.com/docs/build-basics/working-with-monetary-amounts.

Where Square's own sources disagree, both spellings are read: the dispute is
`data.object.dispute` in every example and `data.object.object` in the schema (and in
the SDK's `DisputeCreatedEventObject`); its id is `id`, or `dispute_id` in the
`dispute.state.changed` example; a payout's `Money` writes `currency_code` in its
examples and the working-with-monetary-amounts page, `currency` in the schema. Not
confirmed: that a completed refund can still fail, and how a `SIMPLE` payout and the
`BATCH` payout listing it net (both are posted as paid).

The merchant is the envelope's `merchant_id`, the Square seller the event belongs to:
a platform whose sellers connect their own Square accounts pays each seller. Square's
payments carry no metadata; a platform selling for several merchants through one
Square account points `[providers.NAME] merchant` at the payment's `reference_id`
(refunds, disputes and payouts do not carry it; follow-ups take their payment's).
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
from gateway.errors import FieldTypeInvalid, MissingField

_K = SettlementKind
_DISPUTE_EVENTS = ("dispute.created", "dispute.state.updated", "dispute.state.changed")
#: Each payment event's statuses that move money (`Payment.status`).
_PAYMENT_STATUS = {
    "payment.created": {"APPROVED": _K.AUTHORISATION, "COMPLETED": _K.CAPTURE},
    "payment.updated": {"COMPLETED": _K.CAPTURE, "CANCELED": _K.VOID, "FAILED": _K.VOID},
}
#: Each refund event's statuses that move money (`PaymentRefund.status`).
_REFUND_STATUS = {
    "refund.created": {"COMPLETED": _K.REFUND},
    "refund.updated": {
        "COMPLETED": _K.REFUND,
        "FAILED": _K.REFUND_REVERSAL,
        "REJECTED": _K.REFUND_REVERSAL,
    },
}
#: A decided dispute's state and its movement (`DisputeState`).
_DISPUTE_STATE = {"LOST": _K.CHARGEBACK, "ACCEPTED": _K.CHARGEBACK, "WON": _K.CHARGEBACK_REVERSAL}

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    **{t: tuple(dict.fromkeys(states.values())) for t, states in _PAYMENT_STATUS.items()},
    **{t: tuple(dict.fromkeys(states.values())) for t, states in _REFUND_STATUS.items()},
    **{t: tuple(dict.fromkeys(_DISPUTE_STATE.values())) for t in _DISPUTE_EVENTS},
    "payout.paid": (_K.PAYOUT,),
}

_OBJ = "data.object."


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Square event's instruction, or None when it moves no money."""
    if event_type in _PAYMENT_STATUS:
        payment = get_object(doc, "data.object.payment")
        kind = _PAYMENT_STATUS[event_type].get(_state(payment, "status", "payment."))
        if kind is None:
            return None  # pending, declined, or an approval updated
        payment_id = get_str(payment, "id", _OBJ + "payment.")
        field = "total_money"
        if kind is _K.AUTHORISATION and payment.get("approved_money") is not None:
            field = "approved_money"
        amount, currency = _money(payment, field, "payment.")
        return SettlementInstruction(
            settlement_id=payment_id,
            kind=kind,
            merchant_id=optional_str(doc, "merchant_id"),
            amount_minor=amount,
            currency=currency,
            refund_id=None if kind is _K.CAPTURE else payment_id,
            source_event_id=optional_str(doc, "event_id"),
        )
    if event_type in _REFUND_STATUS:
        refund = get_object(doc, "data.object.refund")
        kind = _REFUND_STATUS[event_type].get(_state(refund, "status", "refund."))
        if kind is None:
            return None  # pending, or created failed
        amount, currency = _money(refund, "amount_money", "refund.")
        return SettlementInstruction(
            settlement_id=get_str(refund, "payment_id", _OBJ + "refund."),
            kind=kind,
            merchant_id=optional_str(doc, "merchant_id"),
            amount_minor=amount,
            currency=currency,
            refund_id=get_str(refund, "id", _OBJ + "refund."),
            source_event_id=optional_str(doc, "event_id"),
        )
    if event_type in _DISPUTE_EVENTS:
        where, dispute = _dispute(doc)
        kind = _DISPUTE_STATE.get(_state(dispute, "state", where))
        if kind is None:
            return None  # still open, or an inquiry closed
        disputed = get_object(doc, _OBJ + where + "disputed_payment")
        # `id`; the deprecated `dispute.state.changed` example writes `dispute_id` only.
        own = "dispute_id" if dispute.get("id") is None and "dispute_id" in dispute else "id"
        amount, currency = _money(dispute, "amount_money", where)
        return SettlementInstruction(
            settlement_id=get_str(disputed, "payment_id", _OBJ + where + "disputed_payment."),
            kind=kind,
            merchant_id=optional_str(doc, "merchant_id"),
            amount_minor=amount,
            currency=currency,
            refund_id=get_str(dispute, own, _OBJ + where),
            source_event_id=optional_str(doc, "event_id"),
        )
    if event_type == "payout.paid":
        payout = get_object(doc, "data.object.payout")
        money = payout.get("amount_money")
        raw = money.get("amount") if isinstance(money, Mapping) else None
        if isinstance(raw, int) and not isinstance(raw, bool) and raw < 0:
            return None  # a withdrawal from the seller's bank, not a payout
        payout_id = get_str(payout, "id", _OBJ + "payout.")
        amount, currency = _money(payout, "amount_money", "payout.")
        return SettlementInstruction(
            settlement_id=payout_id,
            kind=_K.PAYOUT,
            merchant_id=optional_str(doc, "merchant_id"),
            amount_minor=amount,
            currency=currency,
            refund_id=payout_id,
            source_event_id=optional_str(doc, "event_id"),
        )
    return None


def _dispute(doc: Any) -> tuple[str, Mapping[str, Any]]:
    """The dispute and its place: `data.object.dispute` (Square's examples), else
    `data.object.object` (Square's schema)."""
    container = get_object(doc, "data.object")
    for key in ("dispute", "object"):
        if container.get(key) is not None:
            return f"{key}.", get_object(doc, _OBJ + key)
    raise MissingField(_OBJ + "dispute")


def _state(obj: Mapping[str, Any], key: str, where: str) -> str:
    return get_str(obj, key, _OBJ + where)


def _money(obj: Mapping[str, Any], key: str, where: str) -> tuple[int, str]:
    """`obj[key]` as (ISO minor units, currency); its currency is `currency`, or
    `currency_code` as Square's payout examples write it."""
    prefix = f"{_OBJ}{where}{key}."
    money = obj.get(key)
    if money is None:
        raise MissingField(prefix[:-1])
    if not isinstance(money, Mapping):
        raise FieldTypeInvalid(prefix[:-1], "an object")
    code = "currency" if money.get("currency") is not None else "currency_code"
    if money.get(code) is None:
        raise MissingField(prefix + "currency")
    currency = get_currency(money, code, prefix)
    amount = get_amount(money, "amount", prefix)
    return from_provider_minor(UNITS, "square", amount, currency, prefix + "amount"), currency


#: Square writes its currencies' base units as ISO 4217 does: "AUD Cent, CAD Cent, JPY
#: Yen, GBP Pence, USD Cent, EUR Cent" (developer.squareup.com/docs/build-basics/
#: working-with-monetary-amounts), the currencies Square sellers take payments in.
UNITS: Mapping[str, ProviderUnits] = MappingProxyType({})

SQUARE = Provider(
    name="square",
    title="Square",
    # `x-square-hmacsha256-signature`: base64 HMAC-SHA256, keyed with the signature key
    # as text, of the notification URL followed by the raw body
    # (square.utils.webhooks_helper.verify_signature).
    scheme=PresetHmacScheme(
        "square",
        SchemeParams(
            secrets=(),
            header="x-square-hmacsha256-signature",
            encoding=Encoding.BASE64,
            signed=SignedContent.URL_BODY,
            event_id_from=FieldRef("json", "event_id"),
            event_type_from=FieldRef("json", "type"),
        ),
    ),
    movements=Movements(instruction, MOVEMENT_TYPES, parse_rules(("/merchant_id",))),
    units=UNITS,
    # A refund and a dispute name their payment; the payment orders them all.
    order_keys=parse_rules(
        (
            "/data/object/payment/id",
            "/data/object/refund/payment_id",
            "/data/object/dispute/disputed_payment/payment_id",
        )
    ),
    cross_check="`square.utils.webhooks_helper.verify_signature` (squareup) and the "
    "vector of its tests",
    backfill="Events API (`POST /v2/events`, SearchEvents), 28 days",
)
