"""Settlement instructions: what an event asks the ledger to do, and the ids it will use.

Pure. Extractors turn a provider's or service's event into a `SettlementInstruction`
(or None when the event type does not settle); ids are derived deterministically, so
the same settlement always maps to the same transfer and accounts, whichever worker or
delivery handles it. Amounts leave the extractors in ISO 4217 minor units, whatever
the provider's own convention (`core.money.from_provider_minor`); conversion between
currencies lives in `core.money` too.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway.core.fields import get_amount, get_currency, get_object, get_str, optional_str
from gateway.core.ledger import ID_MAX, AccountCode, AccountSpec, LedgerTransfer, TransferCode
from gateway.core.money import check_amount, check_currency, from_provider_minor, quantize_rate
from gateway.errors import FieldTypeInvalid, MissingField


class SettlementKind(enum.StrEnum):
    """Which way money moves: capture pays the merchant, refund takes it back."""

    CAPTURE = "capture"
    REFUND = "refund"


class SettlementState(enum.StrEnum):
    """Where a settlement stands, as stored in `settlements.state`."""

    PENDING = "pending"
    SETTLED = "settled"
    FAILED = "failed"


@dataclass(frozen=True)
class SettlementInstruction:
    """One capture or refund to post, in the event's own currency, in ISO minor units."""

    settlement_id: str  # the payment's id; a refund carries the id of the payment it reverses
    kind: SettlementKind
    #: None only for a provider refund that does not repeat the merchant: take it from the
    #: settled payment, which the worker must look up anyway.
    merchant_id: str | None
    amount_minor: int  # ISO 4217 minor units of `currency`, not the provider's
    currency: str  # upper-case code
    refund_id: str | None  # set for refunds only
    source_event_id: str | None

    @property
    def key(self) -> str:
        """The settlement's own id: the refund id for refunds, the payment id otherwise."""
        return self.refund_id if self.refund_id is not None else self.settlement_id


# --- extractors --------------------------------------------------------------------------


def from_stripe(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A Stripe event's instruction, or None when its type does not settle.

    `charge.refunded` carries the refunded charge. When the charge lists its refunds
    (API versions before 2022-11-15 expand them), the newest refund is the settlement,
    with its own id and amount, so partial refunds settle one by one. Otherwise the
    charge id and the cumulative `amount_refunded` are used, and a later partial refund
    of the same charge surfaces as an id collision for manual review, never as money
    moved twice. Amounts are read with Stripe's minor units (MGA 0 decimals, ISK and UGX
    2; ISO says 2, 0, 0), which read as ISO would settle 100x wrong.
    """
    if event_type == "payment_intent.succeeded":
        obj = get_object(doc, "data.object")
        return SettlementInstruction(
            settlement_id=get_str(obj, "id", "data.object."),
            kind=SettlementKind.CAPTURE,
            merchant_id=get_str(
                get_object(doc, "data.object.metadata"), "merchant_id", "data.object.metadata."
            ),
            amount_minor=from_provider_minor(
                "stripe",
                get_amount(obj, "amount_received", "data.object."),
                get_currency(obj, "currency", "data.object."),
                "data.object.amount_received",
            ),
            currency=get_currency(obj, "currency", "data.object."),
            refund_id=None,
            source_event_id=optional_str(doc, "id"),
        )
    if event_type == "charge.refunded":
        obj = get_object(doc, "data.object")
        latest = _latest_refund(obj)
        metadata = obj.get("metadata")
        merchant_id = metadata.get("merchant_id") if isinstance(metadata, Mapping) else None
        if latest is not None:
            refund_id = get_str(latest, "id", "data.object.refunds.data[].")
            amount_field = "data.object.refunds.data[].amount"
            amount = get_amount(latest, "amount", "data.object.refunds.data[].")
        else:
            refund_id = get_str(obj, "id", "data.object.")
            amount_field = "data.object.amount_refunded"
            amount = get_amount(obj, "amount_refunded", "data.object.")
        return SettlementInstruction(
            settlement_id=get_str(obj, "payment_intent", "data.object."),
            kind=SettlementKind.REFUND,
            merchant_id=merchant_id if isinstance(merchant_id, str) and merchant_id else None,
            amount_minor=from_provider_minor(
                "stripe", amount, get_currency(obj, "currency", "data.object."), amount_field
            ),
            currency=get_currency(obj, "currency", "data.object."),
            refund_id=refund_id,
            source_event_id=optional_str(doc, "id"),
        )
    return None


_INTERNAL_KINDS = {
    "payment.captured": SettlementKind.CAPTURE,
    "payment.refunded": SettlementKind.REFUND,
}


def from_internal(event_type: str, doc: Any) -> SettlementInstruction | None:
    """An internal `payment.captured` / `payment.refunded` event's instruction, else None."""
    kind = _INTERNAL_KINDS.get(event_type)
    if kind is None:
        return None
    data = get_object(doc, "data")
    return SettlementInstruction(
        settlement_id=get_str(data, "settlement_id", "data."),
        kind=kind,
        merchant_id=get_str(data, "merchant_id", "data."),
        amount_minor=get_amount(data, "amount_minor", "data."),
        currency=get_currency(data, "currency", "data."),
        refund_id=get_str(data, "refund_id", "data.") if kind is SettlementKind.REFUND else None,
        source_event_id=optional_str(doc, "id"),
    )


def merchant_to_post(
    instruction: SettlementInstruction, settled_payment_merchant: str | None
) -> str | None:
    """The merchant whose account the transfer moves money for.

    A capture names its merchant (`MissingField` otherwise). A refund belongs to the
    merchant of the payment it reverses, and only once that payment has settled:
    `settled_payment_merchant` is that payment's merchant then, None before. None comes
    back for a refund whose payment has not settled; the caller decides whether to wait.
    """
    if instruction.kind is SettlementKind.REFUND:
        if settled_payment_merchant is None:
            return None
        return instruction.merchant_id or settled_payment_merchant
    if not instruction.merchant_id:
        raise MissingField("merchant_id")
    return instruction.merchant_id


# --- deterministic ids -------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def _hash128(*parts: str) -> int:
    """A 128-bit id from `parts`, never one of the two values TigerBeetle reserves.

    Cached: a settlement's ids are asked for several times while it settles, and the
    few account ids over and over.
    """
    salt = 0
    while True:
        digest = hashlib.blake2b(digest_size=16, person=b"gateway.ledger1")
        for part in (*parts, str(salt)):
            raw = part.encode("utf-8")
            # Length prefixes keep ("a:b", "c") and ("a", "b:c") apart.
            digest.update(len(raw).to_bytes(4, "big") + raw)
        value = int.from_bytes(digest.digest(), "big")
        if 0 < value < ID_MAX:
            return value
        salt += 1  # astronomically rare; rehash deterministically


def transfer_id(instruction: SettlementInstruction) -> int:
    """The transfer's id: the same settlement (or refund) always gets the same id."""
    if instruction.kind is SettlementKind.REFUND:
        return _hash128("transfer", "refund", instruction.settlement_id, instruction.key)
    return _hash128("transfer", "capture", instruction.settlement_id)


def settlement_ref(settlement_id: str) -> int:
    """A 128-bit hash of the settlement id, for TigerBeetle's `user_data_128`."""
    return _hash128("settlement", settlement_id)


def merchant_account_id(merchant_id: str, currency: str) -> int:
    """The id of the merchant's account in `currency`."""
    return _hash128("account", "merchant", merchant_id, check_currency(currency))


def clearing_account_id(provider: str, currency: str) -> int:
    """The id of the provider's clearing account in `currency` (money in transit)."""
    return _hash128("account", "clearing", provider, check_currency(currency))


def ledger_number(currency: str) -> int:
    """The ledger (a u32) holding `currency`: its letters read as a base-27 number.

    Total and collision-free for currency codes (three letters; the encoding would stay
    within a u32 up to six, 27**6 < 2**32), with no table to keep up to date; `USD` is
    15_826.
    """
    code = check_currency(currency)
    value = 0
    for letter in code:
        value = value * 27 + (ord(letter) - ord("A") + 1)
    return value


def merchant_account(merchant_id: str, currency: str) -> AccountSpec:
    """A merchant's account: it may never pay out more than it was paid."""
    return AccountSpec(
        id=merchant_account_id(merchant_id, currency),
        ledger=ledger_number(currency),
        code=AccountCode.MERCHANT,
        debits_must_not_exceed_credits=True,
    )


def clearing_account(provider: str, currency: str) -> AccountSpec:
    """A provider's clearing account: debited on capture, so it runs a debit balance."""
    return AccountSpec(
        id=clearing_account_id(provider, currency),
        ledger=ledger_number(currency),
        code=AccountCode.CLEARING,
    )


def build_transfer(
    instruction: SettlementInstruction,
    *,
    provider: str,
    ledger_currency: str,
    amount_minor: int,
    rate_at_payment: Decimal,
    merchant_id: str | None = None,
) -> LedgerTransfer:
    """The ledger transfer for `instruction`, already converted to `ledger_currency`.

    Capture: clearing → merchant. Refund: merchant → clearing. `merchant_id` overrides
    the instruction's (needed when a refund event does not name the merchant).
    """
    merchant = merchant_id or instruction.merchant_id
    if not merchant:
        raise MissingField("merchant_id")
    check_amount(amount_minor, "converted amount")  # positive, within the ledgers' range
    clearing = clearing_account_id(provider, ledger_currency)
    merchant_acct = merchant_account_id(merchant, ledger_currency)
    capture = instruction.kind is SettlementKind.CAPTURE
    return LedgerTransfer(
        id=transfer_id(instruction),
        debit_account_id=clearing if capture else merchant_acct,
        credit_account_id=merchant_acct if capture else clearing,
        amount_minor=amount_minor,
        ledger=ledger_number(ledger_currency),
        code=TransferCode.CAPTURE if capture else TransferCode.REFUND,
        settlement_id=instruction.settlement_id,
        rate_at_payment=quantize_rate(rate_at_payment),
    )


def _latest_refund(charge: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The newest refund listed on a charge, or None when the list is not included."""
    refunds = charge.get("refunds")
    items = refunds.get("data") if isinstance(refunds, Mapping) else None
    if not isinstance(items, list) or not items:
        return None
    listed = [r for r in items if isinstance(r, Mapping)]
    if len(listed) != len(items):
        raise FieldTypeInvalid("data.object.refunds.data", "a list of refund objects")
    # Stripe lists newest first (max keeps the first of equals); `created` decides otherwise.
    return max(listed, key=lambda r: r["created"] if isinstance(r.get("created"), int) else 0)
