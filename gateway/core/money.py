"""Money arithmetic: minor-unit exponents, provider amounts, currency conversion, rates.

Pure and exact: amounts are integers in minor units, rates are `Decimal`, and rounding
happens once, at the end, with banker's rounding (ROUND_HALF_EVEN). Half-even is what
IEEE 754 and most ledgers use because it does not drift upwards over many conversions;
a half-up rule would add, on average, a quarter of a minor unit per tie.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from types import MappingProxyType

from gateway.core.failures.excerpt import excerpt
from gateway.core.ledger.port import RATE_DECIMALS
from gateway.errors import InvalidAmount, ProviderAmountInvalid

#: Exactly three ASCII letters, either case (Stripe writes `usd`), matched on the text as
#: given: folding the case first let `"u\u017fd"` (a long s) pass as USD, since
#: `"\u017f".upper()` is `"S"`; so would `[A-Z]` under `re.IGNORECASE` without `re.ASCII`.
_CURRENCY_CODE = re.compile(r"[A-Za-z]{3}", re.ASCII)
#: The length of the longest asset code (`ASSETS`), checked before any case folding.
_ASSET_CODE = re.compile(r"[A-Za-z]{4}", re.ASCII)

#: The largest amount, in minor units, any ledger is asked to move: PostgreSQL's
#: `bigint` (2**63 - 1). One bound for both ledgers, not one each: every settlement is
#: recorded in `settlements.amount_minor`, a `bigint`, whichever ledger posts it (the
#: PostgreSQL ledger's balances are `numeric(39,0)`, TigerBeetle's amounts u128, both
#: wider). A wider amount is `InvalidAmount`, checked before anything is written, where
#: it used to fail in the database as a `DATABASE_ERROR`.
AMOUNT_MAX = 2**63 - 1

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

#: Assets that are not ISO 4217 currencies, with the decimals of their smallest unit.
#: The stablecoins take 6, the precision of the USDT and USDC tokens on Tron and
#: Ethereum (their contracts' `decimals`): no payment can move a finer amount on chain,
#: so 6 is exact for every transfer, and 2**63-1 of it is still 9.2 trillion units.
#: Gateways that write 8 decimals (exchanges' internal books) are refused, never
#: rounded, when a ninth-to-eighth decimal is not zero (`get_decimal_amount`).
ASSETS: Mapping[str, int] = MappingProxyType({"USDT": 6, "USDC": 6})

#: Codes that are another currency counted in a larger unit, with how many of that
#: currency's units one of theirs is. Iranian gateways take amounts in tomans
#: (`IRT`, not in ISO 4217), ten rials each; the ledger holds them as IRR, exactly.
_ASSET_LIST = ", ".join(ASSETS)

ALIASES: Mapping[str, tuple[str, int]] = MappingProxyType({"IRT": ("IRR", 10)})
#: Enough digits for a u128 amount times a rate with its decimals, with room to spare.
_PRECISION = 80
#: The arithmetic's context, made once: a `localcontext()` per conversion cost as much
#: as the conversion (settlement converts every event). Otherwise the default context.
_CONTEXT = decimal.Context(prec=_PRECISION)
_RATE_QUANTUM = Decimal(1).scaleb(-RATE_DECIMALS)
#: Codes seen valid, as written, to their upper case: settlement checks each event's
#: currency several times. Bounded, so hostile codes cannot grow it without end.
_CHECKED: dict[str, str] = {}
_CHECKED_MAX = 1024


def check_currency(code: str) -> str:
    """The code upper-cased, or ValueError if it is neither three ASCII letters nor an
    asset of `ASSETS` (checked before any case folding, with no spaces around)."""
    checked = _CHECKED.get(code)
    if checked is not None:
        return checked
    if _CURRENCY_CODE.fullmatch(code) or (_ASSET_CODE.fullmatch(code) and code.upper() in ASSETS):
        checked = code.upper()
    else:
        raise ValueError(f"not a currency code (3 letters, or {_ASSET_LIST}): {excerpt(code, 16)}")
    if len(_CHECKED) < _CHECKED_MAX:
        _CHECKED[code] = checked
    return checked


def check_amount(amount: int, what: str = "amount") -> int:
    """`amount` (minor units), or `InvalidAmount` unless it is 1 to `AMOUNT_MAX`."""
    if amount <= 0:
        raise InvalidAmount(f"{what} is {amount}; amounts must be positive")
    if amount > AMOUNT_MAX:
        raise InvalidAmount(f"{what} is {amount}, more than the ledgers' {AMOUNT_MAX} (2**63-1)")
    return amount


def minor_exponent(currency: str) -> int:
    """Decimal places of the currency's minor unit: JPY 0, USD 2, KWD 3, USDT 6."""
    code = check_currency(currency)
    asset = ASSETS.get(code)
    return asset if asset is not None else _EXPONENTS.get(code, _DEFAULT_EXPONENT)


def held_as(amount_minor: int, currency: str) -> tuple[int, str]:
    """The amount and currency the ledger holds for `amount_minor` of `currency`: the
    same, or an alias's amount in its currency (`IRT` 1,000.00 is `IRR` 10,000.00),
    exact; `InvalidAmount` if that is wider than `AMOUNT_MAX`."""
    code = check_currency(currency)
    alias = ALIASES.get(code)
    if alias is None:
        return amount_minor, code
    target, factor = alias
    # Minor units scale by the units' factor and by the two exponents' difference (both
    # count hundredths today: IRR's ISO exponent, IRT's by default).
    shift = minor_exponent(target) - minor_exponent(code)
    if shift < 0:
        raise ValueError(f"{code} is counted more finely than {target}: not an alias")
    scaled = amount_minor * factor * 10**shift
    return check_amount(scaled, f"{amount_minor} {code} in {target}"), target


def account_currency(currency: str) -> str:
    """`currency` as an account's currency, or ValueError for an alias (`IRT`): the
    ledger keeps one account per currency, never one per way of counting it."""
    code = check_currency(currency)
    if code in ALIASES:
        target = ALIASES[code][0]
        raise ValueError(f"{code} is counted in {target} on the ledger; name {target}")
    return code


# --- amounts as each provider writes them ---------------------------------------------


@dataclass(frozen=True)
class ProviderUnits:
    """How a provider writes integer amounts of one currency, where it differs from ISO 4217."""

    exponent: int  # decimal places the provider's integer carries (ISO's may differ)
    multiple_of: int = 1  # the provider documents that its amounts are always a multiple


def from_provider_minor(
    units: Mapping[str, ProviderUnits],
    provider: str,
    amount: int,
    currency: str,
    field: str = "amount",
) -> int:
    """`amount` as `provider` writes it, in ISO 4217 minor units of `currency`; `units`
    are the provider's exceptions to ISO 4217 (`Provider.units`).

    Exact or refused: an amount the provider documents it never sends (a Stripe ISK
    amount that is not a whole number of krónur) is `ProviderAmountInvalid`, never
    rounded, because a rounded amount would settle money nobody paid. `field` names the
    amount's path in the event, for that error.
    """
    code = check_currency(currency)
    rule = units.get(code)
    if rule is None:
        return check_amount(amount, field)
    if amount % rule.multiple_of:
        raise ProviderAmountInvalid(
            f"{field} is {amount} {code}: {provider} writes {code} with {rule.exponent} "
            f"decimals in multiples of {rule.multiple_of}, so it never sends this amount"
        )
    shift = minor_exponent(code) - rule.exponent
    factor: int = 10 ** abs(shift)  # typed: int ** int is Any to mypy (negative powers)
    if shift >= 0:
        return check_amount(amount * factor, field)
    whole, rest = divmod(amount, factor)
    if rest:
        raise ProviderAmountInvalid(
            f"{field} is {amount} {code}: finer than {code}'s ISO 4217 minor unit"
        )
    return check_amount(whole, field)


def quantize_rate(rate: Decimal) -> Decimal:
    """`rate` rounded (half-even) to the `RATE_DECIMALS` places the ledger records."""
    if not rate.is_finite() or rate <= 0:
        raise ValueError(f"a rate must be a positive number, got {rate}")
    quantized = rate.quantize(_RATE_QUANTUM, rounding=ROUND_HALF_EVEN, context=_CONTEXT)
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
    check_amount(amount_minor, f"amount in {source}")
    if source == target:
        if rate != 1:
            raise ValueError(f"converting {source} to itself needs rate 1, got {rate}")
        return amount_minor
    if not rate.is_finite() or rate <= 0:
        raise ValueError(f"a rate must be a positive number, got {rate}")
    # Shift both exponents in one step so nothing is rounded before the end.
    shift = minor_exponent(target) - minor_exponent(source)
    product = _CONTEXT.multiply(Decimal(amount_minor), rate)
    exact = _CONTEXT.multiply(product, Decimal(1).scaleb(shift, context=_CONTEXT))
    converted = int(exact.to_integral_value(rounding=ROUND_HALF_EVEN, context=_CONTEXT))
    if converted <= 0:
        raise InvalidAmount(
            f"{amount_minor} minor units of {source} at {rate} is less than one minor "
            f"unit of {target}"
        )
    return check_amount(converted, f"{amount_minor} {source} at {rate} in {target}")


def format_minor(amount_minor: int, currency: str) -> str:
    """`amount_minor` as a person reads it, with its currency and decimals:
    `format_minor(-1250, "USD")` is `"-12.50 USD"`, JPY has none, KWD three."""
    return f"{format_decimal(amount_minor, currency)} {check_currency(currency)}"


def format_decimal(amount_minor: int, currency: str) -> str:
    """`amount_minor` in the currency's decimals, without its code (a table's column
    names the currency): `format_decimal(-1250, "USD")` is `"-12.50"`."""
    exponent = minor_exponent(currency)
    sign = "-" if amount_minor < 0 else ""
    whole, fraction = divmod(abs(amount_minor), 10**exponent)
    text = f"{whole:,}" if exponent == 0 else f"{whole:,}.{fraction:0{exponent}d}"
    return f"{sign}{text}"
