"""Internal services' events (`POST /v1/events`) as money movements.

- `payment.authorized`: an authorisation, the amount reserved (the payment is
  `settlement_id`); `payment.captured` then posts it (a partial capture releases the
  rest) and `payment.voided` releases it;
- `payment.captured`: a capture (the payment is `settlement_id`);
- `payment.refunded`: a refund, keyed by `refund_id`;
- `payment.refund_failed`: a refund reversal, keyed by `refund_id`;
- `payment.chargeback`: a chargeback, keyed by `dispute_id`, with the dispute fee when
  `fee_minor` says one (in `fee_currency`, else the event's currency);
- `payment.chargeback_reversed`: a chargeback reversal, keyed by `dispute_id`, with the
  fee returned when `fee_minor` says one;
- `payout.paid`: a payout of `merchant_id`'s money, keyed by `payout_id` (no payment).

Every event but a payout names its payment (`data.settlement_id`), `amount_minor` (ISO
4217 minor units, the ledger's own, so nothing is translated) and `currency`. A capture,
an authorisation and a payout name their `merchant_id`; any other movement may, and
otherwise takes its payment's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.fields import get_amount, get_currency, get_object, get_str, optional_str
from gateway.core.providers.base import Movements
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind, with_fee

_K = SettlementKind
#: Each type's movement and the `data` field holding the movement's own id.
_TYPES: Mapping[str, tuple[SettlementKind, str | None]] = {
    "payment.authorized": (_K.AUTHORISATION, "settlement_id"),
    "payment.voided": (_K.VOID, "settlement_id"),
    "payment.captured": (_K.CAPTURE, None),
    "payment.refunded": (_K.REFUND, "refund_id"),
    "payment.refund_failed": (_K.REFUND_REVERSAL, "refund_id"),
    "payment.chargeback": (_K.CHARGEBACK, "dispute_id"),
    "payment.chargeback_reversed": (_K.CHARGEBACK_REVERSAL, "dispute_id"),
    "payout.paid": (_K.PAYOUT, "payout_id"),
}

_FEES = {_K.CHARGEBACK: _K.DISPUTE_FEE, _K.CHARGEBACK_REVERSAL: _K.DISPUTE_FEE_REVERSAL}

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    t: (k, _FEES[k]) if k in _FEES else (k,) for t, (k, _) in _TYPES.items()
}


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """An internal event's instruction, or None for a type that moves no money."""
    typed = _TYPES.get(event_type)
    if typed is None:
        return None
    kind, own_id_field = typed
    data = get_object(doc, "data")
    # A capture, authorisation or payout names its merchant; a void takes its auth's.
    named = not kind.follows_payment and kind is not _K.VOID
    merchant = get_str(data, "merchant_id", "data.") if named else optional_str(data, "merchant_id")
    # A payout belongs to no payment: it is its own settlement.
    payment_field = "payout_id" if kind is _K.PAYOUT else "settlement_id"
    found = SettlementInstruction(
        settlement_id=get_str(data, payment_field, "data."),
        kind=kind,
        merchant_id=merchant,
        amount_minor=get_amount(data, "amount_minor", "data."),
        currency=get_currency(data, "currency", "data."),
        refund_id=None if own_id_field is None else get_str(data, own_id_field, "data."),
        source_event_id=optional_str(doc, "id"),
    )
    if kind not in _FEES or data.get("fee_minor") in (None, 0):
        return found
    fee_currency = get_currency(data, "fee_currency", "data.") if "fee_currency" in data else None
    return with_fee(found, get_amount(data, "fee_minor", "data."), fee_currency or found.currency)


#: The movements of every internal service's events (they name ISO minor units and
#: their merchant themselves).
SERVICE = Movements(instruction, MOVEMENT_TYPES)
