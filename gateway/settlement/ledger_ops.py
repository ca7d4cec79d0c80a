"""`gateway ledger`: open merchant accounts, list balances by name, check double entry.

Each operation takes the ledger and the account-name directory the composition root
opened (`gateway.wiring.ops`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gateway.core.ledger.accounts import (
    AccountName,
    AccountNames,
    AccountView,
    describe_all,
    merchant_name,
    select,
)
from gateway.core.ledger.port import Ledger, verify_totals
from gateway.errors import LedgerImbalance

log = logging.getLogger(__name__)


async def open_accounts(ledger: Ledger, names: AccountNames, wanted: Sequence[AccountName]) -> None:
    """Record the accounts' names, then create the accounts (both idempotent).

    Names first: a crash in between leaves a name without an account (harmless, and
    completed by the next try), never an account nobody can name.
    """
    await names.record(wanted)
    await ledger.ensure_accounts([n.spec() for n in wanted])


async def open_account(ledger: Ledger, names: AccountNames, merchant_id: str, currency: str) -> int:
    """Open (idempotently) the merchant's account in `currency`; its ledger id."""
    name = merchant_name(merchant_id, currency)
    await open_accounts(ledger, names, [name])
    return name.account_id


async def balances(
    ledger: Ledger,
    names: AccountNames,
    *,
    merchant: str | None = None,
    currency: str | None = None,
) -> list[AccountView]:
    """Every account's posted totals with its kind, owner and currency, filtered."""
    found = await ledger.balances()
    known = await names.lookup([b.account_id for b in found])
    return select(describe_all(found, known), merchant=merchant, currency=currency)


async def check(ledger: Ledger) -> tuple[int, int]:
    """(debits, credits) posted in all; `LedgerImbalance` (logged critical) if they
    differ, or if the ledger's reads show it for certain while money moves."""
    try:
        totals = await ledger.check()
    except LedgerImbalance as exc:  # TigerBeetle's reads, outgrown one by the next
        log.critical("ledger imbalance", extra={"reason": str(exc)})
        raise
    try:
        verify_totals(totals)
    except LedgerImbalance:
        log.critical(
            "ledger imbalance",
            extra={"debits": totals.debits_posted, "credits": totals.credits_posted},
        )
        raise
    return totals.debits_posted, totals.credits_posted
