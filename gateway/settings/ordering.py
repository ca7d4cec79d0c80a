"""`[ordering]`: order per key, from ingest's numbering to settlement's gate.

Each provider's key rules (`[providers.NAME] order_key`) and its own `on_poison` are read
with the provider (`senders`); this table holds what applies to all of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.core.failures.retry import RetryPolicy
from gateway.errors import ConfigError

if TYPE_CHECKING:
    from gateway.settings.sections import CurrencySettings, LedgerSettings, SettlementSettings


class OnPoison(enum.StrEnum):
    """What an event parked for good does to the later events of its key."""

    HOLD = "hold"  # they are parked behind it until it settles or an operator releases it
    SKIP = "skip"  # the key moves past it; the event stays parked on its own


@dataclass(frozen=True)
class OrderingSettings:
    """Per-key order: settlement applies a key's events in the order ingest numbered
    them, and a poison event holds only its own key."""

    #: Number keyed events at ingest and apply each key's in order in settlement. Off:
    #: no event gets a number, and settlement applies events as they come.
    enabled: bool = True
    #: Seconds an event waits for an earlier event of its key, counted from the key's
    #: last progress (or the event's arrival), before it is parked as
    #: `ORDER_PREDECESSOR_MISSING` and holds the key.
    #: allowed: > 0
    gap_timeout_s: float = 300.0
    #: What an event parked for good does to its key, unless its provider says otherwise
    #: (`[providers.NAME] on_poison`).
    #: allowed: `hold`, `skip`
    on_poison: str = OnPoison.HOLD.value


def gap_outlasts_retries(
    ordering: OrderingSettings,
    settlement: SettlementSettings,
    currency: CurrencySettings,
    ledger: LedgerSettings,
) -> None:
    """`[ordering] gap_timeout_s` must outlast every settlement retry schedule: an event
    waits that long for its key's earlier event, and an earlier event that is only
    retrying (the currency-service or the ledger down a while) makes no progress until
    its schedule ends. A shorter gap would park the later event for a predecessor that
    was never missing."""
    if not ordering.enabled:
        return
    schedules = {
        "settlement.retry_delays_s": settlement.retry_delays_s,
        "currency.retry_delays_s": currency.retry_delays_s,
        "ledger.retry_delays_s": ledger.retry_delays_s,
    }
    spans = {}
    for key, delays_s in schedules.items():
        try:
            spans[key] = RetryPolicy(delays_s).longest_s
        except ValueError as exc:  # no delay, or one that is not positive
            raise ConfigError(key, str(exc)) from None
    key, longest_s = max(spans.items(), key=lambda kv: kv[1])
    if ordering.gap_timeout_s <= longest_s:
        raise ConfigError(
            "ordering.gap_timeout_s",
            f"must be longer than the longest retry schedule ({key}: up to {longest_s:g} s "
            f"with jitter), got {ordering.gap_timeout_s:g}: an event would be parked "
            "while its key's earlier event is only retrying",
        )
