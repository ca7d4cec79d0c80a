"""What the ledger pages and their API read: a statement page, a page of the transfer
list, a page of merchants' balances, the count of merchants below zero. The routes
(`console.ledger`, `console.adjustments`) only parse and answer.

Statements and lists read the recorded movements with the adapter and the running
balance of `gateway ledger statement|transfers` (`adapters.postgres.statements`,
`core.finance.statements.running`), a keyset page of `PAGE_ROWS` at a time, so memory stays
bounded; the console never loads `gateway.settlement`, where the commands' loop lives.
Balances come from the configured ledger through `ConsoleDeps.books`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import statements as statements_store
from gateway.core.finance.input import StatementAsk, TransfersAsk
from gateway.core.finance.statements import PAGE_ROWS, Filters, Movement, running
from gateway.core.finance.view import (
    BalancesAsk,
    Books,
    MerchantBalance,
    StatementPage,
    balances_page,
    merchant_balances,
    negative_counts,
)
from gateway.core.keyset import Keyset, encode_cursor
from gateway.errors import TransientError

#: How long the overview waits for the ledger's balances before it says "unavailable"
#: (the overview refreshes every 10 s). It reads every account, as the settle process
#: does each minute for `gateway_ledger_negative_merchants`: about a millisecond per
#: thousand accounts on TigerBeetle, one indexed scan of `ledger_accounts` on PostgreSQL.
OVERVIEW_LEDGER_TIMEOUT_S = 2.0


class LedgerUnreadable(Exception):
    """The ledger could not be asked: none configured, or it did not answer."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def cursor_of(m: Movement) -> str:
    return encode_cursor(Keyset(m.recorded_at, m.id))


async def statement_page(pool: Pool, ask: StatementAsk) -> StatementPage:
    """The page of `ask`'s statement after `ask.after_id`, with the window's opening and
    closing balances: the whole window is walked, a keyset page at a time, so the
    balances on any page are the books' own (nothing is taken from the link)."""
    opening = 0
    if ask.since is not None:
        async with connection(pool) as conn:
            opening = await statements_store.opening(conn, ask.merchant_id, ask.currency, ask.since)
    page = StatementPage(opening, after_id=ask.after_id, limit=ask.limit)
    filters = Filters(ask.merchant_id, ask.currency, since=ask.since, until=ask.until)
    balance, after = opening, 0
    while True:
        async with connection(pool) as conn:
            found = await statements_store.page(conn, filters, after, PAGE_ROWS)
        for line in running(found, balance):
            page.add(line)
            balance = line.balance_minor
        if len(found) < PAGE_ROWS:
            return page
        after = found[-1].id


async def transfers_page(pool: Pool, ask: TransfersAsk) -> tuple[list[Movement], str | None]:
    """One page of the transfer list, and the cursor of the next (None on the last)."""
    async with connection(pool) as conn:
        found = await statements_store.page(conn, ask.filters, ask.after_id, ask.limit + 1)
    shown = found[: ask.limit]
    return shown, cursor_of(shown[-1]) if len(found) > ask.limit else None


async def _balances(books: Books | None) -> list[MerchantBalance]:
    if books is None:
        raise LedgerUnreadable("this console was started without a ledger")
    try:
        return merchant_balances(await books.merchant_balances())
    except TransientError as exc:
        raise LedgerUnreadable(f"the ledger did not answer ({exc.error_class})") from exc


@dataclass(frozen=True)
class BalancesView:
    """A page of merchants' balances, where the next starts, and the merchants below
    zero by currency (over every account, not the page)."""

    rows: list[MerchantBalance]
    next_key: tuple[int, str, str, int] | None
    negative: dict[str, int]


async def balances_view(books: Books | None, ask: BalancesAsk) -> BalancesView:
    """Raises `LedgerUnreadable`."""
    every = await _balances(books)
    rows, next_key = balances_page(every, ask)
    return BalancesView(rows, next_key, negative_counts(every))


async def negative_merchants(
    books: Books | None, timeout_s: float = OVERVIEW_LEDGER_TIMEOUT_S
) -> tuple[dict[str, int] | None, str | None]:
    """For the overview: merchants below zero by currency, or None and why not. Never
    raises for the ledger's sake, and waits at most `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            return negative_counts(await _balances(books)), None
    except LedgerUnreadable as exc:
        return None, exc.detail
    except TimeoutError:
        return None, f"the ledger did not answer within {timeout_s:g} s"


async def ledger_balance(books: Books | None, merchant_id: str, currency: str) -> int | None:
    """The merchant's balance as the ledger holds it now; None when unknown (no account,
    or the ledger cannot be asked: the statement says so)."""
    if books is None:
        return None
    try:
        async with asyncio.timeout(OVERVIEW_LEDGER_TIMEOUT_S):
            return await books.merchant_balance(merchant_id, currency)
    except (TransientError, TimeoutError):
        return None
