"""Finance's view of the ledger: statements, transfer lists, exports, operators'
adjustments and the per-payment check (`gateway ledger statement|transfers|export|adjust`,
`gateway ledger check --payments`).

Statements and lists read the recorded movements (`settlements`) in keyset pages of
`core.finance.statements.PAGE_ROWS`, so memory stays bounded over millions of rows and the same
code serves both ledgers. An adjustment is recorded (who, why) and posted like any other
movement: a pending `settlements` row, the transfer, then settled, each step idempotent
by the operator's id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime
from decimal import Decimal

from gateway.adapters.postgres import Pool, connection, transaction
from gateway.adapters.postgres import adjustments as adjustments_store
from gateway.adapters.postgres import settlements as store
from gateway.adapters.postgres import statements as statements_store
from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.core.failures.excerpt import excerpt
from gateway.core.finance.statements import PAGE_ROWS, Adjustment, Filters, Line, Movement, running
from gateway.core.ledger.accounts import clearing_name
from gateway.core.ledger.ids import merchant_account_id
from gateway.core.ledger.port import Ledger, TransferResult, interpret
from gateway.core.money import check_amount, check_currency, format_minor
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    build_transfer,
    transfer_id,
)
from gateway.errors import InvalidAmount, UnknownMerchant, UsageError
from gateway.settlement.ledger_ops import open_accounts

#: The owner of the accounts adjustments are posted against, one per currency (a
#: provider or service name never holds a colon, so it cannot be taken by one).
ADJUSTMENTS_OWNER = "operator:adjustments"
#: How adjustments show as a provider in statements and the `settlements` table.
OPERATOR = "operator"
_ONE = Decimal(1)  # an adjustment is in the ledger's currency: nothing is converted


async def movements(
    pool: Pool, filters: Filters, page_rows: int = PAGE_ROWS
) -> AsyncIterator[Movement]:
    """Every movement `filters` take, in recorded order, a keyset page at a time."""
    after = 0
    while True:
        async with connection(pool) as conn:
            found = await statements_store.page(conn, filters, after, page_rows)
        for m in found:
            yield m
        if len(found) < page_rows:
            return
        after = found[-1].id


async def statement(
    pool: Pool,
    merchant_id: str,
    currency: str,
    since: datetime | None,
    until: datetime | None,
    page_rows: int = PAGE_ROWS,
) -> tuple[int, AsyncIterator[Line]]:
    """The opening balance and the lines after it (each with its running balance)."""
    opening = 0
    if since is not None:
        async with connection(pool) as conn:
            opening = await statements_store.opening(conn, merchant_id, currency, since)
    filters = Filters(merchant_id, currency, since=since, until=until)

    async def lines() -> AsyncIterator[Line]:
        balance = opening
        async for m in movements(pool, filters, page_rows):
            (line,) = running([m], balance)
            balance = line.balance_minor
            yield line

    return opening, lines()


async def adjust(pool: Pool, ledger: Ledger, wanted: Adjustment) -> tuple[Adjustment, bool]:
    """Record and post one correcting entry; (the entry, whether it moved money now).

    Refused with `UsageError` (exit 2): a zero or out-of-range amount, a reason missing,
    an id taken by another entry. `UnknownMerchant` when the merchant has no account in
    the currency."""
    if not wanted.reason.strip():
        raise UsageError("--reason is required: say why the ledger is corrected")
    if wanted.amount_minor == 0:
        raise UsageError("--amount must not be zero")
    try:
        check_amount(abs(wanted.amount_minor), "--amount")
        currency = check_currency(wanted.currency)
    except (InvalidAmount, ValueError) as exc:  # out of the ledgers' range; not a code
        raise UsageError(str(exc)) from None
    wanted = dataclasses.replace(wanted, currency=currency)
    if await ledger.balance(merchant_account_id(wanted.merchant_id, currency)) is None:
        raise UnknownMerchant(f"merchant {excerpt(wanted.merchant_id)} has no {currency} account")
    await open_accounts(
        ledger, PostgresAccountNames(pool), [clearing_name(ADJUSTMENTS_OWNER, currency)]
    )
    kind = (
        SettlementKind.CREDIT_ADJUSTMENT
        if wanted.amount_minor > 0
        else SettlementKind.DEBIT_ADJUSTMENT
    )
    amount = abs(wanted.amount_minor)
    instruction = SettlementInstruction(
        settlement_id=f"adjustment:{wanted.adjustment_id}", kind=kind,
        merchant_id=wanted.merchant_id, amount_minor=amount, currency=currency,
        refund_id=wanted.adjustment_id, source_event_id=None,
    )  # fmt: skip
    tid = transfer_id(instruction)
    async with transaction(pool) as conn:
        stored = await adjustments_store.record(conn, wanted)
        if not stored.same_entry(wanted):
            raise UsageError(
                f"adjustment id {excerpt(wanted.adjustment_id)} was used for "
                f"{format_minor(stored.amount_minor, stored.currency)} to "
                f"{excerpt(stored.merchant_id)} ({excerpt(stored.reason)}): choose another --id"
            )
        pending = store.PendingSettlement(instruction, tid, OPERATOR, wanted.merchant_id,
                                          amount, currency, _ONE)  # fmt: skip
        await store.fix_pending_many(conn, [pending])
    transfer = build_transfer(instruction, provider=ADJUSTMENTS_OWNER, ledger_currency=currency,
                              amount_minor=amount, rate_at_payment=_ONE)  # fmt: skip
    (result,) = await ledger.post([transfer])
    answer = interpret(result, transfer)
    async with connection(pool) as conn:
        await store.set_settled_many(conn, [tid])
    return stored, answer is TransferResult.CREATED
