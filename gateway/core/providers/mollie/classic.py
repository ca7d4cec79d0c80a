"""Mollie's classic webhooks: the `mollie` provider. Pure. Why an unsigned webhook is
safe: `core.signatures.mollie.classic`.

A classic webhook is a form whose one field names a payment (`id=tr_…`): the gateway
records it (`document`), answers `200`, and never publishes it. The confirm stage
(`gateway confirm`) then fetches the payment with its refunds and chargebacks
(`Confirmation.locate`, with the account's API key: `auth`) and records each change the
answer holds that moves, or may move, money as an event of its own
(`mollie.answer.confirmed`: the event ids, types and the statuses counted are in its
docstring). Those events settle here (`instruction`):

- `payment.authorized`: an authorisation of the payment's `amount`, keyed by the payment.
- `payment.paid`: the capture of its `amountCaptured` (else its `amount`); it posts the
  authorisation's reservation when there is one.
- `payment.canceled`, `payment.expired`, `payment.failed` (only ever confirmed for a
  payment that was authorised and never paid): the void of its reservation.
- `refund.refunded`: a refund of the refund's `amount`, keyed by the refund;
  `refund.failed`: its reversal.
- `chargeback.received`: a chargeback of its `amount`, keyed by the chargeback;
  `chargeback.reversed`: its reversal.

Amounts are `{"value": "10.00", "currency": "EUR"}`, the value a decimal string in major
units with the currency's ISO 4217 decimals (docs.mollie.com/payments/multicurrency:
JPY and ISK none, the others two), read exactly: more decimals than the currency has is
refused, never rounded. The merchant is the payment's `metadata.merchant_id`, which
every one of its events carries; a payment's events are ordered by the payment id.

Mollie wants `200` with any body ("you only have to return the HTTP status 200 OK",
docs.mollie.com/overview/webhooks), and the gateway's JSON outcome is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.confirmed import confirmed_document
from gateway.core.bodies.fields import (
    get_currency,
    get_decimal_amount,
    get_object,
    get_str,
    optional_str,
)
from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Confirmation, Movements, Provider
from gateway.core.providers.mollie.answer import PAYMENT_ID, confirmed, payment_id_of
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.mollie.classic import SCHEME
from gateway.errors import PayloadInvalid

_K = SettlementKind
#: The event type of the webhook itself: recorded, never published.
WEBHOOK_TYPE = "payment.webhook"
#: The most bytes a webhook's form may have: `id=` and a payment id is under 80.
BODY_BYTES_MAX = 1_024
#: The most bytes a confirmed event's body may have (its metadata is at most 4 KiB).
CONFIRMED_BYTES_MAX = 8_192

_PAYMENT_KINDS = {
    "payment.authorized": _K.AUTHORISATION,
    "payment.paid": _K.CAPTURE,
    "payment.canceled": _K.VOID,
    "payment.expired": _K.VOID,
    "payment.failed": _K.VOID,
}
_FOLLOW_UP_KINDS = {
    "refund.refunded": _K.REFUND,
    "refund.failed": _K.REFUND_REVERSAL,
    "chargeback.received": _K.CHARGEBACK,
    "chargeback.reversed": _K.CHARGEBACK_REVERSAL,
}
MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    event_type: (kind,) for event_type, kind in (_PAYMENT_KINDS | _FOLLOW_UP_KINDS).items()
}


def document(body: bytes) -> dict[str, Any]:
    """What a `mollie` row's body holds. A webhook's form, read strictly: exactly one
    field, `id`, naming a payment (`tr_` and 1 to 64 letters or digits), read as
    `{"id": "tr_…", "type": "payment.webhook"}`. Or a confirmed event's body (a JSON
    object, `mollie.answer`), read as it is: the settlement worker, the console and
    replays read every row of the provider through here. `PayloadInvalid` otherwise.

    A JSON body never yields an `id` or a `type`: one posted to the webhook has no event
    id, and is parked, so no request can take the id of a change a confirmation will
    record (`tr_x:paid`) and turn the genuine one into a duplicate."""
    if body[:1] == b"{":
        return confirmed_document(body, CONFIRMED_BYTES_MAX, "Mollie")
    if len(body) > BODY_BYTES_MAX:
        raise PayloadInvalid(f"the form is {len(body)} bytes (at most {BODY_BYTES_MAX})")
    try:
        fields = form_fields(body)
    except FormInvalid as exc:
        raise PayloadInvalid(str(exc)) from None
    if list(fields) != ["id"]:
        names = ", ".join(repr(name[:40]) for name in list(fields)[:4]) or "none"
        raise PayloadInvalid(f"the form must hold one field, id; it holds {names}")
    if not PAYMENT_ID.fullmatch(fields["id"]):
        raise PayloadInvalid("the form's id is not a Mollie payment id (tr_ and 1 to 64 "
                             "letters or digits)")  # fmt: skip
    return {"id": fields["id"], "type": WEBHOOK_TYPE}


def locate(doc: Any) -> str:
    """The payment a webhook names, with its refunds and chargebacks."""
    if not isinstance(doc, Mapping) or doc.get("type") != WEBHOOK_TYPE:
        raise PayloadInvalid("not a Mollie webhook: nothing to fetch")
    return f"/v2/payments/{payment_id_of(doc)}?embed=refunds,chargebacks"


def auth(key: str) -> Mapping[str, str]:
    """Mollie's API keys (`live_…`, `test_…`) and access tokens are bearer tokens."""
    return {"Authorization": f"Bearer {key}"}


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A confirmed Mollie event's instruction, or None when its type moves no money."""
    kind = _PAYMENT_KINDS.get(event_type) or _FOLLOW_UP_KINDS.get(event_type)
    if kind is None:
        return None
    if not isinstance(doc, Mapping):
        raise PayloadInvalid("a Mollie event's body is not an object")
    payment = get_str(doc, "payment_id")
    amount = get_object(doc, "amount")
    currency = get_currency(amount, "currency", "amount.")
    own_id: str | None = payment  # an authorisation and its void are keyed by the payment
    if kind is _K.CAPTURE:
        own_id = None
    elif event_type in _FOLLOW_UP_KINDS:
        own_id = get_str(doc, "object_id")
    return SettlementInstruction(
        settlement_id=payment,
        kind=kind,
        merchant_id=_merchant(doc),
        amount_minor=get_decimal_amount(amount, "value", currency, "amount."),
        currency=currency,
        refund_id=own_id,
        source_event_id=optional_str(doc, "event_id"),
    )


def _merchant(doc: Mapping[str, Any]) -> str | None:
    """The payment's `metadata.merchant_id`, when it is a non-empty string."""
    metadata = doc.get("metadata")
    return optional_str(metadata, "merchant_id")


MOLLIE = Provider(
    name="mollie",
    title="Mollie",
    scheme=SCHEME,
    movements=Movements(instruction, MOVEMENT_TYPES, parse_rules(("/metadata/merchant_id",))),
    order_keys=parse_rules(("/payment_id",)),
    document=document,
    confirmation=Confirmation(locate, confirmed, auth),
    cross_check="none: Mollie signs nothing; each webhook is confirmed by a fetch of the "
    "payment, read in the shapes of `mollie-api-python`'s `tests/responses` fixtures",
    backfill="",
)
