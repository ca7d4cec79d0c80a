"""Paystack's events as money movements (paystack.com/docs/payments/webhooks).

An event is `{"event": …, "data": {…}}`, with no id of its own. Amounts are integers in
the currency's subunit ("kobo if currency is NGN, pesewas, if currency is GHS, and
cents, if currency is ZAR", PaystackOSS/openapi; `UNITS` for the exceptions); Paystack's
refund examples write the amount as an integer or as a string of digits, so both are
read.

The payment is the transaction's `reference`: the only key its refunds name
(`transaction_reference`) and one its disputes name (`transaction.reference`); the
transaction's numeric `id` is absent from the refund events.

- `charge.success`: a capture of `amount` (Paystack's `fees` are its own business,
  as Stripe's are), keyed by the transaction's `reference`. Paystack captures at once;
  its pre-authorisation events (`preauthorization.*`) are not mapped.
- `refund.processed`: a refund of `amount` of `transaction_reference`, keyed by the
  refund's `refund_reference`, else its `id` (every refund event in the examples
  carries the reference; `id` appears in `refund.needs-attention` only, so keying by it
  first would put a refund and its failure under two keys). A refund whose `dispute` names a
  dispute moves nothing here: the dispute's resolution moves that money (Paystack's
  Refund object has the field; its refund events do not show it). `refund.failed`: its
  reversal, which `core.settlement.follow_ups` records and nets to nothing when the refund never
  processed (the usual case: it fails from pending), and which returns the money if a
  processed refund can fail later.
  `refund.pending`, `.processing` and `.needs-attention` move nothing.
- `charge.dispute.resolve`: the decision. `resolution` `merchant-accepted` (the
  merchant accepted it) and `auto-accepted` (Paystack's example; by its name, accepted
  for the merchant, who must answer within 16 hours, paystack.com/docs/payments/
  manage-disputes) are a chargeback of `refund_amount` ("the amount (full or partial)
  you want to refund the customer with", docs-v1.paystack.com/docs/handling-disputes),
  keyed by the dispute's `id`, of `transaction.reference`; `declined` (the merchant
  proved value was given) moves nothing; any other resolution is refused
  (`FieldTypeInvalid`) rather than guessed at. `charge.dispute.create` and `.remind`
  move nothing: the ledger moves a dispute's money on its decision only, as for
  Razorpay.
- `transfer.success`: a payout of `amount` from the merchant's balance, keyed by the
  transfer's `reference`, when its recipient names a merchant
  (`recipient.metadata.merchant_id`; a transfer takes no metadata of its own): other
  transfers pay no merchant's money. `transfer.failed` moves nothing.
  `transfer.reversed` (the money came back to the balance) moves nothing here: the
  ledger has no payout reversal, so an operator posts `gateway ledger adjust`.

Sources: the examples Paystack's documentation shows, PaystackOSS/doc-code-snippets
(`src/doc/payments/webhooks/events/`, `src/doc/payments/refunds/events/`,
`src/doc/terminal/virtual-terminal/webhook/`); the dispute resolutions ("Accepted
values, merchant-accepted, declined") and the metadata types from PaystackOSS/openapi
(`dist/paystack.yaml`); the Refund object's `dispute` from doc-code-snippets
`src/api/refunds/fetch/response.json`. Not confirmed: whether an accepted dispute also
sends `refund.processed` (and whether that refund's event names the dispute), whether a
processed refund can fail later, and the refund examples' mixed amount types.

The merchant is `metadata.merchant_id` of the transaction (`data.metadata`; a dispute's
`data.transaction.metadata`), else None; Paystack stores `metadata` as sent, so an
object, or a string of JSON (the charge-authorization call takes "Stringified JSON"),
or `0` and `""` in its examples. `source_event_id` is `EVENT:data.id`, the id the
gateway records the event by, when `data.id` is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson

from gateway.core.bodies.fields import (
    get_amount,
    get_currency,
    get_digits_amount,
    get_object,
    get_str,
)
from gateway.core.money import ProviderUnits, from_provider_minor
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.base import Algorithm, Encoding, FieldRef, SchemeParams, SignedContent
from gateway.core.signatures.hmac_generic import PresetHmacScheme
from gateway.errors import FieldTypeInvalid, MissingField

_K = SettlementKind
_REFUND = {"refund.processed": _K.REFUND, "refund.failed": _K.REFUND_REVERSAL}
#: The resolutions that take the disputed money; `declined` leaves it with the merchant.
_ACCEPTED = frozenset({"merchant-accepted", "auto-accepted"})

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {
    "charge.success": (_K.CAPTURE,),
    **{t: (k,) for t, k in _REFUND.items()},
    "charge.dispute.resolve": (_K.CHARGEBACK,),
    "transfer.success": (_K.PAYOUT,),
}

_D = "data."


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Paystack event's instruction, or None when it moves no money."""
    if event_type == "charge.success":
        data = get_object(doc, "data")
        return SettlementInstruction(
            settlement_id=get_str(data, "reference", _D),
            kind=_K.CAPTURE,
            merchant_id=_metadata_merchant(data),
            amount_minor=_amount(data, "amount", _D),
            currency=get_currency(data, "currency", _D),
            refund_id=None,
            source_event_id=_event_id(event_type, data),
        )
    if event_type in _REFUND:
        data = get_object(doc, "data")
        if data.get("dispute") is not None:
            return None  # the dispute's resolution moves it
        own = "refund_reference" if data.get("refund_reference") is not None else "id"
        return SettlementInstruction(
            settlement_id=get_str(data, "transaction_reference", _D),
            kind=_REFUND[event_type],
            merchant_id=None,  # a refund event carries no metadata: its payment's
            amount_minor=_amount(data, "amount", _D),
            currency=get_currency(data, "currency", _D),
            refund_id=_id(data, own, _D),
            source_event_id=_event_id(event_type, data),
        )
    if event_type == "charge.dispute.resolve":
        data = get_object(doc, "data")
        resolution = get_str(data, "resolution", _D)
        if resolution == "declined":
            return None  # the merchant keeps the money
        if resolution not in _ACCEPTED:
            raise FieldTypeInvalid(
                _D + "resolution", "merchant-accepted, auto-accepted or declined"
            )
        transaction = get_object(doc, "data.transaction")
        return SettlementInstruction(
            settlement_id=get_str(transaction, "reference", _D + "transaction."),
            kind=_K.CHARGEBACK,
            merchant_id=_metadata_merchant(transaction),
            amount_minor=_amount(data, "refund_amount", _D),
            currency=get_currency(data, "currency", _D),
            refund_id=_id(data, "id", _D),
            source_event_id=_event_id(event_type, data),
        )
    if event_type == "transfer.success":
        data = get_object(doc, "data")
        recipient = data.get("recipient")
        merchant = _metadata_merchant(recipient) if isinstance(recipient, Mapping) else None
        if merchant is None:
            return None  # no merchant's money paid out
        reference = get_str(data, "reference", _D)
        return SettlementInstruction(
            settlement_id=reference,
            kind=_K.PAYOUT,
            merchant_id=merchant,
            amount_minor=_amount(data, "amount", _D),
            currency=get_currency(data, "currency", _D),
            refund_id=reference,
            source_event_id=_event_id(event_type, data),
        )
    return None


def _amount(obj: Mapping[str, Any], key: str, prefix: str) -> int:
    """An amount written as an integer or as a string of digits, in ISO minor units."""
    read = get_digits_amount if isinstance(obj.get(key), str) else get_amount
    amount = read(obj, key, prefix)
    currency = get_currency(obj, "currency", prefix)
    return from_provider_minor(UNITS, "paystack", amount, currency, prefix + key)


def _id(obj: Mapping[str, Any], key: str, prefix: str) -> str:
    """An id Paystack writes as an integer (a dispute's, a refund's) or as a string."""
    value = obj.get(key)
    if value is None:
        raise MissingField(prefix + key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return get_str(obj, key, prefix)


def _event_id(event_type: str, data: Mapping[str, Any]) -> str | None:
    """`EVENT:data.id`, else `EVENT:data.refund_reference`: the id the event is recorded
    by (`PAYSTACK`'s `event_id_from`); None without either."""
    for key in ("id", "refund_reference"):
        value = data.get(key)
        if not isinstance(value, bool) and isinstance(value, (int, str)) and value != "":
            return f"{event_type}:{value}"
    return None


def _metadata_merchant(obj: Mapping[str, Any]) -> str | None:
    """`metadata.merchant_id` when it is a non-empty string, else None; `metadata` is an
    object or a string of one (anything else, `0` or `""`, names no merchant)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, str) and metadata.startswith("{"):
        try:
            metadata = orjson.loads(metadata)
        except orjson.JSONDecodeError:
            return None
    merchant = metadata.get("merchant_id") if isinstance(metadata, Mapping) else None
    return merchant if isinstance(merchant, str) and merchant else None


#: Paystack's amounts are "in the subunit of the currency" with no listed exception, and
#: Paystack's own WooCommerce plugin (PaystackOSS/woo-paystack,
#: `includes/class-wc-gateway-paystack.php`) sends every currency it accepts (NGN USD
#: ZAR GHS KES XOF EGP RWF) as `get_total() * 100` and reads `amount / 100` back. ISO
#: 4217 gives XOF and RWF no decimals, so Paystack's 100 XOF is 1 franc: read as ISO it
#: would settle 100x too much. [Inference from that plugin: no Paystack page was found
#: that states XOF's or RWF's subunit.] An amount that is not whole francs is refused.
UNITS: Mapping[str, ProviderUnits] = MappingProxyType(
    {"XOF": ProviderUnits(exponent=2), "RWF": ProviderUnits(exponent=2)}
)

PAYSTACK = Provider(
    name="paystack",
    title="Paystack",
    # `x-paystack-signature`: hex HMAC-SHA512 of the raw body, keyed with the secret API
    # key (paystack.com/docs/payments/webhooks). Paystack sends no event id: the id is
    # the event and its object (`data.id`; a refund has only `data.refund_reference`),
    # both inside the signed body.
    scheme=PresetHmacScheme(
        "paystack",
        SchemeParams(
            secrets=(),
            header="x-paystack-signature",
            encoding=Encoding.HEX,
            algorithm=Algorithm.SHA512,
            signed=SignedContent.BODY,
            event_id_from=FieldRef(
                "json",
                "/event",
                also=("/data/id",),
                fallback=FieldRef(
                    "json",
                    "/event",
                    also=("/data/refund_reference",),
                    # A pending refund may carry neither yet: its transaction then (it
                    # moves nothing, so two of one transaction being one row is harmless).
                    fallback=FieldRef("json", "/event", also=("/data/transaction_reference",)),
                ),
            ),
            event_type_from=FieldRef("json", "event"),
        ),
    ),
    movements=Movements(instruction, MOVEMENT_TYPES, parse_rules(("/data/metadata/merchant_id",))),
    units=UNITS,
    order_keys=parse_rules(
        ("/data/reference", "/data/transaction_reference", "/data/transaction/reference")
    ),
    cross_check="no official library: the signature is recomputed from the rule on "
    "Paystack's webhooks page (HMAC-SHA512 of the body, hex)",
)
