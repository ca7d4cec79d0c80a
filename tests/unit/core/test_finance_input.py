"""The ledger pages' filters, read as `gateway ledger statement|transfers|balances`
read theirs: times in the CLI's forms, a kind of movement, a currency, a page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.finance.input import (
    FinanceUsageError,
    StatementAsk,
    parse_balances_query,
    parse_statement_query,
    parse_transfers_query,
)
from gateway.core.finance.statements import Filters
from gateway.core.finance.view import encode_balance_cursor
from gateway.core.keyset import Keyset, encode_cursor
from gateway.core.settlement.instructions import SettlementKind

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
CURSOR_412 = encode_cursor(Keyset(NOW, 412))


def test_a_statement_is_asked_for_once_a_merchant_is_given() -> None:
    """The empty form asks for nothing; the currency defaults to the settlement's."""
    assert parse_statement_query({}, NOW, "USD") is None
    assert parse_statement_query({"merchant": " m_1 "}, NOW, "USD") == StatementAsk(
        "m_1", "USD", None, None
    )
    ask = parse_statement_query(
        {"merchant": "m_1", "currency": "eur", "since": "30d", "until": "2026-12-01",
         "cursor": CURSOR_412, "limit": "20"}, NOW, "USD",
    )  # fmt: skip
    assert ask == StatementAsk("m_1", "EUR", NOW - timedelta(days=30),
                               datetime(2026, 12, 1, tzinfo=UTC), 412, 20)  # fmt: skip


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"since": "yesterday"}, "since: cannot read 'yesterday'"),
        ({"until": "2026-12-01T10:00"}, "until: '2026-12-01T10:00' has no time zone"),
        ({"since": "1d", "until": "2d"}, "since must be before until"),
        ({"currency": "dollars"}, "currency: 'dollars' is not a currency code"),
        ({"cursor": "not-ours"}, "cursor: not a page cursor of this console"),
        ({"limit": "0"}, "limit: give a whole number from 1 to 1,000"),
        ({"limit": "1001"}, "limit: give a whole number from 1 to 1,000"),
        ({"merchant": "m\x00"}, "merchant: 'm\\x00' is not an id"),
    ],
)
def test_a_statement_query_that_cannot_be_used(query: dict[str, str], says: str) -> None:
    with pytest.raises(FinanceUsageError) as refused:
        parse_statement_query({"merchant": "m_1"} | query, NOW, "USD")
    assert says in str(refused.value)


def test_the_transfer_lists_filters_are_the_clis() -> None:
    """Every filter of `gateway ledger transfers`, blank fields meaning "any"."""
    ask = parse_transfers_query(
        {"merchant": "m_1", "payment": "pi_3", "kind": "chargeback", "currency": "usd",
         "since": "7d", "until": "", "limit": "1000", "cursor": CURSOR_412}, NOW,
    )  # fmt: skip
    assert ask.filters == Filters("m_1", "USD", "pi_3", SettlementKind.CHARGEBACK,
                                  NOW - timedelta(days=7), None)  # fmt: skip
    assert (ask.after_id, ask.limit) == (412, 1000)
    empty = parse_transfers_query({"merchant": " ", "kind": "", "payment": ""}, NOW)
    assert (empty.filters, empty.after_id, empty.limit) == (Filters(), 0, 100)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"kind": "gift"}, "kind: 'gift' is not one of capture, refund"),
        ({"currency": "US"}, "is not a currency code"),
        ({"payment": "p" * 201}, "payment: "),
        ({"limit": "ten"}, "limit: give a whole number"),
    ],
)
def test_a_transfer_filter_that_cannot_be_used(query: dict[str, str], says: str) -> None:
    with pytest.raises(FinanceUsageError) as refused:
        parse_transfers_query(query, NOW)
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("value", "only"),
    [("1", True), ("true", True), ("on", True), ("", False), ("0", False), ("false", False)],
)
def test_the_balances_checkbox(value: str, only: bool) -> None:
    """The form's checkbox sends `1`; the API's boolean `true` or `false`."""
    assert parse_balances_query({"negative": value}).negative_only is only


def test_the_balances_filters() -> None:
    key = (0, "m_1", "USD", 7)
    ask = parse_balances_query({"merchant": "m_1", "currency": "usd", "limit": "5",
                                "cursor": encode_balance_cursor(key)})  # fmt: skip
    assert (ask.merchant_id, ask.currency, ask.limit, ask.after) == ("m_1", "USD", 5, key)
    for bad in ({"negative": "null"}, {"cursor": CURSOR_412}, {"currency": "1"}):
        with pytest.raises(FinanceUsageError):
            parse_balances_query(bad)
