"""What settlement accepts at its edges: amounts within the ledgers' range, currency
codes of exactly three ASCII letters as sent, and values cut short in error messages."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from gateway.core.failures.excerpt import MESSAGE_MAX_CHARS, capped, clip, excerpt
from gateway.core.money import AMOUNT_MAX, check_amount, check_currency, convert_minor
from gateway.core.providers.internal import instruction as from_internal
from gateway.core.providers.stripe.snapshot import instruction as from_stripe
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    build_transfer,
)
from gateway.errors import FieldTypeInvalid, InvalidAmount, ProviderAmountInvalid


def stripe(amount: Any = 1000, currency: Any = "usd") -> dict[str, Any]:
    obj = {"id": "pi_1", "amount_received": amount, "currency": currency,
           "metadata": {"merchant_id": "m_1"}}  # fmt: skip
    return {"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": obj}}


def internal(amount: Any = 1000, currency: Any = "USD") -> dict[str, Any]:
    data = {"settlement_id": "s_1", "merchant_id": "m_1", "amount_minor": amount,
            "currency": currency}  # fmt: skip
    return {"type": "payment.captured", "data": data}


def extract(source: str, doc: dict[str, Any]) -> SettlementInstruction | None:
    if source == "stripe":
        return from_stripe("payment_intent.succeeded", copy.deepcopy(doc))
    return from_internal("payment.captured", copy.deepcopy(doc))


MAKERS = {"stripe": stripe, "internal": internal}


@pytest.mark.parametrize("source", ["stripe", "internal"])
@pytest.mark.parametrize(
    ("amount", "currency", "valid"),
    [
        (1, "usd", True),  # the smallest amount
        (AMOUNT_MAX, "usd", True),  # the bound itself: bigint's largest
        (AMOUNT_MAX + 1, "usd", False),  # 2**63: one past it
        (2**64 - 1, "usd", False),  # the widest integer a JSON parser keeps (u64)
        (2**128, "usd", False),  # wider than TigerBeetle's u128 too
        (0, "usd", False),
        (-1, "usd", False),
    ],
)
def test_amounts_outside_the_ledgers_range_are_invalid_amount(
    source: str, amount: int, currency: str, valid: bool
) -> None:
    """One bound for both ledgers, checked before anything is written: an amount wider
    than `settlements.amount_minor` (a bigint) is INVALID_AMOUNT, not a database error."""
    doc = MAKERS[source](amount, currency)
    if valid:
        got = extract(source, doc)
        assert got is not None and got.amount_minor == amount
        return
    with pytest.raises(InvalidAmount) as caught:
        extract(source, doc)
    assert caught.value.error_class == "INVALID_AMOUNT"


@pytest.mark.parametrize(
    ("amount", "currency", "error"),
    [
        (AMOUNT_MAX // 100, "mga", None),  # Stripe's MGA has no decimals, ISO's 2: x100 fits
        (AMOUNT_MAX // 100 + 1, "mga", InvalidAmount),  # x100 it passes the bound
        (150, "isk", ProviderAmountInvalid),  # the unit rule still comes first
    ],
)
def test_an_amount_is_bounded_after_the_providers_scaling_too(
    amount: int, currency: str, error: type[Exception] | None
) -> None:
    """Reading a provider's units may multiply the amount; the bound holds after that."""
    if error is None:
        got = extract("stripe", stripe(amount, currency))
        assert got is not None and got.amount_minor == amount * 100
        return
    with pytest.raises(error):
        extract("stripe", stripe(amount, currency))


@pytest.mark.parametrize(
    ("amount", "rate", "source", "target", "error"),
    [
        (AMOUNT_MAX, "1", "USD", "USD", None),
        (AMOUNT_MAX // 2, "2", "EUR", "USD", None),
        (AMOUNT_MAX, "1.5", "EUR", "USD", InvalidAmount),  # converted past the bound
        (AMOUNT_MAX, "1", "JPY", "USD", InvalidAmount),  # JPY to USD multiplies by 100
        (AMOUNT_MAX + 1, "0.5", "EUR", "USD", InvalidAmount),  # too wide before conversion
    ],
)
def test_a_converted_amount_stays_within_the_ledgers_range(
    amount: int, rate: str, source: str, target: str, error: type[Exception] | None
) -> None:
    if error is None:
        assert 0 < convert_minor(amount, Decimal(rate), source, target) <= AMOUNT_MAX
        return
    with pytest.raises(error):
        convert_minor(amount, Decimal(rate), source, target)


@pytest.mark.parametrize("amount", [AMOUNT_MAX + 1, 0])
def test_a_transfer_is_never_built_outside_the_range(amount: int) -> None:
    instruction = extract("internal", internal())
    assert instruction is not None
    with pytest.raises(InvalidAmount):
        build_transfer(instruction, provider="internal", ledger_currency="USD",
                       amount_minor=amount, rate_at_payment=Decimal(1))  # fmt: skip


@pytest.mark.parametrize(
    ("code", "upper"),
    [
        ("usd", "USD"),  # Stripe writes lower case
        ("USD", "USD"),
        ("uSd", "USD"),
        ("u\u017fd", None),  # a long s: "\u017f".upper() is "S", so it read as USD
        ("\u212awd", None),  # the Kelvin sign: lower-cased it is "k"
        ("\uff35\uff33\uff24", None),  # fullwidth USD
        ("us", None),
        ("usdt", "USDT"),  # an asset of `ASSETS`, in either case
        ("usdc", "USDC"),
        ("usdx", None),  # four letters only for an asset listed
        ("usd\u0163", None),  # a t with a cedilla: no asset either
        ("usdtt", None),
        (" usd", None),  # nothing around the letters
        ("usd\n", None),
        ("u1d", None),
        ("", None),
        ("x" * 300_000, None),
    ],
)
def test_a_currency_code_is_three_ascii_letters_or_an_asset_before_any_case_folding(
    code: str, upper: str | None
) -> None:
    """Checked on the code as sent; only then upper-cased."""
    if upper is not None:
        assert check_currency(code) == upper
        got = extract("stripe", stripe(currency=code))
        assert got is not None and got.currency == upper
        return
    with pytest.raises(ValueError) as refused:
        check_currency(code)
    assert len(str(refused.value)) < 100  # never the whole of a huge value
    with pytest.raises(FieldTypeInvalid) as caught:
        extract("stripe", stripe(currency=code))
    assert caught.value.field == "data.object.currency"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("m_1", "'m_1'"),  # an ordinary id whole, quoted
        ("x" * 200, repr("x" * 200)),  # at the limit: whole
        ("x" * 201, repr("x" * 200) + "... (201 chars)"),  # past it: cut, with its length
        ("m_" + "y" * 299_998, repr("m_" + "y" * 198) + "... (300000 chars)"),
        ("a'b\n", repr("a'b\n")),  # quoted as Python quotes it: control characters escaped
    ],
)
def test_values_in_messages_are_cut_to_200_characters(value: str, shown: str) -> None:
    assert excerpt(value) == shown


def test_clip_and_capped_cut_unquoted() -> None:
    """`clip` for a value written unquoted, `capped` for a whole message."""
    assert clip("pi_1") == "pi_1"
    assert clip("z" * 500) == "z" * 200 + "... (500 chars)"
    long = "e" * (MESSAGE_MAX_CHARS + 1)
    assert capped(long) == "e" * MESSAGE_MAX_CHARS + f"... ({MESSAGE_MAX_CHARS + 1} chars)"
    assert capped("short") == "short"


def test_check_amount_names_what_it_checked() -> None:
    with pytest.raises(InvalidAmount, match=r"data\.amount_minor is 9223372036854775808"):
        check_amount(AMOUNT_MAX + 1, "data.amount_minor")
    assert check_amount(AMOUNT_MAX) == AMOUNT_MAX


@pytest.mark.parametrize(
    ("minor", "currency", "shown"),
    [(1000, "USD", "10.00"), (-1250, "usd", "-12.50"), (500, "JPY", "500"),
     (1_234_567, "KWD", "1,234.567"), (0, "EUR", "0.00")],
)  # fmt: skip
def test_amounts_are_written_with_their_currencys_decimals(
    minor: int, currency: str, shown: str
) -> None:
    from gateway.core.money import format_decimal, format_minor

    assert format_decimal(minor, currency) == shown
    assert format_minor(minor, currency) == f"{shown} {currency.upper()}"
