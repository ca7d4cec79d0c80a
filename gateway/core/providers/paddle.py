"""Paddle Billing's events as money movements (developer.paddle.com/webhooks).

- `transaction.completed`: a capture of `details.totals.grand_total`; the payment is
  the transaction (`data.id`).
- `adjustment.created`, `adjustment.updated` with `status` `approved`: by `action`,
  `refund` and `credit` a refund, `chargeback` a chargeback, `chargeback_reverse` a
  chargeback reversal, of `totals.total`, keyed by the adjustment; the payment is its
  `transaction_id`.

Amounts are strings of digits in the currency's lowest denomination ("1000" is USD
10.00), with no exception to ISO 4217 in what Paddle documents (`core.money`). An
adjustment that is not approved yet (`pending_approval`, `rejected`) moves nothing; its
`adjustment.updated` to `approved` does. `chargeback_warning` and `credit_reverse` move
nothing here. The merchant is `custom_data.merchant_id` of the transaction; an
adjustment takes its payment's.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.core.bodies.fields import get_currency, get_digits_amount, get_object, get_str
from gateway.core.money import ProviderUnits, from_provider_minor
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind, with_fee
from gateway.core.signatures.timestamped import TimestampedPairsScheme

_K = SettlementKind
_ADJUSTMENT_ACTIONS = {
    "refund": _K.REFUND,
    "credit": _K.REFUND,
    "chargeback": _K.CHARGEBACK,
    "chargeback_reverse": _K.CHARGEBACK_REVERSAL,
}
_ADJUSTMENT_EVENTS = ("adjustment.created", "adjustment.updated")

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    "transaction.completed": (_K.CAPTURE,),
    **{
        t: (*dict.fromkeys(_ADJUSTMENT_ACTIONS.values()), _K.DISPUTE_FEE)
        for t in _ADJUSTMENT_EVENTS
    },
}


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Paddle event's instruction, or None when it moves no money."""
    if event_type == "transaction.completed":
        data = get_object(doc, "data")
        totals = get_object(doc, "data.details.totals")
        currency = get_currency(data, "currency_code", "data.")
        return SettlementInstruction(
            settlement_id=get_str(data, "id", "data."),
            kind=_K.CAPTURE,
            merchant_id=_custom_merchant(data),  # `[providers.NAME] merchant` may say
            amount_minor=_amount(totals, "grand_total", currency, "data.details.totals."),
            currency=currency,
            refund_id=None,
            source_event_id=_event_id(doc),
        )
    if event_type in _ADJUSTMENT_EVENTS:
        data = get_object(doc, "data")
        if data.get("status") != "approved":
            return None
        action = data.get("action")
        kind = _ADJUSTMENT_ACTIONS.get(action) if isinstance(action, str) else None
        if kind is None:
            return None
        currency = get_currency(data, "currency_code", "data.")
        found = SettlementInstruction(
            settlement_id=get_str(data, "transaction_id", "data."),
            kind=kind,
            merchant_id=None,
            amount_minor=_amount(get_object(doc, "data.totals"), "total", currency, "data.totals."),
            currency=currency,
            refund_id=get_str(data, "id", "data."),
            source_event_id=_event_id(doc),
        )
        if kind is _K.CHARGEBACK:
            return with_fee(found, *_chargeback_fee(data))
        return found
    return None


def _chargeback_fee(data: Mapping[str, Any]) -> tuple[int, str]:
    """The chargeback fee Paddle charged (`payout_totals.chargeback_fee.amount`, in the
    payout currency), or (0, "") when it states none."""
    payout = data.get("payout_totals")
    fee = payout.get("chargeback_fee") if isinstance(payout, Mapping) else None
    if not isinstance(fee, Mapping) or fee.get("amount") in (None, "0"):
        return 0, ""
    prefix = "data.payout_totals."
    currency = get_currency(payout, "currency_code", prefix)  # type: ignore[arg-type]
    return _amount(fee, "amount", currency, prefix + "chargeback_fee."), currency


def _amount(totals: Mapping[str, Any], key: str, currency: str, prefix: str) -> int:
    return from_provider_minor(
        UNITS, "paddle", get_digits_amount(totals, key, prefix), currency, prefix + key
    )


def _custom_merchant(data: Mapping[str, Any]) -> str | None:
    """`custom_data.merchant_id` when it is a non-empty string, else None."""
    custom = data.get("custom_data")
    merchant = custom.get("merchant_id") if isinstance(custom, Mapping) else None
    return merchant if isinstance(merchant, str) and merchant else None


def _event_id(doc: Any) -> str | None:
    value = doc.get("event_id") if isinstance(doc, Mapping) else None
    return value if isinstance(value, str) and value else None


# Paddle Billing (developer.paddle.com/api-reference/currencies): amounts are strings in
# the lowest denomination, with `decimal_places` per currency "in the common notation"
# (10 USD is "1000", 100 JPY is "100"). Its supported currencies (USD, EUR, GBP, JPY, AUD,
# CAD, CHF, HKD, SGD, SEK, ARS, BRL, CLP, CNY, COP, CZK, DKK, HUF, ILS, INR, KRW, MXN,
# NOK, NZD, PEN, PLN, RUB, THB, TRY, TWD, UAH, VND, ZAR) show no exception to ISO in what
# Paddle documents; its `GET /currencies` returns `decimal_places` to check one against.
UNITS: Mapping[str, ProviderUnits] = MappingProxyType({})

PADDLE = Provider(
    name="paddle",
    title="Paddle",
    scheme=TimestampedPairsScheme(
        "paddle", "Paddle-Signature", ";", "ts", "h1", b":", "event_id", "event_type"
    ),
    movements=Movements(
        instruction, MOVEMENT_TYPES, parse_rules(("/data/custom_data/merchant_id",))
    ),
    units=UNITS,
    order_keys=parse_rules(("/data/transaction_id", "/data/id")),
    backfill="Events API (`GET /events`)",
    cross_check="the signed notifications of paddle-python-sdk's Verifier tests",
    resign=True,
)
