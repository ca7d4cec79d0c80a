"""An operator's correcting entry as the console takes it: from the form, its amount
typed in the currency's own units (`-12.50` for USD, `-1250` for JPY, `-1.250` for
KWD), the way finance reads money, and refused unless it is a whole number of the
currency's minor units; from the API, `amount_minor`, an integer of minor units, as
`gateway ledger adjust --amount` takes it. Either way the result is the
`core.finance.statements.Adjustment` that `gateway ledger adjust` posts, each field checked as
that command checks it, and bounded, since each is kept in the audit trail.

Pure. Every problem is a `FinanceUsageError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gateway.core.finance.input import (
    FinanceUsageError,
    currency_field,
    required_field,
    shown,
    text_field,
)
from gateway.core.finance.statements import Adjustment
from gateway.core.money import AMOUNT_MAX, format_minor, minor_exponent

#: An amount in the currency's units: a sign, digits, and decimals after a point; no
#: thousands separators, no exponent (`1e3`), ASCII digits only.
_UNITS = re.compile(r"([+-]?)([0-9]{1,30})(?:\.([0-9]{1,30}))?", re.ASCII)


def parse_units(text: str, currency: str) -> int:
    """An amount typed in `currency`'s units (`-12.50` USD) as signed minor units
    (-1250); refused unless it is a whole number of minor units."""
    code = currency_field(currency)
    value = text.strip()
    match = _UNITS.fullmatch(value)
    if match is None:
        raise FinanceUsageError(
            f"amount: {shown(value)} is not an amount like -12.50 "
            "(digits, a point before the decimals, no thousands separators)"
        )
    sign, whole, fraction = match.group(1), match.group(2), match.group(3) or ""
    exponent = minor_exponent(code)
    if len(fraction.rstrip("0")) > exponent:
        unit = "no decimals" if exponent == 0 else f"{exponent} decimals"
        raise FinanceUsageError(
            f"amount: {value} {code} is not a whole number of minor units ({code} has {unit})"
        )
    scale: int = 10**exponent  # typed: int ** int is Any to mypy
    minor = int(whole) * scale + int((fraction + "0" * exponent)[:exponent] or "0")
    return -minor if sign == "-" else minor


def check_adjustment(
    *,
    merchant_id: str | None,
    amount_minor: int,
    currency: str | None,
    reason: str | None,
    adjustment_id: str | None,
    note: str | None,
    actor: str,
) -> Adjustment:
    """The entry asked for, each field checked as `gateway ledger adjust` checks it
    (and bounded, since each is kept in the audit trail)."""
    merchant = required_field(merchant_id, "merchant")
    code = currency_field(currency)
    if amount_minor == 0:
        raise FinanceUsageError(
            "amount: must not be zero (a positive amount credits the merchant, a negative "
            "one debits it)"
        )
    if abs(amount_minor) > AMOUNT_MAX:
        raise FinanceUsageError(f"amount: beyond the ledgers' largest, {AMOUNT_MAX:,} minor units")
    why = text_field(reason, "reason")
    if why is None:
        raise FinanceUsageError("reason: required (say why the ledger is corrected: it is kept)")
    entry_id = required_field(adjustment_id, "id")
    return Adjustment(entry_id, merchant, amount_minor, code, why, text_field(note, "note"), actor)


def read_adjustment_form(form: Mapping[str, str], actor: str) -> Adjustment:
    """The form's entry: its amount in the currency's units (`parse_units`). Checked in
    the form's order, so the first field wrong is the one named."""
    required_field(form.get("merchant"), "merchant")
    currency = currency_field(form.get("currency"))
    amount_text = (form.get("amount") or "").strip()
    if not amount_text:
        raise FinanceUsageError("amount: required")
    return check_adjustment(
        merchant_id=form.get("merchant"),
        amount_minor=parse_units(amount_text, currency),
        currency=currency,
        reason=form.get("reason"),
        adjustment_id=form.get("id"),
        note=form.get("note"),
        actor=actor,
    )


def read_adjustment_json(doc: object, actor: str) -> Adjustment:
    """The API's entry: `amount_minor` an integer of minor units."""
    if not isinstance(doc, dict):
        raise FinanceUsageError("the body must be a JSON object")
    texts = ("merchant_id", "currency", "reason", "adjustment_id", "note")
    if any(doc.get(k) is not None and not isinstance(doc.get(k), str) for k in texts):
        raise FinanceUsageError(f"{', '.join(texts)} are strings")
    amount = doc.get("amount_minor")
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise FinanceUsageError(
            "amount_minor: required, an integer of minor units (12.50 USD is 1250)"
        )
    return check_adjustment(
        merchant_id=doc.get("merchant_id"),
        amount_minor=amount,
        currency=doc.get("currency"),
        reason=doc.get("reason"),
        adjustment_id=doc.get("adjustment_id"),
        note=doc.get("note"),
        actor=actor,
    )


def adjustment_payment_id(adjustment_id: str) -> str:
    """The payment id an adjustment's movement is recorded under (`settlements`), as
    `gateway.settlement.finance.adjust` records it: the transfer list's `payment`."""
    return f"adjustment:{adjustment_id}"


def adjustment_line(entry: Adjustment, moved: bool) -> str:
    """The line `gateway ledger adjust` prints for the entry."""
    done = "posted" if moved else "posted before; nothing moved again"
    return (
        f"adjustment {entry.adjustment_id}: {format_minor(entry.amount_minor, entry.currency)}"
        f" to {entry.merchant_id}, {done}"
    )
