"""The `settlements` table: where every payment stands (pending, settled, failed)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.settlement import SettlementInstruction, SettlementState

# The first attempt fixes the converted amount and the rate; a redelivery only counts
# itself, so a retry posts the very same transfer even if the rate has moved since.
_FIX_PENDING = """
INSERT INTO settlements (transfer_id, kind, settlement_id, refund_id, provider, merchant_id,
                         source_event_id, amount_minor, currency, ledger_amount_minor,
                         ledger_currency, rate_at_payment, attempts)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1)
ON CONFLICT (transfer_id) DO UPDATE
SET attempts = settlements.attempts + 1, updated_at = now()
RETURNING transfer_id, kind, settlement_id, refund_id, provider, merchant_id, state,
       amount_minor, currency, ledger_amount_minor, ledger_currency, rate_at_payment, attempts
"""

_BY_TRANSFER = """
SELECT transfer_id, kind, settlement_id, refund_id, provider, merchant_id, state,
       amount_minor, currency, ledger_amount_minor, ledger_currency, rate_at_payment, attempts
FROM settlements WHERE transfer_id = $1
"""

_CAPTURE_OF = """
SELECT transfer_id, kind, settlement_id, refund_id, provider, merchant_id, state,
       amount_minor, currency, ledger_amount_minor, ledger_currency, rate_at_payment, attempts
FROM settlements WHERE settlement_id = $1 AND kind = 'capture'
"""


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


def _row(record: asyncpg.Record) -> SettlementRow:
    return SettlementRow(
        transfer_id=int(record["transfer_id"]),
        kind=record["kind"],
        settlement_id=record["settlement_id"],
        merchant_id=record["merchant_id"],
        state=SettlementState(record["state"]),
        amount_minor=record["amount_minor"],
        currency=record["currency"],
        ledger_amount_minor=record["ledger_amount_minor"],
        rate_at_payment=record["rate_at_payment"],
        attempts=record["attempts"],
    )


async def by_transfer(conn: Conn, transfer_id: int) -> SettlementRow | None:
    """The settlement posting `transfer_id`, if one was started."""
    with translate_errors():
        record = await conn.fetchrow(_BY_TRANSFER, Decimal(transfer_id))
    return None if record is None else _row(record)


async def capture_of(conn: Conn, settlement_id: str) -> SettlementRow | None:
    """The capture of payment `settlement_id`, if one was started."""
    with translate_errors():
        record = await conn.fetchrow(
            _CAPTURE_OF,
            settlement_id,
        )
    return None if record is None else _row(record)


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
