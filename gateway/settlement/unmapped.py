"""Nothing ignored in silence: a payment provider's event that moves no money is counted.

`gateway_settlement_unmapped_total{provider,type}` counts each payment provider's events
whose type (or state: a Paddle adjustment not approved yet) settles nothing, and the
first of each type in a process is logged once. Sources that can never move money
(GitHub, Shopify, Standard Webhooks or plain HMAC senders, internal services' other
events) are not counted. Types are the provider's own words, from signed events only;
past `MAX_TYPES` distinct pairs the rest count under `type="other"`, so a provider
inventing types cannot grow the metric without bound.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from gateway.core.mappings import PROVIDER_MAPPINGS, is_internal
from gateway.core.model import Event
from gateway.metrics import Metrics

log = logging.getLogger(__name__)

#: Distinct (provider, type) label pairs kept before the rest count as `other`.
MAX_TYPES = 500


class Unmapped:
    """Counts, and logs once, the payment providers' events that settle nothing."""

    def __init__(self, metrics: Metrics, schemes: Mapping[str, str]) -> None:
        self._metrics = metrics
        self._payment_providers = {
            name for name, scheme in schemes.items() if scheme in PROVIDER_MAPPINGS
        }
        self._seen: set[tuple[str, str]] = set()

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


def say_silent_providers(schemes: Mapping[str, str]) -> None:
    """One start-up line naming the providers whose events never settle (their scheme
    has no money mapping), so nobody waits for their payments in the ledger."""
    silent = sorted(name for name, scheme in schemes.items() if scheme not in PROVIDER_MAPPINGS)
    if silent:
        log.info(
            "these providers' events never settle: their schemes map no money movements",
            extra={"providers": silent},
        )
