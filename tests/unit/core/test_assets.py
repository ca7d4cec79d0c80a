"""Assets beyond ISO 4217: the stablecoins with their six decimals, and tomans (`IRT`)
held as rials, exactly, whichever provider reads them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gateway import settings as settings_mod
from gateway.core.bodies.fields import get_decimal_amount
from gateway.core.ledger.accounts import ledger_currency, merchant_name
from gateway.core.ledger.ids import ledger_number, merchant_account_id
from gateway.core.money import (
    AMOUNT_MAX,
    account_currency,
    check_currency,
    convert_minor,
    format_minor,
    held_as,
    minor_exponent,
)
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import ConfigError, FieldTypeInvalid, InvalidAmount


@pytest.mark.parametrize(
    ("code", "exponent"),
    [("USDT", 6), ("usdt", 6), ("USDC", 6), ("USD", 2), ("IRR", 2), ("IRT", 2), ("TRY", 2),
     ("JPY", 0), ("KWD", 3)],
)  # fmt: skip
def test_each_asset_has_its_exponent(code: str, exponent: int) -> None:
    assert minor_exponent(code) == exponent


@pytest.mark.parametrize(
    ("text", "currency", "minor"),
    [
        ("12.5", "USDT", 12_500_000),
        ("0.000001", "USDT", 1),
        ("1.100000", "USDC", 1_100_000),
        ("1.10000000", "USDT", 1_100_000),  # zeros beyond the sixth decimal are the same
        ("34.56", "TRY", 3456),
        ("1000", "IRR", 100_000),
    ],
)
def test_decimal_amounts_of_assets_are_exact(text: str, currency: str, minor: int) -> None:
    assert get_decimal_amount({"a": text}, "a", currency) == minor


@pytest.mark.parametrize(("text", "currency"), [("0.0000001", "USDT"), ("1.00000001", "USDC"),
                                                ("34.567", "TRY")])  # fmt: skip
def test_a_decimal_finer_than_the_asset_is_refused_never_rounded(text: str, currency: str) -> None:
    with pytest.raises(FieldTypeInvalid):
        get_decimal_amount({"a": text}, "a", currency)


@pytest.mark.parametrize(
    ("amount", "currency", "held"),
    [
        (100_000, "IRT", (1_000_000, "IRR")),  # 1,000 tomans are 10,000 rials
        (1, "irt", (10, "IRR")),
        (100_000, "IRR", (100_000, "IRR")),
        (5, "USDT", (5, "USDT")),
    ],
)
def test_tomans_are_held_as_rials(amount: int, currency: str, held: tuple[int, str]) -> None:
    assert held_as(amount, currency) == held


def test_tomans_wider_than_the_ledgers_once_in_rials_are_refused() -> None:
    with pytest.raises(InvalidAmount):
        held_as(AMOUNT_MAX // 10 + 1, "IRT")
    assert held_as(AMOUNT_MAX // 10, "IRT")[0] <= AMOUNT_MAX


def test_an_instruction_in_tomans_moves_rials() -> None:
    instruction = SettlementInstruction(
        settlement_id="A000000000000000000000000000001", kind=SettlementKind.CAPTURE,
        merchant_id="m1", amount_minor=150_000, currency="IRT", refund_id=None,
        source_event_id=None,
    )  # fmt: skip
    assert (instruction.amount_minor, instruction.currency) == (1_500_000, "IRR")
    assert format_minor(instruction.amount_minor, instruction.currency) == "15,000.00 IRR"


def test_no_account_is_kept_in_tomans() -> None:
    with pytest.raises(ValueError, match="IRR"):
        account_currency("IRT")
    with pytest.raises(ValueError):
        merchant_name("m1", "IRT")
    with pytest.raises(ValueError):
        ledger_number("IRT")


def test_each_asset_has_a_ledger_of_its_own_read_back_from_its_number() -> None:
    numbers = {code: ledger_number(code) for code in ("USDT", "USDC", "USD", "IRR", "TRY")}
    assert len(set(numbers.values())) == len(numbers)
    assert all(0 < n < 2**32 for n in numbers.values())
    for code, number in numbers.items():
        assert ledger_currency(number) == code
    assert merchant_account_id("m1", "USDT") != merchant_account_id("m1", "USD")
    assert ledger_currency(ledger_number("USDT") * 27 + 1) is None  # five letters: none


@pytest.mark.parametrize(
    ("amount", "rate", "source", "target", "converted"),
    [
        (12_500_000, "1.0004", "USDT", "USD", 1250),  # 12.5 USDT at 1.0004 is 12.505 USD
        (1_000_000, "1050000", "USDT", "IRR", 105_000_000),
        (10_000, "0.0291", "TRY", "USDT", 2_910_000),
        (100, "0.0000001", "IRR", "USDT", 0),  # less than one unit: refused
    ],
)
def test_conversions_between_assets_and_currencies_are_exact(
    amount: int, rate: str, source: str, target: str, converted: int
) -> None:
    if converted == 0:
        with pytest.raises(InvalidAmount):
            convert_minor(amount, Decimal(rate), source, target)
        return
    assert convert_minor(amount, Decimal(rate), source, target) == converted


def test_assets_read_with_their_decimals() -> None:
    assert format_minor(12_500_000, "USDT") == "12.500000 USDT"
    assert check_currency("USDC") == "USDC"


def test_the_settlement_currency_cannot_be_an_alias() -> None:
    doc = {"database": {"url": "postgresql://127.0.0.1/x"}, "nats": {"url": "nats://127.0.0.1"},
           "settlement": {"currency": "IRT"}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"settlement\.currency"):
        settings_mod.parse(doc, env={})
