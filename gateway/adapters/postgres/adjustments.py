"""The `ledger_adjustments` table: operators' correcting entries, who made them and why."""

from __future__ import annotations

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.finance.statements import Adjustment

_INSERT = """
INSERT INTO ledger_adjustments
    (adjustment_id, merchant_id, amount_minor, currency, reason, note, actor)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (adjustment_id) DO NOTHING"""
_SELECT = """
SELECT adjustment_id, merchant_id, amount_minor, currency, reason, note, actor
FROM ledger_adjustments WHERE adjustment_id = $1"""


async def record(conn: Conn, adjustment: Adjustment) -> Adjustment:
    """Record `adjustment` unless its id is taken; the entry stored under the id."""
    a = adjustment
    with translate_errors():
        await conn.execute(_INSERT, a.adjustment_id, a.merchant_id, a.amount_minor, a.currency,
                           a.reason, a.note, a.actor)  # fmt: skip
        row = await conn.fetchrow(_SELECT, a.adjustment_id)
    if row is None:  # inserted or there already: a row exists; keep the type checker honest
        raise RuntimeError("adjustment vanished")
    return Adjustment(**dict(row))
