"""Settlement core: extractors, deterministic ids, conversion and transfer building."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import orjson
import pytest

from gateway.core.ledger.ids import (
    clearing_account,
    clearing_account_id,
    ledger_number,
    merchant_account,
    merchant_account_id,
    settlement_ref,
)
from gateway.core.ledger.port import ID_MAX, AccountCode, TransferCode
from gateway.core.money import convert_minor, minor_exponent, quantize_rate
from gateway.core.providers.internal import instruction as from_internal
from gateway.core.providers.movements import instruction_of
from gateway.core.providers.stripe.snapshot import instruction as from_stripe
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    build_transfer,
    merchant_to_post,
    transfer_id,
)
from gateway.errors import (
    FieldError,
    FieldTypeInvalid,
    InvalidAmount,
    MissingField,
    PermanentError,
)


def stripe_succeeded() -> dict[str, Any]:
    return {
        "id": "evt_1",
        "type": "payment_intent.succeeded",
        "data": {
            "object": {
                "id": "pi_123",
                "object": "payment_intent",
                "amount": 2000,
                "amount_received": 1999,
                "currency": "eur",
                "metadata": {"merchant_id": "m_42"},
            }
        },
    }


def stripe_refunded(with_list: bool = True) -> dict[str, Any]:
    charge: dict[str, Any] = {
        "id": "ch_9",
        "object": "charge",
        "payment_intent": "pi_123",
        "amount": 1999,
        "amount_refunded": 800,
        "currency": "eur",
        "metadata": {"merchant_id": "m_42"},
    }
    if with_list:
        charge["refunds"] = {
            "object": "list",
            "data": [
                {"id": "re_new", "amount": 300, "created": 1_700_000_200},
                {"id": "re_old", "amount": 500, "created": 1_700_000_100},
            ],
        }
    return {"id": "evt_2", "type": "charge.refunded", "data": {"object": charge}}


def internal(kind: str = "captured", **data: Any) -> dict[str, Any]:
    body = {"settlement_id": "s_1", "merchant_id": "m_7", "amount_minor": 500, "currency": "usd"}
    if kind == "refunded":
        body["refund_id"] = "r_1"
    body.update(data)
    return {"id": "ev_int_1", "data": body}


# --- extractors ----------------------------------------------------------------------------


def test_stripe_payment_intent_succeeded_is_a_capture() -> None:
    """The intent's id, received amount, upper-cased currency and merchant become a capture."""
    got = from_stripe("payment_intent.succeeded", stripe_succeeded())
    assert got == SettlementInstruction(
        settlement_id="pi_123",
        kind=SettlementKind.CAPTURE,
        merchant_id="m_42",
        amount_minor=1999,
        currency="EUR",
        refund_id=None,
        source_event_id="evt_1",
    )


@pytest.mark.parametrize("with_list", [True, False], ids=["refunds-listed", "today's-shape"])
def test_stripe_charge_refunded_is_the_running_total_in_both_shapes(with_list: bool) -> None:
    """The charge's `amount_refunded` is the claim, keyed by itself: the refunds list (cut
    at ten, and gone since API version 2022-11-15) is not needed to move the money once."""
    got = from_stripe("charge.refunded", stripe_refunded(with_list=with_list))
    assert got is not None
    assert (got.kind, got.settlement_id, got.refund_id, got.amount_minor, got.cumulative) == (
        SettlementKind.REFUND,
        "pi_123",
        "refunded:800",
        800,
        True,
    )
    assert got.merchant_id == "m_42"


def test_stripe_refund_without_merchant_leaves_it_to_the_payment() -> None:
    """A refunded charge without merchant metadata yields merchant None, not an error."""
    doc = stripe_refunded()
    del doc["data"]["object"]["metadata"]
    got = from_stripe("charge.refunded", doc)
    assert got is not None and got.merchant_id is None


@pytest.mark.parametrize(
    "event_type", ["customer.created", "payment_intent.created", "charge.failed"]
)
def test_stripe_types_that_do_not_settle_are_ignored(event_type: str) -> None:
    """Only settling event types produce an instruction; the rest are acked and skipped."""
    assert from_stripe(event_type, stripe_succeeded()) is None


@pytest.mark.parametrize(
    ("kind", "refund_id"),
    [("captured", None), ("refunded", "r_1")],
)
def test_internal_events(kind: str, refund_id: str | None) -> None:
    """payment.captured / payment.refunded carry the settlement in `data`."""
    got = from_internal(f"payment.{kind}", internal(kind))
    assert got is not None
    assert got.kind is (SettlementKind.CAPTURE if kind == "captured" else SettlementKind.REFUND)
    assert (got.settlement_id, got.merchant_id, got.amount_minor, got.currency) == (
        "s_1",
        "m_7",
        500,
        "USD",
    )
    assert got.refund_id == refund_id
    assert got.source_event_id == "ev_int_1"


def test_internal_types_that_do_not_settle_are_ignored() -> None:
    """Other internal types produce no instruction."""
    assert from_internal("payment.disputed", internal()) is None
    assert from_internal("payment.created", internal()) is None


def _drop(doc: dict[str, Any], path: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    del node[last]
    return doc


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    node[last] = value
    return doc


@pytest.mark.parametrize(
    ("event_type", "doc", "error", "field"),
    [
        ("payment_intent.succeeded", _drop(stripe_succeeded(), "data.object.id"), MissingField,
         "data.object.id"),
        ("payment_intent.succeeded", _drop(stripe_succeeded(), "data.object.metadata"),
         MissingField, "data.object.metadata.merchant_id"),
        ("payment_intent.succeeded",
         _drop(stripe_succeeded(), "data.object.metadata.merchant_id"), MissingField,
         "data.object.metadata.merchant_id"),
        ("payment_intent.succeeded", _drop(stripe_succeeded(), "data.object.amount_received"),
         MissingField, "data.object.amount_received"),
        ("payment_intent.succeeded", _set(stripe_succeeded(), "data.object.amount_received",
                                          "1999"), FieldTypeInvalid, "data.object.amount_received"),
        ("payment_intent.succeeded", _set(stripe_succeeded(), "data.object.amount_received",
                                          19.99), FieldTypeInvalid, "data.object.amount_received"),
        ("payment_intent.succeeded", _set(stripe_succeeded(), "data.object.amount_received",
                                          True), FieldTypeInvalid, "data.object.amount_received"),
        ("payment_intent.succeeded", _set(stripe_succeeded(), "data.object.currency", "e1"),
         FieldTypeInvalid, "data.object.currency"),
        ("payment_intent.succeeded", _set(stripe_succeeded(), "data.object", "pi_123"),
         FieldTypeInvalid, "data.object"),
        ("payment_intent.succeeded", _drop(stripe_succeeded(), "data"), MissingField, "data"),
        ("charge.refunded", _drop(stripe_refunded(), "data.object.payment_intent"), MissingField,
         "data.object.payment_intent"),
        ("charge.refunded", _set(stripe_refunded(), "data.object.amount_refunded", "800"),
         FieldTypeInvalid, "data.object.amount_refunded"),
        ("payment.captured", _drop(internal(), "data.merchant_id"), MissingField,
         "data.merchant_id"),
        ("payment.captured", _set(internal(), "data.settlement_id", 17), FieldTypeInvalid,
         "data.settlement_id"),
        ("payment.captured", _set(internal(), "data.currency", None), MissingField,
         "data.currency"),
        ("payment.refunded", _drop(internal("refunded"), "data.refund_id"), MissingField,
         "data.refund_id"),
        ("payment.captured", _set(internal(), "data", [1, 2]), FieldTypeInvalid, "data"),
    ],
)  # fmt: skip
def test_bad_fields_are_permanent_errors_naming_the_field(
    event_type: str, doc: dict[str, Any], error: type[FieldError], field: str
) -> None:
    """A missing or ill-typed field is a permanent error whose `field` names its path
    (read as the worker reads it: the merchant is found by `core.mappings`)."""
    provider = "service:billing" if event_type.startswith("payment.") else "stripe"
    with pytest.raises(error) as caught:
        instruction_of(provider, event_type, orjson.dumps(doc), {"stripe": "stripe"})
    assert isinstance(caught.value, PermanentError)
    assert caught.value.field == field


@pytest.mark.parametrize("amount", [0, -1, -1999])
@pytest.mark.parametrize(
    ("event_type", "make", "path"),
    [
        ("payment_intent.succeeded", stripe_succeeded, "data.object.amount_received"),
        ("payment.captured", internal, "data.amount_minor"),
    ],
)
def test_non_positive_amounts_are_invalid(
    event_type: str, make: Any, path: str, amount: int
) -> None:
    """Zero and negative amounts are INVALID_AMOUNT, at once."""
    extract = from_internal if event_type.startswith("payment.") else from_stripe
    with pytest.raises(InvalidAmount) as caught:
        extract(event_type, _set(make(), path, amount))
    assert caught.value.error_class == "INVALID_AMOUNT"


# --- deterministic ids ---------------------------------------------------------------------


def test_transfer_id_depends_only_on_kind_and_settlement() -> None:
    """Two deliveries of a settlement (other event id, even other amount) share one id."""
    first = from_stripe("payment_intent.succeeded", stripe_succeeded())
    again = from_internal(
        "payment.captured", internal(settlement_id="pi_123", merchant_id="m_42", amount_minor=7)
    )
    assert first is not None and again is not None
    assert transfer_id(first) == transfer_id(again)


def test_transfer_ids_differ_between_capture_and_refunds() -> None:
    """The capture and each refund of one payment get their own ids."""
    capture = from_internal("payment.captured", internal())
    refund_1 = from_internal("payment.refunded", internal("refunded"))
    refund_2 = from_internal("payment.refunded", internal("refunded", refund_id="r_2"))
    ids = {transfer_id(i) for i in (capture, refund_1, refund_2) if i is not None}
    assert len(ids) == 3


def test_ids_are_valid_tigerbeetle_ids_and_stable() -> None:
    """Every derived id is inside 1..2**128-2 and the same on every call."""
    samples = [f"s_{i}" for i in range(500)]
    for sample in samples:
        for derive in (settlement_ref, lambda s: merchant_account_id(s, "USD"),
                       lambda s: clearing_account_id(s, "USD")):  # fmt: skip
            value = derive(sample)
            assert 0 < value < ID_MAX
            assert derive(sample) == value


def test_account_ids_separate_merchants_currencies_and_roles() -> None:
    """Merchant per currency, and merchant vs clearing of the same name, are distinct."""
    ids = {
        merchant_account_id("m_1", "USD"),
        merchant_account_id("m_1", "EUR"),
        merchant_account_id("m_2", "USD"),
        clearing_account_id("m_1", "USD"),
    }
    assert len(ids) == 4
    assert merchant_account_id("m_1", "usd") == merchant_account_id("m_1", "USD")


def test_ledger_numbers_are_distinct_u32_values() -> None:
    """Each currency gets its own non-zero ledger that fits TigerBeetle's u32."""
    codes = ["USD", "EUR", "JPY", "KWD", "AAA", "ZZZ", "AAB", "BAA"]
    numbers = [ledger_number(c) for c in codes]
    assert len(set(numbers)) == len(numbers)
    assert all(0 < n < 2**32 for n in numbers)


def test_account_specs_carry_their_limits() -> None:
    """Neither has a debit limit: a merchant may go below zero through money the provider
    has already taken back (a refund, a chargeback), and shows as negative."""
    merchant = merchant_account("m_1", "USD")
    clearing = clearing_account("stripe", "USD")
    assert (merchant.code, merchant.debits_must_not_exceed_credits) == (AccountCode.MERCHANT, False)
    assert (clearing.code, clearing.debits_must_not_exceed_credits) == (AccountCode.CLEARING, False)
    assert merchant.ledger == clearing.ledger == ledger_number("USD")


# --- conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "rate", "source", "target", "expected"),
    [
        (100, "1.08", "EUR", "USD", 108),
        (1000, "0.0066", "JPY", "USD", 660),  # no minor unit → cents
        (1234, "150.25", "USD", "JPY", 1854),  # 1854.085 yen
        (100, "0.307", "USD", "KWD", 307),  # cents → fils (3 decimals)
        (1500, "3.25", "KWD", "USD", 488),  # 487.5 cents: half-even rounds to 488
        (25, "1.1", "EUR", "USD", 28),  # 27.5 → 28 (even)
        (35, "1.1", "EUR", "USD", 38),  # 38.5 → 38 (even): banker's, not half-up
        (12345, "1", "USD", "USD", 12345),
        (10**17, "1.08", "EUR", "USD", 108 * 10**15),  # exact far beyond float precision
    ],
)
def test_convert_minor(amount: int, rate: str, source: str, target: str, expected: int) -> None:
    """Amounts convert through each currency's exponent, rounding half-even once."""
    assert convert_minor(amount, Decimal(rate), source, target) == expected


def test_conversion_that_rounds_to_nothing_is_invalid() -> None:
    """Less than one minor unit of the target is INVALID_AMOUNT, not a zero transfer."""
    with pytest.raises(InvalidAmount):
        convert_minor(1, Decimal("0.0049"), "JPY", "USD")  # 0.49 cents


@pytest.mark.parametrize("amount", [0, -5])
def test_conversion_of_non_positive_amount_is_invalid(amount: int) -> None:
    with pytest.raises(InvalidAmount):
        convert_minor(amount, Decimal("1.08"), "EUR", "USD")


@pytest.mark.parametrize(
    ("rate", "source", "target"),
    [("1.08", "USD", "USD"), ("0", "EUR", "USD"), ("-1", "EUR", "USD"), ("NaN", "EUR", "USD")],
)
def test_impossible_rates_are_refused(rate: str, source: str, target: str) -> None:
    """A same-currency rate other than 1 or a non-positive rate is a programming error."""
    with pytest.raises(ValueError):
        convert_minor(100, Decimal(rate), source, target)


@pytest.mark.parametrize(
    ("currency", "exponent"), [("JPY", 0), ("usd", 2), ("KWD", 3), ("BHD", 3), ("XYZ", 2)]
)
def test_minor_exponents(currency: str, exponent: int) -> None:
    assert minor_exponent(currency) == exponent


def test_rates_are_kept_to_nine_decimals_half_even() -> None:
    assert quantize_rate(Decimal("1.0123456785")) == Decimal("1.012345678")
    assert quantize_rate(Decimal("1.0123456795")) == Decimal("1.012345680")


# --- transfers -----------------------------------------------------------------------------


def test_capture_moves_clearing_to_merchant() -> None:
    """A capture debits the provider's clearing account and credits the merchant."""
    capture = from_stripe("payment_intent.succeeded", stripe_succeeded())
    assert capture is not None
    t = build_transfer(
        capture, provider="stripe", ledger_currency="USD", amount_minor=2159,
        rate_at_payment=Decimal("1.0801234567891"),
    )  # fmt: skip
    assert t.id == transfer_id(capture)
    assert t.debit_account_id == clearing_account_id("stripe", "USD")
    assert t.credit_account_id == merchant_account_id("m_42", "USD")
    assert (t.amount_minor, t.ledger, t.code) == (2159, ledger_number("USD"), TransferCode.CAPTURE)
    assert (t.settlement_id, t.rate_at_payment) == ("pi_123", Decimal("1.080123457"))


def test_refund_moves_merchant_to_clearing_with_the_payments_merchant() -> None:
    """A refund reverses the direction; the merchant may come from the settled payment."""
    doc = stripe_refunded()
    del doc["data"]["object"]["metadata"]
    refund = from_stripe("charge.refunded", doc)
    assert refund is not None
    with pytest.raises(MissingField):
        build_transfer(refund, provider="stripe", ledger_currency="USD", amount_minor=324,
                       rate_at_payment=Decimal("1.08"))  # fmt: skip
    t = build_transfer(
        refund, provider="stripe", ledger_currency="USD", amount_minor=324,
        rate_at_payment=Decimal("1.08"), merchant_id="m_42",
    )  # fmt: skip
    assert t.debit_account_id == merchant_account_id("m_42", "USD")
    assert t.credit_account_id == clearing_account_id("stripe", "USD")
    assert t.code is TransferCode.REFUND


def _instruction(kind: SettlementKind, merchant_id: str | None) -> SettlementInstruction:
    return SettlementInstruction(
        settlement_id="pi_1",
        kind=kind,
        merchant_id=merchant_id,
        amount_minor=100,
        currency="EUR",
        refund_id="re_1" if kind is SettlementKind.REFUND else None,
        source_event_id="evt_1",
    )


@pytest.mark.parametrize(
    ("kind", "named", "settled_payment_merchant", "expected"),
    [
        (SettlementKind.CAPTURE, "m_1", None, "m_1"),
        (SettlementKind.CAPTURE, "m_1", "m_other", "m_1"),  # a capture names its own
        (SettlementKind.REFUND, None, "m_1", "m_1"),  # taken from the settled payment
        (SettlementKind.REFUND, "m_2", "m_1", "m_2"),  # named: kept (a mismatch is a collision)
        (SettlementKind.REFUND, "m_2", None, None),  # payment not settled: wait
        (SettlementKind.REFUND, None, None, None),
    ],
)
def test_merchant_to_post(
    kind: SettlementKind,
    named: str | None,
    settled_payment_merchant: str | None,
    expected: str | None,
) -> None:
    instruction = _instruction(kind, named)
    assert merchant_to_post(instruction, settled_payment_merchant) == expected


@pytest.mark.parametrize("named", [None, ""])
def test_capture_without_merchant_is_refused(named: str | None) -> None:
    with pytest.raises(MissingField):
        merchant_to_post(_instruction(SettlementKind.CAPTURE, named), "m_1")
