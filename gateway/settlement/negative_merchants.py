"""`gateway_ledger_negative_merchants`: how many merchant accounts hold less than nothing.

Refunds and chargebacks the provider has already executed may take a merchant below zero
(`core.ledger.ids.merchant_account`); finance must see it. The settle process reads every
account's totals through the ledger port (`Ledger.balances`: one query on PostgreSQL,
pages of 8,000 on TigerBeetle) every `SCAN_INTERVAL_S`, which costs about a millisecond
per thousand accounts, and sets the gauge (per ledger currency). The alert rule
`GatewayMerchantNegative` fires on it; `gateway ledger balances` names the merchants.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable

from gateway.core.ledger.accounts import ledger_currency
from gateway.core.ledger.port import AccountCode, Balance, Ledger
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

#: Seconds between two reads of the merchants' balances.
SCAN_INTERVAL_S = 60.0


def count_negative(balances: Iterable[Balance]) -> Counter[str]:
    """Merchant accounts whose credits fall short of their debits, by currency."""
    found: Counter[str] = Counter()
    for b in balances:
        if b.code == AccountCode.MERCHANT and b.credits_posted < b.debits_posted:
            found[ledger_currency(b.ledger) or str(b.ledger)] += 1
    return found


async def refresh(ledger: Ledger, metrics: Metrics, seen: set[str]) -> Counter[str]:
    """Set the gauge from the ledger's balances; currencies once negative and now not
    are set to 0 (in `seen`)."""
    found = count_negative(await ledger.balances())
    for currency in seen | set(found):
        metrics.ledger_negative_merchants.set(found.get(currency, 0), currency=currency)
    seen.update(found)
    return found


async def keep_refreshed(
    ledger: Ledger, metrics: Metrics, interval_s: float = SCAN_INTERVAL_S
) -> None:
    """Refresh the gauge until cancelled; a failed read is logged and tried next time."""
    seen: set[str] = set()
    while True:
        try:
            await refresh(ledger, metrics, seen)
        except Exception:  # the ledger down: settling logs and retries it too
            log.warning("could not read the merchants' balances", exc_info=True)
        await asyncio.sleep(interval_s)
