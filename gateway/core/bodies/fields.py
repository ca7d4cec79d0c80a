"""Reading fields out of parsed JSON, with errors that name the field's path.

Used by the settlement extractors: a missing field is `MissingField`, a present field of
the wrong type is `FieldTypeInvalid`, an amount that is not positive or wider than the
ledgers' range (`core.money.AMOUNT_MAX`) is `InvalidAmount`; all of them are permanent,
so a malformed event goes to the dead-letter table at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.core.money import check_amount, check_currency, minor_exponent
from gateway.errors import FieldTypeInvalid, InvalidAmount, MissingField


def get_object(doc: Any, path: str) -> Mapping[str, Any]:
    """The object at dotted `path` (`data.object`) inside `doc`."""
    node: Any = doc
    walked = ""
    for key in path.split("."):
        if not isinstance(node, Mapping):
            raise FieldTypeInvalid(walked or "(body)", "an object")
        walked = f"{walked}.{key}" if walked else key
        if node.get(key) is None:
            raise MissingField(walked)
        node = node[key]
    if not isinstance(node, Mapping):
        raise FieldTypeInvalid(path, "an object")
    return node


def get_str(obj: Mapping[str, Any], key: str, prefix: str = "") -> str:
    """A required non-empty string; `prefix` is the object's path, for the error."""
    value = obj.get(key)
    if value is None:
        raise MissingField(prefix + key)
    if not isinstance(value, str) or not value.strip():
        raise FieldTypeInvalid(prefix + key, "a non-empty string")
    return value


def optional_str(doc: Any, key: str) -> str | None:
    """A non-empty string at `key`, or None when absent or of another type."""
    value = doc.get(key) if isinstance(doc, Mapping) else None
    return value if isinstance(value, str) and value else None


def get_amount(obj: Mapping[str, Any], key: str, prefix: str = "") -> int:
    """A required integer amount in minor units, 1 to `core.money.AMOUNT_MAX`."""
    value = obj.get(key)
    if value is None:
        raise MissingField(prefix + key)
    # bool is an int in Python, and a float amount is ambiguous in minor units.
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldTypeInvalid(prefix + key, "an integer amount in minor units")
    return check_amount(value, prefix + key)  # positive, and no wider than the ledgers


def get_digits_amount(obj: Mapping[str, Any], key: str, prefix: str = "") -> int:
    """A required amount written as a string of digits in minor units (Paddle's `"1000"`
    for USD 10.00), 1 to `core.money.AMOUNT_MAX`. A sign, a decimal point, blanks or an
    integer instead of a string are refused, never guessed at."""
    value = obj.get(key)
    if value is None:
        raise MissingField(prefix + key)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise FieldTypeInvalid(prefix + key, "a string of digits in minor units")
    if len(value) > 20:  # wider than any amount the ledgers hold; int() of it stays cheap
        raise InvalidAmount(f"{prefix + key} is {len(value)} digits long")
    return check_amount(int(value), prefix + key)


def get_currency(obj: Mapping[str, Any], key: str, prefix: str = "") -> str:
    """A required currency code, upper-cased (Stripe sends `usd`)."""
    value = get_str(obj, key, prefix)
    try:
        return check_currency(value)
    except ValueError:
        raise FieldTypeInvalid(prefix + key, "a currency code (3 letters, or an asset)") from None


#: A decimal amount as providers write one: digits, then optionally a point and digits.
#: No sign, no exponent, no blanks, no thousands separators: nothing to guess at.
_DECIMAL = re.compile(r"([0-9]{1,20})(?:\.([0-9]{1,20}))?", re.ASCII)


def get_decimal_amount(obj: Mapping[str, Any], key: str, currency: str, prefix: str = "") -> int:
    """A required amount written as a decimal string in major units (Braintree's and
    PayPal's `"10.00"`), as ISO 4217 minor units of `currency`, 1 to `AMOUNT_MAX`.

    Exact or refused: more decimals than the currency has (`"10.005"` USD, `"5.5"` JPY)
    is `FieldTypeInvalid`, never rounded, since a rounded amount would settle money
    nobody paid; trailing zeros beyond them (`"10.000"`) are the same amount. A number
    instead of a string is refused too: a JSON float cannot carry an exact amount.
    """
    value = obj.get(key)
    if value is None:
        raise MissingField(prefix + key)
    found = _DECIMAL.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise FieldTypeInvalid(prefix + key, 'a decimal amount as a string, like "10.00"')
    whole, fraction = found.group(1), (found.group(2) or "").rstrip("0")
    exponent = minor_exponent(currency)
    if len(fraction) > exponent:
        raise FieldTypeInvalid(
            prefix + key, f"an amount with at most {exponent} decimals in {currency}"
        )
    return check_amount(int(whole + fraction.ljust(exponent, "0")), prefix + key)
