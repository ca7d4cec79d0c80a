"""`[ordering]`: order per key, from ingest's numbering to settlement's gate.

Each provider's key rules (`[providers.NAME] order_key`) and its own `on_poison` are read
with the provider (`senders`); this table holds what applies to all of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
