"""NOWPayments' IPNs (crypto payments, USDT among them) as money movements. Pure. The
signature: `core.signatures.nowpayments`.

An IPN is the payment as NOWPayments' "get payment status" answers it, sent at each
change of its `payment_status` (waiting, confirming, confirmed, sending,
partially_paid, finished, failed, refunded, expired):

    {"payment_id": 123456789, "parent_payment_id": 987654321, "invoice_id": null,
     "payment_status": "finished", "pay_address": "address", "price_amount": 1,
     "price_currency": "usd", "pay_amount": 15, "actually_paid": 15,
     "actually_paid_at_fiat": 0, "pay_currency": "trx", "order_id": null,
     "order_description": null, "purchase_id": "123456789", "outcome_amount": 14.8106,
     "outcome_currency": "trx", "payment_extra_ids": null, "fee": {"currency": "btc",
     "depositFee": 0.09853637216235617, "withdrawalFee": 0, "serviceFee": 0}}

The event is the change: its id is `payment_id:payment_status` (a repeat of one status,
NOWPayments' "recurrent notifications" or one asked for from its dashboard, is a
duplicate), its type the status.

- `finished` ("the funds have reached your personal address"): a capture of
  `actually_paid` in `pay_currency`, keyed by `payment_id`: the crypto received, as a
  Stripe capture is the amount received, NOWPayments' fee (`fee`, and the difference to
  `outcome_amount`) being its own business; `price_amount` is the order's price in
  fiat, not money that moved. A repeated deposit to a paid address comes with its own
  `payment_id` (its `parent_payment_id` names the first) and is captured on its own:
  keyed by the parent, it would collide with the parent's capture.
- `refunded` ("the funds were refunded back to the user"): a refund of the payment's
  `actually_paid`, keyed by the payment (NOWPayments refunds a payment once and gives
  the refund no id of its own).
- `partially_paid` moves nothing: the customer may still send the rest, and then
  `finished` carries the whole `actually_paid`; capturing the part first would need a
  second capture of one payment, which the ledger keys once. A payment left partially
  paid is counted as unmapped (or parked, `unmapped = "park"`) for an operator to settle
  by hand (`gateway ledger adjust`). The other statuses move nothing.

Amounts are JSON numbers, read exactly from their text (`document`), in the asset's
smallest unit (`core.money.minor_exponent`: USDT and USDC 6); more decimals than that is
refused, never rounded, and so is a text that says more than the double NOWPayments'
signature covers (`0.30000000000000001`). `pay_currency` names a coin on a network
(`NETWORK_ASSETS`): USDT's and USDC's tickers are their asset; a fiat currency
NOWPayments takes is itself; any other coin (`btc`, `trx`) is parked as
`FIELD_TYPE_INVALID` on `pay_currency`: the ledger holds no such asset.

NOWPayments names no merchant (an account is one store): `[providers.NAME]
merchant_id` names the store's, or `merchant` says where one is (`Movements.merchant`
is empty), else a capture is parked as
`MISSING_FIELD`; a refund takes its payment's. Payouts' and custodial recurring
payments' IPNs are recorded and published, and never settle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from gateway.core.bodies.fields import get_decimal_amount, get_str
from gateway.core.money import check_amount, minor_exponent
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.nowpayments import SCHEME, refuse_constant
from gateway.errors import FieldTypeInvalid, InvalidAmount, MissingField, PayloadNotJson

_K = SettlementKind
MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = MappingProxyType(
    {"finished": (_K.CAPTURE,), "refunded": (_K.REFUND,)}
)

#: NOWPayments' tickers of the stablecoins, one per network, to the asset the ledger
#: holds. Named in NOWPayments' API documentation: `usdt`, `usdterc20`, `usdttrc20`,
#: `usdtbsc`, `usdc`; the others as NOWPayments' integrators write them [second-hand]
#: (its full list is its API's `GET /v1/full-currencies`). A network whose token has
#: more decimals than 6 (BSC's has 18) still settles exactly: a finer amount is refused.
NETWORK_ASSETS: Mapping[str, str] = MappingProxyType(
    {
        **dict.fromkeys(("usdt", "usdterc20", "usdttrc20", "usdtbsc"), "USDT"),
        **dict.fromkeys(("usdtsol", "usdtmatic", "usdtarb", "usdtton"), "USDT"),
        "usdc": "USDC",
        **dict.fromkeys(("usdcbsc", "usdcsol", "usdcmatic", "usdcarb"), "USDC"),
        # "one of available fiat currencies if it's enabled for your account"
        **{code.lower(): code for code in ("USD", "EUR", "ILS", "GBP", "AUD", "RON")},
    }
)
#: The largest integer a JavaScript number holds exactly (2**53 - 1): past it, the
#: signature covers a rounded value, so such an id could be respelt under one signature.
_SAFE_INTEGER = 2**53 - 1
#: Past 10**20 units an amount is wider than any ledger (2**63 - 1 of the smallest unit).
_DIGITS_MAX = 20


def document(body: bytes) -> Any:
    """The IPN's JSON with every decimal a `Decimal` of its text as written, so no amount
    passes through a float; `PayloadNotJson` for a body that is not JSON."""
    try:
        return json.loads(body.decode("utf-8"), parse_float=Decimal, parse_constant=refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise PayloadNotJson(f"body is not valid JSON: {exc}") from None


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A NOWPayments IPN's instruction, or None when it moves no money."""
    kinds = MOVEMENT_TYPES.get(event_type)
    if kinds is None or not isinstance(doc, Mapping) or "payment_id" not in doc:
        return None  # another status, or a payout's IPN
    payment = _payment_id(doc)
    currency = _asset(doc)
    capture = kinds[0] is _K.CAPTURE
    return SettlementInstruction(
        settlement_id=payment,
        kind=kinds[0],
        merchant_id=None,  # NOWPayments names none: `merchant_id` or `merchant` do
        amount_minor=exact_amount(doc, "actually_paid", currency),
        currency=currency,
        refund_id=None if capture else payment,
        source_event_id=f"{payment}:{event_type}",
    )


def _payment_id(doc: Mapping[str, Any]) -> str:
    """`payment_id`, an integer (a string in some answers) the signature covers exactly."""
    value = doc.get("payment_id")
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 < value <= _SAFE_INTEGER:
            raise FieldTypeInvalid("payment_id", f"an id from 1 to {_SAFE_INTEGER}")
        return str(value)
    return get_str(doc, "payment_id")


def _asset(doc: Mapping[str, Any]) -> str:
    """The asset `pay_currency` names on the ledger (`NETWORK_ASSETS`)."""
    ticker = get_str(doc, "pay_currency")
    asset = NETWORK_ASSETS.get(ticker.lower())
    if asset is None:
        raise FieldTypeInvalid(
            "pay_currency", "USDT or USDC on a network NOWPayments names, or a fiat currency"
        )
    return asset


def exact_amount(doc: Mapping[str, Any], key: str, currency: str) -> int:
    """`doc[key]` in the smallest unit of `currency`: a JSON number read from its text
    (a decimal string, as NOWPayments writes some amounts, is read as
    `get_decimal_amount` reads one).

    Exact or refused (`FieldTypeInvalid`): more decimals than `currency` has
    (`10.0000005` USDT) is never rounded; nor is a text finer than its double, the value
    NOWPayments' signature covers, so the amount settled is the amount signed. Trailing
    zeros (`10.50`) are the same amount. Not positive, or wider than the ledgers:
    `InvalidAmount`.
    """
    value = doc.get(key)
    if isinstance(value, str):
        return get_decimal_amount(doc, key, currency)
    if value is None:
        raise MissingField(key)
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise FieldTypeInvalid(key, "a number")
    exact = Decimal(value)
    signed = float(exact)  # JSON.parse's double: Decimal's float is correctly rounded
    if math.isinf(signed) or Decimal(repr(signed)) != exact:
        raise FieldTypeInvalid(key, "a number as NOWPayments writes it (the double it signs)")
    # At most 17 significant digits now, so neither step below rounds anything.
    exponent = minor_exponent(currency)
    if -min(0, int(exact.normalize().as_tuple().exponent)) > exponent:
        raise FieldTypeInvalid(key, f"an amount with at most {exponent} decimals in {currency}")
    if exact.adjusted() > _DIGITS_MAX:  # past the ledgers' range: no need to build it
        raise InvalidAmount(f"{key} is {exact}, wider than the ledgers")
    return check_amount(int(exact.scaleb(exponent)), key)


NOWPAYMENTS = Provider(
    name="nowpayments",
    title="NOWPayments",
    scheme=SCHEME,
    movements=Movements(instruction, MOVEMENT_TYPES),
    order_keys=parse_rules(("/payment_id",)),
    cross_check="NOWPayments' Node.js SDK (`createWebhookSignature`, "
    "NowPaymentsIO/nowpayments-sdk-nodejs, not on npm) and the `sortObject` example of "
    "its API documentation, run under Node.js to make the tests' vectors",
    document=document,
)
