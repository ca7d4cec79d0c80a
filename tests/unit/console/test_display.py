"""The console's one time format and one ledger-id format, as the CLI prints them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gateway.cli.format import when
from gateway.console.display import ledger_id, money, utc

AT = datetime(2026, 12, 6, 17, 23, 42, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (AT, "2026-12-06T17:23:42Z"),
        (AT.astimezone(timezone(timedelta(hours=2))), "2026-12-06T17:23:42Z"),  # said in UTC
        (AT.replace(tzinfo=None), "2026-12-06T17:23:42Z"),  # stored times are UTC
        ("2026-12-06T17:23:42.123456+00:00", "2026-12-06T17:23:42Z"),  # a document's text
        ("2026-12-06T17:23:42Z", "2026-12-06T17:23:42Z"),
        (None, "-"),
    ],
)
def test_every_time_in_one_format(value: datetime | str | None, text: str) -> None:
    assert utc(value) == text


def test_the_console_and_the_cli_write_a_time_alike() -> None:
    assert utc(AT) == when(AT)


def test_ledger_ids_as_the_cli_prints_them() -> None:
    """`gateway ledger balances` prints `{id:#034x}`: 0x and 32 hex digits."""
    assert ledger_id(255) == "0x000000000000000000000000000000ff"
    assert ledger_id(str(2**128 - 1)) == "0x" + "f" * 32


def test_money_with_its_decimals_and_currency() -> None:
    assert money(1250, "EUR") == "12.50 EUR"
    assert money(1250, "JPY") == "1,250 JPY"
