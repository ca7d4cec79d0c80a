"""Amounts in each provider's own minor units, read into the ledger's (ISO 4217) ones."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from gateway.core.money import ProviderUnits, convert_minor, minor_exponent
from gateway.core.money import from_provider_minor as read_minor
from gateway.core.providers import PROVIDERS
from gateway.core.providers.stripe.snapshot import instruction as from_stripe
from gateway.errors import InvalidAmount, PermanentError, ProviderAmountInvalid

#: Each settling provider's minor-unit table; internal services write ISO's.
PROVIDER_UNITS = {
    **{name: p.units for name, p in PROVIDERS.items() if p.movements is not None},
    "internal": {},
}


def from_provider_minor(provider: str, amount: int, currency: str) -> int:
    """The amount as the provider's module reads it."""
    units: dict[str, ProviderUnits] = dict(PROVIDER_UNITS[provider])
    return read_minor(units, provider, amount, currency)


# One row per provider x currency whose exponent differs from ISO 4217: what the provider
# sends for an amount, and the ISO minor units the ledger must read from it.
DIFFERS_FROM_ISO = [
    pytest.param("stripe", "MGA", 1_000, 100_000, id="stripe-MGA-zero-decimal-1000-ariary"),
    pytest.param("stripe", "MGA", 1, 100, id="stripe-MGA-one-ariary"),
    pytest.param("stripe", "ISK", 50_000, 500, id="stripe-ISK-two-decimals-500-kronur"),
    pytest.param("stripe", "ISK", 100, 1, id="stripe-ISK-one-krona"),
    pytest.param("stripe", "UGX", 500, 5, id="stripe-UGX-two-decimals-5-shillings"),
    pytest.param("stripe", "UGX", 1_000_000, 10_000, id="stripe-UGX-10000-shillings"),
    # Thin events settle from the same objects, read with the same units.
    pytest.param("stripe_thin", "MGA", 1, 100, id="stripe_thin-MGA-one-ariary"),
    pytest.param("stripe_thin", "ISK", 100, 1, id="stripe_thin-ISK-one-krona"),
    pytest.param("stripe_thin", "UGX", 500, 5, id="stripe_thin-UGX-5-shillings"),
    # Adyen's currency table (docs.adyen.com/development-resources/currency-codes).
    pytest.param("adyen", "CLP", 100_000, 1_000, id="adyen-CLP-two-decimals-1000-pesos"),
    pytest.param("adyen", "ISK", 50_000, 500, id="adyen-ISK-two-decimals-500-kronur"),
    pytest.param("adyen", "CVE", 1_000, 100_000, id="adyen-CVE-zero-decimal-1000-escudos"),
    pytest.param("adyen", "IDR", 15_000, 1_500_000, id="adyen-IDR-zero-decimal-15000-rupiah"),
    # Checkout.com ("format the amount value": every currency but the zero-decimal and
    # three-decimal lists is divided by 100, CLP and CLF included).
    pytest.param("checkout", "CLP", 100_000, 1_000, id="checkout-CLP-two-decimals"),
    pytest.param("checkout", "CLF", 150, 15_000, id="checkout-CLF-two-decimals-of-four"),
    # Paystack: every amount is x100, the zero-decimal francs included.
    pytest.param("paystack", "XOF", 50_000, 500, id="paystack-XOF-x100"),
    pytest.param("paystack", "RWF", 100, 1, id="paystack-RWF-x100"),
]


@pytest.mark.parametrize(("provider", "currency", "sent", "ledger_minor"), DIFFERS_FROM_ISO)
def test_provider_amount_is_read_with_the_providers_exponent(
    provider: str, currency: str, sent: int, ledger_minor: int
) -> None:
    """Where the provider's exponent is not ISO's, the amount is rescaled exactly."""
    assert from_provider_minor(provider, sent, currency) == ledger_minor


def test_the_rows_above_cover_every_documented_difference() -> None:
    """Each provider x currency the table marks as differing from ISO has a row above."""
    differing = {
        (provider, code)
        for provider, table in PROVIDER_UNITS.items()
        for code, rule in table.items()
        if rule.exponent != minor_exponent(code)
    }
    tested = {(p.values[0], p.values[1]) for p in DIFFERS_FROM_ISO}
    assert differing == tested
    assert {("stripe", "MGA"), ("stripe", "ISK"), ("stripe", "UGX")} <= tested


@pytest.mark.parametrize(
    ("provider", "currency", "sent"),
    [
        # Stripe's special cases that concern payouts only: charges keep two decimals.
        pytest.param("stripe", "HUF", 1_045, id="stripe-HUF-charges-have-filler"),
        pytest.param("stripe", "TWD", 80_045, id="stripe-TWD-charges-have-cents"),
        # Three decimals at Stripe as in ISO; a last digit other than 0 settles as written.
        pytest.param("stripe", "KWD", 5_125, id="stripe-KWD-three-decimals"),
        pytest.param("stripe", "BHD", 5_120, id="stripe-BHD-three-decimals"),
        pytest.param("stripe", "JPY", 500, id="stripe-JPY-zero-decimal-like-iso"),
        pytest.param("stripe", "USD", 1_000, id="stripe-USD"),
        pytest.param("paddle", "JPY", 100, id="paddle-JPY"),
        pytest.param("paddle", "HUF", 1_045, id="paddle-HUF"),
        pytest.param("internal", "ISK", 5, id="internal-amount-minor-is-iso"),
        pytest.param("internal", "MGA", 1_000, id="internal-MGA-is-iso"),
    ],
)
def test_amounts_where_the_provider_agrees_with_iso_pass_unchanged(
    provider: str, currency: str, sent: int
) -> None:
    """No rescaling where the provider writes the ISO exponent."""
    assert from_provider_minor(provider, sent, currency) == sent


# Paddle Billing's supported currencies (its API's `currency_code` values).
PADDLE_CURRENCIES = [
    "USD", "EUR", "GBP", "JPY", "AUD", "CAD", "CHF", "HKD", "SGD", "SEK", "ARS", "BRL",
    "CLP", "CNY", "COP", "CZK", "DKK", "HUF", "ILS", "INR", "KRW", "MXN", "NOK", "NZD",
    "PEN", "PLN", "RUB", "THB", "TRY", "TWD", "UAH", "VND", "ZAR",
]  # fmt: skip


@pytest.mark.parametrize("currency", PADDLE_CURRENCIES)
def test_paddle_supported_currencies_use_iso_exponents(currency: str) -> None:
    """Paddle documents no currency whose lowest denomination differs from ISO 4217, so
    its amounts are the ledger's minor units as they are."""
    assert "paddle" in PROVIDER_UNITS and currency not in PROVIDER_UNITS["paddle"]
    assert from_provider_minor("paddle", 12_345, currency) == 12_345


@pytest.mark.parametrize(
    ("currency", "sent"),
    [
        pytest.param("ISK", 50_050, id="ISK-with-aurar"),
        pytest.param("ISK", 1, id="ISK-one-hundredth"),
        pytest.param("UGX", 150, id="UGX-fraction"),
    ],
)
def test_amount_stripe_never_sends_is_a_permanent_error(currency: str, sent: int) -> None:
    """A Stripe ISK/UGX amount off the whole-unit grid is refused, never rounded."""
    with pytest.raises(ProviderAmountInvalid, match=f"{sent} {currency}") as caught:
        from_provider_minor("stripe", sent, currency)
    assert isinstance(caught.value, PermanentError)
    assert caught.value.error_class == "PROVIDER_AMOUNT_INVALID"


def test_currency_case_does_not_matter() -> None:
    assert from_provider_minor("stripe", 1_000, "mga") == 100_000


# --- through the Stripe extractor -----------------------------------------------------


def stripe_payment(amount: int, currency: str) -> dict[str, Any]:
    return {
        "id": "evt_1",
        "data": {
            "object": {
                "id": "pi_1",
                "amount_received": amount,
                "currency": currency,
                "metadata": {"merchant_id": "m_1"},
            }
        },
    }


def stripe_refund(amount: int, currency: str, listed: bool) -> dict[str, Any]:
    charge: dict[str, Any] = {
        "id": "ch_1",
        "payment_intent": "pi_1",
        "amount_refunded": amount,
        "currency": currency,
    }
    if listed:
        charge["refunds"] = {"data": [{"id": "re_1", "amount": amount, "created": 1}]}
    return {"id": "evt_2", "data": {"object": charge}}


@pytest.mark.parametrize(
    ("currency", "sent", "ledger_usd_cents", "rate"),
    [
        # 10,000 MGA at 0.0002 is USD 2.00; read as ISO (100.00 MGA) it was 2 cents.
        pytest.param("mga", 10_000, 200, Decimal("0.0002"), id="MGA"),
        # 500 ISK at 0.01 is USD 5.00; read as ISO (50,000 ISK) it was USD 500.
        pytest.param("isk", 50_000, 500, Decimal("0.01"), id="ISK"),
    ],
)
def test_stripe_payment_converts_to_the_right_ledger_amount(
    currency: str, sent: int, ledger_usd_cents: int, rate: Decimal
) -> None:
    """Extraction then conversion gives the dollars the customer actually paid."""
    instruction = from_stripe("payment_intent.succeeded", stripe_payment(sent, currency))
    assert instruction is not None
    assert convert_minor(instruction.amount_minor, rate, instruction.currency, "USD") == (
        ledger_usd_cents
    )


@pytest.mark.parametrize("listed", [True, False], ids=["refund-listed", "amount-refunded"])
def test_stripe_refund_amounts_are_read_in_stripe_units(listed: bool) -> None:
    instruction = from_stripe("charge.refunded", stripe_refund(30_000, "isk", listed))
    assert instruction is not None
    assert (instruction.amount_minor, instruction.currency) == (300, "ISK")


@pytest.mark.parametrize(
    ("event_type", "doc", "field"),
    [
        ("payment_intent.succeeded", stripe_payment(50_050, "isk"), "amount_received"),
        # Both shapes are read by their running total (the list is cut at ten).
        ("charge.refunded", stripe_refund(150, "ugx", True), "amount_refunded"),
        ("charge.refunded", stripe_refund(150, "isk", False), "amount_refunded"),
    ],
    ids=["payment", "listed-refund", "amount-refunded"],
)
def test_stripe_event_with_an_impossible_amount_is_refused_naming_the_field(
    event_type: str, doc: dict[str, Any], field: str
) -> None:
    with pytest.raises(ProviderAmountInvalid, match=re.escape(f"data.object.{field} is")):
        from_stripe(event_type, doc)


def test_zero_amount_is_still_invalid_amount_before_any_rescaling() -> None:
    with pytest.raises(InvalidAmount) as caught:
        from_stripe("payment_intent.succeeded", stripe_payment(0, "mga"))
    assert caught.value.error_class == "INVALID_AMOUNT"
