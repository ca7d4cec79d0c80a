"""An adjustment as the console takes it: the form's amount in the currency's units, the
API's in minor units, and every field checked as `gateway ledger adjust` checks it."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.finance.adjustment_form import (
    adjustment_line,
    adjustment_payment_id,
    parse_units,
    read_adjustment_form,
    read_adjustment_json,
)
from gateway.core.finance.input import FinanceUsageError
from gateway.core.finance.statements import Adjustment
from gateway.core.money import AMOUNT_MAX

FORM = {"merchant": "m_1", "amount": "-12.50", "currency": "USD", "reason": "dup", "id": "a-1",
        "note": ""}  # fmt: skip
JSON = {"merchant_id": "m_1", "amount_minor": -1250, "currency": "USD", "reason": "dup",
        "adjustment_id": "a-1"}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "currency", "minor"),
    [
        ("12.50", "USD", 1250),
        ("-12.50", "USD", -1250),
        ("+12.5", "USD", 1250),  # a missing trailing zero is still cents
        ("12", "USD", 1200),
        ("0.01", "USD", 1),
        ("12.500", "USD", 1250),  # zeros past the minor unit change nothing
        (" 7.25 ", "eur", 725),  # spaces around and a lower-case code, as typed
        ("1250", "JPY", 1250),  # no minor unit
        ("1250.0", "JPY", 1250),
        ("-1.250", "KWD", -1250),  # thousandths
        ("0.0001", "CLF", 1),  # ten-thousandths
        ("92233720368547758.07", "USD", AMOUNT_MAX),
    ],
)
def test_units_read_as_minor_units(text: str, currency: str, minor: int) -> None:
    """An amount in the currency's units is exactly its minor units, in that currency's
    decimals, never through a float."""
    assert parse_units(text, currency) == minor


@pytest.mark.parametrize(
    ("text", "currency", "says"),
    [
        ("12.505", "USD", "is not a whole number of minor units (USD has 2 decimals)"),
        ("12.5", "JPY", "(JPY has no decimals)"),
        ("1.2345", "KWD", "(KWD has 3 decimals)"),
        ("1,250.00", "USD", "is not an amount like -12.50"),
        ("1 250", "USD", "is not an amount like -12.50"),
        ("1e3", "USD", "is not an amount like -12.50"),
        ("12,50", "USD", "is not an amount like -12.50"),  # a decimal comma is not read
        (".50", "USD", "is not an amount like -12.50"),
        ("NaN", "USD", "is not an amount like -12.50"),
        ("١٢", "USD", "is not an amount like -12.50"),  # digits, but not ASCII ones
        ("--1", "USD", "is not an amount like -12.50"),
        ("12.50", "US", "is not a currency code"),
    ],
)
def test_amounts_that_are_not_whole_minor_units_are_refused(
    text: str, currency: str, says: str
) -> None:
    """Nothing finer than the minor unit, and nothing that only looks like a number."""
    with pytest.raises(FinanceUsageError) as refused:
        parse_units(text, currency)
    assert says in str(refused.value)


def test_the_forms_entry_is_the_one_the_cli_posts() -> None:
    """Fields stripped, the code upper-cased, a blank note left out: the `Adjustment`
    `gateway ledger adjust` builds from the same values."""
    form = FORM | {"merchant": " m_1 ", "currency": "usd", "reason": " dup ", "note": "  "}
    assert read_adjustment_form(form, "console:op") == Adjustment(
        "a-1", "m_1", -1250, "USD", "dup", None, "console:op"
    )
    assert read_adjustment_form(FORM | {"note": "ticket 8"}, "x").note == "ticket 8"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"merchant": ""}, "merchant: required"),
        ({"merchant": "m\n1"}, "merchant: 'm\\n1' is not an id"),
        ({"merchant": "m" * 201}, "at most 200 characters"),
        ({"amount": ""}, "amount: required"),
        ({"amount": "0"}, "amount: must not be zero"),
        ({"amount": "-0.00"}, "amount: must not be zero"),
        ({"amount": "92233720368547758.08"}, "beyond the ledgers' largest"),
        ({"currency": ""}, "currency: '' is not a currency code"),
        ({"reason": ""}, "reason: required"),
        ({"reason": " \t "}, "reason: required"),
        ({"reason": "r\x00"}, "reason: must not hold control characters"),
        ({"reason": "r" * 2001}, "reason: at most 2000 characters"),
        ({"id": "  "}, "id: required"),
        ({"note": "n\x1b[31m"}, "note: must not hold control characters"),
    ],
)
def test_the_form_names_the_first_field_it_cannot_use(change: dict[str, str], says: str) -> None:
    """Each refusal says which field and why, in one line."""
    with pytest.raises(FinanceUsageError) as refused:
        read_adjustment_form(FORM | change, "x")
    assert says in str(refused.value)


def test_a_reason_may_run_over_lines() -> None:
    """A reason or a note is text: line breaks and tabs are kept."""
    assert read_adjustment_form(FORM | {"reason": "a\r\nb\tc"}, "x").reason == "a\r\nb\tc"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([], "the body must be a JSON object"),
        (JSON | {"amount_minor": 12.5}, "amount_minor: required, an integer"),
        (JSON | {"amount_minor": "1250"}, "amount_minor: required, an integer"),
        (JSON | {"amount_minor": True}, "amount_minor: required, an integer"),
        ({k: v for k, v in JSON.items() if k != "amount_minor"}, "amount_minor: required"),
        (JSON | {"amount_minor": 0}, "amount: must not be zero"),
        (JSON | {"amount_minor": AMOUNT_MAX + 1}, "beyond the ledgers' largest"),
        (JSON | {"reason": 7}, "are strings"),
        (JSON | {"currency": None}, "is not a currency code"),
        (JSON | {"adjustment_id": ""}, "id: required"),
    ],
)
def test_the_api_body_is_refused_in_words(body: Any, says: str) -> None:
    """The API's entry: `amount_minor` an integer of minor units, the rest strings."""
    with pytest.raises(FinanceUsageError) as refused:
        read_adjustment_json(body, "x")
    assert says in str(refused.value)


def test_the_api_entry_is_in_minor_units() -> None:
    entry = read_adjustment_json(JSON | {"amount_minor": AMOUNT_MAX, "note": None}, "console:ci")
    assert (entry.amount_minor, entry.note, entry.actor) == (AMOUNT_MAX, None, "console:ci")


def test_the_line_and_payment_are_the_clis() -> None:
    """What the page says after posting is what `gateway ledger adjust` prints, and the
    movement is found under the payment id the service records it under."""
    entry = Adjustment("adj-812", "m_1", -1250, "USD", "dup", None, "x")
    assert adjustment_line(entry, True) == "adjustment adj-812: -12.50 USD to m_1, posted"
    assert adjustment_line(entry, False).endswith("posted before; nothing moved again")
    assert adjustment_payment_id("adj-812") == "adjustment:adj-812"
