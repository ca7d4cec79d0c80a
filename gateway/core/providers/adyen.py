"""Adyen's Standard webhooks (classic notifications): the `adyen` provider and its
money movements. Pure. How its items are verified and split: `core.signatures.adyen_items`.

Money (`instruction`, from the one item of a split body; `success` "false" moves nothing):

- `AUTHORISATION`: the amount reserved, keyed by the payment (`pspReference`). Adyen
  sends no `CAPTURE` for an automatic capture unless told to, so enable it.
- `CAPTURE` and `CANCELLATION`: the capture and the void of payment `originalReference`.
- `REFUND`: keyed by its own `pspReference`. `REFUND_FAILED` (the scheme rejected it) and
  `REFUNDED_REVERSED` (the refunded money came back): its reversal under the same key,
  the refund's reference (Adyen's Magento plugin looks its credit memo up by it; its
  commercetools one fails the refund of that reference on both codes), so it nets
  against the refund (`core.settlement.follow_ups`) and two codes for one refund move it once.
  [unverified for REFUNDED_REVERSED: a reference of its own would net to nothing.]
- `CHARGEBACK`: keyed by the dispute's `pspReference`, which every event of a dispute
  shares (docs.adyen.com/risk-management/disputes-api/dispute-notifications);
  `CHARGEBACK_REVERSED`: its reversal. `SECOND_CHARGEBACK` (the defence refused after
  the reversal) is keyed `{pspReference}:SECOND_CHARGEBACK`: under the first key it
  would be the first chargeback told again and move nothing as the money leaves again.
  Dispute events carry `originalReference` only where the Customer Area enables it
  (else `MissingField`).
- `CAPTURE_FAILED` moves nothing (counted as unmapped, parked with `unmapped = "park"`).
  It follows a capture already posted; its commonest cause is technical and Adyen then
  re-captures, sending `CAPTURE` again, which is that capture's duplicate here
  (docs.adyen.com/online-payments/capture/failure-reasons). Taking the money back would
  leave the merchant short once it arrives, and no kind undoes a capture: without a
  re-capture in 10 days an operator posts `gateway ledger adjust`.
- `CANCEL_OR_REFUND`, `TECHNICAL_CANCEL`, `AUTHORISATION_ADJUSTMENT`, `PREARBITRATION_*`
  and the rest move nothing yet.

The merchant is, by default, the Adyen merchant account (`merchantAccountCode`), the
one field every event of a payment carries (a capture or refund does not repeat the
payment's `metadata`). A platform that keeps several merchants in one merchant account
points `[providers.NAME] merchant` at a field its events all carry; the mapping itself
falls back to `additionalData["metadata.merchant_id"]` (Adyen flattens a payment's
`metadata`; a nested one is read too).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gateway.core.bodies.fields import get_amount, get_currency, get_str
from gateway.core.money import ProviderUnits, from_provider_minor
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Answer, Batch, Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.adyen_items import SCHEME, signed_body, split
from gateway.core.signatures.base import SchemeParams, signing_secret
from gateway.errors import FieldTypeInvalid, MissingField

# --- money movements ----------------------------------------------------------------

_K = SettlementKind
_P = "notificationItems.0.NotificationRequestItem."

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = MappingProxyType(
    {
        "AUTHORISATION": (_K.AUTHORISATION,),
        "CAPTURE": (_K.CAPTURE,),
        "CANCELLATION": (_K.VOID,),
        "REFUND": (_K.REFUND,),
        "REFUND_FAILED": (_K.REFUND_REVERSAL,),
        "REFUNDED_REVERSED": (_K.REFUND_REVERSAL,),
        "CHARGEBACK": (_K.CHARGEBACK,),
        "CHARGEBACK_REVERSED": (_K.CHARGEBACK_REVERSAL,),
        "SECOND_CHARGEBACK": (_K.CHARGEBACK,),
    }
)

# Adyen's currency table (docs.adyen.com/development-resources/currency-codes): amounts
# are integers in minor units with the table's decimals, which Adyen says lead where
# ISO 4217 differs. Its rows marked "differs from standard": CLP 2 (ISO 0) and CVE 0
# (ISO 2); its note "For CLP, CVE, IDR, and ISK the standard has a different number of
# decimals" adds IDR 0 (ISO 2) and ISK 2 (ISO 0) [2nd: the note as quoted by
# docs.one-cp.com/currency-codes, and adyen-commercetools #1085 for ISK]. Adyen's
# adyen-web `currency-decimals.ts` still lists ISK with none; the API page wins. An
# ISK or CLP amount that is not whole krónur or pesos is refused by `from_provider_minor`.
UNITS: Mapping[str, ProviderUnits] = MappingProxyType(
    {
        "CLP": ProviderUnits(exponent=2),
        "CVE": ProviderUnits(exponent=0),
        "IDR": ProviderUnits(exponent=0),
        "ISK": ProviderUnits(exponent=2),
    }
)


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """An Adyen event's instruction, or None when it moves no money (the module's list)."""
    kinds = MOVEMENT_TYPES.get(event_type)
    if kinds is None:
        return None
    item = _single_item(doc)
    success = item.get("success")
    if success not in ("true", "false"):
        raise FieldTypeInvalid(_P + "success", '"true" or "false"')
    if success == "false":
        return None
    psp = get_str(item, "pspReference", _P)
    kind = kinds[0]
    if kind is _K.AUTHORISATION and _zero(item):
        return None  # a zero-value authorisation checks a card and reserves nothing
    # An authorisation is keyed by its payment, a void by the payment it voids, a
    # capture by nothing of its own; the rest by their own reference.
    payment = psp if kind is _K.AUTHORISATION else get_str(item, "originalReference", _P)
    # A capture is keyed by its payment and carries its own reference: a second partial
    # capture of one payment is then parked (`LEDGER_ID_COLLISION`, for an operator),
    # never taken for a repeat of the first when the amounts are equal.
    movement: str | None = psp
    if kind is _K.VOID:
        movement = payment
    elif event_type == "SECOND_CHARGEBACK":
        movement = f"{psp}:{event_type}"  # the dispute's reference keys the first one
    amount, currency = _amount(item)
    return SettlementInstruction(
        settlement_id=payment,
        kind=kind,
        merchant_id=_metadata_merchant(item),
        amount_minor=amount,
        currency=currency,
        refund_id=movement,
        source_event_id=f"{psp}:{event_type}:{success}",
    )


def _single_item(doc: Any) -> Mapping[str, Any]:
    """The one item of a split body (several would be money silently left unread)."""
    if not isinstance(doc, Mapping):
        raise FieldTypeInvalid("(body)", "an object")
    items = doc.get("notificationItems")
    if items is None:
        raise MissingField("notificationItems")
    if not isinstance(items, list) or len(items) != 1:
        raise FieldTypeInvalid("notificationItems", "a list of one item (batches are split)")
    item = items[0].get("NotificationRequestItem") if isinstance(items[0], Mapping) else None
    if item is None:
        raise MissingField(_P[:-1])
    if not isinstance(item, Mapping):
        raise FieldTypeInvalid(_P[:-1], "an object")
    return item


def _amount(item: Mapping[str, Any]) -> tuple[int, str]:
    """`amount` in ISO 4217 minor units, and its currency."""
    amount = item.get("amount")
    if amount is None:
        raise MissingField(_P + "amount")
    if not isinstance(amount, Mapping):
        raise FieldTypeInvalid(_P + "amount", "an object")
    prefix = _P + "amount."
    currency = get_currency(amount, "currency", prefix)
    value = get_amount(amount, "value", prefix)
    return from_provider_minor(UNITS, "adyen", value, currency, prefix + "value"), currency


def _metadata_merchant(item: Mapping[str, Any]) -> str | None:
    """`additionalData["metadata.merchant_id"]` (or nested) when a non-empty string."""
    extra = item.get("additionalData")
    if not isinstance(extra, Mapping):
        return None
    merchant = extra.get("metadata.merchant_id")
    if merchant is None and isinstance(extra.get("metadata"), Mapping):
        merchant = extra["metadata"].get("merchant_id")
    return merchant if isinstance(merchant, str) and merchant else None


def _zero(item: Mapping[str, Any]) -> bool:
    """An amount of 0 (Adyen authorises 0 to store or check a card)."""
    amount = item.get("amount")
    return isinstance(amount, Mapping) and amount.get("value") == 0


#: The most items one request may carry: Adyen sends one per JSON or HTTP POST
#: delivery and up to six over SOAP; a body past this is not Adyen's (413, whole).
ITEMS_MAX = 50
#: The most bytes one item may hold as its own body: an item is a few kilobytes.
ITEM_BYTES_MAX = 65_536
_ITEM = "/notificationItems/0/NotificationRequestItem"


def _split(body: bytes) -> tuple[bytes, ...]:
    return split(body, ITEMS_MAX, ITEM_BYTES_MAX)


def _sign_body(params: SchemeParams, body: bytes) -> bytes:
    return signed_body(body, signing_secret(params))


ADYEN = Provider(
    name="adyen",
    title="Adyen",
    scheme=SCHEME,
    movements=Movements(
        instruction, MOVEMENT_TYPES, parse_rules((f"{_ITEM}/merchantAccountCode",))
    ),
    units=UNITS,
    # A modification names its payment in `originalReference`; an authorisation is it.
    order_keys=parse_rules((f"{_ITEM}/originalReference", f"{_ITEM}/pspReference")),
    # Today's docs accept any 2xx; `[accepted]` is the older contract, and both hold.
    answer=Answer(body=b"[accepted]"),
    batch=Batch(_split, ITEMS_MAX, ITEM_BYTES_MAX),
    cross_check="`Adyen.util.is_valid_hmac_notification` (Adyen's Python library) and "
    "its published notifications, `:` and `\\` in references included",
    sign_body=_sign_body,
)
