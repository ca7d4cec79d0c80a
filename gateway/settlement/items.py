"""The items of the settlement steps (`gateway.settlement.steps`) and what each step
decides: a `Triage` of the items that go on, the outcomes or exceptions decided, and the
items left to be settled alone. Plain values; the one function that runs the steps
(`Settler.settle_items`) keeps the `Tally`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Generic, TypeVar

from gateway import tracing
from gateway.adapters.postgres.settlements import SettlementRow
from gateway.core.events.model import Event
from gateway.core.ledger.port import LedgerTransfer, TransferResult
from gateway.core.settlement.instructions import SettlementInstruction, transfer_id
from gateway.errors import TransientError

T = TypeVar("T")


class SettleOutcome(enum.StrEnum):
    """How an event ended, as counted in `gateway_settlements_total{outcome}`."""

    SETTLED = "settled"
    DUPLICATE = "duplicate"  # already settled: nothing moved
    IGNORED = "ignored"  # an event type that does not settle


#: What each event came to: an outcome, or the exception to dispose of.
Result = SettleOutcome | Exception


@dataclass(frozen=True, slots=True)
class Item:
    """One event to settle: its place in the work, its instruction and transfer id."""

    index: int
    event: Event
    attempt: int  # its delivery number
    instruction: SettlementInstruction
    tid: int
    span: tracing.Span | None = None  # its settlement span, parent of its steps' spans


@dataclass(frozen=True, slots=True)
class Routed:
    """An item and the merchant it posts for; `fixed`: the amount and rate an earlier
    attempt stored (only for an item settled alone); `payment`: the capture a refund,
    reversal or chargeback follows."""

    item: Item
    merchant: str
    fixed: tuple[int, Decimal] | None = None
    payment: SettlementRow | None = None
    #: The authorisation a capture posts (or, with `release`, voids before moving at
    #: once), or a void voids (`settlement.two_phase`).
    authorisation: SettlementRow | None = None
    release: bool = False
    #: A follow-up's exchange difference, as its claim fixed it (settled alone).
    fx: tuple[int, Decimal] | None = None


@dataclass(frozen=True, slots=True)
class Priced:
    """An item with its amount in the ledger's currency and the rate that gave it;
    `stored`: both are in `settlements` already."""

    item: Item
    merchant: str
    amount_minor: int
    rate: Decimal
    ledger_currency: str  # what `amount_minor` is in: the ledger (account) currency
    stored: bool = False
    #: The capture a follow-up not netted yet belongs to (`settlement.follow_ups`): its
    #: amount and rate come from netting it against its payment's claims, not from here.
    payment: SettlementRow | None = None
    authorisation: SettlementRow | None = None  # as in `Routed`
    release: bool = False
    #: Today's rate, for a follow-up of a converted payment not netted yet: the
    #: exchange difference is found at it (`settlement.follow_ups`).
    current_rate: Decimal | None = None
    #: The exchange difference to post with a follow-up, and the rate it was found at.
    fx: tuple[int, Decimal] | None = None


@dataclass(frozen=True, slots=True)
class Posting:
    """An item's transfer, ready to post."""

    priced: Priced
    transfer: LedgerTransfer
    #: Posted just before `transfer`, in the same request: the void of a reservation a
    #: capture cannot post, the exchange difference of a follow-up.
    before: tuple[LedgerTransfer, ...] = ()


#: A posted transfer and the ledger's answer, interpreted.
Posted = tuple[Posting, TransferResult]


@dataclass(frozen=True, slots=True)
class Triage(Generic[T]):
    """What a step decided: what goes on, outcomes or exceptions by index, and the items
    left to be settled alone."""

    go_on: list[T] = field(default_factory=list)
    decided: dict[int, Result] = field(default_factory=dict)
    alone: list[Item] = field(default_factory=list)


@dataclass(slots=True)
class Tally:
    """Everything the steps decided so far; kept by the one function that runs them."""

    decided: dict[int, Result] = field(default_factory=dict)
    alone: list[Item] = field(default_factory=list)

    def take(self, triage: Triage[T]) -> list[T]:
        """Keep what `triage` decided; the items that go on."""
        self.decided.update(triage.decided)
        self.alone.extend(triage.alone)
        return triage.go_on


def items_of(
    work: Sequence[tuple[Event, int]],
    instruction: Callable[[Event], SettlementInstruction | None],
    spans: Sequence[tracing.Span | None] | None = None,
) -> Triage[Item]:
    """The `(event, delivery number)` pairs as items, without I/O: an event that does
    not settle is decided (ignored, or its payload's error); a repeat of a settlement
    already among them is left to be settled alone, after it."""
    triage: Triage[Item] = Triage()
    seen: set[int] = set()
    for i, (event, attempt) in enumerate(work):
        try:
            found = instruction(event)
        except Exception as exc:  # the worker disposes of it
            triage.decided[i] = exc
            continue
        if found is None:
            triage.decided[i] = SettleOutcome.IGNORED
            continue
        item = Item(i, event, attempt, found, transfer_id(found), spans[i] if spans else None)
        # A dispute with its fee is two movements: settled alone, the fee first.
        alone = item.tid in seen or found.fee is not None
        (triage.alone if alone else triage.go_on).append(item)
        seen.add(item.tid)
    return triage


def step_failed(exc: Exception, items: Sequence[Item], *, alone: bool) -> Triage[None]:
    """A batch-wide step failed for `items`: an outage fails each with the exception
    (the worker retries it), and so does anything for an item settled alone; anything
    else leaves each to be settled alone, so one bad event cannot fail its neighbours."""
    if alone or isinstance(exc, TransientError):
        return Triage(decided={item.index: exc for item in items})
    return Triage(alone=list(items))
