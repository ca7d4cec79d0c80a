"""Money arithmetic: minor-unit exponents, currency conversion and rate precision.

Pure and exact: amounts are integers in minor units, rates are `Decimal`, and rounding
happens once, at the end, with banker's rounding (ROUND_HALF_EVEN). Half-even is what
IEEE 754 and most ledgers use because it does not drift upwards over many conversions;
a half-up rule would add, on average, a quarter of a minor unit per tie.
"""

from __future__ import annotations

import decimal
import re
from decimal import ROUND_HALF_EVEN, Decimal

from gateway.core.ledger import RATE_DECIMALS
from gateway.errors import InvalidAmount

_CURRENCY_CODE = re.compile(r"[A-Z]{3,6}")

#: ISO 4217 currencies whose minor unit is not the hundredth. Everything else has 2.
_EXPONENTS: dict[str, int] = {
    # No minor unit.
    "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
    "PYG": 0, "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0,
    "XPF": 0,
    # Thousandths.
    "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
    # Ten-thousandths (unit of account).
    "CLF": 4, "UYW": 4,
}  # fmt: skip
_DEFAULT_EXPONENT = 2
#: Enough digits for a u128 amount times a rate with its decimals, with room to spare.
_PRECISION = 80


def check_currency(code: str) -> str:
    """The code upper-cased, or ValueError if it is not 3 to 6 letters."""
    upper = code.strip().upper()
    if not _CURRENCY_CODE.fullmatch(upper):
        raise ValueError(f"not a currency code: {code!r}")
    return upper


def minor_exponent(currency: str) -> int:
    """Decimal places of the currency's minor unit: JPY 0, USD 2, KWD 3."""
    return _EXPONENTS.get(check_currency(currency), _DEFAULT_EXPONENT)


def quantize_rate(rate: Decimal) -> Decimal:
    """`rate` rounded (half-even) to the `RATE_DECIMALS` places the ledger records."""
    if not rate.is_finite() or rate <= 0:
        raise ValueError(f"a rate must be a positive number, got {rate}")
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        quantized = rate.quantize(Decimal(1).scaleb(-RATE_DECIMALS), rounding=ROUND_HALF_EVEN)
    if quantized <= 0:
        raise ValueError(f"rate {rate} rounds to zero at {RATE_DECIMALS} decimals")
    return quantized


def convert_minor(amount_minor: int, rate: Decimal, from_currency: str, to_currency: str) -> int:
    """`amount_minor` of `from_currency` in minor units of `to_currency`, at `rate`.

    `rate` is the price of one major unit of `from_currency` in major units of
    `to_currency` (EUR→USD 1.08 means 1 EUR = 1.08 USD). The result is rounded half-even
    to a whole minor unit; an amount that rounds to nothing is `InvalidAmount`.
    """
    source = check_currency(from_currency)
    target = check_currency(to_currency)
    if amount_minor <= 0:
        raise InvalidAmount(f"amount {amount_minor} {source} is not positive")
    if source == target:
        if rate != 1:
            raise ValueError(f"converting {source} to itself needs rate 1, got {rate}")
        return amount_minor
    if not rate.is_finite() or rate <= 0:
        raise ValueError(f"a rate must be a positive number, got {rate}")
    with decimal.localcontext() as ctx:
        ctx.prec = _PRECISION
        # Shift both exponents in one step so nothing is rounded before the end.
        shift = minor_exponent(target) - minor_exponent(source)
        exact = Decimal(amount_minor) * rate * Decimal(1).scaleb(shift)
        converted = int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))
    if converted <= 0:
        raise InvalidAmount(
            f"{amount_minor} minor units of {source} at {rate} is less than one minor "
            f"unit of {target}"
        )
    return converted
