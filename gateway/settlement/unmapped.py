"""Nothing ignored in silence: a payment provider's event that moves no money is counted.

`gateway_settlement_unmapped_total{provider,type}` counts each payment provider's events
whose type (or state: a Paddle adjustment not approved yet) settles nothing, and the
first of each type in a process is logged once. Sources that can never move money
(GitHub, Shopify, Standard Webhooks or plain HMAC senders, internal services' other
events) are not counted. Types are the provider's own words, from signed events only;
past `MAX_TYPES` distinct pairs the rest count under `type="other"`, so a provider
inventing types cannot grow the metric without bound. The counts are also added to
`settlement_unmapped` every `FLUSH_INTERVAL_S` (`keep_recorded`), which the console's
overview reads: the metric is per process, the table the whole gateway's.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import unmapped as store
from gateway.core.events.model import Event
from gateway.core.providers.movements import is_internal, movements_of
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

#: Distinct (provider, type) label pairs kept before the rest count as `other`.
MAX_TYPES = 500
#: Seconds between two additions of the counts to `settlement_unmapped`.
FLUSH_INTERVAL_S = 10.0


class Unmapped:
    """Counts, and logs once, the payment providers' events that settle nothing."""

    def __init__(self, metrics: Metrics, schemes: Mapping[str, str]) -> None:
        self._metrics = metrics
        self._payment_providers = {
            name for name, scheme in schemes.items() if movements_of(scheme) is not None
        }
        self._seen: set[tuple[str, str]] = set()
        self._unrecorded: Counter[tuple[str, str]] = Counter()

    def note(self, event: Event) -> None:
        """Count `event`, which settled nothing, if its provider is a payment provider."""
        provider = event.provider
        if is_internal(provider) or provider not in self._payment_providers:
            return
        pair = (provider, event.event_type or "")
        if pair not in self._seen:
            if len(self._seen) >= MAX_TYPES:
                pair = (provider, "other")
            else:
                self._seen.add(pair)
                log.info(
                    "event type moves no money",
                    extra={"provider": provider, "event_type": pair[1]},
                )
        self._metrics.settlement_unmapped_total.inc(provider=pair[0], type=pair[1])
        self._unrecorded[pair] += 1

    def take(self) -> Counter[tuple[str, str]]:
        """The counts not recorded yet, forgotten here (`put_back` on a failed write)."""
        taken, self._unrecorded = self._unrecorded, Counter()
        return taken

    def put_back(self, counts: Counter[tuple[str, str]]) -> None:
        self._unrecorded.update(counts)


async def record(pool: Pool, unmapped: Unmapped) -> None:
    """Add what `unmapped` counted since the last time to `settlement_unmapped`; on a
    failure the counts are kept for the next time."""
    counts = unmapped.take()
    if not counts:
        return
    try:
        async with connection(pool) as conn:
            await store.add(conn, counts)
    except Exception:
        unmapped.put_back(counts)
        raise


async def keep_recorded(
    pool: Pool, unmapped: Unmapped, interval_s: float = FLUSH_INTERVAL_S
) -> None:
    """`record` every `interval_s` until cancelled; a failed write is logged and its
    counts tried next time (the metric has them meanwhile)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await record(pool, unmapped)
        except Exception:
            log.warning("could not record the unmapped event types", exc_info=True)


def say_silent_providers(schemes: Mapping[str, str]) -> None:
    """One start-up line naming the providers whose events never settle (their scheme
    has no money mapping), so nobody waits for their payments in the ledger."""
    silent = sorted(name for name, scheme in schemes.items() if movements_of(scheme) is None)
    if silent:
        log.info(
            "these providers' events never settle: their schemes map no money movements",
            extra={"providers": silent},
        )
