"""How the console writes times, ledger ids and withheld text, as template filters: one
format each on every page, the same the CLI prints. Pure.

- a time: ISO 8601 in UTC to the second with a `Z` (`2026-12-06T17:23:42Z`), as
  `gateway dlq list` and the API's documents write it (`cli.format.when`);
- a ledger id (a transfer's, an account's): 128 bits as `0x` and 32 hex digits, as
  `gateway ledger balances` prints an account;
- an amount: the currency's decimals and its code (`core.money.format_minor`);
- a withheld message: its length and why (`core.payload_text`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gateway.core.money import format_minor
from gateway.core.payload_text import withheld_note


def utc(value: datetime | str | None) -> str:
    """A stored time (or its ISO 8601 text) as the console shows it; `-` for none."""
    if value is None or value == "":
        return "-"
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    if at.tzinfo is None:  # stored times are UTC; a naive one is read as such
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ledger_id(value: int | str) -> str:
    """A 128-bit ledger id (or its decimal digits) as `0x` and 32 hex digits."""
    return f"{int(value):#034x}"


def money(amount_minor: int, currency: str) -> str:
    """Minor units as a person reads them, with decimals and currency (`12.00 USD`)."""
    return format_minor(amount_minor, currency)


FILTERS: dict[str, Callable[..., Any]] = {
    "money": money,
    "utc": utc,
    "ledger_id": ledger_id,
    "withheld_note": withheld_note,
}
