"""What the ledger pages show: merchants' balances in their order (below zero first)
and paged, those below zero counted, a statement cut into pages with balances that are
the window's own, and money and rates as people read them."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from gateway.core.finance.statements import Line, Movement, running
from gateway.core.finance.view import (
    BalancesAsk,
    MerchantBalance,
    StatementPage,
    balances_page,
    counts_text,
    decode_balance_cursor,
    encode_balance_cursor,
    line_doc,
    merchant_balances,
    money,
    negative_counts,
    rate_text,
)
from gateway.core.keyset import BadCursor
from gateway.core.ledger.accounts import AccountView
from gateway.core.settlement.instructions import SettlementKind

AT = datetime(2026, 12, 6, 9, 12, 3, tzinfo=UTC)
_IDS = itertools.count(1000)


def view(owner: str | None, debits: int, credits: int, currency: str | None = "USD",
         kind: str = "merchant", account_id: int = 0) -> AccountView:  # fmt: skip
    return AccountView(account_id or next(_IDS), kind, owner, currency, 1, debits, credits)


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [
        (-1250, "USD", "-12.50 USD"),
        (0, "USD", "0.00 USD"),
        (125_000, "EUR", "1,250.00 EUR"),
        (1250, "JPY", "1,250 JPY"),
        (-1250, "KWD", "-1.250 KWD"),
        (7, None, "7 minor units"),  # a ledger that names no currency
    ],
)
def test_money_carries_its_currency_and_decimals(
    amount: int, currency: str | None, shown: str
) -> None:
    """Every amount on the pages is written with its currency and its own decimals."""
    assert money(amount, currency) == shown


@pytest.mark.parametrize(
    ("rate", "shown"),
    [
        (None, "-"),
        (Decimal("1.000000"), "1"),
        (Decimal("1.080000"), "1.08"),
        (Decimal("10.000000"), "10"),
        (Decimal("0.000150"), "0.00015"),
    ],
)
def test_rates_as_written(rate: Decimal | None, shown: str) -> None:
    """A recorded rate without its padding zeros and never in exponent form."""
    assert rate_text(rate) == shown


def test_merchants_below_zero_come_first_and_are_counted() -> None:
    """Only merchant accounts; below zero first, then by merchant and currency."""
    views = [view("m_b", 0, 500), view("m_a", 900, 100), view("m_c", 0, 0),
             view("m_a", 0, 10, "EUR"), view("ops", 5, 0, kind="clearing"),
             view(None, 3, 1, None)]  # fmt: skip
    balances = merchant_balances(views)
    assert [(b.merchant_id, b.currency, b.balance_minor, b.negative) for b in balances] == [
        (None, None, -2, True),
        ("m_a", "USD", -800, True),
        ("m_a", "EUR", 10, False),
        ("m_b", "USD", 500, False),
        ("m_c", "USD", 0, False),  # zero is not below zero
    ]
    assert negative_counts(balances) == {"?": 1, "USD": 1}
    assert counts_text({"EUR": 1, "USD": 2}) == "1 EUR, 2 USD" and counts_text({}) == "none"


def test_balances_page_by_key_and_filter() -> None:
    """Each account once across the pages; filters apply before the page is cut."""
    balances = merchant_balances(
        # Account ids are 128-bit numbers (`core.ledger.ids`), past what JSON numbers hold.
        [view(f"m_{n}", 100 if n % 2 else 0, 50, account_id=2**127 + n) for n in range(7)]
    )
    seen, after = [], None
    while True:
        page, after = balances_page(balances, BalancesAsk(limit=3, after=after))
        seen += [b.merchant_id for b in page]
        if after is None:
            break
        assert decode_balance_cursor(encode_balance_cursor(after)) == after
    assert seen == ["m_1", "m_3", "m_5", "m_0", "m_2", "m_4", "m_6"]
    only, more = balances_page(balances, BalancesAsk(negative_only=True))
    assert ([b.merchant_id for b in only], more) == (["m_1", "m_3", "m_5"], None)
    one, _ = balances_page(balances, BalancesAsk(merchant_id="m_2", currency="USD"))
    assert [b.merchant_id for b in one] == ["m_2"]
    assert balances_page(balances, BalancesAsk(currency="EUR")) == ([], None)


@pytest.mark.parametrize(
    "cursor", ["", "x", "bm90IGpzb24", "WzIsIm0iLCJVU0QiLDFd", "WzAsMSwiVVNEIiwxXQ", "A" * 2000]
)
def test_a_balances_cursor_not_given_out_is_refused(cursor: str) -> None:
    """Garbage, a rank other than 0 or 1, a number where a merchant goes, too long."""
    with pytest.raises(BadCursor):
        decode_balance_cursor(cursor)


def test_the_account_as_the_api_answers_it() -> None:
    b = MerchantBalance(0xAB, "m_1", "USD", 1500, 250, reserved_minor=900)
    assert b.as_dict() == {
        "account_id": "0x000000000000000000000000000000ab", "merchant_id": "m_1",
        "currency": "USD", "debits_posted": 1500, "credits_posted": 250,
        "balance_minor": -1250, "reserved_minor": 900, "negative": True,
    }  # fmt: skip


def test_what_authorisations_reserve_is_beside_the_balance_not_in_it() -> None:
    """An open authorisation's reservation is shown, and neither makes a merchant
    negative nor keeps one from being so."""
    held = AccountView(1, "merchant", "m_1", "USD", 1, 0, 0, debits_pending=0, credits_pending=700)
    [b] = merchant_balances([held])
    assert (b.balance_minor, b.reserved_minor, b.negative) == (0, 700, False)


def movement(row: int, kind: SettlementKind, posted: int) -> Movement:
    return Movement(row, AT, "m_1", kind, "stripe", f"evt_{row}", "pi_1", None, posted, "EUR",
                    Decimal("1.080000"), posted, "USD", "settled")  # fmt: skip


LINES = list(running([movement(n, SettlementKind.CAPTURE if n % 3 else SettlementKind.REFUND,
                               100 * n) for n in range(1, 8)], 1000))  # fmt: skip


@pytest.mark.parametrize(
    ("after", "limit", "ids", "before", "last"),
    [
        (0, 3, [1, 2, 3], 1000, 3),  # the first page starts at the opening balance
        (3, 3, [4, 5, 6], 1000 + 100 + 200 - 300, 6),  # the next starts where it ended
        (6, 3, [7], 1000 + 100 + 200 - 300 + 400 + 500 - 600, None),  # the last has no next
        (0, 7, [1, 2, 3, 4, 5, 6, 7], 1000, None),  # exactly one page
        (7, 3, [], 1000 + 100 + 200 - 300 + 400 + 500 - 600 + 700, None),  # past the end
    ],
)
def test_a_statement_page_carries_the_windows_own_balances(
    after: int, limit: int, ids: list[int], before: int, last: int | None
) -> None:
    """Whatever the page, the opening and closing balances and the count are the whole
    window's; the balance before the page is the one after the previous page's last line."""
    page = StatementPage(1000, after_id=after, limit=limit)
    for line in LINES:
        page.add(line)
    assert [ln.movement.id for ln in page.lines] == ids
    assert (page.before_minor, page.last_id) == (before, last)
    assert (page.opening_minor, page.closing_minor, page.movements) == (
        1000,
        LINES[-1].balance_minor,
        7,
    )


def test_an_empty_window_closes_at_its_opening() -> None:
    page = StatementPage(-250)
    assert (page.before_minor, page.closing_minor, page.lines, page.last_id) == (
        -250,
        -250,
        [],
        None,
    )


def test_a_line_as_the_api_answers_it() -> None:
    """The CLI's fields (minor units, `posted_minor` signed), and the same money written out."""
    refund = Line(movement(3, SettlementKind.REFUND, 300), -50)
    doc = line_doc(refund)
    assert (doc["posted_minor"], doc["posted"], doc["balance"]) == (-300, "-3.00 USD", "-0.50 USD")
    assert (doc["amount"], doc["rate"], doc["rate_text"]) == ("3.00 EUR", "1.080000", "1.08")
    listed = line_doc(refund, balance=False)
    assert "balance_minor" not in listed and "balance" not in listed
