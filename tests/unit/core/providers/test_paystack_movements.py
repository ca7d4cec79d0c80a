"""Paystack's events as money movements (`core.providers.paystack`), table-driven from
the examples Paystack's documentation shows (`payloads/paystack/README.md`)."""

from __future__ import annotations

import copy
import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.core.providers import paystack as mapping
from gateway.core.settlement.follow_ups import Claim, Payment, Pool, decide, held
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import FieldTypeInvalid, InvalidAmount, MissingField, ProviderAmountInvalid

K = SettlementKind
PAYLOADS = Path(__file__).parent / "payloads" / "paystack"


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((PAYLOADS / f"{name}.json").read_bytes())
    return doc


def changed(name: str, event: str | None = None, **data: Any) -> dict[str, Any]:
    """The payload `name` with another `event` and some `data` fields replaced (None
    removes one)."""
    doc = copy.deepcopy(load(name))
    if event is not None:
        doc["event"] = event
    for key, value in data.items():
        if value is None:
            doc["data"].pop(key, None)
        else:
            doc["data"][key] = value
    return doc


def to_recipient(merchant: Any) -> dict[str, Any]:
    doc = copy.deepcopy(load("transfer_success"))
    doc["data"]["recipient"]["metadata"] = merchant
    return doc


def moved(doc: dict[str, Any]) -> SettlementInstruction | None:
    return mapping.instruction(doc["event"], doc)


@pytest.mark.parametrize(
    ("case", "doc", "kind", "settlement_id", "key", "amount", "currency", "merchant", "event_id"),
    [
        ("a successful charge is captured, keyed by the transaction's reference",
         load("charge_success"), K.CAPTURE, "qTPrJoy9Bx", "qTPrJoy9Bx", 10000, "NGN", None,
         "charge.success:302961"),
        ("in KES too; metadata without a merchant names none",
         load("charge_success_kes"), K.CAPTURE, "T173424527684156", "T173424527684156", 10000,
         "KES", None, "charge.success:4677002219"),
        ("the merchant is metadata.merchant_id",
         changed("charge_success", metadata={"merchant_id": "m_1"}), K.CAPTURE, "qTPrJoy9Bx",
         "qTPrJoy9Bx", 10000, "NGN", "m_1", "charge.success:302961"),
        ("metadata sent as a string of JSON is read too",
         changed("charge_success", metadata='{"merchant_id": "m_2"}'), K.CAPTURE, "qTPrJoy9Bx",
         "qTPrJoy9Bx", 10000, "NGN", "m_2", "charge.success:302961"),
        ("XOF is written in hundredths: 150000 is 1,500 francs",
         changed("charge_success", currency="XOF", amount=150000), K.CAPTURE, "qTPrJoy9Bx",
         "qTPrJoy9Bx", 1500, "XOF", None, "charge.success:302961"),
        ("a processed refund (its amount a string) is keyed by its refund_reference",
         load("refund_processed"), K.REFUND, "T2154954_412829_3be32076_6lcg3", "132013318360",
         5000, "NGN", None, "refund.processed:132013318360"),
        ("a refund with an id too is still keyed by its reference, as its failure is",
         changed("refund_processed", id="123456"), K.REFUND, "T2154954_412829_3be32076_6lcg3",
         "132013318360", 5000, "NGN", None, "refund.processed:123456"),
        ("a refund with an id and no reference is keyed by the id",
         changed("refund_processed", id="123456", refund_reference=None), K.REFUND,
         "T2154954_412829_3be32076_6lcg3", "123456", 5000, "NGN", None,
         "refund.processed:123456"),
        ("a failed refund (its amount an integer) is its reversal",
         load("refund_failed"), K.REFUND_REVERSAL, "T9171231_412325_3be2736c_n6tml",
         "TRF_9vgfawjnoz58uxy", 20000, "NGN", None, "refund.failed:TRF_9vgfawjnoz58uxy"),
        ("an auto-accepted dispute is a chargeback of refund_amount, keyed by the dispute",
         load("charge_dispute_resolve"), K.CHARGEBACK, "5qm4pv2mxs9rltp", "358949", 5700,
         "NGN", None, "charge.dispute.resolve:358949"),
        ("so is one the merchant accepted, for part of it",
         changed("charge_dispute_resolve", resolution="merchant-accepted", refund_amount=2000),
         K.CHARGEBACK, "5qm4pv2mxs9rltp", "358949", 2000, "NGN", None,
         "charge.dispute.resolve:358949"),
        ("a transfer to a merchant's recipient is its payout, keyed by its reference",
         to_recipient({"merchant_id": "m_1"}), K.PAYOUT,
         "acv_9ee55786-2323-4760-98e2-6380c9cb3f68", "acv_9ee55786-2323-4760-98e2-6380c9cb3f68",
         100000, "NGN", "m_1", "transfer.success:860703114"),
    ],
)  # fmt: skip
def test_each_mapped_type_moves_what_paystack_says(
    case: str, doc: dict[str, Any], kind: SettlementKind, settlement_id: str, key: str,
    amount: int, currency: str, merchant: str | None, event_id: str | None,
) -> None:  # fmt: skip
    found = moved(doc)
    assert found is not None, case
    assert (found.kind, found.settlement_id, found.key) == (kind, settlement_id, key), case
    assert (found.amount_minor, found.currency, found.merchant_id) == (amount, currency, merchant)
    assert found.source_event_id == event_id, case
    assert found.kind in mapping.MOVEMENT_TYPES[doc["event"]], case


@pytest.mark.parametrize(
    ("case", "doc"),
    [
        ("a pending refund", load("refund_pending")),
        ("a refund needing attention", load("refund_needs_attention")),
        ("a refund still processing", changed("refund_pending", "refund.processing")),
        ("a dispute raised", load("charge_dispute_create")),
        ("a dispute reminder", changed("charge_dispute_create", "charge.dispute.remind")),
        ("a failed transfer", load("transfer_failed")),
        ("a reversed transfer: no payout reversal kind (an operator adjusts)",
         load("transfer_reversed")),
    ],
)  # fmt: skip
def test_the_types_that_move_nothing(case: str, doc: dict[str, Any]) -> None:
    assert doc["event"] not in mapping.MOVEMENT_TYPES, case
    assert moved(doc) is None, case


@pytest.mark.parametrize(
    ("case", "doc"),
    [
        ("a declined dispute leaves the money with the merchant",
         changed("charge_dispute_resolve", resolution="declined", refund_amount=None)),
        ("a refund settling a dispute: the dispute's resolution moves it",
         changed("refund_processed", dispute=358949)),
        ("a transfer to a recipient naming no merchant", load("transfer_success")),
        ("nor a recipient whose metadata is not an object", to_recipient("m_1")),
    ],
)  # fmt: skip
def test_listed_types_that_move_nothing_for_this_body(case: str, doc: dict[str, Any]) -> None:
    assert doc["event"] in mapping.MOVEMENT_TYPES, case
    assert moved(doc) is None, case


@pytest.mark.parametrize(
    ("case", "doc", "error", "field"),
    [
        ("no data", {"event": "charge.success"}, MissingField, "data"),
        ("no reference", changed("charge_success", reference=None), MissingField,
         "data.reference"),
        ("no amount", changed("charge_success", amount=None), MissingField, "data.amount"),
        ("a float amount", changed("charge_success", amount=100.5), FieldTypeInvalid,
         "data.amount"),
        ("a decimal string amount", changed("refund_processed", amount="50.00"),
         FieldTypeInvalid, "data.amount"),
        ("no currency", changed("charge_success", currency=None), MissingField, "data.currency"),
        ("a refund without its transaction", changed("refund_processed",
                                                     transaction_reference=None),
         MissingField, "data.transaction_reference"),
        ("a refund with no id and no refund_reference",
         changed("refund_failed", refund_reference=None), MissingField, "data.id"),
        ("a resolution never documented", changed("charge_dispute_resolve", resolution="won"),
         FieldTypeInvalid, "data.resolution"),
        ("a resolved dispute without its resolution",
         changed("charge_dispute_resolve", resolution=None), MissingField, "data.resolution"),
        ("a dispute without its transaction", changed("charge_dispute_resolve",
                                                      transaction=None),
         MissingField, "data.transaction"),
        ("a dispute id that is neither a number nor text",
         changed("charge_dispute_resolve", id=[358949]), FieldTypeInvalid, "data.id"),
        ("a payout without its reference", changed("transfer_success", reference=None,
                                                   recipient={"metadata": {"merchant_id": "m"}}),
         MissingField, "data.reference"),
    ],
)  # fmt: skip
def test_missing_or_garbled_fields_are_permanent_errors_naming_the_field(
    case: str, doc: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as raised:
        moved(doc)
    assert field in str(raised.value), case


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        (changed("charge_success", amount=0), InvalidAmount),
        (changed("charge_dispute_resolve", refund_amount=-5), InvalidAmount),
        (changed("charge_success", currency="XOF", amount=150050), ProviderAmountInvalid),
    ],
)  # fmt: skip
def test_amounts_paystack_never_sends_are_refused(
    doc: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        moved(doc)


def test_units_lists_the_zero_decimal_currencies_paystack_writes_in_hundredths() -> None:
    assert {code: rule.exponent for code, rule in mapping.UNITS.items()} == {"XOF": 2, "RWF": 2}


@pytest.mark.parametrize(
    ("case", "events", "refunded"),
    [
        ("processed, then failed: given back", ["refund.processed", "refund.failed"], 0),
        ("processed, told twice: refunded once", ["refund.processed", "refund.processed"], 5000),
        ("failed without processing: nothing", ["refund.failed"], 0),
    ],
)  # fmt: skip
def test_every_arrival_order_of_a_refund_ends_in_the_same_balance(
    case: str, events: list[str], refunded: int
) -> None:
    payment = Payment("T2154954_412829_3be32076_6lcg3", 10000, "NGN", "NGN", Decimal(1))
    instructions = [moved(changed("refund_processed", e)) for e in events]
    for order in itertools.permutations([i for i in instructions if i is not None]):
        claims: list[Claim] = []
        for found in order:
            due = decide(claims, found, payment)
            if due is not None:
                claims.append(due.claim)
        assert held(claims, Pool.REFUNDS)[0] == refunded, case
