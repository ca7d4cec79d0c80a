"""PayPal's webhooks as money movements (developer.paypal.com/api/rest/webhooks/
event-names; the resources are the Payments v2 API's: captures, refunds, and the
Disputes API's dispute).

An event is `{"id": "WH-…", "event_type", "resource_type", "resource": {…}}`. Amounts
are `{"currency_code", "value"}`, the value a decimal string in major units read
exactly (`fields.get_decimal_amount`): more decimals than the currency has is refused,
never rounded. PayPal writes HUF, JPY and TWD without decimals ("Currency codes":
developer.paypal.com/api/rest/reference/currency-codes) although ISO 4217 gives HUF and
TWD two: a PayPal `"100"` HUF is 10000 ISO minor units, and `"100.50"` HUF is refused.

A PayPal payment is keyed by its **capture** id: refunds name only their capture (the
`links` entry whose `rel` is `up`, `/v2/payments/captures/{id}`), and a dispute's
`disputed_transactions[].seller_transaction_id` is the capture too; the order id
(`supplementary_data.related_ids.order_id`) is named by captures alone.

- `PAYMENT.CAPTURE.COMPLETED`: the capture of its `amount`. (`.PENDING`, `.DENIED`
  move nothing: nothing was paid yet, or ever.)
- `PAYMENT.CAPTURE.REFUNDED`: the resource is the refund: a refund of its `amount`
  keyed by the refund's `id`, of the capture its `up` link names.
- `PAYMENT.CAPTURE.REVERSED`: funds taken back by PayPal (a bank reversal or a
  chargeback): a chargeback of its `amount`, of the capture its `up` link names (or of
  the resource itself when it is the capture).
- `CUSTOMER.DISPUTE.CREATED` moves nothing: PayPal holds the disputed funds while a
  dispute is open ("we'll place a temporary hold on the funds", PayPal's "disputes and
  chargebacks" help), it does not take them; the ledger moves on the decision, as for
  Square. `CUSTOMER.DISPUTE.RESOLVED` whose `dispute_outcome.outcome_code` is
  `RESOLVED_BUYER_FAVOUR` is a chargeback of `dispute_outcome.amount_refunded` (else
  `dispute_amount`); every other outcome releases the hold and moves nothing.
  [Unverified: whether PayPal also sends `PAYMENT.CAPTURE.REVERSED` for a dispute it
  decides for the buyer.] So that the same money cannot be taken twice, both kinds of
  taking-back are keyed by the capture (`{capture}:taken-back`): the second of equal
  amount is a duplicate, one of another amount an id collision parked for an operator.
- `PAYMENT.AUTHORIZATION.CREATED` / `.VOIDED` move nothing. The ledger's reservation
  is keyed by its payment and posted by the capture of that key (`core.settlement.two_phase`), but
  PayPal's capture of an authorisation is refunded and disputed under the capture's
  own id, never the authorisation's: keyed by the authorisation, the refunds would
  follow an unknown payment; keyed apart, no capture would ever post the reservation.

The merchant is the resource's `payee.merchant_id` (the PayPal account paid), else its
`custom_id` (the merchant's own field, for a platform selling for several merchants).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.fields import (
    get_currency,
    get_decimal_amount,
    get_object,
    get_str,
    optional_str,
)
from gateway.core.money import minor_exponent
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import CertificateSource, Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.paypal.scheme import PayPalScheme
from gateway.errors import FieldTypeInvalid, MissingField

_K = SettlementKind
MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    "PAYMENT.CAPTURE.COMPLETED": (_K.CAPTURE,),
    "PAYMENT.CAPTURE.REFUNDED": (_K.REFUND,),
    "PAYMENT.CAPTURE.REVERSED": (_K.CHARGEBACK,),
    "CUSTOMER.DISPUTE.RESOLVED": (_K.CHARGEBACK,),
}
#: The currencies PayPal writes in whole units whatever ISO 4217 says.
WHOLE_UNITS = frozenset({"HUF", "JPY", "TWD"})
_RES = "resource."
_CAPTURE_PATH = "/v2/payments/captures/"
_BUYER_WON = "RESOLVED_BUYER_FAVOUR"


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A PayPal event's instruction, or None when it moves no money."""
    if event_type not in MOVEMENT_TYPES:
        return None
    resource = get_object(doc, "resource")
    source = optional_str(doc, "id")
    merchant = _merchant(resource)
    if event_type == "PAYMENT.CAPTURE.COMPLETED":
        amount, currency = paypal_money(resource, "amount", _RES)
        return SettlementInstruction(
            settlement_id=get_str(resource, "id", _RES),
            kind=_K.CAPTURE,
            merchant_id=merchant,
            amount_minor=amount,
            currency=currency,
            refund_id=None,
            source_event_id=source,
        )
    if event_type == "CUSTOMER.DISPUTE.RESOLVED":
        outcome = get_object(doc, "resource.dispute_outcome")
        if get_str(outcome, "outcome_code", _RES + "dispute_outcome.") != _BUYER_WON:
            return None  # the hold is released: nothing left the merchant
        if outcome.get("amount_refunded") is not None:
            amount, currency = paypal_money(outcome, "amount_refunded", _RES + "dispute_outcome.")
        else:
            amount, currency = paypal_money(resource, "dispute_amount", _RES)
        capture = _disputed_capture(resource)
        return _taken_back(capture, merchant, amount, currency, source)
    amount, currency = paypal_money(resource, "amount", _RES)
    if event_type == "PAYMENT.CAPTURE.REFUNDED":
        return SettlementInstruction(
            settlement_id=up_capture(resource),
            kind=_K.REFUND,
            merchant_id=merchant,
            amount_minor=amount,
            currency=currency,
            refund_id=get_str(resource, "id", _RES),
            source_event_id=source,
        )
    # PAYMENT.CAPTURE.REVERSED: the reversal names its capture, or is the capture.
    try:
        capture = up_capture(resource)
    except MissingField:
        capture = get_str(resource, "id", _RES)
    return _taken_back(capture, merchant, amount, currency, source)


def _taken_back(
    capture: str, merchant: str | None, amount: int, currency: str, source: str | None
) -> SettlementInstruction:
    return SettlementInstruction(
        settlement_id=capture,
        kind=_K.CHARGEBACK,
        merchant_id=merchant,
        amount_minor=amount,
        currency=currency,
        refund_id=f"{capture}:taken-back",
        source_event_id=source,
    )


def paypal_money(obj: Mapping[str, Any], key: str, where: str) -> tuple[int, str]:
    """`obj[key]`, a PayPal `Money`, as (ISO minor units, currency); a HUF, JPY or TWD
    value with decimals is `FieldTypeInvalid` (PayPal writes them whole)."""
    money = obj.get(key)
    if money is None:
        raise MissingField(where + key)
    if not isinstance(money, Mapping):
        raise FieldTypeInvalid(where + key, "an object")
    prefix = f"{where}{key}."
    currency = get_currency(money, "currency_code", prefix)
    amount = get_decimal_amount(money, "value", currency, prefix)
    if currency in WHOLE_UNITS and amount % 10 ** minor_exponent(currency):
        raise FieldTypeInvalid(prefix + "value", f"a whole amount in {currency} (PayPal's)")
    return amount, currency


def up_capture(resource: Mapping[str, Any]) -> str:
    """The capture id a refund's or reversal's `up` link names; `MissingField` without
    one."""
    links = resource.get("links")
    for link in links if isinstance(links, list) else ():
        if not isinstance(link, Mapping):
            continue
        href = link.get("href")
        if link.get("rel") == "up" and isinstance(href, str) and _CAPTURE_PATH in href:
            capture = href.split(_CAPTURE_PATH, 1)[1].split("/", 1)[0].split("?", 1)[0]
            if capture:
                return capture
    raise MissingField(_RES + "links[rel=up] (its capture)")


def _disputed_capture(resource: Mapping[str, Any]) -> str:
    transactions = resource.get("disputed_transactions")
    if not isinstance(transactions, list) or not transactions:
        raise MissingField(_RES + "disputed_transactions")
    first = transactions[0]
    if not isinstance(first, Mapping):
        raise FieldTypeInvalid(_RES + "disputed_transactions[0]", "an object")
    return get_str(first, "seller_transaction_id", _RES + "disputed_transactions[0].")


def _merchant(resource: Mapping[str, Any]) -> str | None:
    payee = resource.get("payee")
    found = optional_str(payee, "merchant_id") if isinstance(payee, Mapping) else None
    return found or optional_str(resource, "custom_id")


_SCHEME = PayPalScheme()

PAYPAL = Provider(
    name="paypal",
    title="PayPal",
    scheme=_SCHEME,
    movements=Movements(
        instruction,
        MOVEMENT_TYPES,
        parse_rules(("/resource/payee/merchant_id", "/resource/custom_id")),
    ),
    # Captures by their id, disputes by the capture they name; a refund names its
    # capture only inside a link, which no pointer reaches (it is unordered).
    order_keys=parse_rules(
        (
            "PAYMENT.CAPTURE.COMPLETED /resource/id",
            "/resource/disputed_transactions/0/seller_transaction_id",
        )
    ),
    certificate=CertificateSource(_SCHEME.cert_url, _SCHEME.keyed_verifier),
    cross_check="`paypalrestsdk.notifications.WebhookEvent`: its message layout "
    "(`_get_expected_sig`) and certificate checks (`_verify_certificate`) against a "
    "test CA of our own",
    backfill="",
)
