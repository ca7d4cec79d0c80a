"""`gateway ledger`: open merchant accounts, list balances, check double entry.

Each operation takes the ledger the composition root opened (`gateway.compose.ops`).
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.core.ledger import Ledger, verify_totals
from gateway.core.settlement import merchant_account, merchant_account_id
from gateway.errors import LedgerImbalance

log = logging.getLogger("gateway.ledger")


async def open_account(ledger: Ledger, merchant_id: str, currency: str) -> int:
    """Open (idempotently) the merchant's account in `currency`; its ledger id."""
    await ledger.ensure_accounts([merchant_account(merchant_id, currency)])
    return merchant_account_id(merchant_id, currency)


async def balances(ledger: Ledger) -> list[dict[str, Any]]:
    """Every account's posted totals, as the CLI prints them."""
    return [
        {
            "account_id": f"{b.account_id:#034x}",
            "debits_posted": b.debits_posted,
            "credits_posted": b.credits_posted,
            "balance": b.credit_balance_minor,
        }
        for b in await ledger.balances()
    ]


async def check(ledger: Ledger) -> tuple[int, int]:
    """(debits, credits) posted in all; `LedgerImbalance` (logged critical) if they differ."""
    totals = await ledger.check()
    try:
        verify_totals(totals)
    except LedgerImbalance:
        log.critical(
            "ledger imbalance",
            extra={"debits": totals.debits_posted, "credits": totals.credits_posted},
        )
        raise
    return totals.debits_posted, totals.credits_posted
