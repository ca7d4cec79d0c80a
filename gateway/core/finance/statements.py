"""A merchant's movements as finance reads them: statements, transfer lists, exports.

Pure. Every transfer the gateway posts is a `settlements` row (captures, follow-ups and
operators' adjustments alike), so a statement is read from that table on either ledger:
its signed amount in the ledger's currency is what the merchant's account moved
(`gateway ledger check --payments` holds the two together). Lines are in the order the
movements were recorded (the row id), which is the order a keyset page walks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gateway.core.money import format_minor
from gateway.core.settlement.instructions import SettlementKind

#: Rows per keyset page read from PostgreSQL: memory stays bounded however many rows
#: a statement or an export walks (each row is well under a kilobyte).
PAGE_ROWS = 1000
#: The columns of `--csv` and the keys of `--json` / NDJSON, in order.
FIELDS = (
    "id", "recorded_at", "merchant_id", "kind", "provider", "event_id", "payment_id",
    "movement_id", "amount_minor", "currency", "rate", "posted_minor", "ledger_currency",
    "state", "balance_minor",
)  # fmt: skip


@dataclass(frozen=True)
class Filters:
    """Which movements: every field None means no filter on it."""

    merchant_id: str | None = None
    ledger_currency: str | None = None
    payment_id: str | None = None
    kind: SettlementKind | None = None
    since: datetime | None = None  # recorded at or after
    until: datetime | None = None  # recorded before
    settled_only: bool = True


@dataclass(frozen=True)
class Adjustment:
    """An operator's correcting entry: + moves money to the merchant, - from it."""

    adjustment_id: str
    merchant_id: str
    amount_minor: int
    currency: str
    reason: str
    note: str | None
    actor: str

    def same_entry(self, other: Adjustment) -> bool:
        """Whether `other` asks for the same correction (who asked does not matter)."""
        return (self.merchant_id, self.amount_minor, self.currency, self.reason, self.note) == (
            other.merchant_id, other.amount_minor, other.currency, other.reason, other.note
        )  # fmt: skip


@dataclass(frozen=True)
class Movement:
    """One recorded movement of a merchant's account."""

    id: int  # the `settlements` row: the keyset position
    recorded_at: datetime
    merchant_id: str
    kind: SettlementKind
    provider: str
    event_id: str | None
    payment_id: str
    movement_id: str | None
    amount_minor: int  # in the event's own currency
    currency: str
    rate: Decimal | None
    posted_minor: int  # what the transfer moved, in the ledger's currency (unsigned)
    ledger_currency: str
    state: str

    @property
    def signed_minor(self) -> int:
        """What it did to the merchant's balance: + for money in, - for money out, 0 for
        a reservation (an authorisation, a void)."""
        return self.kind.balance_sign * self.posted_minor


@dataclass(frozen=True)
class Line:
    """A statement line: a movement and the balance after it."""

    movement: Movement
    balance_minor: int

    def as_dict(self) -> dict[str, object]:
        """The line's fields, named by `FIELDS` (amounts as integers of minor units)."""
        m = self.movement
        return {
            "id": m.id, "recorded_at": m.recorded_at.isoformat(), "merchant_id": m.merchant_id,
            "kind": m.kind.value, "provider": m.provider, "event_id": m.event_id,
            "payment_id": m.payment_id, "movement_id": m.movement_id,
            "amount_minor": m.amount_minor, "currency": m.currency,
            "rate": None if m.rate is None else str(m.rate), "posted_minor": m.signed_minor,
            "ledger_currency": m.ledger_currency, "state": m.state,
            "balance_minor": self.balance_minor,
        }  # fmt: skip

    def text(self) -> str:
        """The line as a person reads it, money with its currency and decimals."""
        m = self.movement
        rate = "" if m.rate is None or m.rate == 1 else f" at {m.rate.normalize()}"
        return (
            f"{m.recorded_at:%Y-%m-%d %H:%M:%S}  {m.kind.value:<19} "
            f"{format_minor(m.signed_minor, m.ledger_currency):>18}  "
            f"{format_minor(self.balance_minor, m.ledger_currency):>18}  "
            f"{m.provider} {m.event_id or '-'} ({format_minor(m.amount_minor, m.currency)}"
            f"{rate})"
        )


def running(movements: Iterable[Movement], opening_minor: int) -> Iterator[Line]:
    """Each movement with the balance after it, from `opening_minor`."""
    balance = opening_minor
    for m in movements:
        balance += m.signed_minor
        yield Line(m, balance)
