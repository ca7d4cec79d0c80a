"""The `settlements` table: where every payment stands (pending, settled, failed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.settlement.instructions import SettlementInstruction, SettlementState

# What every query returns, read by `_row`: ids and the rate as text, because asyncpg's
# binary numeric codec cost more than the query.
_COLUMNS = """
transfer_id::text AS transfer_id, kind, settlement_id, refund_id, provider, merchant_id,
state, amount_minor, currency, ledger_amount_minor, ledger_currency,
rate_at_payment::text AS rate_at_payment, attempts"""

# The first attempt fixes the converted amount and the rate; a redelivery only counts
# itself, so a retry posts the very same transfer even if the rate has moved since.
_FIX_PENDING = f"""
INSERT INTO settlements (transfer_id, kind, settlement_id, refund_id, provider, merchant_id,
                         source_event_id, amount_minor, currency, ledger_amount_minor,
                         ledger_currency, rate_at_payment, attempts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1)
ON CONFLICT (transfer_id) DO UPDATE
SET attempts = settlements.attempts + 1, updated_at = now()
RETURNING {_COLUMNS}
"""  # noqa: S608 - only constants are interpolated

# The same for a batch of distinct settlements, in one statement, returning only the
# rows that were there before (a new row holds what was sent: attempts 1): in a backlog
# nearly every row is new, and reading back a batch of rows cost more than writing them.
_FIX_PENDING_MANY = f"""
WITH fixed AS (
    INSERT INTO settlements (transfer_id, kind, settlement_id, refund_id, provider,
                             merchant_id, source_event_id, amount_minor, currency,
                             ledger_amount_minor, ledger_currency, rate_at_payment, attempts)
    SELECT t.*, 1
    FROM unnest($1::text[]::numeric[], $2::text[], $3::text[], $4::text[], $5::text[],
                $6::text[], $7::text[], $8::bigint[], $9::text[], $10::bigint[], $11::text[],
                $12::text[]::numeric[])
         AS t
    ON CONFLICT (transfer_id) DO UPDATE
    SET attempts = settlements.attempts + 1, updated_at = now()
    RETURNING {_COLUMNS}
)
SELECT * FROM fixed WHERE attempts > 1
"""  # noqa: S608 - only constants are interpolated

_BY_TRANSFER = f"""
SELECT {_COLUMNS}
FROM settlements WHERE transfer_id = $1
"""  # noqa: S608 - only constants are interpolated

_BY_TRANSFERS = f"""
SELECT {_COLUMNS}
FROM settlements WHERE transfer_id = ANY($1::text[]::numeric[])
"""  # noqa: S608 - only constants are interpolated

_CAPTURES_OF = f"""
SELECT {_COLUMNS}
FROM settlements WHERE settlement_id = ANY($1::text[]) AND kind = 'capture'
"""  # noqa: S608 - only constants are interpolated


@dataclass(frozen=True)
class SettlementRow:
    """One settlement as stored."""

    transfer_id: int
    kind: str
    settlement_id: str
    merchant_id: str
    state: SettlementState
    amount_minor: int
    currency: str
    ledger_amount_minor: int | None
    rate_at_payment: Decimal | None
    attempts: int
    ledger_currency: str | None = None
    #: The movement's own id; a capture's own id where its provider gives one (an
    #: Adyen capture's psp reference), else None.
    refund_id: str | None = None

    @property
    def settled_merchant(self) -> str | None:
        """The merchant, once settled: a refund may only follow a settled payment."""
        return self.merchant_id if self.state is SettlementState.SETTLED else None


def _row(record: asyncpg.Record) -> SettlementRow:
    # Numerics are read (and sent) as text: asyncpg's binary numeric codec costs a few
    # microseconds a value, more than a batch's round trip for a batch of them.
    rate = record["rate_at_payment"]
    return SettlementRow(
        transfer_id=int(record["transfer_id"]),
        kind=record["kind"],
        settlement_id=record["settlement_id"],
        merchant_id=record["merchant_id"],
        state=SettlementState(record["state"]),
        amount_minor=record["amount_minor"],
        currency=record["currency"],
        ledger_amount_minor=record["ledger_amount_minor"],
        rate_at_payment=None if rate is None else Decimal(rate),
        attempts=record["attempts"],
        ledger_currency=record["ledger_currency"],
        refund_id=record["refund_id"],
    )


async def by_transfer(conn: Conn, transfer_id: int) -> SettlementRow | None:
    """The settlement posting `transfer_id`, if one was started."""
    with translate_errors():
        record = await conn.fetchrow(_BY_TRANSFER, Decimal(transfer_id))
    return None if record is None else _row(record)


async def by_transfers(conn: Conn, transfer_ids: Sequence[int]) -> dict[int, SettlementRow]:
    """The settlements already started among `transfer_ids`, by transfer id."""
    with translate_errors():
        records = await conn.fetch(
            _BY_TRANSFERS,
            [str(t) for t in transfer_ids],
        )
    return {row.transfer_id: row for row in map(_row, records)}


async def captures_of(conn: Conn, settlement_ids: Sequence[str]) -> dict[str, SettlementRow]:
    """The captures of these payments that were started, by payment id."""
    with translate_errors():
        records = await conn.fetch(
            _CAPTURES_OF,
            list(settlement_ids),
        )
    return {row.settlement_id: row for row in map(_row, records)}


async def fix_pending(
    conn: Conn,
    instruction: SettlementInstruction,
    *,
    transfer_id: int,
    provider: str,
    merchant_id: str,
    ledger_amount_minor: int,
    ledger_currency: str,
    rate: Decimal,
) -> SettlementRow:
    """Record the settlement as pending with its amount and rate, or count another try.

    Returns the stored row: on a retry its amount and rate are the first attempt's.
    """
    with translate_errors():
        record = await conn.fetchrow(
            _FIX_PENDING,
            Decimal(transfer_id),
            instruction.kind.value,
            instruction.settlement_id,
            instruction.refund_id,
            provider,
            merchant_id,
            instruction.source_event_id,
            instruction.amount_minor,
            instruction.currency,
            ledger_amount_minor,
            ledger_currency,
            rate,
        )
    if record is None:  # RETURNING always yields the row; this keeps the type honest
        raise RuntimeError("settlement upsert returned nothing")
    return _row(record)


@dataclass(frozen=True)
class PendingSettlement:
    """What `fix_pending_many` records for one settlement (see `fix_pending`)."""

    instruction: SettlementInstruction
    transfer_id: int
    provider: str
    merchant_id: str
    ledger_amount_minor: int
    ledger_currency: str
    rate: Decimal


async def fix_pending_many(
    conn: Conn, pending: Sequence[PendingSettlement]
) -> dict[int, SettlementRow]:
    """`fix_pending` for a batch of distinct settlements in one statement; the rows that
    were stored before, by transfer id (a retried one keeps its first attempt's amount
    and rate). A settlement not among them was stored now, as given."""
    if not pending:
        return {}
    columns: list[list[object]] = [[] for _ in range(12)]
    for p in pending:
        i = p.instruction
        values = (str(p.transfer_id), i.kind.value, i.settlement_id, i.refund_id,
                  p.provider, p.merchant_id, i.source_event_id, i.amount_minor, i.currency,
                  p.ledger_amount_minor, p.ledger_currency, str(p.rate))  # fmt: skip
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    with translate_errors():
        records = await conn.fetch(_FIX_PENDING_MANY, *columns)
    return {row.transfer_id: row for row in map(_row, records)}


async def set_settled_many(conn: Conn, transfer_ids: Sequence[int]) -> None:
    """`set_state(..., SETTLED)` for a batch, in one statement."""
    if not transfer_ids:
        return
    with translate_errors():
        await conn.execute(
            "UPDATE settlements SET state = 'settled', error_class = NULL, updated_at = now(), "
            "settled_at = now() "
            "WHERE transfer_id = ANY($1::text[]::numeric[]) AND state <> 'settled'",
            [str(t) for t in transfer_ids],
        )


async def set_state(
    conn: Conn, transfer_id: int, state: SettlementState, error_class: str | None = None
) -> None:
    """Move a settlement to `state` (settled clears the last error)."""
    with translate_errors():
        await conn.execute(
            "UPDATE settlements SET state = $2, error_class = $3, updated_at = now(), "
            "settled_at = CASE WHEN $2 = 'settled' THEN now() ELSE settled_at END "
            "WHERE transfer_id = $1 AND state <> 'settled'",
            Decimal(transfer_id),
            state.value,
            error_class,
        )


async def note_failure(conn: Conn, transfer_id: int, error_class: str) -> None:
    """Record why the last attempt of a still-pending settlement failed."""
    with translate_errors():
        await conn.execute(
            "UPDATE settlements SET error_class = $2, updated_at = now() "
            "WHERE transfer_id = $1 AND state = 'pending'",
            Decimal(transfer_id),
            error_class,
        )
