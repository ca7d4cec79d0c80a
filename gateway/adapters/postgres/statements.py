"""Reading merchants' recorded movements (`settlements`) in keyset pages, for statements,
transfer lists and exports (`core.finance.statements`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import asyncpg

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.finance.statements import Filters, Movement
from gateway.core.settlement.instructions import SettlementKind

# Money in: captures, reversals, credit adjustments; reservations (authorisations and
# voids) are not in the balance; everything else is money out
# (`SettlementKind.balance_sign`).
_SIGNED = """CASE WHEN kind IN ('capture', 'refund_reversal', 'chargeback_reversal',
                             'credit_adjustment', 'dispute_fee_reversal')
                  THEN ledger_amount_minor
             WHEN kind IN ('authorisation', 'void') THEN 0
             ELSE -ledger_amount_minor END"""

_COLUMNS = """id, coalesce(settled_at, created_at) AS recorded_at, merchant_id, kind, provider,
source_event_id, settlement_id, refund_id, amount_minor, currency,
rate_at_payment::text AS rate, ledger_amount_minor, ledger_currency, state"""


def where(filters: Filters, first_param: int) -> tuple[str, list[object]]:
    """The WHERE clause of `filters` (parameters numbered from `first_param`) and its
    values."""
    clauses: list[str] = []
    values: list[object] = []
    for column, value in (
        ("merchant_id", filters.merchant_id),
        ("ledger_currency", filters.ledger_currency),
        ("settlement_id", filters.payment_id),
        ("kind", None if filters.kind is None else filters.kind.value),
    ):
        if value is not None:
            values.append(value)
            clauses.append(f"{column} = ${first_param + len(values) - 1}")
    for op, moment in ((">=", filters.since), ("<", filters.until)):
        if moment is not None:
            values.append(moment)
            clauses.append(
                f"coalesce(settled_at, created_at) {op} ${first_param + len(values) - 1}"
            )
    if filters.settled_only:
        clauses.append("state = 'settled'")
    return (" AND ".join(clauses) or "true"), values


async def page(conn: Conn, filters: Filters, after_id: int, limit: int) -> list[Movement]:
    """Up to `limit` movements after row `after_id`, in recorded order."""
    clause, values = where(filters, 3)
    sql = (
        f"SELECT {_COLUMNS} FROM settlements WHERE id > $1 AND {clause} "  # noqa: S608
        "ORDER BY id LIMIT $2"
    )
    with translate_errors():
        rows = await conn.fetch(sql, after_id, limit, *values)
    return [_movement(r) for r in rows]


async def opening(conn: Conn, merchant_id: str, ledger_currency: str, before: datetime) -> int:
    """The merchant's balance from movements settled before `before`."""
    sql = (
        f"SELECT coalesce(sum({_SIGNED}), 0) FROM settlements "  # noqa: S608
        "WHERE merchant_id = $1 AND ledger_currency = $2 AND state = 'settled' "
        "AND settled_at < $3"
    )
    with translate_errors():
        value = await conn.fetchval(sql, merchant_id, ledger_currency, before)
    return int(value)


@dataclass(frozen=True)
class Recorded:
    """A movement as `settlements` records it, for `gateway ledger check --payments`."""

    id: int  # the row: the keyset position
    transfer_id: int
    payment_id: str
    kind: SettlementKind
    state: str
    signed_minor: int  # what it did to the merchant's balance, in the ledger's currency


async def settled_page(conn: Conn, after_id: int, limit: int) -> list[Recorded]:
    """Every settled or pending movement after row `after_id`, at most `limit`."""
    sql = (
        f"SELECT id, transfer_id::text AS transfer_id, settlement_id, kind, state, "  # noqa: S608
        f"{_SIGNED} AS signed_minor FROM settlements "
        "WHERE id > $1 AND ledger_amount_minor IS NOT NULL ORDER BY id LIMIT $2"
    )
    with translate_errors():
        rows = await conn.fetch(sql, after_id, limit)
    return [
        Recorded(
            r["id"],
            int(r["transfer_id"]),
            r["settlement_id"],
            SettlementKind(r["kind"]),
            r["state"],
            int(r["signed_minor"]),
        )
        for r in rows
    ]


def _movement(r: asyncpg.Record) -> Movement:
    rate = r["rate"]
    return Movement(
        id=r["id"],
        recorded_at=r["recorded_at"],
        merchant_id=r["merchant_id"],
        kind=SettlementKind(r["kind"]),
        provider=r["provider"],
        event_id=r["source_event_id"],
        payment_id=r["settlement_id"],
        movement_id=r["refund_id"],
        amount_minor=r["amount_minor"],
        currency=r["currency"],
        rate=None if rate is None else Decimal(rate),
        posted_minor=r["ledger_amount_minor"] or 0,
        ledger_currency=r["ledger_currency"] or r["currency"],
        state=r["state"],
    )
